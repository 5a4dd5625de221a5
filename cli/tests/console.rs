//! `polylock console` against real redis-servers: the binary runs as its own process on a free
//! loopback port (`--bind 127.0.0.1:0`, the port read from its first line), and the tests ask
//! it over HTTP as a browser would, while real polylock clients in this process hold and wait.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use polylock::{AcquireOptions, Client, ClientOptions};
use polylock_testkit::{Cluster, RedisServer, SentinelSet, TlsFiles};
use serde_json::Value;

const BINARY: &str = env!("CARGO_BIN_EXE_polylock");
/// How long a condition may take to show (client records are rewritten about a second after
/// holds change; the console reads once a second).
const SHOW_BOUND: Duration = Duration::from_secs(30);

/// A running `polylock console`, killed when dropped.
struct Console {
    child: Child,
    base: String,
    /// Its first line: the URL.
    first_line: String,
    /// The lines it prints on stdout after the first.
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

impl Console {
    fn start(url: &str, extra: &[&str]) -> Console {
        let mut child = Command::new(BINARY)
            .args(["console", "--redis", url])
            .args(extra)
            .env_remove("POLYLOCK_REDIS_URL")
            .env_remove("POLYLOCK_CONSOLE_TOKEN")
            .env_remove("POLYLOCK_KEY_PREFIX")
            .env_remove("POLYLOCK_TLS_CA")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start polylock console");
        let (lines, stdout_lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let (errors, stderr) = mpsc::channel();
        let mut stderr_pipe = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr_pipe.read_to_string(&mut text);
            let _ = errors.send(text);
        });
        let first = stdout_lines
            .recv_timeout(SHOW_BOUND)
            .expect("the console printed no URL");
        let base = first
            .strip_prefix("polylock console: ")
            .unwrap_or_else(|| panic!("not the URL line: {first}"))
            .trim_end_matches('/')
            .to_owned();
        Console {
            child,
            base,
            first_line: first,
            stdout: stdout_lines,
            stderr,
        }
    }

    /// The next line it printed on stdout that starts with `prefix` (waiting for it).
    fn printed(&self, prefix: &str) -> String {
        let deadline = Instant::now() + SHOW_BOUND;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => continue,
                Err(_) => panic!("the console printed no line starting with {prefix:?}"),
            }
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn get(&self, path: &str, bearer: Option<&str>) -> (u16, String) {
        let mut request = agent().get(self.url(path));
        if let Some(token) = bearer {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        answer(request.call())
    }

    fn snapshot(&self) -> Value {
        let (status, body) = self.get("/api/snapshot", None);
        assert_eq!(status, 200, "{body}");
        json(&body)
    }

    fn force_unlock(&self, name: &str, holder: &str) -> (u16, Value) {
        let body = serde_json::json!({ "name": name, "holder": holder }).to_string();
        let (status, text) = answer(
            agent()
                .post(self.url("/api/force-unlock"))
                .header("Content-Type", "application/json")
                .send(body),
        );
        (status, json(&text))
    }

    /// The snapshot once `check` finds what it waits for in it.
    fn wait_for<T>(&self, what: &str, check: impl FnMut(&Value) -> Option<T>) -> T {
        poll_until(what, || self.snapshot(), check)
    }

    fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// Stops it and returns what it wrote on stderr.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr.recv_timeout(SHOW_BOUND).unwrap_or_default()
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(15)))
        .build()
        .into()
}

fn answer(result: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (u16, String) {
    let mut response = result.expect("an HTTP answer");
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_string().expect("a text body");
    (status, body)
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|err| panic!("not JSON ({err}):\n{text}"))
}

fn lock_in<'a>(snapshot: &'a Value, name: &str) -> Option<&'a Value> {
    snapshot["locks"]
        .as_array()?
        .iter()
        .find(|lock| lock["name"] == name)
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    polylock::runtime().block_on(future)
}

/// A polylock client named `name` (its record names it, with this process's pid).
fn named(server: &RedisServer, name: &str) -> Client {
    named_at(&server.url(), name)
}

/// [`named`], on the deployment of `url`.
fn named_at(url: &str, name: &str) -> Client {
    let options = ClientOptions {
        name: Some(name.to_owned()),
        // The record of a waiter is rewritten every third of this: a short one shows waits soon.
        watchdog_timeout: Duration::from_secs(3),
        ..ClientOptions::default()
    };
    block_on(Client::connect_with(url, options)).expect("connect")
}

fn now() -> AcquireOptions {
    AcquireOptions::new().wait(Duration::ZERO)
}

/// Starts an acquire of `lock` that waits up to 60 s, in the background.
fn wait_in_background(lock: polylock::Lock) {
    let wait_long = AcquireOptions::new().wait(Duration::from_secs(60));
    polylock::runtime().spawn(async move { lock.acquire(wait_long).await });
}

