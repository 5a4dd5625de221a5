//! The client record `polylock:client:<client-id>` (docs/PROTOCOL.md): written at connect with
//! the client's name, host and pid, listing its holds about a second after they change, kept
//! alive while the client lives, deleted at close, gone with its lease when the process dies;
//! a refused write warns once and locks work on. And what it is for: a timed-out acquire names
//! the holder, `Client::inspect` gives holder names and hold ages. Its own test binary: it
//! installs a global log subscriber that records every line.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use polylock::{AcquireOptions, Client, ClientOptions, Hold};
use redis::AsyncCommands;

use common::{command_calls, eventually, raw, recorded_logs, Peer, RedisServer};

fn recorded() -> String {
    recorded_logs(tracing::Level::WARN)
}

async fn named_client(url: &str, name: Option<&str>, watchdog: Duration) -> Client {
    let options = ClientOptions {
        name: name.map(str::to_owned),
        watchdog_timeout: watchdog,
        connect_timeout: Duration::from_secs(2),
        response_timeout: Duration::from_secs(2),
        ..ClientOptions::default()
    };
    Client::connect_with(url, options).await.expect("connect")
}

fn record_key(client_id: &str) -> String {
    polylock::keys::client_record(client_id)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn field(con: &mut redis::aio::MultiplexedConnection, key: &str, name: &str) -> String {
    let value: Option<String> = con.hget(key, name).await.unwrap();
    value.unwrap_or_default()
}

/// The record's `holds` field, parsed.
async fn holds(con: &mut redis::aio::MultiplexedConnection, key: &str) -> Vec<serde_json::Value> {
    let text = field(con, key, "holds").await;
    serde_json::from_str::<Vec<serde_json::Value>>(&text).unwrap_or_default()
}

async fn record_exists(server: &RedisServer, key: &str) -> bool {
    common::exists(&mut raw(server).await, key).await
}

/// This host's name, as the record writes it.
fn host_name() -> String {
    let output = std::process::Command::new("hostname").output().unwrap();
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_writes_the_record_with_name_host_pid_times_and_metrics() {
    let server = RedisServer::start();
    let before = now_ms();
    let client = named_client(&server.url(), Some("worker-7"), Duration::from_secs(9)).await;
    let key = record_key(client.id());
    // Written by the time connect returns.
    let mut con = raw(&server).await;
    assert_eq!(field(&mut con, &key, "name").await, "worker-7");
    assert_eq!(field(&mut con, &key, "host").await, host_name());
    assert_eq!(
        field(&mut con, &key, "pid").await,
        std::process::id().to_string()
    );
    let connected: u64 = field(&mut con, &key, "connected_ms").await.parse().unwrap();
    let refreshed: u64 = field(&mut con, &key, "refreshed_ms").await.parse().unwrap();
    assert!(connected >= before && connected <= now_ms(), "{connected}");
    assert!(refreshed >= connected, "{refreshed} < {connected}");
    assert_eq!(field(&mut con, &key, "holds").await, "[]");
    let metrics: serde_json::Value =
        serde_json::from_str(&field(&mut con, &key, "metrics").await).unwrap();
    assert!(metrics["at_ms"].as_u64().unwrap() >= before, "{metrics}");
    assert!(metrics["locks"].as_array().unwrap().is_empty(), "{metrics}");
    // It expires with the watchdog lease unless refreshed.
    let ttl: i64 = con.pttl(&key).await.unwrap();
    assert!(ttl > 0 && ttl <= 9_000, "{ttl}");
    // The default name is host:pid.
    let unnamed = named_client(&server.url(), None, Duration::from_secs(9)).await;
    assert_eq!(
        field(&mut con, &record_key(unnamed.id()), "name").await,
        format!("{}:{}", host_name(), std::process::id())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_are_listed_about_a_second_after_acquire_and_gone_after_release() {
    let server = RedisServer::start();
    let client = named_client(&server.url(), Some("lister"), Duration::from_secs(30)).await;
    let key = record_key(client.id());
    let mut con = raw(&server).await;
    let before = now_ms();
    let lock = client.fair_lock("orders:42").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    assert!(
        eventually(Duration::from_secs(5), || async {
            !holds(&mut raw(&server).await, &key).await.is_empty()
        })
        .await,
        "the hold was never listed"
    );
    let listed = holds(&mut con, &key).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["lock"], "orders:42");
    assert_eq!(listed[0]["kind"], "fair_lock");
    let since = listed[0]["since_ms"].as_u64().unwrap();
    assert!(since >= before && since <= now_ms(), "{since}");
    lock.release().await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), || async {
            holds(&mut raw(&server).await, &key).await.is_empty()
        })
        .await,
        "the released hold stayed listed"
    );
}

