//! The `polylock` binary against real redis-servers. Locks "held by another process" are held
//! by this test process through the core, while the CLI runs as its own process.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use polylock::{AcquireOptions, Client, ErrorKind, Lock};
use polylock_testkit::{free_port, run_tool, Output, RedisServer};

const BINARY: &str = env!("CARGO_BIN_EXE_polylock");
/// No CLI run in these tests may take longer (it is killed, and the test fails).
const RUN_BOUND: Duration = Duration::from_secs(120);

/// Runs `polylock ARGS` with stdin closed (not a terminal) and no POLYLOCK_* variables.
fn polylock(args: &[&str]) -> Output {
    polylock_with_env(args, &[])
}

fn polylock_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    run_tool(BINARY, args, env, RUN_BOUND)
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    polylock::runtime().block_on(future)
}

fn connect(server: &RedisServer) -> Client {
    block_on(Client::connect(&server.url())).expect("connect")
}

fn hold(lock: &Lock) {
    assert!(block_on(lock.acquire(AcquireOptions::new().wait(Duration::ZERO))).expect("acquire"));
}

/// The `sold` column of a language's row in the demo's table.
fn sold_in_table(stdout: &str, language: &str) -> Option<u64> {
    stdout.lines().find_map(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        (words.first() == Some(&language))
            .then(|| words.get(2)?.parse().ok())
            .flatten()
    })
}

/// `sold X tickets for N seats`: X.
fn total_sold(stdout: &str) -> u64 {
    stdout
        .lines()
        .find_map(|line| {
            line.strip_prefix("sold ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no `sold X tickets` line in:\n{stdout}"))
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|err| panic!("not JSON ({err}):\n{text}"))
}

#[test]
fn demo_with_the_lock_sells_exactly_n_tickets() {
    let server = RedisServer::start();
    let url = server.url();
    let out = polylock(&[
        "demo",
        "--redis",
        &url,
        "--languages",
        "rust",
        "--tickets",
        "30",
        "--workers",
        "3",
    ]);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    assert_eq!(
        sold_in_table(&out.stdout, "rust"),
        Some(30),
        "{}",
        out.stdout
    );
    assert_eq!(total_sold(&out.stdout), 30);
    assert!(
        out.stdout.contains("OK: exactly 30 tickets sold"),
        "{}",
        out.stdout
    );
    // The stock key is cleaned up and no lock is left behind.
    assert_eq!(server.int(&["EXISTS", "polylock-demo:tickets:stock"]), 0);
    assert_eq!(server.int(&["EXISTS", "polylock-demo:tickets"]), 0);
}

#[test]
fn demo_with_the_fair_lock_sells_exactly_n_tickets() {
    let server = RedisServer::start();
    let url = server.url();
    let out = polylock(&[
        "demo",
        "--redis",
        &url,
        "--languages",
        "rust",
        "--tickets",
        "25",
        "--workers",
        "3",
        "--fair",
    ]);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    assert!(out.stdout.contains("under the fair lock"), "{}", out.stdout);
    assert_eq!(
        sold_in_table(&out.stdout, "rust"),
        Some(25),
        "{}",
        out.stdout
    );
}

#[test]
fn demo_without_the_lock_reports_the_sale_as_unlocked() {
    let server = RedisServer::start();
    let url = server.url();
    let out = polylock(&[
        "demo",
        "--redis",
        &url,
        "--languages",
        "rust",
        "--tickets",
        "30",
        "--workers",
        "3",
        "--no-lock",
    ]);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    assert!(out.stdout.contains("WITHOUT a lock"), "{}", out.stdout);
    assert!(out.stdout.contains("WITHOUT the lock:"), "{}", out.stdout);
    // Lost updates can only add sales: never fewer than the seats.
    let sold = total_sold(&out.stdout);
    assert!(sold >= 30, "{}", out.stdout);
    assert_eq!(sold_in_table(&out.stdout, "rust"), Some(sold));
    if sold > 30 {
        assert!(
            out.stdout.contains(&format!("oversold by {}", sold - 30)),
            "{}",
            out.stdout
        );
    }
}

