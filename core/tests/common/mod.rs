//! Shared helpers for the core's behaviour tests: a real redis-server per test, clients with
//! short timeouts, and a raw connection to look at what the lock wrote.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use polylock::Client;
pub use polylock_testkit::RedisServer;
use redis::AsyncCommands;

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// Every log line at `level` or above written so far in this test binary. The first call
/// installs a global subscriber that records them (one per test binary: a test that reads logs
/// lives in a binary of its own, or shares one level with the binary's other tests).
pub fn recorded_logs(level: tracing::Level) -> String {
    static RECORDED: std::sync::OnceLock<RecordedLogs> = std::sync::OnceLock::new();
    let recorded = RECORDED.get_or_init(|| {
        let recorded = RecordedLogs::default();
        let writer = recorded.clone();
        tracing_subscriber::fmt()
            .with_max_level(level)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        recorded
    });
    String::from_utf8_lossy(&recorded.0.lock().unwrap()).into_owned()
}

#[derive(Clone, Default)]
struct RecordedLogs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for RecordedLogs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub async fn client(server: &RedisServer) -> Client {
    client_with_watchdog(server, Duration::from_secs(30)).await
}

pub async fn client_with_watchdog(server: &RedisServer, watchdog: Duration) -> Client {
    Client::builder(server.url())
        .watchdog_timeout(watchdog)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connect to the test server")
}

/// A client of `url` (a server, or a fault proxy in front of one) with the given watchdog lease
/// and response timeout.
pub async fn client_with(url: &str, watchdog: Duration, response: Duration) -> Client {
    Client::builder(url)
        .watchdog_timeout(watchdog)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(response)
        .connect()
        .await
        .expect("connect to the test server")
}

/// A client of `url` with `sync_replicas` on and the given `WAIT` timeout.
pub async fn synced_client(url: &str, replica_sync_timeout: Duration) -> Client {
    Client::builder(url)
        .sync_replicas(true)
        .replica_sync_timeout(replica_sync_timeout)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("connect to the test server")
}

/// Whether `primary` counts a replica as online within 20 s: one still in its first sync
/// acknowledges nothing, and `sync_replicas` does not wait for it yet.
pub async fn replica_online(primary: &RedisServer) -> bool {
    eventually(Duration::from_secs(20), || async {
        primary
            .command(&["INFO", "replication"])
            .is_some_and(|info| info.contains("state=online"))
    })
    .await
}

/// `CLIENT PAUSE ms ALL`: the server answers nobody for that long, then runs what queued up.
pub fn pause(server: &RedisServer, ms: u64) {
    assert_eq!(
        server
            .command(&["CLIENT", "PAUSE", &ms.to_string(), "ALL"])
            .as_deref(),
        Some("+OK")
    );
}

pub async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Calls counted in INFO commandstats (since the last `CONFIG RESETSTAT`) of the commands for
/// which `counted(name)` holds, each `redis.call` inside a script included.
pub async fn command_calls(
    con: &mut redis::aio::MultiplexedConnection,
    counted: impl Fn(&str) -> bool,
) -> i64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(con)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            counted(name).then_some(stats)
        })
        .filter_map(|stats| {
            stats
                .split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<i64>()
                .ok()
        })
        .sum()
}

/// Script calls counted in INFO commandstats.
pub async fn evalsha_calls(con: &mut redis::aio::MultiplexedConnection) -> i64 {
    command_calls(con, |name| name == "evalsha" || name == "eval").await
}

/// Each lock (one per process) takes the lock `rounds` times in turn with the others: acquire
/// (watchdog lease), hold for 1 ms, release. Replies the script calls the server counted
/// meanwhile.
pub async fn take_turns(server: &RedisServer, locks: Vec<polylock::Lock>, rounds: usize) -> i64 {
    let mut con = raw(server).await;
    let before = evalsha_calls(&mut con).await;
    let mut loops = Vec::new();
    for lock in locks {
        loops.push(tokio::spawn(async move {
            for _ in 0..rounds {
                assert!(lock.acquire(polylock::AcquireOptions::new()).await.unwrap());
                tokio::time::sleep(Duration::from_millis(1)).await;
                lock.release().await.unwrap();
            }
        }));
    }
    for handle in loops {
        tokio::time::timeout(Duration::from_secs(60), handle)
            .await
            .expect("every round served")
            .unwrap();
    }
    evalsha_calls(&mut con).await - before
}

pub async fn exists(con: &mut redis::aio::MultiplexedConnection, key: &str) -> bool {
    con.exists(key).await.unwrap()
}

pub async fn hget(
    con: &mut redis::aio::MultiplexedConnection,
    key: &str,
    field: &str,
) -> Option<i64> {
    con.hget(key, field).await.unwrap()
}

