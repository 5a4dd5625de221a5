//! `polylock inspect` and `polylock watch` name holders and waiters from the client records
//! (`polylock:client:<client-id>`, docs/PROTOCOL.md) and show the live metrics in them, against
//! real redis-servers. The CLI runs as its own process.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use polylock_testkit::{run_tool, Output, RedisServer};

const BINARY: &str = env!("CARGO_BIN_EXE_polylock");
/// No CLI run in these tests may take longer (it is killed, and the test fails).
const RUN_BOUND: Duration = Duration::from_secs(60);

/// Runs `polylock ARGS` with stdin closed and no POLYLOCK_* variables.
fn polylock(args: &[&str]) -> Output {
    run_tool(BINARY, args, &[], RUN_BOUND)
}

fn watch_json(args: &[&str], refreshes: usize) -> (Vec<serde_json::Value>, String) {
    let mut child = Command::new(BINARY)
        .arg("watch")
        .args(args)
        .arg("--json")
        .env_remove("POLYLOCK_REDIS_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start polylock watch");
    let stdout = child.stdout.take().expect("stdout");
    let mut stderr_pipe = child.stderr.take().expect("stderr");
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .take(refreshes)
            .collect::<Vec<String>>()
    });
    let deadline = Instant::now() + RUN_BOUND;
    while !reader.is_finished() {
        assert!(
            Instant::now() < deadline,
            "watch {args:?} printed too little"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let lines = reader.join().expect("stdout reader");
    let _ = child.kill();
    let _ = child.wait();
    let stderr = stderr_reader.join().expect("stderr reader");
    assert_eq!(lines.len(), refreshes, "watch ended early: {stderr}");
    (lines.iter().map(|line| json(line)).collect(), stderr)
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|err| panic!("not JSON ({err}):\n{text}"))
}

fn ok(out: &Output) {
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
}

/// The line of a table whose first word is `name`.
fn row(stdout: &str, name: &str) -> String {
    stdout
        .lines()
        .find(|line| line.split_whitespace().next() == Some(name))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no {name} row:\n{stdout}"))
}

/// The cell under `header` in `row` (the columns are right-aligned under their headers).
fn cell(stdout: &str, row_text: &str, header: &str) -> String {
    let headers = stdout
        .lines()
        .find(|line| line.starts_with("NAME "))
        .unwrap_or_else(|| panic!("no header line:\n{stdout}"));
    let end = headers.find(header).expect("a column") + header.len();
    let start = row_text[..end].rfind("  ").map_or(0, |at| at + 2);
    row_text[start..end].trim().to_owned()
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

fn hset(server: &RedisServer, key: &str, fields: &[(&str, &str)]) {
    let mut args = vec!["HSET", key];
    for (field, value) in fields {
        args.extend([*field, *value]);
    }
    assert_eq!(server.int(&args), fields.len() as i64, "HSET {key}");
}

const CLIENT_ID: &str = "0c1d6a8e-5f3e-4d2b-9a7c-1e2f3a4b5c6d";

/// A client record exactly as docs/PROTOCOL.md describes it (as a client in any language
/// writes it): worker-7, pid 1234 on host-a, holding `orders:42` since 12.3 s ago and with
/// metrics taken now, 100 s after it connected.
fn write_record_of_worker_7(server: &RedisServer, now: i64) {
    let holds = format!(
        r#"[{{"lock":"orders:42","kind":"lock","since_ms":{}}}]"#,
        now - 12_300
    );
    let metrics = format!(
        r#"{{"at_ms":{now},"locks":[
            {{"name":"orders:42","kind":"lock","acquired":1000,"timed_out":200,"cancelled":0,
              "failed":0,"holds":1,"waiters":3,"wait_count":1200,"wait_sum_s":60.0,
              "hold_count":99,"hold_sum_s":9.9,"lost":2,"renewal_failures":1}},
            {{"name":"idle:1","kind":"fair_lock","acquired":0,"timed_out":0,"cancelled":0,
              "failed":0,"holds":0,"waiters":0,"wait_count":0,"wait_sum_s":0.0,
              "hold_count":0,"hold_sum_s":0.0,"lost":0,"renewal_failures":0}}]}}"#
    );
    let connected = (now - 100_000).to_string();
    let now_text = now.to_string();
    hset(
        server,
        &format!("polylock:client:{CLIENT_ID}"),
        &[
            ("name", "worker-7"),
            ("host", "host-a"),
            ("pid", "1234"),
            ("connected_ms", &connected),
            ("refreshed_ms", &now_text),
            ("holds", &holds),
            ("metrics", &metrics),
        ],
    );
    let owner = format!("{CLIENT_ID}:1");
    hset(server, "orders:42", &[(&owner, "1")]);
    assert_eq!(server.int(&["PEXPIRE", "orders:42", "30000"]), 1);
}