/// Waits until `waiters` are in the fair queue of `name`.
fn queued(server: &RedisServer, name: &str, waiters: i64) {
    let deadline = Instant::now() + SHOW_BOUND;
    let queue = format!("redisson_lock_queue:{{{name}}}");
    while server.int(&["LLEN", &queue]) < waiters {
        assert!(Instant::now() < deadline, "the waiters never queued");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Holds `name` as Redisson does (a hash owner -> count, with a lease), for `lease_ms`.
fn hold_as_redisson(server: &RedisServer, name: &str, lease_ms: u64) -> String {
    let owner = "7b1e2d3c-0000-4000-8000-000000000001:57";
    assert_eq!(server.int(&["HSET", name, owner, "1"]), 1);
    assert_eq!(server.int(&["PEXPIRE", name, &lease_ms.to_string()]), 1);
    owner.to_owned()
}

#[test]
fn a_held_lock_shows_its_holder_name_and_pid_and_the_page_loads() {
    let server = RedisServer::start();
    let worker = named(&server, "worker-a");
    let lock = worker.lock("orders:42").expect("lock");
    assert!(block_on(lock.acquire(now())).expect("acquire"));
    let console = Console::start(&server.url(), &["--bind", "127.0.0.1:0"]);
    let pid = u64::from(std::process::id());

    let holder = console.wait_for("orders:42 held by worker-a", |snapshot| {
        let holder = lock_in(snapshot, "orders:42")?["holders"][0].clone();
        (holder["client_name"] == "worker-a").then_some(holder)
    });
    assert_eq!(holder["client_pid"], pid, "{holder}");
    assert!(holder["client_host"].is_string(), "{holder}");
    let snapshot = console.snapshot();
    let lock_state = lock_in(&snapshot, "orders:42").expect("the lock");
    assert_eq!(lock_state["label"], "plain");
    assert_eq!(lock_state["held"], true);
    assert!(lock_state["remaining_lease_ms"].as_u64().expect("a lease") > 0);
    let client = snapshot["clients"]
        .as_array()
        .expect("clients")
        .iter()
        .find(|client| client["name"] == "worker-a")
        .unwrap_or_else(|| panic!("no worker-a among the clients: {snapshot}"));
    assert_eq!(client["pid"], pid);

    let (status, page) = console.get("/", None);
    assert_eq!(status, 200);
    assert!(page.contains("<title>polylock console</title>"), "{page}");
    for asset in ["/console.js", "/console.css"] {
        let (status, body) = console.get(asset, None);
        assert_eq!(status, 200, "{asset}");
        assert!(body.len() > 500, "{asset}: {body}");
    }
    // The rebinding guard: a request addressed to another name is refused.
    for path in ["/api/snapshot", "/api/lock?name=orders:42"] {
        let (status, body) = answer(
            agent()
                .get(console.url(path))
                .header("Host", "attacker.example")
                .call(),
        );
        assert_eq!(status, 403, "{path}");
        assert!(!body.contains("orders:42"), "{path}: {body}");
    }
}

/// A client acquiring and releasing a lock over and over: the lock's acquires/s is above 0 in
/// the snapshot, with one reading per refresh in its history (the sparklines').
#[test]
fn a_lock_acquired_repeatedly_has_a_rate_and_a_history() {
    let server = RedisServer::start();
    let worker = named(&server, "busy-worker");
    let console = Console::start(&server.url(), &["--bind", "127.0.0.1:0"]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy = {
        let stop = stop.clone();
        let lock = worker.lock("hot:42").expect("lock");
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                assert!(block_on(lock.acquire(now())).expect("acquire"));
                block_on(lock.release()).expect("release");
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };

    let history = console.wait_for("hot:42 with a rate in two readings", |snapshot| {
        let lock = lock_in(snapshot, "hot:42")?;
        let history = lock["history"].clone();
        let rates = history["acquires_per_s"].as_array()?;
        let rising = rates
            .iter()
            .filter(|rate| rate.as_f64() > Some(0.0))
            .count();
        (lock["metrics"]["acquires_per_s"].as_f64()? > 0.0 && rising >= 2).then_some(history)
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    busy.join().expect("the busy thread");
    // One value per reading in each measure, the readings a refresh apart.
    let times: Vec<i64> = history["unix_ms"]
        .as_array()
        .expect("times")
        .iter()
        .map(|at| at.as_i64().expect("a time"))
        .collect();
    for measure in ["acquires_per_s", "avg_wait_ms", "timeouts_per_s", "lost"] {
        assert_eq!(
            history[measure].as_array().map(Vec::len),
            Some(times.len()),
            "{measure}: {history}"
        );
    }
    assert!(
        times.windows(2).all(|pair| pair[1] - pair[0] >= 500),
        "{history}"
    );
    assert!(history["lost"]
        .as_array()
        .expect("lost")
        .iter()
        .all(|lost| lost == 0));
}

#[test]
fn a_fair_lock_shows_its_waiters_in_order() {
    let server = RedisServer::start();
    let (a, b, c) = (
        named(&server, "worker-a"),
        named(&server, "worker-b"),
        named(&server, "worker-c"),
    );
    let held = a.fair_lock("queue:fair").expect("lock");
    assert!(block_on(held.acquire(now())).expect("acquire"));
    wait_in_background(b.fair_lock("queue:fair").expect("lock"));
    queued(&server, "queue:fair", 1);
    wait_in_background(c.fair_lock("queue:fair").expect("lock"));
    queued(&server, "queue:fair", 2);
    let console = Console::start(&server.url(), &["--bind", "127.0.0.1:0"]);

    let waiters = console.wait_for("the fair queue, named", |snapshot| {
        let lock = lock_in(snapshot, "queue:fair")?;
        let names: Vec<String> = lock["queue"]
            .as_array()?
            .iter()
            .map(|waiter| waiter["client_name"].as_str().map(str::to_owned))
            .collect::<Option<_>>()?;
        (lock["holders"][0]["client_name"] == "worker-a" && names.len() == 2).then_some(names)
    });
    assert_eq!(waiters, ["worker-b", "worker-c"]);
    assert_eq!(
        lock_in(&console.snapshot(), "queue:fair").expect("lock")["label"],
        "fair"
    );
}

/// The clients table says what each client waits for: its place in a fair queue (from the
/// queue), and a plain lock (which keeps no line: from the waiter's own metrics).
#[test]
fn each_client_shows_what_it_holds_and_what_it_waits_for() {
    let server = RedisServer::start();
    let (a, b, c) = (
        named(&server, "holder-a"),
        named(&server, "queued-b"),
        named(&server, "waiting-c"),
    );
    let fair = a.fair_lock("queue:fair").expect("lock");
    assert!(block_on(fair.acquire(now())).expect("acquire"));
    let plain = a.lock("plain:1").expect("lock");
    assert!(block_on(plain.acquire(now())).expect("acquire"));
    wait_in_background(b.fair_lock("queue:fair").expect("lock"));
    queued(&server, "queue:fair", 1);
    wait_in_background(c.lock("plain:1").expect("lock"));
    let console = Console::start(&server.url(), &["--bind", "127.0.0.1:0"]);

    let client = |snapshot: &Value, name: &str| -> Option<Value> {
        snapshot["clients"]
            .as_array()?
            .iter()
            .find(|client| client["name"] == name)
            .cloned()
    };
    // Each record is rewritten about a second after its holds change, and every second (a 3 s
    // watchdog) with its metrics.
    let clients = console.wait_for("both holds and both waits", |snapshot| {
        let clients = [
            client(snapshot, "holder-a")?,
            client(snapshot, "queued-b")?,
            client(snapshot, "waiting-c")?,
        ];
        let listed = |client: &Value, field: &str| client[field].as_array().map_or(0, Vec::len);
        (listed(&clients[0], "holds") == 2
            && listed(&clients[1], "waits_for") > 0
            && listed(&clients[2], "waits_for") > 0)
            .then_some(clients)
    });
    let [holder, queued_b, waiting_c] = &clients;
    assert_eq!(
        queued_b["waits_for"],
        serde_json::json!([{"lock": "queue:fair", "place": 1, "count": 1}])
    );
    assert_eq!(
        waiting_c["waits_for"],
        serde_json::json!([{"lock": "plain:1", "place": null, "count": 1}])
    );
    assert_eq!(holder["waits_for"], serde_json::json!([]));
    let mut holds: Vec<&str> = holder["holds"]
        .as_array()
        .expect("holds")
        .iter()
        .filter_map(|hold| hold["lock"].as_str())
        .collect();
    holds.sort();
    assert_eq!(holds, ["plain:1", "queue:fair"], "{holder}");
    let connected = holder["connected_ms"].as_i64().expect("connected_ms");
    assert!(connected <= console.snapshot()["unix_ms"].as_i64().expect("now"));
    assert_eq!(holder["metrics"]["locks"].as_array().map(Vec::len), Some(2));
}

#[test]
fn the_event_stream_delivers_a_newly_held_lock() {
    let server = RedisServer::start();
    let console = Console::start(&server.url(), &["--bind", "127.0.0.1:0"]);
    let stream = agent_without_bound()
        .get(console.url("/api/events"))
        .call()
        .expect("the event stream");
    assert_eq!(stream.status().as_u16(), 200);
    let content_type = stream.headers()["content-type"].to_str().expect("a type");
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let events = data_lines(stream);
    // The current snapshot comes at once: nothing is held yet.
    let first = events.recv_timeout(SHOW_BOUND).expect("a first event");
    assert_eq!(json(&first)["locks"], serde_json::json!([]), "{first}");

    let worker = named(&server, "worker-new");
    let lock = worker.lock("fresh:1").expect("lock");
    assert!(block_on(lock.acquire(now())).expect("acquire"));
    let deadline = Instant::now() + SHOW_BOUND;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let data = events
            .recv_timeout(left)
            .expect("no event showed fresh:1 held by worker-new in time");
        let snapshot = json(&data);
        if lock_in(&snapshot, "fresh:1").is_some_and(|lock| {
            lock["held"] == true && lock["holders"][0]["client_name"] == "worker-new"
        }) {
            break;
        }
    }
}

fn agent_without_bound() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// The `data:` lines of an event stream, as they come.
fn data_lines(response: ureq::http::Response<ureq::Body>) -> mpsc::Receiver<String> {
    let (lines, received) = mpsc::channel();
    let reader = BufReader::new(response.into_body().into_reader());
    std::thread::spawn(move || {
        for line in reader.lines().map_while(Result::ok) {
            if let Some(data) = line.strip_prefix("data: ") {
                if lines.send(data.to_owned()).is_err() {
                    return;
                }
            }
        }
    });
    received
}

#[test]
fn force_unlock_is_refused_when_read_only() {
    let server = RedisServer::start();
    let owner = hold_as_redisson(&server, "orders:7", 60_000);
    let console = Console::start(&server.url(), &["--bind", "127.0.0.1:0"]);
    assert_eq!(console.snapshot()["allow_write"], false);

    let (status, answer) = console.force_unlock("orders:7", &owner);
    assert_eq!(status, 403, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .is_some_and(|message| message.contains("--allow-write")),
        "{answer}"
    );
    assert_eq!(
        server.int(&["EXISTS", "orders:7"]),
        1,
        "the lock was deleted"
    );
}

/// A page on another site can make a browser POST to a loopback console without a preflight
/// only as a "simple" request (a form's or `text/plain` body): the action takes JSON only, so
/// such a request does nothing, even with `--allow-write` and no token.
#[test]
fn a_cross_site_form_post_cannot_force_unlock() {
    let server = RedisServer::start();
    let owner = hold_as_redisson(&server, "orders:8", 60_000);
    let console = Console::start(&server.url(), &["--bind", "127.0.0.1:0", "--allow-write"]);
    let body = serde_json::json!({ "name": "orders:8", "holder": owner }).to_string();
    for content_type in ["text/plain", "application/x-www-form-urlencoded"] {
        let (status, answer) = answer(
            agent()
                .post(console.url("/api/force-unlock"))
                .header("Content-Type", content_type)
                .header("Origin", "https://elsewhere.example")
                .send(body.as_str()),
        );
        assert_eq!(status, 415, "{content_type}: {answer}");
        assert_eq!(
            server.int(&["EXISTS", "orders:8"]),
            1,
            "{content_type}: the lock was deleted"
        );
    }
}

#[test]
fn force_unlock_with_write_frees_the_lock_for_the_next_waiter() {
    let server = RedisServer::start();
    let (a, b) = (named(&server, "worker-a"), named(&server, "worker-b"));
    let held = a.fair_lock("orders:9").expect("lock");
    assert!(block_on(held.acquire(now())).expect("acquire"));
    let waiter = b.fair_lock("orders:9").expect("lock");
    let waiting = {
        let waiter = waiter.clone();
        polylock::runtime().spawn(async move {
            waiter
                .acquire(AcquireOptions::new().wait(Duration::from_secs(60)))
                .await
        })
    };
    queued(&server, "orders:9", 1);
    let console = Console::start(&server.url(), &["--bind", "127.0.0.1:0", "--allow-write"]);
    assert!(console.printed("write: ").contains("--allow-write"));
    let owner = console.wait_for("orders:9 held by worker-a", |snapshot| {
        let holder = &lock_in(snapshot, "orders:9")?["holders"][0];
        (holder["client_name"] == "worker-a")
            .then(|| holder["owner"].as_str().map(str::to_owned))?
    });

    // Not the holder the operator saw: nothing is done.
    let (status, answer) = console.force_unlock("orders:9", "someone-else:1");
    assert_eq!(status, 409, "{answer}");
    assert!(!waiting.is_finished(), "the waiter got the lock early");

    let (status, answer) = console.force_unlock("orders:9", &owner);
    assert_eq!(status, 200, "{answer}");
    let message = answer["message"].as_str().expect("a message");
    assert!(
        message.contains("worker-a") && message.contains("orders:9"),
        "{message}"
    );
    // The next waiter is woken and gets it.
    let got = block_on(async { tokio::time::timeout(SHOW_BOUND, waiting).await })
        .expect("the waiter was not woken in time")
        .expect("the waiting task");
    assert!(got.expect("acquire"), "the waiter did not get the lock");
    console.wait_for("orders:9 held by worker-b", |snapshot| {
        let holder = &lock_in(snapshot, "orders:9")?["holders"][0];
        (holder["client_name"] == "worker-b").then_some(())
    });

    let timeline = console.snapshot()["timeline"].clone();
    assert!(
        timeline
            .as_array()
            .expect("a timeline")
            .iter()
            .any(|entry| {
                entry["kind"] == "force-unlock"
                    && entry["lock"] == "orders:9"
                    && entry["text"]
                        .as_str()
                        .is_some_and(|t| t.contains("worker-a"))
            }),
        "{timeline}"
    );
    let stderr = console.stop();
    assert!(
        stderr.contains("force-unlocked fair lock 'orders:9' held by worker-a"),
        "{stderr}"
    );
}

#[test]
fn with_a_token_every_request_needs_it_and_a_refusal_tells_nothing() {
    let server = RedisServer::start();
    hold_as_redisson(&server, "secret-lock:1", 60_000);
    let console = Console::start(
        &server.url(),
        &[
            "--bind",
            "127.0.0.1:0",
            "--token",
            "secret",
            "--allow-write",
        ],
    );
    // A token given is not printed (only a generated one is).
    assert_eq!(
        console.printed("token: "),
        "token: as given (--token or POLYLOCK_CONSOLE_TOKEN)"
    );
    for path in [
        "/",
        "/api/snapshot",
        "/api/events",
        "/api/snapshot?token=wrong",
        "/api/lock?name=secret-lock:1",
        "/api/lock?name=secret-lock:1&token=wrong",
        "/api/lock/events?name=secret-lock:1&token=wrong",
    ] {
        let (status, body) = console.get(path, None);
        assert_eq!(status, 401, "{path}: {body}");
        assert!(!body.contains("secret-lock"), "{path}: {body}");
    }
    let (status, _) = console.get("/api/snapshot", Some("wrong"));
    assert_eq!(status, 401);
    let (status, body) = console.get("/api/snapshot", Some("secret"));
    assert_eq!(status, 200);
    assert!(lock_in(&json(&body), "secret-lock:1").is_some(), "{body}");
    let (status, body) = console.get("/api/snapshot?token=secret", None);
    assert_eq!(status, 200);
    assert!(body.contains("secret-lock:1"), "{body}");
    // A lock's page: a wrong token in the header is refused too, the right one answers.
    let (status, body) = console.get("/api/lock?name=secret-lock:1", Some("wrong"));
    assert_eq!(status, 401);
    assert!(!body.contains("7b1e2d3c"), "{body}");
    let (status, body) = console.get("/api/lock?name=secret-lock:1", Some("secret"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        json(&body)["state"]["holders"][0]["owner"],
        "7b1e2d3c-0000-4000-8000-000000000001:57"
    );
    let (status, page) = console.get("/?token=secret", None);
    assert_eq!(status, 200, "{page}");
    // An action takes the token in the header only: a URL's is not enough.
    let body = r#"{"name":"secret-lock:1","holder":"x:1"}"#;
    let (status, text) = answer(
        agent()
            .post(console.url("/api/force-unlock?token=secret"))
            .header("Content-Type", "application/json")
            .send(body),
    );
    assert_eq!(status, 401, "{text}");
    assert_eq!(server.int(&["EXISTS", "secret-lock:1"]), 1);
    // No CORS: nothing lets another origin's script read an answer.
    let response = agent()
        .get(console.url("/api/snapshot?token=secret"))
        .header("Origin", "http://attacker.example")
        .call()
        .expect("an answer");
    assert!(response
        .headers()
        .keys()
        .all(|name| !name.as_str().starts_with("access-control-")));
}

#[test]
fn a_non_loopback_bind_generates_and_prints_a_token() {
    let server = RedisServer::start();
    let console = Console::start(&server.url(), &["--bind", "0.0.0.0:0"]);
    let line = console.printed("token: ");
    let token = line["token: ".len()..]
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(token.len() >= 32, "{token}");
    let port = console.base.rsplit(':').next().expect("a port").to_owned();
    let loopback = format!("http://127.0.0.1:{port}/api/snapshot");
    let (status, _) = answer(agent().get(&loopback).call());
    assert_eq!(status, 401);
    let (status, body) = answer(
        agent()
            .get(&loopback)
            .header("Authorization", format!("Bearer {token}"))
            .call(),
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn the_url_password_never_appears() {
    let password = "pw-s3cret-4711";
    let mut server = RedisServer::start();
    let grant = format!(">{password}");
    let user = [
        "ACL", "SETUSER", "viewer", "on", &grant, "~*", "&*", "+@all",
    ];
    assert_eq!(server.command(&user).as_deref(), Some("+OK"));
    let url = format!("redis://viewer:{password}@127.0.0.1:{}", server.port());
    let holder = named(&server, "worker-pw");
    let lock = holder.lock("guarded:1").expect("lock");
    assert!(block_on(lock.acquire(now())).expect("acquire"));
    let console = Console::start(&url, &["--bind", "127.0.0.1:0"]);
    let snapshot = console.wait_for("guarded:1 held", |snapshot| {
        lock_in(snapshot, "guarded:1").map(|_| snapshot.clone())
    });
    assert!(
        snapshot["redis"]
            .as_str()
            .is_some_and(|shown| shown.contains("***")),
        "{snapshot}"
    );
    let (_, page) = console.get("/", None);
    let (_, script) = console.get("/console.js", None);
    // Even the errors of a server gone quote no password.
    server.kill();
    let failing = console.wait_for("the error banner", |snapshot| {
        snapshot["error"].is_string().then(|| snapshot.clone())
    });
    for (what, text) in [
        ("the snapshot", snapshot.to_string()),
        ("the page", page),
        ("the script", script),
        ("the failing snapshot", failing.to_string()),
        ("the first line", console.first_line.clone()),
    ] {
        assert!(
            !text.contains(password),
            "{what} shows the password: {text}"
        );
    }
    let stderr = console.stop();
    assert!(!stderr.contains(password), "stderr: {stderr}");
}

#[test]
fn a_pattern_matching_nothing_gives_an_empty_list_with_the_pattern() {
    let server = RedisServer::start();
    hold_as_redisson(&server, "orders:1", 60_000);
    let console = Console::start(
        &server.url(),
        &["--bind", "127.0.0.1:0", "--pattern", "nothing:*"],
    );
    let snapshot = console.snapshot();
    assert_eq!(snapshot["pattern"], "nothing:*");
    assert!(snapshot["error"].is_null(), "{snapshot}");
    assert!(snapshot["read_ms"].is_i64(), "{snapshot}");
    assert_eq!(snapshot["locks"], serde_json::json!([]), "{snapshot}");
    // The same console with the pattern of the lock shows it: the empty list was the pattern's.
    let all = Console::start(
        &server.url(),
        &["--bind", "127.0.0.1:0", "--pattern", "orders:*"],
    );
    assert!(lock_in(&all.snapshot(), "orders:1").is_some());
}

#[test]
fn a_server_gone_is_a_banner_and_the_console_recovers_when_it_returns() {
    let mut server = RedisServer::start();
    hold_as_redisson(&server, "orders:1", 600_000);
    let mut console = Console::start(&server.url(), &["--bind", "127.0.0.1:0"]);
    assert!(lock_in(&console.snapshot(), "orders:1").is_some());

    server.kill();
    let failing = console.wait_for("the error banner", |snapshot| {
        snapshot["error"].as_str().map(|_| snapshot.clone())
    });
    let error = failing["error"].as_str().expect("an error");
    assert!(!error.is_empty());
    // The last reading stays, marked by when it was made.
    assert!(lock_in(&failing, "orders:1").is_some(), "{failing}");
    assert!(console.is_running(), "the console ended");
    let (status, _) = console.get("/", None);
    assert_eq!(status, 200);

    server.restart(); // same port, no data
    hold_as_redisson(&server, "orders:2", 600_000);
    let recovered = console.wait_for("the console reading again", |snapshot| {
        (snapshot["error"].is_null() && lock_in(snapshot, "orders:2").is_some())
            .then(|| snapshot.clone())
    });
    assert!(lock_in(&recovered, "orders:1").is_none(), "{recovered}");
    let kinds: Vec<&str> = recovered["timeline"]
        .as_array()
        .expect("a timeline")
        .iter()
        .filter_map(|entry| entry["kind"].as_str())
        .collect();
    assert!(
        kinds.contains(&"redis-error") && kinds.contains(&"redis-back"),
        "{kinds:?}"
    );
    assert!(console.is_running());
}

#[test]
fn a_lease_that_runs_out_is_a_loss_on_the_timeline() {
    let server = RedisServer::start();
    let console = Console::start(&server.url(), &["--bind", "127.0.0.1:0"]);
    // A holder that stopped renewing (crashed): its lease runs out on its own.
    let owner = hold_as_redisson(&server, "orders:lost", 2500);
    let entry = console.wait_for("a lease-ran-out entry", |snapshot| {
        snapshot["timeline"]
            .as_array()?
            .iter()
            .find(|entry| entry["kind"] == "lease-ran-out")
            .cloned()
    });
    assert_eq!(entry["lock"], "orders:lost");
    assert!(
        entry["text"]
            .as_str()
            .is_some_and(|text| text.contains(&owner)),
        "{entry}"
    );
    // A lock released with its lease far from its end is no loss.
    hold_as_redisson(&server, "orders:released", 600_000);
    console.wait_for("orders:released shown", |snapshot| {
        lock_in(snapshot, "orders:released").map(|_| ())
    });
    assert_eq!(server.int(&["DEL", "orders:released"]), 1);
    console.wait_for("orders:released gone", |snapshot| {
        lock_in(snapshot, "orders:released").is_none().then_some(())
    });
    let timeline = console.snapshot()["timeline"].clone();
    assert!(
        !timeline.to_string().contains("orders:released"),
        "{timeline}"
    );
}

#[test]
fn a_console_started_before_its_server_serves_a_banner_then_the_locks() {
    let port = polylock_testkit::free_port();
    let mut console = Console::start(
        &format!("redis://127.0.0.1:{port}"),
        &["--bind", "127.0.0.1:0"],
    );
    let snapshot = console.snapshot();
    assert!(snapshot["error"].is_string(), "{snapshot}");
    assert!(snapshot["read_ms"].is_null(), "{snapshot}");
    assert!(console.is_running());

    let server = RedisServer::start_on(port, &[]).expect("a server on the console's port");
    hold_as_redisson(&server, "orders:late", 600_000);
    console.wait_for("the late lock", |snapshot| {
        (snapshot["error"].is_null() && lock_in(snapshot, "orders:late").is_some()).then_some(())
    });
}

/// The SCAN calls the server has answered (INFO commandstats).
fn scans(server: &RedisServer) -> u64 {
    let mut connection = server.connection().expect("a connection");
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut connection)
        .expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_scan:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().expect("a count"))
}

#[test]
fn an_unwatched_console_stops_reading_and_reads_again_when_asked() {
    let server = RedisServer::start();
    hold_as_redisson(&server, "orders:1", 600_000);
    let console = Console::start(&server.url(), &["--bind", "127.0.0.1:0"]);
    assert!(lock_in(&console.snapshot(), "orders:1").is_some());

    // Nobody asks: within its idle time (10 s) and a few refreshes it stops scanning.
    let deadline = Instant::now() + SHOW_BOUND;
    let mut last = scans(&server);
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < Duration::from_secs(3) {
        assert!(Instant::now() < deadline, "the console kept reading");
        std::thread::sleep(Duration::from_millis(200));
        let now = scans(&server);
        if now != last {
            (last, quiet_since) = (now, Instant::now());
        }
    }

    // Asked: it reads again, and the answer is of a new reading.
    assert_eq!(server.int(&["DEL", "orders:1"]), 1);
    let asked = Instant::now();
    let snapshot = console.snapshot();
    assert!(lock_in(&snapshot, "orders:1").is_none(), "{snapshot}");
    assert!(scans(&server) > last);
    assert!(asked.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_bad_url_is_a_usage_error_at_once() {
    for url in ["127.0.0.1:6379", "redis://127.0.0.1:notaport"] {
        let out = polylock_testkit::run_tool(
            BINARY,
            &["console", "--redis", url, "--bind", "127.0.0.1:0"],
            &[],
            SHOW_BOUND,
        );
        assert_eq!(out.code, 2, "{url}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{url}: {}", out.stdout);
    }
}

#[test]
fn under_a_key_prefix_names_are_shown_as_the_clients_use_them() {
    let server = RedisServer::start();
    let options = ClientOptions {
        name: Some("worker-prefixed".to_owned()),
        key_prefix: Some("app:".to_owned()),
        ..ClientOptions::default()
    };
    let worker = block_on(Client::connect_with(&server.url(), options)).expect("connect");
    let lock = worker.lock("orders:1").expect("lock");
    assert!(block_on(lock.acquire(now())).expect("acquire"));
    assert_eq!(server.int(&["EXISTS", "app:orders:1"]), 1);
    let console = Console::start(
        &server.url(),
        &[
            "--bind",
            "127.0.0.1:0",
            "--key-prefix",
            "app:",
            "--allow-write",
        ],
    );
    let owner = console.wait_for("orders:1 held by worker-prefixed", |snapshot| {
        let holder = &lock_in(snapshot, "orders:1")?["holders"][0];
        (holder["client_name"] == "worker-prefixed")
            .then(|| holder["owner"].as_str().map(str::to_owned))?
    });
    let (status, answer) = console.force_unlock("orders:1", &owner);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(server.int(&["EXISTS", "app:orders:1"]), 0);
}

/// The read-only rule `polylock check --permissions --console --json ARGS` gives, asked as the
/// default user of the deployment of `url`.
fn console_rule(url: &str, args: &[&str]) -> Vec<String> {
    let output = Command::new(BINARY)
        .args(["check", "--permissions", "--console", "--json"])
        .args(["-u", url])
        .args(args)
        .env_remove("POLYLOCK_REDIS_URL")
        .env_remove("POLYLOCK_KEY_PREFIX")
        .output()
        .expect("run polylock check --permissions --console");
    let report = json(&String::from_utf8_lossy(&output.stdout));
    let rule = report["rule"].as_array().expect("the rule");
    rule.iter()
        .map(|part| part.as_str().expect("a part").to_owned())
        .collect()
}

/// `ACL SETUSER viewer on >PASSWORD <rule>` on `server`: the user a console's URL names.
fn add_viewer(server: &RedisServer, password: &str, rule: &[String]) {
    let grant = format!(">{password}");
    let mut setuser = vec!["ACL", "SETUSER", "viewer", "on", &grant];
    setuser.extend(rule.iter().map(String::as_str));
    assert_eq!(server.command(&setuser).as_deref(), Some("+OK"));
}

/// The read-only rule `polylock check --permissions --console` gives is enough to look: a
/// console as a user with only that rule shows a held lock, its holder named from its record.
#[test]
fn the_read_only_rule_of_check_permissions_console_is_enough_to_look() {
    let server = RedisServer::start();
    add_viewer(
        &server,
        "secret",
        &console_rule(&server.url(), &["--prefix", "app:"]),
    );
    let worker = named(&server, "worker-a");
    let fair = worker.fair_lock("app:orders").expect("lock");
    assert!(block_on(fair.acquire(now())).expect("acquire"));
    let url = format!("redis://viewer:secret@127.0.0.1:{}", server.port());
    let console = Console::start(&url, &["--bind", "127.0.0.1:0", "--pattern", "app:*"]);
    console.wait_for("app:orders held by worker-a, read as viewer", |snapshot| {
        let lock = lock_in(snapshot, "app:orders")?;
        (snapshot["error"].is_null() && lock["holders"][0]["client_name"] == "worker-a")
            .then_some(())
    });
}

/// A console on `url` (whose password is `password`), started with `extra` arguments, shows each
/// of `names` held by
/// `holder_name`, and shows the password nowhere: not in the snapshot, the page, or its log.
fn shows_the_holds_and_no_password(
    url: &str,
    extra: &[&str],
    password: &str,
    names: &[String],
    holder: &str,
) {
    let mut args = vec!["--bind", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let console = Console::start(url, &args);
    let snapshot = console.wait_for("every name held, its holder named", |snapshot| {
        let all = names.iter().all(|name| {
            lock_in(snapshot, name).is_some_and(|lock| lock["holders"][0]["client_name"] == holder)
        });
        all.then(|| snapshot.clone())
    });
    assert!(snapshot["error"].is_null(), "{snapshot}");
    let shown = snapshot["redis"].as_str().expect("the URL shown");
    assert!(
        shown.contains("***") && !shown.contains(password),
        "{shown}"
    );
    let (_, page) = console.get("/", None);
    let (_, body) = console.get("/api/snapshot", None);
    for text in [&page, &body, &console.first_line] {
        assert!(!text.contains(password), "{text}");
    }
    let stderr = console.stop();
    assert!(!stderr.contains(password), "{stderr}");
}

/// Names `<prefix>N`, until every primary of `cluster` serves one.
fn names_on_every_primary(cluster: &Cluster, prefix: &str) -> Vec<String> {
    let primaries = cluster
        .topology()
        .iter()
        .filter(|node| node.primary)
        .count();
    let mut names = Vec::new();
    let mut served = std::collections::HashSet::new();
    for n in 0.. {
        let name = format!("{prefix}{n}");
        if served.insert(cluster.primary_for_key(&name)) {
            names.push(name);
        }
        if served.len() == primaries {
            return names;
        }
    }
    unreachable!("the names run out before the primaries")
}

/// On a cluster, held locks on every primary and their holder's record (a key of its own slot)
/// are all read (the console SCANs each primary), as a user with only the read-only rule.
#[test]
fn on_a_cluster_the_console_shows_the_locks_of_every_primary() {
    let password = "cluster-pw-9931";
    let cluster = Cluster::start(3, 0);
    // The console reads as a user with only the read-only rule; the holder is the default user.
    let mut rule = console_rule(&cluster.url(), &[]);
    if !polylock_testkit::ServerBuild::configured().has_sharded_pubsub() {
        // Redis 6.2 has no SPUBLISH to grant (docs/console.md says to leave it out there).
        rule.retain(|part| part != "+spublish");
    }
    for node in &cluster.nodes {
        add_viewer(node, password, &rule);
    }
    let url = cluster.url().replacen(
        "redis+cluster://",
        &format!("redis+cluster://viewer:{password}@"),
        1,
    );
    let names = names_on_every_primary(&cluster, "orders:");
    let worker = named_at(&cluster.url(), "cluster-worker");
    let locks: Vec<_> = names
        .iter()
        .map(|name| worker.lock(name).expect("lock"))
        .collect();
    for lock in &locks {
        assert!(block_on(lock.acquire(now())).expect("acquire"));
    }
    shows_the_holds_and_no_password(&url, &[], password, &names, "cluster-worker");
}

/// Through Sentinel, the console reads the primary the sentinels name, as a user with only the
/// read-only rule.
#[test]
fn through_sentinel_the_console_shows_the_primarys_locks() {
    let password = "sentinel-pw-5521";
    let set = SentinelSet::start(1, 1);
    let primary = set.server(set.primary_port());
    add_viewer(primary, password, &console_rule(&primary.url(), &[]));
    let url = set.url().replacen(
        "redis+sentinel://",
        &format!("redis+sentinel://viewer:{password}@"),
        1,
    );
    let worker = named_at(&set.url(), "sentinel-worker");
    let lock = worker.fair_lock("jobs:7").expect("lock");
    assert!(block_on(lock.acquire(now())).expect("acquire"));
    let jobs = ["jobs:7".to_owned()];
    shows_the_holds_and_no_password(&url, &[], password, &jobs, "sentinel-worker");
}

/// Over TLS (`rediss://`, the server's certificate checked with the test's CA: `--tls-ca`), as
/// a user with only the read-only rule.
#[test]
fn over_tls_the_console_shows_the_locks() {
    let password = "tls-pw-7310";
    let files = TlsFiles::make();
    let server = RedisServer::start_tls(&files, "server", false);
    add_viewer(&server, password, &console_rule(&server.url(), &[]));
    let url = server
        .tls_url()
        .replacen("rediss://", &format!("rediss://viewer:{password}@"), 1);
    let options = ClientOptions {
        name: Some("tls-worker".to_owned()),
        tls_ca: Some(files.path("ca.crt")),
        ..ClientOptions::default()
    };
    let worker = block_on(Client::connect_with(&server.tls_url(), options)).expect("connect");
    let lock = worker.lock("tls:orders").expect("lock");
    assert!(block_on(lock.acquire(now())).expect("acquire"));
    // Without the CA its certificate is not trusted: the banner says so.
    let untrusted = Console::start(&url, &["--bind", "127.0.0.1:0"]);
    let error = untrusted.wait_for("a TLS error", |snapshot| {
        snapshot["error"].as_str().map(str::to_owned)
    });
    assert!(error.to_lowercase().contains("certificate"), "{error}");
    drop(untrusted);
    let ca = files.path("ca.crt");
    shows_the_holds_and_no_password(
        &url,
        &["--tls-ca", &ca],
        password,
        &["tls:orders".to_owned()],
        "tls-worker",
    );
}

/// The timeline entry of `kind`, once the console has one.
fn timeline_entry(console: &Console, kind: &str) -> Value {
    console.wait_for(&format!("a {kind} on the timeline"), |snapshot| {
        let timeline = snapshot["timeline"].as_array()?;
        timeline.iter().find(|entry| entry["kind"] == kind).cloned()
    })
}

/// A Sentinel failover while the console looks: on the timeline, naming the new primary, and
/// the lock read again from it.
#[test]
fn a_sentinel_failover_is_on_the_timeline() {
    let set = SentinelSet::start(1, 1);
    let worker = named_at(&set.url(), "sentinel-worker");
    let lock = worker.lock("jobs:failover").expect("lock");
    assert!(block_on(lock.acquire(now())).expect("acquire"));
    let console = Console::start(&set.url(), &["--bind", "127.0.0.1:0"]);
    console.wait_for("jobs:failover held", |snapshot| {
        lock_in(snapshot, "jobs:failover").map(|_| ())
    });
    let old = set.primary_port();
    let new = set.failover();
    let entry = timeline_entry(&console, "failover");
    let text = entry["text"].as_str().expect("text");
    assert!(
        text.contains(&format!(":{new},")) && text.contains(&format!(":{old} ")),
        "{text}"
    );
}

/// A cluster primary failed over to its replica while the console looks: on the timeline.
#[test]
fn a_cluster_failover_is_on_the_timeline() {
    let cluster = Cluster::start(3, 1);
    let console = Console::start(&cluster.url(), &["--bind", "127.0.0.1:0"]);
    // Its first reading, done before it printed its address, asked the slot map.
    let primary = cluster.primary_for_key("orders:1");
    let new = cluster.failover(primary);
    let entry = timeline_entry(&console, "failover");
    let text = entry["text"].as_str().expect("text");
    let (now, before) = text.split_once("before").expect("now and before");
    assert!(now.contains(&format!(":{new},")), "{text}");
    assert!(
        before.contains(&format!(":{primary}")) && !now.contains(&format!(":{primary},")),
        "{text}"
    );
}

/// `GET /api/lock?name=` as the page asks for it (the name URI-encoded).
fn lock_page(console: &Console, name: &str) -> Value {
    let (status, body) = answer(
        agent()
            .get(console.url("/api/lock"))
            .query("name", name)
            .call(),
    );
    assert_eq!(status, 200, "{body}");
    json(&body)
}

/// The lock's page once `check` finds what it waits for in it.
fn wait_for_page<T>(
    console: &Console,
    name: &str,
    what: &str,
    check: impl FnMut(&Value) -> Option<T>,
) -> T {
    poll_until(what, || lock_page(console, name), check)
}

/// Reads with `read` until `check` finds what it waits for, within [`SHOW_BOUND`].
fn poll_until<T>(
    what: &str,
    mut read: impl FnMut() -> Value,
    mut check: impl FnMut(&Value) -> Option<T>,
) -> T {
    let deadline = Instant::now() + SHOW_BOUND;
    loop {
        let value = read();
        if let Some(found) = check(&value) {
            return found;
        }
        assert!(Instant::now() < deadline, "never: {what}; last: {value}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The client names of one order of a page's queue.
fn order_names(order: &Value) -> Vec<String> {
    order["waiters"]
        .as_array()
        .map(|waiters| {
            waiters
                .iter()
                .map(|waiter| waiter["client_name"].as_str().unwrap_or("?").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A lock's page, for a lock outside the console's pattern (the page reads it all the same):
/// its holds with their durations (the first ended when released, the next one growing), the
/// queue at each order it had (the waiters moving up when the head takes the lock), and the
/// wait histogram the waiter's record reports.
#[test]
fn a_lock_page_shows_holds_the_queue_as_it_moves_and_the_wait_histogram() {
    let server = RedisServer::start();
    let console = Console::start(
        &server.url(),
        &["--bind", "127.0.0.1:0", "--pattern", "elsewhere:*"],
    );
    let (holder, first, second) = (
        named(&server, "page-holder"),
        named(&server, "page-first"),
        named(&server, "page-second"),
    );
    let lock = holder.fair_lock("page:fair").expect("lock");
    assert!(block_on(lock.acquire(now())).expect("acquire"));
    let first_lock = first.fair_lock("page:fair").expect("lock");
    wait_in_background(first_lock.clone());
    queued(&server, "page:fair", 1);
    wait_in_background(second.fair_lock("page:fair").expect("lock"));
    queued(&server, "page:fair", 2);

    let page = wait_for_page(&console, "page:fair", "both waiters in order", |page| {
        let orders = page["queue_orders"].as_array()?;
        (order_names(orders.last()?) == ["page-first", "page-second"]).then(|| page.clone())
    });
    assert_eq!(page["found"], true);
    assert_eq!(page["state"]["kind"], "fair");
    let holds = page["holds"].as_array().expect("holds");
    assert_eq!(holds.len(), 1, "{page}");
    assert_eq!(holds[0]["owner"], lock.owner());
    assert_eq!(holds[0]["end_ms"], Value::Null);
    assert!(
        lock_in(&console.snapshot(), "page:fair").is_none(),
        "outside the pattern"
    );

    block_on(lock.release()).expect("release");
    let page = wait_for_page(&console, "page:fair", "the first waiter holding", |page| {
        let holds = page["holds"].as_array()?;
        let moved = page["queue_orders"].as_array()?.last().map(order_names)?;
        (holds.len() == 2 && moved == ["page-second"]).then(|| page.clone())
    });
    let holds = page["holds"].as_array().expect("holds");
    let ended = &holds[0];
    assert_eq!(ended["owner"], lock.owner());
    let (start, end) = (
        ended["start_ms"].as_i64().expect("a start"),
        ended["end_ms"].as_i64().expect("ended"),
    );
    assert_eq!(ended["duration_ms"].as_i64(), Some(end - start));
    assert_eq!(holds[1]["owner"], first_lock.owner());
    assert_eq!(holds[1]["client_name"], "page-first");
    assert_eq!(holds[1]["end_ms"], Value::Null);
    // The orders the queue had, oldest first: both, then the second alone at the head.
    let orders: Vec<Vec<String>> = page["queue_orders"]
        .as_array()
        .expect("orders")
        .iter()
        .map(order_names)
        .collect();
    let both = orders
        .iter()
        .position(|order| order == &["page-first", "page-second"])
        .unwrap_or_else(|| panic!("{orders:?}"));
    assert_eq!(
        orders.last().map(Vec::as_slice),
        Some(&["page-second".to_owned()][..])
    );
    assert!(both < orders.len() - 1);

    // The first waiter's record reports its wait: one count in the summed histogram.
    let histogram = wait_for_page(&console, "page:fair", "the wait in the histogram", |page| {
        let histogram = page["wait_histogram"].clone();
        (histogram["count"].as_u64()? >= 1).then_some(histogram)
    });
    let counts: Vec<u64> = histogram["counts"]
        .as_array()
        .expect("counts")
        .iter()
        .map(|count| count.as_u64().expect("a count"))
        .collect();
    assert_eq!(
        counts.iter().sum::<u64>(),
        histogram["count"].as_u64().unwrap()
    );
    assert_eq!(
        counts.len(),
        histogram["bounds_ms"].as_array().expect("bounds").len() + 1
    );
    assert_eq!(histogram["bounds_ms"][0], 0.5);
}

/// The page of a name with nothing at it says so; odd characters come back as given; a name no
/// lock can have is a 400 that says why; the stream of a page delivers it as `lock` events.
#[test]
fn a_lock_page_for_nothing_odd_names_and_bad_names() {
    let server = RedisServer::start();
    let console = Console::start(&server.url(), &["--bind", "127.0.0.1:0"]);
    let page = lock_page(&console, "nothing:here");
    assert_eq!(page["found"], false, "{page}");
    assert_eq!(page["state"]["kind"], "none");
    assert_eq!(page["holds"], serde_json::json!([]));

    let odd = "odd <b>&amp;</b> /?#%20 \"name\" ü";
    let worker = named(&server, "odd-worker");
    let lock = worker.lock(odd).expect("lock");
    assert!(block_on(lock.acquire(now())).expect("acquire"));
    let page = lock_page(&console, odd);
    assert_eq!(page["name"], odd);
    assert_eq!(page["found"], true);
    assert_eq!(page["state"]["holders"][0]["owner"], lock.owner());

    for (query, problem) in [
        ("/api/lock?name=", "must not be empty"),
        ("/api/lock", "name"),
        ("/api/lock/events?name=", "must not be empty"),
    ] {
        let (status, body) = console.get(query, None);
        assert_eq!(status, 400, "{query}: {body}");
        assert!(body.contains(problem), "{query}: {body}");
    }
    let long = "x".repeat(polylock::MAX_NAME_BYTES + 1);
    let (status, body) = answer(
        agent()
            .get(console.url("/api/lock"))
            .query("name", &long)
            .call(),
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("at most"), "{body}");

    let stream = agent_without_bound()
        .get(console.url("/api/lock/events"))
        .query("name", odd)
        .call()
        .expect("the page's stream");
    assert_eq!(stream.status().as_u16(), 200);
    let events = data_lines(stream);
    let data = events.recv_timeout(SHOW_BOUND).expect("a lock event");
    let page = json(&data);
    assert_eq!(page["name"], odd);
    assert_eq!(page["holds"][0]["owner"], lock.owner());
}

/// A latch and an election are listed among the locks (the latch with its count, the election
/// with its leader, value and term), and a new leader is on the timeline with its term.
#[test]
fn latches_and_elections_are_listed_and_a_new_leader_is_on_the_timeline() {
    let server = RedisServer::start();
    let console = Console::start(&server.url(), &["--bind", "127.0.0.1:0"]);
    let (first, second) = (named(&server, "leader-a"), named(&server, "leader-b"));
    let latch = first.count_down_latch("ready:all").expect("latch");
    assert!(block_on(latch.try_set_count(3)).expect("set"));
    let leadership = block_on(
        first
            .election("leader:db")
            .expect("election")
            .campaign("10.0.0.1:5432", Some(Duration::ZERO)),
    )
    .expect("campaign")
    .expect("leads");

    let listed = console.wait_for("the latch and the election listed", |snapshot| {
        let latch = lock_in(snapshot, "ready:all")?.clone();
        let election = lock_in(snapshot, "leader:db")?.clone();
        (election["leader"]["client_name"] == "leader-a").then_some((latch, election))
    });
    let (latch_view, election) = listed;
    assert_eq!(latch_view["label"], "latch");
    assert_eq!(latch_view["latch_count"], 3);
    assert_eq!(election["label"], "election");
    assert_eq!(election["leader"]["value"], "10.0.0.1:5432");
    assert_eq!(election["leader"]["term"], leadership.term());
    // Once each: not their marks, records or counters.
    let snapshot = console.snapshot();
    let names: Vec<&str> = snapshot["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .map(|lock| lock["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ["leader:db", "ready:all"]);

    let first_term = leadership.term();
    block_on(leadership.resign()).expect("resign");
    let next = block_on(
        second
            .election("leader:db")
            .expect("election")
            .campaign("10.0.0.2:5432", Some(Duration::from_secs(10))),
    )
    .expect("campaign")
    .expect("leads");
    assert!(next.term() > first_term);
    let entry = console.wait_for("the new leader on the timeline", |snapshot| {
        let timeline = snapshot["timeline"].as_array()?;
        timeline
            .iter()
            .find(|entry| {
                entry["kind"] == "new-leader"
                    && entry["text"]
                        .as_str()
                        .is_some_and(|text| text.contains(&format!("term {}", next.term())))
            })
            .cloned()
    });
    assert_eq!(entry["lock"], "leader:db");
    let text = entry["text"].as_str().expect("a text");
    assert!(
        text.contains("leader-b") && text.contains("10.0.0.2:5432"),
        "{text}"
    );
    // The election's page: the leader now, and both terms seen while it was open.
    let page = wait_for_page(&console, "leader:db", "the leader on the page", |page| {
        (page["state"]["leader"]["client_name"] == "leader-b").then(|| page.clone())
    });
    assert_eq!(page["state"]["leader"]["term"], next.term());
    assert_eq!(page["terms"].as_array().map(Vec::len), Some(1), "{page}");
    block_on(next.resign()).expect("resign");
}

/// Calls of each command the server has answered (INFO commandstats), by lower-case name.
fn command_calls(server: &RedisServer) -> std::collections::HashMap<String, u64> {
    let mut connection = server.connection().expect("a connection");
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut connection)
        .expect("INFO");
    info.lines()
        .filter_map(|line| {
            let (command, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats.strip_prefix("calls=")?.split(',').next()?;
            Some((command.to_owned(), calls.parse().ok()?))
        })
        .collect()
}

/// The number of readings the snapshot is of.
fn readings(snapshot: &Value) -> u64 {
    snapshot["readings"].as_u64().expect("readings")
}

/// With thousands of locks the console's commands per refresh stay within the documented
/// bound (at most 2 x 4 SCAN per primary + C HMGET + B EVALSHA: docs/console.md, "Cost on
/// Redis"), every lock is shown within the documented number of refreshes, and a lock released
/// or taken over is seen so within ceil(N / B) refreshes; holders are named from the records.
#[test]
fn thousands_of_locks_cost_a_bounded_number_of_commands_per_refresh() {
    const LOCKS: usize = 3000;
    const READS_PER_REFRESH: usize = 500;
    const SCANS_PER_REFRESH: u64 = 2 * 4;
    let server = RedisServer::start();
    // Three clients, each with a record (as a polylock client writes it), holding the locks
    // in Redisson's layout; nothing renews them, so every command counted is the console's.
    let client_ids: Vec<String> = (0..3)
        .map(|n| format!("6e3814a1-e847-452b-a982-45baf93a1d{n:02}"))
        .collect();
    let mut setup = redis::pipe();
    for (n, id) in client_ids.iter().enumerate() {
        setup
            .cmd("HSET")
            .arg(format!("polylock:client:{id}"))
            .arg(&[
                ("name", format!("cost-worker-{n}")),
                ("host", "host-a".to_owned()),
                ("pid", (4000 + n).to_string()),
            ])
            .ignore();
    }
    for n in 0..LOCKS {
        let name = format!("cost:{n}");
        let owner = format!("{}:1", client_ids[n % client_ids.len()]);
        setup.cmd("HSET").arg(&name).arg(owner).arg(1).ignore();
        setup.cmd("PEXPIRE").arg(&name).arg(600_000).ignore();
    }
    let mut connection = server.connection().expect("a connection");
    let () = setup.query(&mut connection).expect("set up the locks");
    let keys = server.int(&["DBSIZE"]) as usize;
    let records = client_ids.len() as u64;

    let console = Console::start(
        &server.url(),
        &[
            "--bind",
            "127.0.0.1:0",
            "--pattern",
            "cost:*",
            "--max-locks",
            "5000",
            "--reads-per-refresh",
            &READS_PER_REFRESH.to_string(),
        ],
    );
    let held = |snapshot: &Value| {
        snapshot["locks"]
            .as_array()
            .expect("locks")
            .iter()
            .filter(|lock| lock["held"] == true)
            .count()
    };
    // A sweep takes ceil(ceil(K / 500) / 4) refreshes; a lock shows within two sweeps and its
    // turn to be read.
    let sweep_refreshes = keys.div_ceil(500).div_ceil(4) as u64;
    let read_turn = LOCKS.div_ceil(READS_PER_REFRESH) as u64;
    let shown_at = console.wait_for("every lock shown", |snapshot| {
        (held(snapshot) == LOCKS).then(|| readings(snapshot))
    });
    assert!(
        shown_at <= 2 * sweep_refreshes + read_turn,
        "every lock shown only at reading {shown_at} (K = {keys})"
    );
    let snapshot = console.snapshot();
    for lock in snapshot["locks"].as_array().expect("locks") {
        let holder = &lock["holders"][0];
        assert!(
            holder["client_name"]
                .as_str()
                .is_some_and(|name| name.starts_with("cost-worker-")),
            "a holder not named from its record: {lock}"
        );
    }

    // The commands of several whole refreshes (and at most one more begun meanwhile).
    let first = readings(&console.snapshot());
    let start = console.wait_for("a new reading", |snapshot| {
        (readings(snapshot) > first).then(|| readings(snapshot))
    });
    let before = command_calls(&server);
    let end = console.wait_for("five more readings", |snapshot| {
        (readings(snapshot) >= start + 5).then(|| readings(snapshot))
    });
    let after = command_calls(&server);
    let calls =
        |command: &str| after.get(command).unwrap_or(&0) - before.get(command).unwrap_or(&0);
    let refreshes = end - start + 1;
    let (scans, hmgets) = (calls("scan"), calls("hmget"));
    let scripts = calls("evalsha") + calls("eval");
    assert!(
        scans > 0 && scans <= refreshes * SCANS_PER_REFRESH,
        "{scans} SCAN in {refreshes}"
    );
    assert!(
        hmgets <= refreshes * records,
        "{hmgets} HMGET in {refreshes} refreshes"
    );
    assert!(
        scripts > 0 && scripts <= refreshes * READS_PER_REFRESH as u64,
        "{scripts} scripts in {refreshes} refreshes"
    );

    // Released, and taken over by another client: seen within a turn of reading (plus the
    // refresh that may have read them just before the change).
    let changed_at = readings(&console.snapshot());
    assert_eq!(server.int(&["DEL", "cost:7"]), 1);
    assert_eq!(server.int(&["DEL", "cost:8"]), 1);
    let new_owner = format!("{}:9", client_ids[0]);
    assert_eq!(server.int(&["HSET", "cost:8", &new_owner, "1"]), 1);
    let seen_at = console.wait_for("cost:7 released and cost:8 taken over", |snapshot| {
        let taken = lock_in(snapshot, "cost:8")?["holders"][0]["owner"] == new_owner.as_str();
        (lock_in(snapshot, "cost:7").is_none() && taken).then(|| readings(snapshot))
    });
    assert!(
        seen_at <= changed_at + read_turn + 1,
        "the changes were seen at reading {seen_at}, made after reading {changed_at}"
    );
}