/// Polls `check` every 10 ms until it holds or `limit` passes; true if it held.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The `peer` example (cargo test builds examples): target/<profile>/examples/peer.
pub fn peer_binary() -> std::path::PathBuf {
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let peer = deps.parent().unwrap().join("examples").join("peer");
    assert!(
        peer.exists(),
        "{} is missing: run `cargo build --example peer`",
        peer.display()
    );
    peer
}

/// The `peer` example as a process (a holder in another process), driven line by line.
pub struct Peer {
    pub child: Child,
    /// The id of the peer's client (from its `ready <client-id>` line).
    pub client_id: String,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Peer {
    /// A peer with the given fair queue timeout.
    pub fn start(server: &RedisServer, queue_timeout_ms: u64) -> Peer {
        Peer::spawn(Command::new(peer_binary()), server, queue_timeout_ms)
    }

    /// A peer whose client has the given watchdog lease.
    pub fn with_watchdog(server: &RedisServer, watchdog: Duration) -> Peer {
        let mut command = Command::new(peer_binary());
        command
            .arg(server.url())
            .arg(watchdog.as_millis().to_string());
        Peer::spawn_with_url(command, 10_000)
    }

    /// A peer whose wall clock runs `skew` (e.g. `+6s`) ahead, under libfaketime, preloaded
    /// directly (as the protocol explorer's server is): the `faketime` wrapper creates a named
    /// semaphore per process id, which a killed peer leaves behind, so a later wrapper whose
    /// process got the same id failed at once ("sem_open: File exists", seen in a CI run).
    pub fn skewed(server: &RedisServer, skew: &str, queue_timeout_ms: u64) -> Peer {
        const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
        assert!(
            std::path::Path::new(LIBFAKETIME).exists(),
            "{LIBFAKETIME} is missing (Debian's faketime package: `make test` installs it)"
        );
        let mut command = Command::new(peer_binary());
        // Timers must not jump: only the wall clock is skewed.
        command
            .env("LD_PRELOAD", LIBFAKETIME)
            .env("FAKETIME", skew)
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        Peer::spawn(command, server, queue_timeout_ms)
    }

    fn spawn(mut command: Command, server: &RedisServer, queue_timeout_ms: u64) -> Peer {
        command.arg(server.url());
        Peer::spawn_with_url(command, queue_timeout_ms)
    }

    /// Starts `command`, which names the server already.
    fn spawn_with_url(mut command: Command, queue_timeout_ms: u64) -> Peer {
        // A group of its own, so that `kill` also ends anything it forked.
        let mut child = command
            .process_group(0)
            .env(
                "POLYLOCK_FAIR_QUEUE_TIMEOUT_MS",
                queue_timeout_ms.to_string(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the peer");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        if !line.starts_with("ready") {
            // Its exit status tells a crash (an empty line) from a refused connection.
            let _ = child.kill();
            panic!("the peer said {line:?}, then {:?}", child.wait());
        }
        let client_id = line.trim().trim_start_matches("ready").trim().to_owned();
        Peer {
            child,
            client_id,
            stdin,
            stdout,
        }
    }

    pub fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
    }

    pub fn reply(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim().to_owned()
    }

    /// Kills the process (and its group), as a crash would.
    pub fn kill(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-9", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A holder granted the lock stalls (a pause, a GC, a slow network): nothing it sends through
/// `proxy` arrives for 2.5 s, well over the old 1 s grant and well within its 30 s lease, while
/// `competitor` tries for the lock. The holder must still hold it, and the competitor not get it.
pub async fn granted_holder_survives_a_stall(
    proxy: &polylock_testkit::FaultProxy,
    holder: &polylock::Lock,
    competitor: &polylock::Lock,
) {
    proxy.set(polylock_testkit::Fault::BlackHole);
    let took = competitor
        .acquire(polylock::AcquireOptions::new().wait(Duration::from_millis(2500)))
        .await
        .unwrap();
    let still_held = holder.is_held();
    proxy.set(polylock_testkit::Fault::Pass);
    assert!(still_held, "the granted holder gave the lock up");
    assert!(
        !took,
        "a competitor took the lock while the granted holder still held it"
    );
}

/// The version of a server build, as the ACL rule reads it.
pub fn version_of(build: &polylock_testkit::ServerBuild) -> polylock::acl::RedisVersion {
    let (major, minor, patch) = build.version;
    polylock::acl::RedisVersion::of_server(&build.name, &format!("{major}.{minor}.{patch}"))
        .unwrap()
}

/// The version of the configured server (`POLYLOCK_REDIS_SERVER`, the matrix row's).
pub fn configured_version() -> polylock::acl::RedisVersion {
    version_of(&polylock_testkit::ServerBuild::configured())
}

/// `polylock::acl::rule_for` the configured server, for the locks under `prefix`.
pub fn configured_rule(prefix: &str) -> Vec<String> {
    polylock::acl::rule_for(configured_version(), "", prefix)
}