#[test]
fn inspect_names_a_holder_from_its_client_record() {
    let server = RedisServer::start();
    let url = server.url();
    write_record_of_worker_7(&server, unix_ms());

    let out = polylock(&["inspect", "orders:42", "--redis", &url]);
    ok(&out);
    let holder_line = out
        .stdout
        .lines()
        .find(|line| line.contains("worker-7"))
        .unwrap_or_else(|| panic!("no holder named:\n{}", out.stdout));
    assert!(
        holder_line.contains("worker-7 (pid 1234 on host-a) held 12."),
        "{holder_line}"
    );
    assert!(
        holder_line.contains(&format!("hold count 1, owner {CLIENT_ID}:1")),
        "{holder_line}"
    );

    let out = polylock(&["inspect", "orders:42", "--redis", &url, "--json"]);
    ok(&out);
    let holder = &json(&out.stdout)["holders"][0];
    assert_eq!(holder["client_name"], "worker-7");
    assert_eq!(holder["client_pid"], 1234);
    assert_eq!(holder["client_host"], "host-a");
    let held_for = holder["held_for_ms"].as_u64().expect("a hold age");
    assert!((12_300..60_000).contains(&held_for), "{held_for}");
}

#[test]
fn an_owner_without_a_record_shows_its_owner_string() {
    let server = RedisServer::start();
    let url = server.url();
    // As Redisson writes a lock: `<uuid>:<thread id>`, and Redisson writes no client record.
    let owner = "7b1e2d3c-0000-4000-8000-000000000001:57";
    hset(&server, "redisson:lock", &[(owner, "1")]);
    assert_eq!(server.int(&["PEXPIRE", "redisson:lock", "30000"]), 1);
    // Another program's key under the record prefix is no record and no error.
    assert_eq!(
        server
            .command(&["SET", "polylock:client:junk", "x"])
            .as_deref(),
        Some("+OK")
    );

    let out = polylock(&["inspect", "redisson:lock", "--redis", &url]);
    ok(&out);
    assert!(
        out.stdout.contains(&format!("  {owner}  (hold count 1)")),
        "{}",
        out.stdout
    );
    let out = polylock(&["inspect", "redisson:lock", "--redis", &url, "--json"]);
    ok(&out);
    let holder = &json(&out.stdout)["holders"][0];
    assert_eq!(holder["owner"], owner);
    assert!(holder["client_name"].is_null(), "{holder}");
    assert!(holder["held_for_ms"].is_null(), "{holder}");

    let out = polylock(&["watch", "--redis", &url, "--once"]);
    ok(&out);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    let lock_row = row(&out.stdout, "redisson:lock");
    assert!(lock_row.contains(&format!("{owner} x1")), "{lock_row}");
    // No client has a record: the metric columns say so.
    for header in ["ACQ/S", "TMO/S", "AVG WAIT", "HOLDS", "WAITERS", "LOST"] {
        assert_eq!(
            cell(&out.stdout, &lock_row, header),
            "-",
            "{header}: {lock_row}"
        );
    }
    assert!(!out.stdout.contains("polylock:client"), "{}", out.stdout);
}

