//! Sentinel: one primary, two replicas, three sentinels, started by the test kit. A failover
//! while a lock is held and waited on: with replica sync the lock survives it (no second
//! holder), its holder follows the new primary and keeps renewing it there, and the waiter is
//! woken through the new primary.

mod common;

use std::time::{Duration, Instant};

use common::init_tracing;
use polylock::{AcquireOptions, Client};
use polylock_testkit::SentinelSet;

const LONG_LEASE: Duration = Duration::from_secs(60);

async fn connect(url: &str, sync_replicas: bool) -> Client {
    Client::builder(url)
        .watchdog_timeout(Duration::from_secs(3))
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(2))
        .sync_replicas(sync_replicas)
        .replica_sync_timeout(Duration::from_millis(500))
        .connect()
        .await
        .expect("connect through the sentinels")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_replica_sync_a_lock_held_and_waited_on_survives_a_failover() {
    init_tracing();
    let set = SentinelSet::start(2, 3);
    let holder_client = connect(&set.url(), true).await;
    let waiter_client = connect(&set.url(), true).await;
    let name = "sentinel:synced";
    let holder = holder_client.lock(name).unwrap();
    assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
    let waiter = waiter_client.lock(name).unwrap();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.acquire(AcquireOptions::new().wait(LONG_LEASE)).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    let old = set.primary_port();
    let new = tokio::task::block_in_place(|| set.failover());
    assert_ne!(old, new);
    // Past a whole watchdog lease on the new primary: the hold was renewed there, and the
    // waiter, who looks again after the switch, still finds it held.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!holder.is_lost(), "the lock survived the failover");
    assert!(!waiting.is_finished(), "no second holder");
    assert_eq!(
        set.server(new).command(&["EXISTS", name]).as_deref(),
        Some(":1"),
        "the new primary has the lock"
    );
    let released = Instant::now();
    holder.release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap());
    assert!(
        released.elapsed() < LONG_LEASE / 4,
        "the waiter was woken through the new primary"
    );
    waiter.release().await.unwrap();
}

/// A field of a sentinel's `INFO` (`connected_clients`, `total_connections_received`), read on
/// `connection`, which the test keeps open so that reading counts no new connection.
fn info_number(connection: &mut redis::Connection, field: &str) -> i64 {
    let info: String = redis::cmd("INFO").query(connection).expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO"))
}

/// (connected clients, connections received so far) of each sentinel.
fn sentinel_counts(connections: &mut [redis::Connection]) -> Vec<(i64, i64)> {
    connections
        .iter_mut()
        .map(|connection| {
            (
                info_number(connection, "connected_clients"),
                info_number(connection, "total_connections_received"),
            )
        })
        .collect()
}

/// Idle clients keep one connection per sentinel open (their `+switch-master` subscription)
/// instead of opening a new one to ask twice a second; dropping them closes those connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_clients_keep_a_constant_set_of_sentinel_connections() {
    init_tracing();
    let set = SentinelSet::start(1, 3);
    let mut connections: Vec<redis::Connection> = set
        .sentinels
        .iter()
        .map(|sentinel| sentinel.connection().unwrap())
        .collect();
    let before = sentinel_counts(&mut connections);
    let mut clients = Vec::new();
    for _ in 0..50 {
        clients.push(connect(&set.url(), false).await);
    }
    // Until every client subscribed to every sentinel (the subscriptions start in the
    // background); the samples below judge what happens if they never do.
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let counts = sentinel_counts(&mut connections);
        if counts
            .iter()
            .zip(&before)
            .all(|(now, then)| now.0 >= then.0 + 50)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    let first = sentinel_counts(&mut connections);
    let mut last = first.clone();
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        last = sentinel_counts(&mut connections);
        let clients_now: Vec<i64> = last.iter().map(|counts| counts.0).collect();
        let clients_first: Vec<i64> = first.iter().map(|counts| counts.0).collect();
        assert_eq!(
            clients_now, clients_first,
            "connected clients changed while idle"
        );
    }
    let received: i64 = last.iter().zip(&first).map(|(l, f)| l.1 - f.1).sum();
    // Asking twice a second on a new connection would make ~1000 in 10 s.
    assert!(
        received <= 10,
        "{received} new sentinel connections in 10 s of 50 idle clients"
    );

    drop(clients);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let counts = sentinel_counts(&mut connections);
        if counts
            .iter()
            .zip(&before)
            .all(|(now, then)| now.0 <= then.0)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "sentinel connections left open after the clients were dropped: {counts:?}, before {before:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `client`'s waiter for lock `name` is subscribed on the server at `port`: the
