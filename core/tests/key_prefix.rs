//! `ClientOptions::key_prefix` against real servers: the prefix maps every name (Redisson's
//! `NameMapper`), so clients under different prefixes share nothing, every key and channel the
//! server sees derives from the mapped name, and users see their own names.

mod common;

use std::time::Duration;

use common::*;
use polylock::{AcquireOptions, Client, ErrorKind, Hold, MultiLock};
use polylock_testkit::cluster::Cluster;
use polylock_testkit::{quoted_args, Monitor};

const PREFIX: &str = "tenant7:";

async fn client_under(url: &str, prefix: Option<&str>) -> Client {
    let mut builder = Client::builder(url)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .fair_queue_timeout(Duration::from_secs(2));
    if let Some(prefix) = prefix {
        builder = builder.key_prefix(prefix);
    }
    builder.connect().await.expect("connect to the test server")
}

fn once() -> AcquireOptions {
    AcquireOptions::new().no_wait()
}

fn up_to(seconds: u64) -> AcquireOptions {
    AcquireOptions::new().wait(Duration::from_secs(seconds))
}

#[tokio::test]
async fn different_prefixes_do_not_exclude_and_the_same_prefix_does() {
    let server = RedisServer::start();
    let tenant_a = client_under(&server.url(), Some("a:")).await;
    let tenant_a_again = client_under(&server.url(), Some("a:")).await;
    let tenant_b = client_under(&server.url(), Some("b:")).await;
    let unprefixed = client_under(&server.url(), None).await;

    let held = tenant_a.lock("job").unwrap();
    assert!(held.acquire(once()).await.unwrap());
    assert!(
        !tenant_a_again
            .lock("job")
            .unwrap()
            .acquire(once())
            .await
            .unwrap(),
        "the same prefix and name are one lock"
    );
    assert!(tenant_b.lock("job").unwrap().acquire(once()).await.unwrap());
    assert!(unprefixed
        .lock("job")
        .unwrap()
        .acquire(once())
        .await
        .unwrap());
    // The unprefixed client sees tenant a's lock under the mapped name.
    assert!(!unprefixed
        .lock("a:job")
        .unwrap()
        .acquire(once())
        .await
        .unwrap());

    let mut raw = raw(&server).await;
    let kind: String = redis::cmd("TYPE")
        .arg("a:job")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(kind, "hash");
}

/// The keys and channels of one command as `MONITOR` shows it (`+<time> [<db> <client>] "CMD"
/// "arg" ...`): a script's declared keys, every channel subscribed to, the first argument of
/// the commands scripts and clients run on one key.
fn keys_and_channels(line: &str) -> Vec<String> {
    let Some(start) = line.find("] ") else {
        return Vec::new();
    };
    let args = quoted_args(&line[start + 2..]);
    let Some((command, rest)) = args.split_first() else {
        return Vec::new();
    };
    match command.to_ascii_lowercase().as_str() {
        "ping" | "script" | "client" | "hello" | "info" | "select" | "time" | "auth"
        | "monitor" | "command" | "readonly" | "cluster" | "wait" | "role" | "flushall" => {
            Vec::new()
        }
        "evalsha" | "eval" | "evalsha_ro" | "eval_ro" => {
            let count: usize = rest[1].parse().unwrap();
            rest[2..2 + count].to_vec()
        }
        "subscribe" | "unsubscribe" | "ssubscribe" | "sunsubscribe" | "del" | "exists" | "mget" => {
            rest.to_vec()
        }
        "pubsub" => rest[1..].to_vec(),
        // Its pattern.
        "scan" => rest
            .iter()
            .skip_while(|arg| !arg.eq_ignore_ascii_case("match"))
            .skip(1)
            .take(1)
            .cloned()
            .collect(),
        _ => rest.first().cloned().into_iter().collect(),
    }
}