/// The terminal table: holder names and ages, and the rates from a record's metrics (on first
/// sight, over the time since the client connected: 100 s, and the moments since).
#[test]
fn watch_renders_names_and_metrics_from_client_records() {
    let server = RedisServer::start();
    let url = server.url();
    write_record_of_worker_7(&server, unix_ms());

    let out = polylock(&["watch", "--redis", &url, "--once"]);
    ok(&out);
    assert!(
        out.stdout.contains("(metrics from 1 client(s))"),
        "{}",
        out.stdout
    );
    let lock_row = row(&out.stdout, "orders:42");
    assert!(
        lock_row.contains("worker-7 (pid 1234 on host-a) held 12."),
        "{lock_row}"
    );
    assert_eq!(cell(&out.stdout, &lock_row, "ACQ/S"), "10.0", "{lock_row}");
    assert_eq!(cell(&out.stdout, &lock_row, "TMO/S"), "2.0", "{lock_row}");
    assert_eq!(
        cell(&out.stdout, &lock_row, "AVG WAIT"),
        "50 ms",
        "{lock_row}"
    );
    assert_eq!(cell(&out.stdout, &lock_row, "HOLDS"), "1", "{lock_row}");
    assert_eq!(cell(&out.stdout, &lock_row, "WAITERS"), "3", "{lock_row}");
    assert_eq!(cell(&out.stdout, &lock_row, "LOST"), "2", "{lock_row}");
    // A lock the record lists without any activity is no row.
    assert!(!out.stdout.contains("idle:1"), "{}", out.stdout);

    let out = polylock(&["watch", "orders:*", "--redis", &url, "--once", "--json"]);
    ok(&out);
    let snapshot = json(out.stdout.trim());
    let lock = &snapshot["locks"][0];
    assert_eq!(lock["name"], "orders:42");
    assert_eq!(lock["holders"][0]["client_name"], "worker-7");
    assert!(lock["holders"][0]["held_for_ms"].as_u64().unwrap() >= 12_300);
    let metrics = &lock["metrics"];
    assert_eq!(metrics["kind"], "lock");
    assert_eq!(metrics["clients"], 1);
    let rate = |field: &str| metrics[field].as_f64().expect("a rate");
    assert!((9.9..=10.0).contains(&rate("acquires_per_s")), "{metrics}");
    assert!((1.98..=2.0).contains(&rate("timeouts_per_s")), "{metrics}");
    assert_eq!(metrics["avg_wait_ms"], 50.0);
    assert_eq!(metrics["holds"], 1);
    assert_eq!(metrics["waiters"], 3);
    assert_eq!(metrics["lost"], 2);
}

/// A user the ACL keeps from the records (`polylock:client:*`) still sees the locks: owner
/// strings, no metrics, and one line on stderr saying why.
#[test]
fn without_access_to_the_records_owner_strings_are_shown() {
    let server = RedisServer::start();
    write_record_of_worker_7(&server, unix_ms());
    assert_eq!(
        server
            .command(&[
                "ACL",
                "SETUSER",
                "viewer",
                "on",
                ">pw",
                "~orders:*",
                "~{orders:*",
                "~*:{orders:*",
                "~redisson_*",
                "~polylock_*",
                "&*",
                "+@all",
            ])
            .as_deref(),
        Some("+OK")
    );
    let url = format!("redis://viewer:pw@127.0.0.1:{}", server.port());

    // Said once, not at every refresh.
    let (refreshes, stderr) = watch_json(&["--redis", &url, "--interval", "0.05"], 3);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("cannot read the client records (polylock:client:*)"),
        "{stderr}"
    );
    for refresh in &refreshes {
        assert_eq!(refresh["clients_reporting"], 0, "{refresh}");
        assert!(refresh["locks"][0]["metrics"].is_null(), "{refresh}");
    }

    let out = polylock(&["watch", "--redis", &url, "--once"]);
    ok(&out);
    let lock_row = row(&out.stdout, "orders:42");
    assert!(
        lock_row.contains(&format!("{CLIENT_ID}:1 x1")),
        "{lock_row}"
    );
    assert_eq!(cell(&out.stdout, &lock_row, "ACQ/S"), "-", "{lock_row}");

    let out = polylock(&["inspect", "orders:42", "--redis", &url]);
    ok(&out);
    assert!(
        out.stdout
            .contains(&format!("  {CLIENT_ID}:1  (hold count 1)")),
        "{}",
        out.stdout
    );
}

/// Clients named by `ClientOptions::name` drive locks for real; their records (written by the
/// core) are what `inspect` and `watch` show.
mod driven_by_clients {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use polylock::{AcquireOptions, Client, ClientOptions};