/// client switched to it. Panics after `bound`.
async fn wait_subscribed_at(set: &SentinelSet, port: u16, name: &str, bound: Duration) {
    let channel = polylock::keys::lock_channel(name);
    let deadline = Instant::now() + bound;
    loop {
        let mut connection = set.server(port).connection().unwrap();
        let (_, listeners): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&channel)
            .query(&mut connection)
            .unwrap();
        if listeners > 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the waiter did not move to the new primary {port} within {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A client with one waiter and nothing else to do (the holder is another client, with a
/// fixed 60 s lease): a failover reaches it through the sentinels, not through a failed
/// command.
async fn failover_noticed_by_an_idle_waiter(kill_sentinel_subscriptions: bool) {
    init_tracing();
    let set = SentinelSet::start(1, 3);
    failover_noticed_by_an_idle_waiter_of(&set, kill_sentinel_subscriptions).await;
}

async fn failover_noticed_by_an_idle_waiter_of(
    set: &SentinelSet,
    kill_sentinel_subscriptions: bool,
) {
    let holder_client = connect(&set.url(), false).await;
    let waiter_client = connect(&set.url(), false).await;
    let name = if kill_sentinel_subscriptions {
        "sentinel:watch-killed"
    } else {
        "sentinel:watch"
    };
    let holder = holder_client.lock(name).unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let waiter = waiter_client.lock(name).unwrap();
    let _waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.acquire(AcquireOptions::new().wait(LONG_LEASE)).await }
    });
    wait_subscribed_at(set, set.primary_port(), name, Duration::from_secs(10)).await;
    // Both clients' subscriptions are up (one per sentinel each) before anything is killed.
    tokio::time::sleep(Duration::from_millis(500)).await;

    if kill_sentinel_subscriptions {
        let killed: i64 = set
            .sentinels
            .iter()
            .map(|sentinel| sentinel.kill_clients("pubsub"))
            .sum();
        assert_eq!(killed, 6, "two clients' subscriptions on three sentinels");
    }
    let new = tokio::task::block_in_place(|| set.failover());
    wait_subscribed_at(set, new, name, Duration::from_secs(10)).await;
    if kill_sentinel_subscriptions {
        // And the subscriptions came back.
        let deadline = Instant::now() + Duration::from_secs(10);
        for sentinel in &set.sentinels {
            loop {
                let mut connection = sentinel.connection().unwrap();
                let list: String = redis::cmd("CLIENT")
                    .arg("LIST")
                    .arg("TYPE")
                    .arg("pubsub")
                    .query(&mut connection)
                    .unwrap();
                if list.lines().count() == 2 {
                    break;
                }
                assert!(Instant::now() < deadline, "not resubscribed: {list}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_reaches_an_idle_client_through_the_sentinels() {
    failover_noticed_by_an_idle_waiter(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_reaches_a_client_whose_sentinel_subscriptions_were_killed() {
    failover_noticed_by_an_idle_waiter(true).await;
}

/// Sentinels that refuse `SUBSCRIBE` (an ACL): no subscription ever comes up, and the client
/// falls back to asking twice a second, which still finds the new primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_reaches_a_client_whose_sentinels_refuse_subscriptions() {
    init_tracing();
    let set = SentinelSet::start(1, 3);
    for sentinel in &set.sentinels {
        let reply = sentinel.command(&["ACL", "SETUSER", "default", "-subscribe"]);
        assert_eq!(reply.as_deref(), Some("+OK"), "ACL SETUSER on a sentinel");
    }
    failover_noticed_by_an_idle_waiter_of(&set, false).await;
}