/// Holds that come and go within the debounce cost no command at all; a hold that lasts gets
/// one write (HSET and PEXPIRE), never one per acquisition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_lock_cycle_writes_no_record() {
    let server = RedisServer::start();
    let client = named_client(&server.url(), Some("quick"), Duration::from_secs(30)).await;
    let mut con = raw(&server).await;
    // A free lock's acquisition writes its level with one HSET, and so does a re-entry
    // (`docs/PROTOCOL.md`): the record's writes are the HSETs beyond the lock's.
    let record_writes = |con: &mut redis::aio::MultiplexedConnection, lock_writes: i64| {
        let mut con = con.clone();
        async move { command_calls(&mut con, |name| name == "hset").await - lock_writes }
    };
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut con)
        .await
        .unwrap();
    let lock = client.lock("cycle").unwrap();
    for _ in 0..20 {
        assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
        lock.release().await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(record_writes(&mut con, 20).await, 0);
    // Held past the debounce: one write lists it, however many levels it takes meanwhile.
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    for _ in 0..5 {
        assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(record_writes(&mut con, 20 + 1 + 5).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_and_drop_delete_the_record() {
    let server = RedisServer::start();
    let client = named_client(&server.url(), Some("closing"), Duration::from_secs(30)).await;
    let key = record_key(client.id());
    assert!(record_exists(&server, &key).await);
    client.close();
    assert!(
        eventually(Duration::from_secs(5), || async {
            !record_exists(&server, &key).await
        })
        .await
    );
    let dropped = named_client(&server.url(), Some("dropped"), Duration::from_secs(30)).await;
    let key = record_key(dropped.id());
    assert!(record_exists(&server, &key).await);
    drop(dropped);
    assert!(
        eventually(Duration::from_secs(5), || async {
            !record_exists(&server, &key).await
        })
        .await
    );
}

/// A process that closes its client and exits at once leaves no record: `close` on a plain
/// thread waits for the record's `DEL` (it went in the background, and died with the process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_closes_its_client_and_exits_leaves_no_record() {
    let server = RedisServer::start();
    let mut peer = Peer::with_watchdog(&server, Duration::from_secs(30));
    let key = record_key(&peer.client_id);
    assert!(record_exists(&server, &key).await);
    peer.send("quit");
    let exited = tokio::task::spawn_blocking(move || {
        let status = peer.child.wait().unwrap();
        drop(peer);
        status
    })
    .await
    .unwrap();
    assert!(exited.success(), "the peer exited with {exited}");
    assert!(
        !record_exists(&server, &key).await,
        "the record outlived the process that closed its client"
    );
}

/// `shutdown` returns once the record is deleted, however slow the server's answer: here each
/// reply takes 300 ms through the fault proxy. `close` in async code does not wait for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_returns_once_the_record_is_deleted() {
    let server = RedisServer::start();
    let proxy = polylock_testkit::FaultProxy::start(server.port());
    let client = named_client(&proxy.url(), Some("slow"), Duration::from_secs(30)).await;
    let key = record_key(client.id());
    assert!(record_exists(&server, &key).await);
    proxy.set(polylock_testkit::Fault::Delay(Duration::from_millis(300)));
    assert_eq!(client.shutdown().await, Vec::<String>::new());
    assert!(
        !record_exists(&server, &key).await,
        "shutdown returned before the record's DEL was answered"
    );

    proxy.set(polylock_testkit::Fault::Pass);
    let closing = named_client(&proxy.url(), Some("closing"), Duration::from_secs(30)).await;
    let key = record_key(closing.id());
    proxy.set(polylock_testkit::Fault::Delay(Duration::from_millis(300)));
    closing.close();
    assert!(
        record_exists(&server, &key).await,
        "close in async code waited for the DEL"
    );
    assert!(
        eventually(Duration::from_secs(5), || async {
            !record_exists(&server, &key).await
        })
        .await
    );
}

/// A process killed with SIGKILL deletes nothing: its record outlives it by at most its
/// watchdog lease, as its locks do. While it lives, refreshes keep the record past that lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_processs_record_expires_with_its_lease() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(1_500);
    let mut peer = Peer::with_watchdog(&server, lease);
    let key = record_key(&peer.client_id);
    peer.send("acquire held - -");
    assert_eq!(peer.reply(), "ok true");
    assert!(
        eventually(Duration::from_secs(5), || async {
            !holds(&mut raw(&server).await, &key).await.is_empty()
        })
        .await,
        "the peer's hold was never listed"
    );
    tokio::time::sleep(lease * 2).await;
    assert!(
        record_exists(&server, &key).await,
        "refreshes keep the record"
    );
    peer.kill();
    assert!(
        eventually(Duration::from_secs(10), || async {
            !record_exists(&server, &key).await
        })
        .await,
        "the killed process's record stayed"
    );
}