#[test]
fn demo_starts_a_private_server_and_stops_it() {
    let out = polylock(&[
        "demo",
        "--languages",
        "rust",
        "--tickets",
        "10",
        "--workers",
        "1",
    ]);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    let port: u16 = out
        .stdout
        .lines()
        .find_map(|line| {
            line.strip_prefix("started a private redis-server on 127.0.0.1:")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no port announced:\n{}", out.stdout));
    assert_eq!(sold_in_table(&out.stdout, "rust"), Some(10));
    assert!(out.stdout.contains("stopped the private redis-server"));
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the private redis-server on port {port} still accepts connections"
    );
}

#[test]
fn demo_fails_when_a_requested_language_cannot_run() {
    let server = RedisServer::start();
    let url = server.url();
    let out = polylock_with_env(
        &[
            "demo",
            "--redis",
            &url,
            "--languages",
            "rust,python",
            "--tickets",
            "10",
            "--workers",
            "1",
        ],
        &[("POLYLOCK_PYTHON", "/nonexistent/python3")],
    );
    assert_eq!(
        out.code, 1,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    assert!(
        out.stderr.contains("python was requested"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("make build-python"), "{}", out.stderr);
}

#[test]
fn demo_skips_a_language_whose_package_is_missing_when_none_were_named() {
    let server = RedisServer::start();
    let url = server.url();
    // A checkout without the worker scripts: Python and Node cannot run, Rust (this binary) can.
    let empty_repo =
        std::env::temp_dir().join(format!("polylock-empty-repo-{}", std::process::id()));
    std::fs::create_dir_all(&empty_repo).unwrap();
    let out = polylock_with_env(
        &["demo", "--redis", &url, "--tickets", "10", "--workers", "1"],
        &[("POLYLOCK_REPO", empty_repo.to_str().unwrap())],
    );
    let _ = std::fs::remove_dir_all(&empty_repo);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    assert!(out.stderr.contains("skipping python"), "{}", out.stderr);
    assert!(out.stderr.contains("skipping node"), "{}", out.stderr);
    assert_eq!(sold_in_table(&out.stdout, "python"), None, "{}", out.stdout);
    assert_eq!(
        sold_in_table(&out.stdout, "rust"),
        Some(10),
        "{}",
        out.stdout
    );
}

/// `polylock demo --languages rust --scenario SCENARIO ARGS` on its own server; must exit 0.
fn scenario(name: &str, extra: &[&str]) -> Output {
    let server = RedisServer::start();
    let url = server.url();
    let mut args = vec![
        "demo",
        "--redis",
        &url,
        "--languages",
        "rust",
        "--scenario",
        name,
    ];
    args.extend_from_slice(extra);
    let out = polylock(&args);
    assert_eq!(
        out.code, 0,
        "{args:?}\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    // The scenario's data keys are cleaned up (lock latches expire by themselves; fencing
    // keeps its token counters, as a fenced lock always does).
    if name != "fencing" {
        assert_eq!(
            server.command(&["KEYS", "polylock-demo:*"]).as_deref(),
            Some("*0"),
            "keys left after {name}"
        );
    }
    out
}

/// The number before `what` on the line that has it: `3 expiries` -> 3.
fn number_before(stdout: &str, what: &str) -> u64 {
    stdout
        .lines()
        .find_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words.iter().position(|word| word.starts_with(what))?;
            words
                .get(at.checked_sub(1)?)?
                .trim_end_matches(',')
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no `N {what}` in:\n{stdout}"))
}

#[test]
fn demo_cache_rebuild_rebuilds_once_per_expiry() {
    let out = scenario(
        "cache-rebuild",
        &["--workers", "3", "--rounds", "2", "--slow-ms", "30"],
    );
    assert_eq!(number_before(&out.stdout, "expiries"), 2, "{}", out.stdout);
    assert_eq!(
        number_before(&out.stdout, "rebuild(s)"),
        2,
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("OK: exactly one rebuild per expiry"),
        "{}",
        out.stdout
    );
}

#[test]
fn demo_cache_rebuild_without_the_lock_reports_the_stampede() {
    let out = scenario(
        "cache-rebuild",
        &[
            "--workers",
            "3",
            "--rounds",
            "2",
            "--slow-ms",
            "30",
            "--no-lock",
        ],
    );
    // Every expiry is rebuilt at least once; without the lock, maybe more often.
    assert!(
        number_before(&out.stdout, "rebuild(s)") >= 2,
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("WITHOUT the lock"), "{}", out.stdout);
}

#[test]
fn demo_read_write_sees_no_disagreement_under_the_lock() {
    let out = scenario("read-write", &["--workers", "3", "--ops", "60"]);
    // `R reads and W writes in ...`
    let summary: Vec<u64> = out
        .stdout
        .lines()
        .find(|line| line.contains(" reads and ") && line.contains(" writes in "))
        .unwrap_or_else(|| panic!("no summary in:\n{}", out.stdout))
        .split_whitespace()
        .filter_map(|word| word.parse().ok())
        .collect();
    let (reads, writes) = (summary[0], summary[1]);
    assert_eq!(reads + writes, 60, "{}", out.stdout);
    assert!(
        out.stdout
            .contains(&format!("OK: zero disagreements in {reads} reads")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("reader(s) inside at once"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("writers waited"), "{}", out.stdout);
}

#[test]
fn demo_segmented_stock_sells_exactly_the_stock_both_ways() {
    let out = scenario("segmented-stock", &["--tickets", "30", "--segments", "3"]);
    assert!(
        out.stdout
            .contains("OK: both sales sold exactly 30 units: no oversell, no leftover"),
        "{}",
        out.stdout
    );
    let rows: Vec<&str> = out
        .stdout
        .lines()
        .filter(|line| {
            line.starts_with("one lock per segment (3)") || line.starts_with("one global lock")
        })
        .collect();
    assert_eq!(rows.len(), 2, "{}", out.stdout);
    for row in rows {
        let words: Vec<&str> = row.split_whitespace().collect();
        let sold_at = if row.starts_with("one global") { 3 } else { 5 };
        assert_eq!(words[sold_at], "30", "{row}");
        assert_eq!(words[sold_at + 1], "0", "{row}");
    }
    assert!(out.stdout.contains("one global lock: "), "{}", out.stdout);
}

#[test]
fn demo_fencing_refuses_the_stale_write_and_shows_the_lost_update_without_it() {
    let out = scenario("fencing", &["--lease-ms", "100"]);
    assert!(
        out.stdout
            .contains("REFUSED (StaleToken); final value: fast"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("OK: every late write"),
        "{}",
        out.stdout
    );

    let out = scenario("fencing", &["--lease-ms", "100", "--no-fencing"]);
    assert!(
        out.stdout.contains("ACCEPTED; final value: slow"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("LOST UPDATE"), "{}", out.stdout);
}

#[test]
fn demo_refuses_options_of_other_scenarios() {
    for args in [
        vec!["demo", "--scenario", "fencing", "--no-lock"],
        vec!["demo", "--scenario", "read-write", "--fair"],
        vec!["demo", "--no-fencing"],
        vec!["demo", "--scenario", "lottery"],
    ] {
        let out = polylock(&args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
    }
}

#[test]
fn demo_rejects_an_unknown_language() {
    let out = polylock(&["demo", "--languages", "rust,cobol"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("unknown language 'cobol'"),
        "{}",
        out.stderr
    );
}

#[test]
fn inspect_shows_a_lock_held_by_another_process() {
    let server = RedisServer::start();
    let url = server.url();
    let client = connect(&server);
    let lock = client.lock("orders:42").expect("lock");
    hold(&lock);
    hold(&lock);

    let out = polylock(&["inspect", "orders:42", "--redis", &url]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("kind:   plain"), "{}", out.stdout);
    // The holder is named from its client record, its owner string beside.
    assert!(
        out.stdout
            .contains(&format!("(pid {} on ", std::process::id()))
            && out
                .stdout
                .contains(&format!("(hold count 2, owner {})", lock.owner())),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("remaining"), "{}", out.stdout);

    let out = polylock(&["inspect", "orders:42", "--redis", &url, "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let state = json(&out.stdout);
    assert_eq!(state["name"], "orders:42");
    assert_eq!(state["kind"], "plain");
    assert_eq!(state["redis_type"], "hash");
    assert_eq!(state["holders"][0]["owner"], lock.owner());
    assert_eq!(state["holders"][0]["count"], 2);
    assert_eq!(state["holders"].as_array().map(Vec::len), Some(1));
    let lease = state["remaining_lease_ms"].as_u64().expect("a lease");
    assert!(lease > 0 && lease <= 30_000, "{lease}");
    assert_eq!(state["queue"].as_array().map(Vec::len), Some(0));

    block_on(lock.release()).expect("release");
    block_on(lock.release()).expect("release");
    let out = polylock(&["inspect", "orders:42", "--redis", &url, "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(json(&out.stdout)["kind"], "none");
}

#[test]
fn inspect_shows_the_fair_queue_in_order() {
    let server = RedisServer::start();
    let url = server.url();
    let holder_client = connect(&server);
    let waiter_client = connect(&server);
    let holder = holder_client.fair_lock("tickets").expect("lock");
    hold(&holder);
    let waiter = waiter_client.fair_lock("tickets").expect("lock");
    let waiter_owner = waiter.owner().to_owned();
    let waiting = {
        let waiter = waiter.clone();
        polylock::runtime().spawn(async move {
            waiter
                .acquire(AcquireOptions::new().wait(Duration::from_secs(60)))
                .await
        })
    };
    let queued = Instant::now() + Duration::from_secs(20);
    while server.int(&["LLEN", "redisson_lock_queue:{tickets}"]) < 1 {
        assert!(Instant::now() < queued, "the waiter never queued");
        std::thread::sleep(Duration::from_millis(10));
    }

    let out = polylock(&["inspect", "tickets", "--redis", &url, "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let state = json(&out.stdout);
    assert_eq!(state["kind"], "fair");
    assert_eq!(state["holders"][0]["owner"], holder.owner());
    assert_eq!(state["queue"][0]["owner"], waiter_owner.as_str());
    assert!(
        state["queue"][0]["deadline_ms"].as_u64().is_some(),
        "{state}"
    );

    let out = polylock(&["inspect", "tickets", "--redis", &url]);
    assert!(out.stdout.contains("queue:  1 waiting"), "{}", out.stdout);
    let first_waiter = out
        .stdout
        .lines()
        .find(|line| line.trim_start().starts_with("1. "))
        .unwrap_or_else(|| panic!("no first waiter:\n{}", out.stdout));
    assert!(
        first_waiter.contains(&format!("owner {waiter_owner})")),
        "{first_waiter}"
    );

    block_on(holder.release()).expect("release");
    assert!(block_on(waiting).expect("join").expect("acquire"));
    block_on(waiter.release()).expect("release");
}

#[test]
fn inspect_shows_a_fenced_lock_and_its_token() {
    let server = RedisServer::start();
    let url = server.url();
    let client = connect(&server);
    let lock = client.fenced_lock("fenced:1").expect("lock");
    hold(&lock);
    let token = lock.token().expect("a token");

    let out = polylock(&["inspect", "fenced:1", "--redis", &url, "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let state = json(&out.stdout);
    assert_eq!(state["kind"], "fenced");
    assert_eq!(state["holders"][0]["owner"], lock.owner());
    assert_eq!(state["holders"][0]["count"], 1);
    assert_eq!(state["fence_token"], token);

    let out = polylock(&["inspect", "fenced:1", "--redis", &url]);
    assert!(out.stdout.contains("kind:   fenced"), "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!("token:  {token}")),
        "{}",
        out.stdout
    );

    block_on(lock.release()).expect("release");
    let out = polylock(&["inspect", "fenced:1", "--redis", &url, "--json"]);
    let state = json(&out.stdout);
    assert_eq!(state["kind"], "fenced");
    assert_eq!(state["holders"].as_array().map(Vec::len), Some(0));
    assert_eq!(state["fence_token"], token);
}

#[test]
fn inspect_shows_a_read_write_lock_with_each_side() {
    let server = RedisServer::start();
    let url = server.url();
    let client = connect(&server);
    let reader = client.read_write_lock("rw:1").expect("rw");
    let other = client.read_write_lock("rw:1").expect("rw");
    hold(&reader.read_lock());
    hold(&reader.read_lock());
    hold(&other.read_lock());

    let out = polylock(&["inspect", "rw:1", "--redis", &url, "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let state = json(&out.stdout);
    assert_eq!(state["kind"], "read-write");
    assert_eq!(state["mode"], "read");
    let holders = state["holders"].as_array().expect("holders");
    assert_eq!(holders.len(), 2, "{state}");
    let count_of = |owner: &str| {
        holders
            .iter()
            .find(|h| h["owner"] == owner)
            .map(|h| (h["count"].as_u64(), h["mode"].clone()))
    };
    assert_eq!(
        count_of(reader.read_lock().owner()),
        Some((Some(2), serde_json::json!("read")))
    );
    assert_eq!(
        count_of(other.read_lock().owner()),
        Some((Some(1), serde_json::json!("read")))
    );
    let out = polylock(&["inspect", "rw:1", "--redis", &url]);
    assert!(
        out.stdout.contains("kind:   read-write (mode: read)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "(read, hold count 2, owner {})",
            reader.read_lock().owner()
        )),
        "{}",
        out.stdout
    );
    for _ in 0..2 {
        block_on(reader.read_lock().release()).expect("release");
    }
    block_on(other.read_lock().release()).expect("release");

    let writer = client.read_write_lock("rw:1").expect("rw");
    hold(&writer.write_lock());
    let out = polylock(&["inspect", "rw:1", "--redis", &url, "--json"]);
    let state = json(&out.stdout);
    assert_eq!(state["mode"], "write");
    assert_eq!(state["holders"][0]["owner"], writer.write_lock().owner());
    assert_eq!(state["holders"][0]["mode"], "write");

    // Force-unlock takes the side it is held in.
    let out = polylock(&["force-unlock", "rw:1", "--redis", &url, "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("force-unlocked read-write lock 'rw:1'"),
        "{}",
        out.stdout
    );
    assert_eq!(server.int(&["EXISTS", "rw:1"]), 0);
}

#[test]
fn inspect_shows_semaphores_and_force_unlock_refuses_them() {
    let server = RedisServer::start();
    let url = server.url();
    let client = connect(&server);
    let semaphore = client.semaphore("sem:1").expect("semaphore");
    assert!(block_on(semaphore.try_set_permits(4)).expect("set"));
    assert!(block_on(semaphore.acquire(1, Some(Duration::ZERO))).expect("acquire"));

    let out = polylock(&["inspect", "sem:1", "--redis", &url, "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let state = json(&out.stdout);
    assert_eq!(state["kind"], "semaphore");
    assert_eq!(state["permits_available"], 3);
    let out = polylock(&["inspect", "sem:1", "--redis", &url]);
    assert!(
        out.stdout.contains("permits: 3 available"),
        "{}",
        out.stdout
    );

    let expirable = client.expirable_semaphore("xsem:1").expect("semaphore");
    assert!(block_on(expirable.try_set_permits(2)).expect("set"));
    let id = block_on(
        expirable.acquire(
            AcquireOptions::new()
                .wait(Duration::ZERO)
                .lease(Duration::from_secs(60)),
        ),
    )
    .expect("acquire")
    .expect("a permit");
    let out = polylock(&["inspect", "xsem:1", "--redis", &url, "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let state = json(&out.stdout);
    assert_eq!(state["kind"], "expirable-semaphore");
    assert_eq!(state["permits_available"], 1);
    assert_eq!(state["permits"][0]["id"], id.as_str());
    let left = state["permits"][0]["expires_in_ms"]
        .as_i64()
        .expect("expiry");
    assert!(left > 0 && left <= 60_000, "{left}");
    let out = polylock(&["inspect", "xsem:1", "--redis", &url]);
    assert!(
        out.stdout.contains(&format!("{id}  (expires in")),
        "{}",
        out.stdout
    );

    for name in ["sem:1", "xsem:1"] {
        let out = polylock(&["force-unlock", name, "--redis", &url, "--yes"]);
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert!(
            out.stderr.contains("nothing to force-unlock"),
            "{}",
            out.stderr
        );
    }
    assert_eq!(server.command(&["GET", "sem:1"]).as_deref(), Some("3"));
    block_on(expirable.release(&id)).expect("still held");
}

#[test]
fn watch_once_shows_every_kind() {
    let server = RedisServer::start();
    let url = server.url();
    let client = connect(&server);
    let fenced = client.fenced_lock("k:fenced").expect("lock");
    hold(&fenced);
    let rw = client.read_write_lock("k:rw").expect("rw");
    hold(&rw.write_lock());
    let semaphore = client.semaphore("k:sem").expect("semaphore");
    assert!(block_on(semaphore.try_set_permits(7)).expect("set"));
    let expirable = client.expirable_semaphore("k:xsem").expect("semaphore");
    assert!(block_on(expirable.try_set_permits(2)).expect("set"));
    let id = block_on(expirable.acquire(AcquireOptions::new().wait(Duration::ZERO)))
        .expect("acquire")
        .expect("a permit");
    // Used by a client gone since (its record with it): a free lock nobody uses now.
    let gone = connect(&server);
    let free = gone.fenced_lock("k:free").expect("lock");
    hold(&free);
    block_on(free.release()).expect("release");
    gone.close();
    let record = format!("polylock:client:{}", gone.id());
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.int(&["EXISTS", &record]) == 1 {
        assert!(
            Instant::now() < deadline,
            "the closed client's record stayed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    let out = polylock(&["watch", "k:*", "--redis", &url, "--once"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let row = |name: &str| {
        out.stdout
            .lines()
            .find(|line| line.split_whitespace().next() == Some(name))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no {name} row:\n{}", out.stdout))
    };
    let fenced_row = row("k:fenced");
    assert!(fenced_row.contains(" fenced "), "{fenced_row}");
    assert!(
        fenced_row.contains(&format!("token {}", fenced.token().unwrap())),
        "{fenced_row}"
    );
    let rw_row = row("k:rw");
    assert!(rw_row.contains(" read-write "), "{rw_row}");
    assert!(
        rw_row.contains(&format!("(pid {} on ", std::process::id())) && rw_row.ends_with("(write)"),
        "{rw_row}"
    );
    assert!(
        row("k:sem").contains("7 permit(s) available"),
        "{}",
        out.stdout
    );
    assert!(
        row("k:xsem").contains("1 permit(s) available, 1 taken"),
        "{}",
        out.stdout
    );
    // A free lock and the keys beside each name are not rows.
    assert!(!out.stdout.contains("k:free"), "{}", out.stdout);
    assert!(!out.stdout.contains("timeout"), "{}", out.stdout);
    assert!(
        out.stdout.contains("2 lock(s) held, 2 semaphore(s)"),
        "{}",
        out.stdout
    );
    block_on(expirable.release(&id)).expect("release");
}

#[test]
fn force_unlock_yes_deletes_a_lock_held_by_another_process() {
    let server = RedisServer::start();
    let url = server.url();
    let client = connect(&server);
    let lock = client.lock("stuck").expect("lock");
    hold(&lock);

    let out = polylock(&["force-unlock", "stuck", "--redis", &url, "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("force-unlocked plain lock 'stuck'"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(lock.owner()), "{}", out.stdout);
    assert_eq!(server.int(&["EXISTS", "stuck"]), 0);
    // The holder learns it lost the lock.
    let err = block_on(lock.release()).expect_err("the lock was deleted");
    assert_eq!(err.kind(), ErrorKind::LockLost);

    let out = polylock(&["force-unlock", "stuck", "--redis", &url, "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("not locked"), "{}", out.stdout);
}

#[test]
fn force_unlock_of_a_fair_lock_hands_it_to_the_head_of_the_queue() {
    let server = RedisServer::start();
    let url = server.url();
    let holder_client = connect(&server);
    let waiter_client = connect(&server);
    let holder = holder_client.fair_lock("fair-stuck").expect("lock");
    hold(&holder);
    let waiter = waiter_client.fair_lock("fair-stuck").expect("lock");
    let waiting = {
        let waiter = waiter.clone();
        polylock::runtime().spawn(async move {
            waiter
                .acquire(AcquireOptions::new().wait(Duration::from_secs(60)))
                .await
        })
    };
    let queued = Instant::now() + Duration::from_secs(20);
    while server.int(&["LLEN", "redisson_lock_queue:{fair-stuck}"]) < 1 {
        assert!(Instant::now() < queued, "the waiter never queued");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = polylock(&["force-unlock", "fair-stuck", "--redis", &url, "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("force-unlocked fair lock"),
        "{}",
        out.stdout
    );
    // Woken by the unlock message, long before the holder's 30 s lease would have run out.
    let started = Instant::now();
    assert!(block_on(waiting).expect("join").expect("acquire"));
    assert!(started.elapsed() < Duration::from_secs(20));
    block_on(waiter.release()).expect("release");
}

#[test]
fn inspect_shows_the_fifo_line_and_force_unlock_hands_the_lock_to_its_head() {
    let server = RedisServer::start();
    let url = server.url();
    let holder_client = connect(&server);
    let waiter_client = connect(&server);
    let holder = holder_client.fifo_lock("fifo-stuck").expect("lock");
    hold(&holder);
    let waiter = waiter_client.fifo_lock("fifo-stuck").expect("lock");
    let waiter_owner = waiter.owner().to_owned();
    let waiting = {
        let waiter = waiter.clone();
        polylock::runtime().spawn(async move {
            waiter
                .acquire(AcquireOptions::new().wait(Duration::from_secs(60)))
                .await
        })
    };
    let queued = Instant::now() + Duration::from_secs(20);
    while server.int(&["LLEN", "polylock_fifo_line:{fifo-stuck}"]) < 1 {
        assert!(Instant::now() < queued, "the waiter never got in line");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = polylock(&["inspect", "fifo-stuck", "--redis", &url, "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let state = json(&out.stdout);
    assert_eq!(state["kind"], "fifo");
    assert_eq!(state["holders"][0]["owner"], holder.owner());
    assert_eq!(state["queue"][0]["owner"], waiter_owner.as_str());
    let out = polylock(&["inspect", "fifo-stuck", "--redis", &url]);
    assert!(out.stdout.contains("queue:  1 waiting"), "{}", out.stdout);

    let out = polylock(&["force-unlock", "fifo-stuck", "--redis", &url, "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("force-unlocked fifo lock"),
        "{}",
        out.stdout
    );
    // Passed to the head, long before the holder's 30 s lease would have run out.
    let started = Instant::now();
    assert!(block_on(waiting).expect("join").expect("acquire"));
    assert!(started.elapsed() < Duration::from_secs(20));
    block_on(waiter.release()).expect("release");
}

#[test]
fn force_unlock_needs_yes_without_a_terminal() {
    let server = RedisServer::start();
    let url = server.url();
    let client = connect(&server);
    let lock = client.lock("kept").expect("lock");
    hold(&lock);
    let out = polylock(&["force-unlock", "kept", "--redis", &url]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--yes"), "{}", out.stderr);
    assert_eq!(server.int(&["EXISTS", "kept"]), 1);
    block_on(lock.release()).expect("still held");
}

#[test]
fn watch_once_lists_only_locks_matching_the_pattern() {
    let server = RedisServer::start();
    let url = server.url();
    let client = connect(&server);
    let first = client.lock("w:first").expect("lock");
    let second = client.lock("w:second").expect("lock");
    let elsewhere = client.lock("elsewhere").expect("lock");
    for lock in [&first, &second, &first, &elsewhere] {
        hold(lock);
    }
    assert_eq!(
        server.command(&["SET", "w:string", "x"]).as_deref(),
        Some("+OK")
    );
    server.int(&["HSET", "w:user", "name", "ada"]);

    let out = polylock(&["watch", "w:*", "--redis", &url, "--once"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let row = |name: &str| {
        out.stdout
            .lines()
            .find(|line| line.split_whitespace().next() == Some(name))
            .map(str::to_owned)
    };
    let first_row = row("w:first").unwrap_or_else(|| panic!("no w:first row:\n{}", out.stdout));
    // Named from the client record (this process), with the hold count.
    assert!(
        first_row.contains(&format!("(pid {} on ", std::process::id()))
            && first_row.contains(" x2"),
        "{first_row}"
    );
    assert!(row("w:second").is_some(), "{}", out.stdout);
    assert!(row("w:string").is_none(), "{}", out.stdout);
    assert!(row("w:user").is_none(), "{}", out.stdout);
    assert!(row("elsewhere").is_none(), "{}", out.stdout);
    assert!(out.stdout.contains("2 lock(s) held"), "{}", out.stdout);

    let out = polylock(&["watch", "--redis", &url, "--once"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("3 lock(s) held"), "{}", out.stdout);
    assert!(out.stdout.contains("elsewhere"), "{}", out.stdout);
}

#[test]
fn bad_urls_are_usage_errors() {
    for url in [
        "not-a-url",
        "http://127.0.0.1:6379",
        "redis://127.0.0.1:notaport",
    ] {
        for args in [
            vec!["inspect", "x", "--redis", url],
            vec!["force-unlock", "x", "--yes", "--redis", url],
            vec!["watch", "--once", "--redis", url],
            vec!["demo", "--languages", "rust", "--redis", url],
        ] {
            let out = polylock(&args);
            assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
            assert!(
                out.stderr.contains("bad Redis URL"),
                "{args:?}: {}",
                out.stderr
            );
        }
    }
}

#[test]
fn an_unreachable_server_is_a_connection_error() {
    let url = format!("redis://127.0.0.1:{}", free_port());
    for args in [
        vec!["inspect", "x", "--redis", &url],
        vec!["force-unlock", "x", "--yes", "--redis", &url],
        vec!["watch", "--once", "--redis", &url],
        vec!["demo", "--languages", "rust", "--redis", &url],
    ] {
        let out = polylock(&args);
        assert_eq!(out.code, 3, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("cannot reach Redis"),
            "{args:?}: {}",
            out.stderr
        );
    }
}

#[test]
fn the_url_comes_from_the_environment() {
    let server = RedisServer::start();
    let url = server.url();
    server.int(&[
        "HSET",
        "env-lock",
        "6e3814a1-e847-452b-a982-45baf93a1df2:1",
        "1",
    ]);
    let out = polylock_with_env(
        &["inspect", "env-lock", "--json"],
        &[("POLYLOCK_REDIS_URL", &url)],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        json(&out.stdout)["holders"][0]["owner"],
        "6e3814a1-e847-452b-a982-45baf93a1df2:1"
    );
    // Written without an expiry: reported as such, not as a lease.
    assert_eq!(json(&out.stdout)["expires"], false);
}

#[test]
fn a_key_that_is_not_a_lock_is_refused() {
    let server = RedisServer::start();
    let url = server.url();
    assert_eq!(
        server.command(&["SET", "config", "x"]).as_deref(),
        Some("+OK")
    );
    server.int(&["HSET", "user:1", "name", "ada"]);

    let out = polylock(&["inspect", "config", "--redis", &url]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains("'config' is not a lock"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("string"), "{}", out.stderr);

    let out = polylock(&["inspect", "user:1", "--redis", &url, "--json"]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    let state = json(&out.stdout);
    assert_eq!(state["kind"], "not-a-lock");
    assert_eq!(state["redis_type"], "hash");

    for name in ["config", "user:1"] {
        let out = polylock(&["force-unlock", name, "--redis", &url, "--yes"]);
        assert_eq!(out.code, 4, "{}", out.stderr);
        assert!(out.stderr.contains("is not a lock"), "{}", out.stderr);
        assert_eq!(server.int(&["EXISTS", name]), 1, "{name} was deleted");
    }
}

#[test]
fn help_shows_examples() {
    for command in ["demo", "inspect", "force-unlock", "watch"] {
        let out = polylock(&[command, "--help"]);
        assert_eq!(out.code, 0);
        assert!(
            out.stdout.contains("Examples:"),
            "{command}: {}",
            out.stdout
        );
        assert!(out.stdout.contains("--redis"), "{command}: {}", out.stdout);
    }
    let out = polylock(&["--help"]);
    assert!(out.stdout.contains("Exit codes"), "{}", out.stdout);
}

#[test]
fn the_url_is_one_global_option_with_a_short_form() {
    let server = RedisServer::start();
    let url = server.url();
    server.int(&[
        "HSET",
        "short-u",
        "6e3814a1-e847-452b-a982-45baf93a1df2:1",
        "1",
    ]);
    // As redis-cli users type it: before the subcommand, -u.
    let out = polylock(&["-u", &url, "inspect", "short-u", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(json(&out.stdout)["kind"], "plain");
    // After it, long form; and it wins over the environment.
    let out = polylock_with_env(
        &["inspect", "short-u", "--json", "--redis", &url],
        &[("POLYLOCK_REDIS_URL", "redis://127.0.0.1:1")],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(json(&out.stdout)["kind"], "plain");
}

#[test]
fn watch_json_prints_one_object_per_refresh_with_each_lock() {
    let server = RedisServer::start();
    let url = server.url();
    let client = connect(&server);
    let fenced = client.fenced_lock("j:fenced").expect("lock");
    hold(&fenced);
    let semaphore = client.semaphore("j:sem").expect("semaphore");
    assert!(block_on(semaphore.try_set_permits(3)).expect("set"));

    let out = polylock(&["--redis", &url, "watch", "j:*", "--once", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    let snapshot = json(lines[0]);
    assert_eq!(snapshot["pattern"], "j:*");
    assert!(snapshot["unix_ms"].as_u64().unwrap() > 0);
    let locks = snapshot["locks"].as_array().expect("locks");
    let by_name = |name: &str| {
        locks
            .iter()
            .find(|lock| lock["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {snapshot}"))
    };
    assert_eq!(by_name("j:fenced")["kind"], "fenced");
    assert_eq!(by_name("j:fenced")["fence_token"], fenced.token().unwrap());
    assert_eq!(by_name("j:sem")["permits_available"], 3);
    assert_eq!(locks.len(), 2, "{snapshot}");
}

#[test]
fn completions_are_printed_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let out = polylock(&["completions", shell]);
        assert_eq!(out.code, 0, "{shell}: {}", out.stderr);
        // Every shell's script names the subcommands and the global URL option.
        for word in ["force-unlock", "watch", "redis"] {
            assert!(out.stdout.contains(word), "{shell} lacks {word}");
        }
    }
    let out = polylock(&["completions", "tcsh"]);
    assert_eq!(out.code, 2, "an unknown shell is bad usage");
}