    use super::*;

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        polylock::runtime().block_on(future)
    }

    fn named(server: &RedisServer, name: &str, watchdog: Duration) -> Client {
        let options = ClientOptions {
            name: Some(name.to_owned()),
            watchdog_timeout: watchdog,
            ..ClientOptions::default()
        };
        block_on(Client::connect_with(&server.url(), options)).expect("connect")
    }

    /// Acquires `name` again and again (waiting up to 50 ms, holding 20 ms) until stopped.
    fn keep_busy(
        client: &Client,
        name: &str,
        stop: &Arc<AtomicBool>,
    ) -> tokio::task::JoinHandle<()> {
        let lock = client.lock(name).expect("lock");
        let stop = stop.clone();
        polylock::runtime().spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let wait = AcquireOptions::new().wait(Duration::from_millis(50));
                // Errors only once the test failed and its server is gone.
                if lock.acquire(wait).await.unwrap_or(false) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let _ = lock.release().await;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    }

    /// `polylock demo-worker`: another process buying tickets under the plain lock `name`.
    fn worker_process(server: &RedisServer, name: &str) -> std::process::Child {
        assert_eq!(
            server.command(&["SET", "busy:stock", "1000000"]).as_deref(),
            Some("+OK")
        );
        let mut child = Command::new(BINARY)
            .args([
                "demo-worker",
                &server.url(),
                name,
                "busy:stock",
                "lock",
                "5",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the worker process");
        child
            .stdin
            .as_mut()
            .expect("stdin")
            .write_all(b"go\n")
            .expect("say go");
        child
    }

    fn queued(server: &RedisServer, name: &str, waiters: i64) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let queue = format!("redisson_lock_queue:{{{name}}}");
        while server.int(&["LLEN", &queue]) < waiters {
            assert!(Instant::now() < deadline, "the waiters never queued");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(found) = check() {
                return found;
            }
            assert!(Instant::now() < deadline, "never: {what}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn lock_in<'a>(refresh: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
        refresh["locks"]
            .as_array()?
            .iter()
            .find(|lock| lock["name"] == name)
    }

    #[test]
    fn a_busy_lock_shows_holder_names_queue_order_rates_waits_and_a_loss() {
        let server = RedisServer::start();
        let url = server.url();
        let long = Duration::from_secs(30);
        let a = named(&server, "worker-a", long);
        // A record is rewritten about a second after its holds change, and every third of the
        // watchdog lease otherwise: a waiter's shows its wait within a second with a 3 s one.
        let b = named(&server, "worker-b", Duration::from_secs(3));
        let c = named(&server, "worker-c", Duration::from_secs(3));
        // A short watchdog: its renewal finds a force-unlocked lock taken within a second.
        let lossy = named(&server, "worker-lossy", Duration::from_secs(1));
        let stop = Arc::new(AtomicBool::new(false));
        let drivers = [keep_busy(&a, "busy", &stop), keep_busy(&b, "busy", &stop)];
        let mut process = worker_process(&server, "busy");

        // A fair lock held by worker-a, worker-b queued first, worker-c second.
        let fair = a.fair_lock("queue:fair").expect("lock");
        assert!(
            block_on(fair.acquire(AcquireOptions::new().wait(Duration::ZERO))).expect("acquire")
        );
        let wait_long = || AcquireOptions::new().wait(Duration::from_secs(60));
        let first = b.fair_lock("queue:fair").expect("lock");
        let first_waiting = {
            let first = first.clone();
            polylock::runtime().spawn(async move { first.acquire(wait_long()).await })
        };
        queued(&server, "queue:fair", 1);
        let second = c.fair_lock("queue:fair").expect("lock");
        let second_waiting = {
            let second = second.clone();
            polylock::runtime().spawn(async move { second.acquire(wait_long()).await })
        };
        queued(&server, "queue:fair", 2);

        // A lease lost for real: held under the watchdog, deleted by force-unlock.
        let lost = lossy.lock("lossy").expect("lock");
        assert!(
            block_on(lost.acquire(AcquireOptions::new().wait(Duration::ZERO))).expect("acquire")
        );
        ok(&polylock(&[
            "force-unlock",
            "lossy",
            "--redis",
            &url,
            "--yes",
        ]));

        let pid = std::process::id() as u64;
        // The records are refreshed about a second after holds change: look until they tell.
        let refresh = wait_for(
            "names, a hold age, rates, waits and the loss in watch",
            || {
                let (refreshes, stderr) = watch_json(&["--redis", &url, "--interval", "0.5"], 2);
                assert!(stderr.is_empty(), "{stderr}");
                let last = refreshes.last()?.clone();
                let busy = &lock_in(&last, "busy")?["metrics"];
                let fair = lock_in(&last, "queue:fair")?;
                // Free since, the lost lock is a row while its last acquire is in the window:
                // on the first refresh, whose window is each client's life.
                let lossy = &lock_in(&refreshes[0], "lossy")?["metrics"];
                // Three clients use the busy lock: a, b and the worker process.
                let ready = busy["acquires_per_s"].as_f64()? > 0.0
                    && busy["avg_wait_ms"].as_f64()? > 0.0
                    && busy["clients"].as_u64()? >= 3
                    && fair["holders"][0]["held_for_ms"].as_u64().is_some()
                    && fair["metrics"]["waiters"].as_i64()? >= 2
                    && lossy["lost"].as_u64()? >= 1;
                ready.then_some(last)
            },
        );
        let fair_state = lock_in(&refresh, "queue:fair").expect("the fair lock");
        assert_eq!(fair_state["holders"][0]["client_name"], "worker-a");
        assert_eq!(fair_state["holders"][0]["client_pid"], pid);
        assert_eq!(fair_state["queue"][0]["client_name"], "worker-b");
        assert_eq!(fair_state["queue"][1]["client_name"], "worker-c");

        // The other process holds the busy lock now and then: named by its record.
        let worker_pid = process.id() as u64;
        wait_for("the worker process named as a holder", || {
            let out = polylock(&["inspect", "busy", "--redis", &url, "--json"]);
            ok(&out);
            let state = json(&out.stdout);
            (state["holders"][0]["client_pid"] == worker_pid).then_some(())
        });

        // The terminal: names with ages, queue order, numbers in every metric column.
        let out = polylock(&["watch", "--redis", &url, "--once"]);
        ok(&out);
        let fair_row = row(&out.stdout, "queue:fair");
        assert!(
            fair_row.contains(&format!("worker-a (pid {pid} on ")) && fair_row.contains(" held "),
            "{fair_row}"
        );
        assert_eq!(cell(&out.stdout, &fair_row, "WAITING"), "2", "{fair_row}");
        assert!(
            fair_row.ends_with("  queue: worker-b, worker-c"),
            "{fair_row}"
        );
        let busy_row = row(&out.stdout, "busy");
        let rate: f64 = cell(&out.stdout, &busy_row, "ACQ/S")
            .parse()
            .expect("a rate");
        assert!(rate > 0.0, "{busy_row}");
        assert!(
            cell(&out.stdout, &busy_row, "AVG WAIT").ends_with('s'),
            "{busy_row}"
        );
        let lossy_row = row(&out.stdout, "lossy");
        assert!(lossy_row.contains("free"), "{lossy_row}");
        assert_eq!(cell(&out.stdout, &lossy_row, "LOST"), "1", "{lossy_row}");
        let out = polylock(&["inspect", "queue:fair", "--redis", &url]);
        ok(&out);
        let text = &out.stdout;
        let first_at = text
            .find("1. worker-b (pid ")
            .unwrap_or_else(|| panic!("{text}"));
        let second_at = text
            .find("2. worker-c (pid ")
            .unwrap_or_else(|| panic!("{text}"));
        assert!(first_at < second_at, "{text}");
        assert!(text.contains("worker-a (pid "), "{text}");

        stop.store(true, Ordering::Relaxed);
        for driver in drivers {
            block_on(driver).expect("driver");
        }
        let _ = process.kill();
        let _ = process.wait();
        block_on(fair.release()).expect("release");
        assert!(block_on(first_waiting).expect("join").expect("acquire"));
        block_on(first.release()).expect("release");
        assert!(block_on(second_waiting).expect("join").expect("acquire"));
        block_on(second.release()).expect("release");
    }

    #[test]
    fn a_read_write_row_names_its_waiting_writer() {
        let server = RedisServer::start();
        let url = server.url();
        let reader = named(&server, "reader-1", Duration::from_secs(30));
        let writer = named(&server, "writer-1", Duration::from_secs(30));
        let read = reader.read_write_lock("stock").expect("lock").read_lock();
        assert!(
            block_on(read.acquire(AcquireOptions::new().wait(Duration::ZERO))).expect("acquire")
        );
        let write = writer.read_write_lock("stock").expect("lock").write_lock();
        let writing = {
            let write = write.clone();
            polylock::runtime().spawn(async move {
                write
                    .acquire(AcquireOptions::new().wait(Duration::from_secs(60)))
                    .await
            })
        };
        let stock_row = wait_for("the writer waiting", || {
            let out = polylock(&["watch", "stock", "--redis", &url, "--once"]);
            ok(&out);
            let stock_row = row(&out.stdout, "stock");
            (cell(&out.stdout, &stock_row, "WAITING") == "1").then_some(stock_row)
        });
        assert!(stock_row.contains("reader-1 (pid "), "{stock_row}");
        assert!(
            stock_row.ends_with("  writers waiting: writer-1"),
            "{stock_row}"
        );

        block_on(read.release()).expect("release");
        assert!(block_on(writing).expect("join").expect("acquire"));
        block_on(write.release()).expect("release");
    }
}

/// `inspect` of a count-down latch (its count) and of an election (its leader named from its
/// client record, the value and the term), made by real polylock clients, in text and JSON.
#[test]
fn inspect_shows_a_latch_count_and_an_election_leader() {
    let server = RedisServer::start();
    let url = server.url();
    let runtime = polylock::runtime();
    let options = polylock::ClientOptions {
        name: Some("leader-7".into()),
        // Its record is rewritten a second after its holds change.
        watchdog_timeout: Duration::from_secs(3),
        ..polylock::ClientOptions::default()
    };
    let client = runtime
        .block_on(polylock::Client::connect_with(&url, options))
        .expect("connect");
    let latch = client.count_down_latch("ready:7").expect("latch");
    assert!(runtime.block_on(latch.try_set_count(4)).expect("set"));
    runtime.block_on(latch.count_down()).expect("count down");
    let leadership = runtime
        .block_on(
            client
                .election("leader:jobs")
                .expect("election")
                .campaign("http://10.0.0.7:8080", Some(Duration::ZERO)),
        )
        .expect("campaign")
        .expect("leads");

    let out = polylock(&["inspect", "ready:7", "--redis", &url]);
    ok(&out);
    assert!(out.stdout.contains("kind:   latch\n"), "{}", out.stdout);
    assert!(out.stdout.contains("count:  3\n"), "{}", out.stdout);
    let out = polylock(&["inspect", "ready:7", "--redis", &url, "--json"]);
    ok(&out);
    let state = json(&out.stdout);
    assert_eq!(state["kind"], "latch");
    assert_eq!(state["latch_count"], 3);
    assert_eq!(state["permits_available"], serde_json::Value::Null);

    let term = leadership.term();
    let out = polylock(&["inspect", "leader:jobs", "--redis", &url]);
    ok(&out);
    assert!(out.stdout.contains("kind:   election\n"), "{}", out.stdout);
    assert!(
        out.stdout.contains("value:  http://10.0.0.7:8080\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!("term:   {term}\n")),
        "{}",
        out.stdout
    );
    // The leader named from its client record once it lists the hold.
    let pid = std::process::id();
    let deadline = Instant::now() + RUN_BOUND;
    let leader = loop {
        let out = polylock(&["inspect", "leader:jobs", "--redis", &url, "--json"]);
        ok(&out);
        let state = json(&out.stdout);
        if state["leader"]["client_pid"] == pid {
            break state;
        }
        assert!(Instant::now() < deadline, "the leader never named: {state}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(leader["kind"], "election");
    let named = &leader["leader"];
    assert_eq!(named["owner"], leadership.owner());
    assert_eq!(named["client_name"], "leader-7");
    assert_eq!(named["announced_by"], "leader-7");
    assert_eq!(named["value"], "http://10.0.0.7:8080");
    assert_eq!(named["term"], term);
    assert_eq!(leader["fence_token"], term);
    // The fields of the first version keep their meaning: the leader holds the lock.
    assert_eq!(leader["holders"][0]["owner"], leadership.owner());

    // A resign deletes the leader's record: what is left is the free fenced lock and its
    // counter, the last term given.
    runtime.block_on(leadership.resign()).expect("resign");
    let out = polylock(&["inspect", "leader:jobs", "--redis", &url]);
    ok(&out);
    assert!(
        out.stdout.contains("kind:   fenced (not held now)\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!("token:  {term} ")),
        "{}",
        out.stdout
    );
    client.close();
}