/// A user whose ACL lacks the record's key pattern: one warning, no record, locks as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_record_write_warns_once_and_locks_still_work() {
    recorded();
    let server = RedisServer::start();
    let build = polylock_testkit::ServerBuild::configured();
    let (major, minor, patch) = build.version;
    let version =
        polylock::acl::RedisVersion::of_server(&build.name, &format!("{major}.{minor}.{patch}"))
            .unwrap();
    let rule: Vec<String> = polylock::acl::rule_for(version, "", "app:")
        .into_iter()
        .filter(|arg| *arg != format!("~{}", polylock::acl::CLIENT_RECORD_PATTERN))
        .collect();
    let mut command = vec!["ACL", "SETUSER", "app", "on", ">secret"];
    command.extend(rule.iter().map(String::as_str));
    assert_eq!(server.command(&command).as_deref(), Some("+OK"));
    let url = format!("redis://app:secret@127.0.0.1:{}", server.port());
    let client = named_client(&url, Some("refused"), Duration::from_secs(30)).await;
    let key = record_key(client.id());
    let lock = client.lock("app:1").unwrap();
    for _ in 0..3 {
        assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
        // Held past the debounce: a record write would be due.
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        lock.release().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1_200)).await;
    }
    assert!(!record_exists(&server, &key).await);
    let warnings = recorded()
        .lines()
        .filter(|line| line.contains(&key) && line.contains("cannot write its client record"))
        .count();
    assert_eq!(warnings, 1, "{}", recorded());
}

/// The scoped acquire of a lock held by a named client says who holds it, since when; an
/// owner without a record (Redisson's) is named by its owner string.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_acquire_names_the_holder() {
    let server = RedisServer::start();
    let holder = named_client(&server.url(), Some("worker-7"), Duration::from_secs(30)).await;
    let waiter = named_client(&server.url(), Some("waiter"), Duration::from_secs(30)).await;
    let held = holder.lock("orders:42").unwrap();
    assert!(held.acquire(AcquireOptions::new()).await.unwrap());
    // Listed in the holder's record (about a second after the acquisition).
    let key = record_key(holder.id());
    assert!(
        eventually(Duration::from_secs(5), || async {
            !holds(&mut raw(&server).await, &key).await.is_empty()
        })
        .await
    );
    let wait = Duration::from_millis(250);
    let err = waiter
        .lock("orders:42")
        .unwrap()
        .with_defaults(AcquireOptions::new().wait(wait))
        .unwrap()
        .lock()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), polylock::ErrorKind::Timeout);
    let message = err.to_string();
    let prefix = format!(
        "lock 'orders:42' was not acquired within 250 ms: another owner held it all that time \
         (held by 'worker-7', pid {} on {}, for ",
        std::process::id(),
        host_name()
    );
    assert!(message.starts_with(&prefix), "{message}");
    assert!(message.ends_with(" s)"), "{message}");
    // `Client::inspect` tells the same.
    let info = waiter.inspect("orders:42").await.unwrap();
    assert_eq!(info.holders[0].client_name.as_deref(), Some("worker-7"));
    let held_for = info.holders[0].held_for.expect("held_for");
    assert!(held_for < Duration::from_secs(60), "{held_for:?}");

    // A Redisson owner (no record) holding another lock.
    let mut con = raw(&server).await;
    let stranger = "5f3e1c2a-0000-4000-8000-000000000001:1";
    let _: () = con.hset("java:1", stranger, 1).await.unwrap();
    let _: () = con.pexpire("java:1", 60_000).await.unwrap();
    let err = waiter
        .lock("java:1")
        .unwrap()
        .acquire_or_fail(AcquireOptions::new().wait(wait))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "lock 'java:1' was not acquired within 250 ms: another owner held it all that time \
             (held by owner {stranger}, no polylock client record)"
        )
    );
    let info = waiter.inspect("java:1").await.unwrap();
    assert_eq!(info.holders[0].client_name, None);
    assert_eq!(info.holders[0].held_for, None);
}

