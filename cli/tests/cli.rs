//! The `polylock` binary against real redis-servers. Locks "held by another process" are held
//! by this test process through the core, while the CLI runs as its own process.

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

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|err| panic!("not JSON ({err}):\n{text}"))
}

/// `polylock demo` is a thin entry to the polylock-demo crate, whose tests
/// (tests/demo/tests/demo.rs) run the demo: here only that the global URL reaches it and that
/// this binary runs its Rust workers (`polylock demo-worker`).
#[test]
fn demo_runs_on_the_global_url_with_this_binary_as_its_rust_workers() {
    let server = RedisServer::start();
    let url = server.url();
    let out = polylock(&[
        "-u",
        &url,
        "demo",
        "--languages",
        "rust",
        "--tickets",
        "10",
        "--workers",
        "2",
    ]);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    assert!(
        out.stdout.contains("OK: exactly 10 tickets sold"),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("private redis-server"),
        "{}",
        out.stdout
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
    for command in ["demo", "inspect", "force-unlock", "watch", "console"] {
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

/// A CLI run's client deletes its record before the process exits (`Client::shutdown`): its
/// record used to stay on the server, listed as a client by `watch` and the console, until its
/// watchdog lease ran out.
#[test]
fn a_cli_run_leaves_no_client_record_behind() {
    let server = RedisServer::start();
    let url = server.url();
    let out = polylock(&["inspect", "orders:42", "--redis", &url]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = polylock(&["force-unlock", "orders:42", "--redis", &url, "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut connection = server.connection().expect("connect");
    let records: Vec<String> = redis::cmd("KEYS")
        .arg("polylock:client:*")
        .query(&mut connection)
        .expect("KEYS");
    assert_eq!(records, Vec::<String>::new());
}