/// Holds `hold` until `waiter_client` waits on the server, then lets it go.
async fn until_subscribed(waiter_client: &Client) {
    for _ in 0..500 {
        if waiter_client.subscribed_channels() > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the waiter never subscribed");
}

#[tokio::test]
async fn every_key_and_channel_of_a_cycle_with_a_waiter_derives_from_the_prefixed_name() {
    let server = RedisServer::start();
    let monitor = Monitor::start(&server);
    let holder = client_under(&server.url(), Some(PREFIX)).await;
    let waiter = client_under(&server.url(), Some(PREFIX)).await;

    // Each kind: held, a waiter on the server, released, taken by the waiter, released.
    for (kind, name) in [
        ("lock", "job-lock"),
        ("fair", "job-fair"),
        ("fifo", "job-fifo"),
        ("fenced", "job-fenced"),
        ("rw", "job-rw"),
    ] {
        let make = |client: &Client| match kind {
            "lock" => client.lock(name).unwrap(),
            "fair" => client.fair_lock(name).unwrap(),
            "fifo" => client.fifo_lock(name).unwrap(),
            "fenced" => client.fenced_lock(name).unwrap(),
            _ => client.read_write_lock(name).unwrap().write_lock(),
        };
        let held = make(&holder);
        assert!(held.acquire(once()).await.unwrap(), "{kind}");
        let waiting = make(&waiter);
        let wait = tokio::spawn(async move {
            assert!(waiting.acquire(up_to(20)).await.unwrap());
            waiting.release().await.unwrap();
        });
        until_subscribed(&waiter).await;
        if kind == "fenced" {
            let token = held.token().unwrap();
            holder.fenced_set("stock", "7", token).await.unwrap();
        }
        held.release().await.unwrap();
        wait.await.unwrap();
    }
    let reader = waiter.read_write_lock("job-rw").unwrap().read_lock();
    assert!(reader.acquire(once()).await.unwrap());
    reader.release().await.unwrap();

    let semaphore = holder.semaphore("job-permits").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    assert!(semaphore.acquire(1, Some(Duration::ZERO)).await.unwrap());
    let waiting = waiter.semaphore("job-permits").unwrap();
    let wait = tokio::spawn(async move {
        assert!(waiting
            .acquire(1, Some(Duration::from_secs(20)))
            .await
            .unwrap());
        waiting.release(1).await.unwrap();
    });
    until_subscribed(&waiter).await;
    semaphore.release(1).await.unwrap();
    wait.await.unwrap();
    let latch = holder.count_down_latch("job-latch").unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    let waiting = waiter.count_down_latch("job-latch").unwrap();
    let wait = tokio::spawn(async move {
        assert!(waiting.await_zero(Duration::from_secs(20)).await.unwrap());
    });
    until_subscribed(&waiter).await;
    latch.count_down().await.unwrap();
    wait.await.unwrap();
    let expirable = holder.expirable_semaphore("job-expirable").unwrap();
    expirable.try_set_permits(1).await.unwrap();
    let permit = expirable.acquire(once()).await.unwrap().unwrap();
    expirable.release(&permit).await.unwrap();

    // Users see their own names: in LockInfo, scan_names, metrics and errors.
    let held = holder.lock("job-lock").unwrap();
    assert!(held.acquire(once()).await.unwrap());
    let info = waiter.inspect("job-lock").await.unwrap();
    assert_eq!(info.name, "job-lock");
    assert_eq!(info.holders.len(), 1);
    assert!(
        info.holders[0].client_name.is_some(),
        "the holder's record is read under the prefix"
    );
    let err = waiter
        .lock("job-lock")
        .unwrap()
        .acquire_or_fail(AcquireOptions::new().wait(Duration::from_millis(50)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert!(err.to_string().contains("'job-lock'"), "{err}");
    assert!(!err.to_string().contains(PREFIX), "{err}");
    let names = waiter.scan_names("job-*").await.unwrap();
    assert!(names.contains(&"job-lock".to_owned()), "{names:?}");
    assert!(names.iter().all(|name| !name.contains(PREFIX)), "{names:?}");
    assert!(holder
        .metrics()
        .locks
        .iter()
        .all(|lock| lock.name.starts_with("job-")));
    let records = waiter.client_records(None).await.unwrap();
    assert!(records.iter().any(|record| record.client_id == holder.id()));
    held.release().await.unwrap();

    let mut raw = raw(&server).await;
    let record_exists: bool = redis::cmd("EXISTS")
        .arg(format!("{PREFIX}polylock:client:{}", holder.id()))
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(record_exists, "the client record is under the prefix");
    holder.close();
    waiter.close();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let lines = monitor.lines();
    drop(monitor);
    let mut seen: Vec<String> = lines.iter().flat_map(|l| keys_and_channels(l)).collect();
    seen.sort();
    seen.dedup();
    // The mapped name is in every key and channel (`tenant7:job-lock`,
    // `redisson_lock__channel:{tenant7:job-lock}`, ...), and the client records start with it.

    let outside: Vec<&String> = seen.iter().filter(|key| !key.contains(PREFIX)).collect();
    assert!(
        outside.is_empty(),
        "keys and channels outside the prefix: {outside:?}"
    );
    // The capture saw the kinds' own keys and channels, not just the names.
    for expected in [
        "polylock_lock_told:{tenant7:job-lock}:",
        "redisson_lock_queue:{tenant7:job-fair}",
        "polylock_fifo_line:{tenant7:job-fifo}",
        "polylock_fifo_waiter:{tenant7:job-fifo}:",
        "polylock_fifo_channel:{tenant7:job-fifo}:",
        "redisson_lock_token:{tenant7:job-fenced}",
        "redisson_rwlock:{tenant7:job-rw}",
        "redisson_sc:{tenant7:job-permits}",
        "{tenant7:job-expirable}:timeout",
        "redisson_countdownlatch__channel__{tenant7:job-latch}",
        "tenant7:job-latch",
        "tenant7:stock",
        "polylock_fence:{tenant7:stock}",
        "tenant7:polylock:client:",
    ] {
        assert!(
            seen.iter().any(|key| key.starts_with(expected)),
            "{expected} not seen in {seen:?}"
        );
    }
}

#[tokio::test]
async fn bad_prefixes_are_refused_before_any_io() {
    for (prefix, says) in [
        ("", "must not be empty"),
        ("{app}:", "must not contain '{'"),
        ("app:*", "must not contain '*'"),
    ] {
        // Nobody listens on port 1: a connect that dialled would be a Connection error.
        let err = Client::builder("redis://127.0.0.1:1")
            .key_prefix(prefix)
            .connect()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{prefix:?}: {err}");
        assert!(err.to_string().contains(says), "{prefix:?}: {err}");
    }
}

/// A name with its own hash tag keeps it under the prefix (`app:{tag}x`): its derived keys stay
/// in its slot, and a MultiLock over names of one tag works on a cluster.
#[tokio::test]
async fn on_a_cluster_a_hash_tagged_name_keeps_its_slot_under_the_prefix() {
    let cluster = Cluster::start(3, 0);
    let first = client_under(&cluster.url(), Some("app:")).await;
    let second = client_under(&cluster.url(), Some("app:")).await;
    let other_tenant = client_under(&cluster.url(), Some("other:")).await;

    let slot = cluster.slot_of("app:{orders}x");
    assert_eq!(slot, cluster.slot_of("orders"));
    assert_eq!(slot, cluster.slot_of("redisson_lock_queue:app:{orders}x"));

    let fair = first.fair_lock("{orders}x").unwrap();
    assert!(fair.acquire(once()).await.unwrap());
    let waiting = second.fair_lock("{orders}x").unwrap();
    let wait = tokio::spawn(async move {
        assert!(waiting.acquire(up_to(20)).await.unwrap());
        waiting.release().await.unwrap();
    });
    until_subscribed(&second).await;
    assert!(other_tenant
        .fair_lock("{orders}x")
        .unwrap()
        .acquire(once())
        .await
        .unwrap());
    fair.release().await.unwrap();
    wait.await.unwrap();

    let group = |client: &Client| {
        MultiLock::new(vec![
            client.lock("{orders}a").unwrap(),
            client.lock("{orders}b").unwrap(),
            client.lock("plain").unwrap(),
        ])
        .unwrap()
    };
    let held = group(&first);
    assert!(held.acquire(once()).await.unwrap());
    assert!(!group(&second).acquire(once()).await.unwrap());
    assert!(group(&other_tenant).acquire(once()).await.unwrap());
    held.release().await.unwrap();
    let taken = group(&second);
    assert!(taken.acquire(once()).await.unwrap());

    let primary = cluster.node(cluster.primary_for_slot(slot));
    assert_eq!(primary.int(&["EXISTS", "app:{orders}a"]), 1);
    let info = second.inspect("{orders}a").await.unwrap();
    assert_eq!(info.name, "{orders}a");
    assert!(info.is_held());
}

/// A RedLock over three servers whose clients share a prefix excludes another such RedLock and
/// not one under another prefix; each server holds the lock at the prefixed name.
#[tokio::test]
async fn a_red_lock_under_a_prefix_excludes_only_its_own_namespace() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let mut tenants = Vec::new();
    for prefix in ["a:", "a:", "b:"] {
        let mut clients = Vec::new();
        for server in &servers {
            clients.push(client_under(&server.url(), Some(prefix)).await);
        }
        tenants.push(clients);
    }
    let red_lock = |clients: &[Client]| {
        polylock::RedLock::new(clients.iter().map(|c| c.lock("report").unwrap()).collect()).unwrap()
    };
    let held = red_lock(&tenants[0]);
    assert!(held.acquire(once()).await.unwrap());
    assert!(!red_lock(&tenants[1]).acquire(once()).await.unwrap());
    let other_namespace = red_lock(&tenants[2]);
    assert!(other_namespace.acquire(once()).await.unwrap());
    for server in &servers {
        assert_eq!(server.int(&["EXISTS", "a:report"]), 1);
        assert_eq!(server.int(&["EXISTS", "b:report"]), 1);
        assert_eq!(server.int(&["EXISTS", "report"]), 0);
    }
    other_namespace.release().await.unwrap();
    held.release().await.unwrap();
}