/// Readers are named up to three, then counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_readers_are_named_up_to_three() {
    let server = RedisServer::start();
    let readers = named_client(&server.url(), Some("reader"), Duration::from_secs(30)).await;
    let waiter = named_client(&server.url(), None, Duration::from_secs(30)).await;
    let mut held = Vec::new();
    for _ in 0..5 {
        let lock = readers.read_write_lock("report").unwrap();
        assert!(lock
            .read_lock()
            .acquire(AcquireOptions::new())
            .await
            .unwrap());
        held.push(lock);
    }
    let err = waiter
        .read_write_lock("report")
        .unwrap()
        .write_lock()
        .acquire_or_fail(AcquireOptions::new().wait(Duration::from_millis(100)))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert_eq!(message.matches("'reader', pid ").count(), 3, "{message}");
    assert!(message.ends_with(" and 2 more)"), "{message}");
}

/// On a cluster the record lives on the node serving its own slot, written and read through
/// the cluster connection: a timed-out acquire names the holder there too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_the_record_is_on_its_own_slot_and_names_the_holder() {
    let cluster = polylock_testkit::Cluster::start_primaries_with(3, &[]);
    let holder = named_client(
        &cluster.url(),
        Some("cluster-holder"),
        Duration::from_secs(30),
    )
    .await;
    let waiter = named_client(&cluster.url(), None, Duration::from_secs(30)).await;
    let key = record_key(holder.id());
    let node = cluster.node(cluster.primary_for_key(&key));
    assert_eq!(
        node.command(&["HGET", &key, "name"]).as_deref(),
        Some("cluster-holder")
    );
    // A lock on (very likely) another node than the record.
    let held = holder.lock("cluster:named").unwrap();
    assert!(held.acquire(AcquireOptions::new()).await.unwrap());
    assert!(
        eventually(Duration::from_secs(5), || async {
            node.command(&["HGET", &key, "holds"])
                .is_some_and(|holds| holds.contains("cluster:named"))
        })
        .await
    );
    let err = waiter
        .lock("cluster:named")
        .unwrap()
        .acquire_or_fail(AcquireOptions::new().wait(Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("(held by 'cluster-holder', pid "),
        "{err}"
    );
    held.release().await.unwrap();
    holder.close();
    assert!(
        eventually(Duration::from_secs(5), || async {
            node.command(&["EXISTS", &key]).as_deref() == Some(":0")
        })
        .await
    );
}

/// A change of holds waits a second before it is written, but the refreshes go on meanwhile:
/// with a lease shorter than that second the record never lapses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_lease_record_never_lapses_while_holds_change() {
    let server = RedisServer::start();
    let client = named_client(&server.url(), Some("short"), Duration::from_millis(600)).await;
    let key = record_key(client.id());
    let mut con = raw(&server).await;
    let lock = client.lock("short:1").unwrap();
    for round in 0..3 {
        assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
        for _ in 0..30 {
            assert!(
                common::exists(&mut con, &key).await,
                "round {round}: the record lapsed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        lock.release().await.unwrap();
    }
}

/// The record's `metrics` are the client's cumulative counters of its active locks
/// (`Client::metrics()`), as of its latest write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_carries_the_clients_lock_metrics() {
    let server = RedisServer::start();
    let client = named_client(&server.url(), Some("counted"), Duration::from_secs(30)).await;
    let key = record_key(client.id());
    let lock = client.fair_lock("counted:1").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    // Written about a second after the hold began, with the metrics of then.
    let metrics = || async {
        let text = field(&mut raw(&server).await, &key, "metrics").await;
        serde_json::from_str::<serde_json::Value>(&text).unwrap()
    };
    assert!(
        eventually(Duration::from_secs(5), || async {
            metrics().await["locks"]
                .as_array()
                .is_some_and(|locks| !locks.is_empty())
        })
        .await,
        "the hold's metrics were never written"
    );
    let written = metrics().await;
    let locks = written["locks"].as_array().unwrap();
    assert_eq!(locks.len(), 1, "{written}");
    let counted = &locks[0];
    assert_eq!(counted["name"], "counted:1");
    assert_eq!(counted["kind"], "fair_lock");
    assert_eq!(counted["acquired"], 1);
    assert_eq!(counted["holds"], 1);
    assert_eq!(counted["wait_count"], 1);
    assert_eq!(counted["lost"], 0);
    lock.release().await.unwrap();
}
