//! Redis Cluster: a 3-primary cluster with a replica each, started by the test kit. Locks
//! exclude across slots, waiters are woken by sharded messages (SSUBSCRIBE / SPUBLISH) on
//! Redis 7+ and Valkey, by broadcast ones (SUBSCRIBE / PUBLISH) on Redis 6.2, which has no
//! sharded pub/sub; a slot migrated while a lock is held and waited on, a primary killed and
//! its replica promoted.

mod common;

use std::time::{Duration, Instant};

use common::init_tracing;
use polylock::{AcquireOptions, Client, Lock};
use polylock_testkit::{Cluster, ServerBuild};
use tokio::task::JoinHandle;

/// A waiter that wakes long before this lease ends was woken by a message, not by expiry.
const LONG_LEASE: Duration = Duration::from_secs(60);

async fn connect(url: &str, watchdog: Duration) -> Client {
    common::client_with(url, watchdog, Duration::from_secs(2)).await
}

/// Waits for `lock` (up to a long lease) in a task of its own; gives the outcome and how long
/// it waited.
fn wait_for(lock: &Lock) -> JoinHandle<(polylock::Result<bool>, Duration)> {
    let lock = lock.clone();
    tokio::spawn(async move {
        let started = Instant::now();
        let acquired = lock.acquire(AcquireOptions::new().wait(LONG_LEASE)).await;
        (acquired, started.elapsed())
    })
}

fn held_for(lease: Duration) -> AcquireOptions {
    AcquireOptions::new().no_wait().lease(lease)
}

/// How many subscribers the node `port` counts on `channel`: shard subscribers (`SHARDNUMSUB`)
/// or plain ones (`NUMSUB`).
fn subscribers(cluster: &Cluster, port: u16, count: &str, channel: &str) -> i64 {
    let node = cluster.node(port);
    let mut connection = node.connection().unwrap();
    let counts: Vec<redis::Value> = redis::cmd("PUBSUB")
        .arg(count)
        .arg(channel)
        .query(&mut connection)
        .unwrap();
    match counts.get(1) {
        Some(redis::Value::Int(count)) => *count,
        other => panic!("PUBSUB {count} replied {other:?}"),
    }
}

/// Whether the waiter on `channel` subscribed as the server calls for: on Redis 7+ (and
/// Valkey) with SSUBSCRIBE on the node of the lock's slot (sharded mode, as Redisson); on
/// Redis 6.2, which has no sharded pub/sub, with SUBSCRIBE on some node (broadcast mode: a
/// cluster's PUBLISH reaches every node).
fn waiter_subscribed(cluster: &Cluster, lock_node: u16, channel: &str) -> bool {
    if ServerBuild::configured().has_sharded_pubsub() {
        subscribers(cluster, lock_node, "SHARDNUMSUB", channel) == 1
    } else {
        let plain: i64 = cluster
            .nodes
            .iter()
            .map(|node| subscribers(cluster, node.port(), "NUMSUB", channel))
            .sum();
        plain == 1
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_exclude_across_slots_wake_by_messages_and_follow_a_slot_migration() {
    init_tracing();
    let cluster = Cluster::start(3, 1);
    let first = connect(&cluster.url(), Duration::from_secs(3)).await;
    let second = connect(&cluster.url(), Duration::from_secs(3)).await;

    // Exclusion on names of many slots (on every primary).
    let names: Vec<String> = (0..12).map(|i| format!("cluster:{i}")).collect();
    let primaries: std::collections::HashSet<u16> = names
        .iter()
        .map(|name| cluster.primary_for_key(name))
        .collect();
    assert_eq!(primaries.len(), 3, "the names spread over every primary");
    for name in &names {
        let mine = first.lock(name).unwrap();
        let theirs = second.lock(name).unwrap();
        assert!(mine.acquire(held_for(LONG_LEASE)).await.unwrap(), "{name}");
        assert!(
            !theirs
                .acquire(AcquireOptions::new().no_wait())
                .await
                .unwrap(),
            "{name}: excluded"
        );
        mine.release().await.unwrap();
        assert!(
            theirs
                .acquire(AcquireOptions::new().no_wait())
                .await
                .unwrap(),
            "{name}: free again"
        );
        theirs.release().await.unwrap();
    }

    // A waiter subscribes with SSUBSCRIBE on the node of the lock's slot (SUBSCRIBE on 6.2),
    // and the release's SPUBLISH (PUBLISH) wakes it long before the holder's 60 s lease would
    // have ended.
    let name = "cluster:wake";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let holder = first.lock(name).unwrap();
    assert!(holder.acquire(held_for(LONG_LEASE)).await.unwrap());
    let waiter = second.lock(name).unwrap();
    let waiting = wait_for(&waiter);
    let node = cluster.primary_for_key(name);
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            waiter_subscribed(&cluster, node, &channel)
        })
        .await,
        "the waiter is a shard subscriber of the lock's node (a plain one on Redis 6.2)"
    );
    holder.release().await.unwrap();
    let (acquired, waited) = waiting.await.unwrap();
    assert!(acquired.unwrap());
    assert!(
        waited < LONG_LEASE / 4,
        "woken by the release message after {waited:?}"
    );
    waiter.release().await.unwrap();

    // The FIFO lock: its scripts build each waiter's record key from a prefix in KEYS (in the
    // lock's slot); two waiters are served in arrival order, long before the 60 s lease.
    let name = "cluster:fifo";
    let line = polylock::keys::fifo_line(name);
    let in_line = |count: usize| {
        let node = cluster.node(cluster.primary_for_key(name));
        let line = line.clone();
        move || {
            let mut connection = node.connection().unwrap();
            let length: usize = redis::cmd("LLEN")
                .arg(&line)
                .query(&mut connection)
                .unwrap();
            async move { length == count }
        }
    };
    let holder = first.fifo_lock(name).unwrap();
    assert!(holder.acquire(held_for(LONG_LEASE)).await.unwrap());
    let one = second.fifo_lock(name).unwrap();
    let one_waits = wait_for(&one);
    assert!(common::eventually(Duration::from_secs(5), in_line(1)).await);
    let two = first.fifo_lock(name).unwrap();
    let two_waits = wait_for(&two);
    assert!(common::eventually(Duration::from_secs(5), in_line(2)).await);
    holder.release().await.unwrap();
    let (acquired, waited) = one_waits.await.unwrap();
    assert!(acquired.unwrap());
    assert!(waited < LONG_LEASE / 4, "passed on by the release");
    assert!(!two.is_held(), "the second in line went before the first");
    one.release().await.unwrap();
    assert!(two_waits.await.unwrap().0.unwrap());
    two.release().await.unwrap();

    // The slot moves to another primary while the lock is held (watchdog) and waited on: the
    // holder keeps renewing it there, and the waiter, subscribed again where the slot lives
    // now, is woken by the release.
    let name = "cluster:migrating";
    let holder = first.lock(name).unwrap();
    assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
    let waiter = second.lock(name).unwrap();
    let waiting = wait_for(&waiter);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let from = cluster.primary_for_key(name);
    let to = cluster.other_primary(from);
    let slot = cluster.slot_of(name);
    tokio::task::block_in_place(|| cluster.migrate_slot(slot, to));
    // The TTL only goes down unless a renewal sets it again: seen going up, the hold was
    // renewed on the lock's new node.
    let mut on_target = cluster.node(to).connection().unwrap();
    let mut pttl = move || -> i64 { redis::cmd("PTTL").arg(name).query(&mut on_target).unwrap() };
    let moved_ttl = pttl();
    assert!(
        common::eventually(Duration::from_secs(20), || std::future::ready(
            pttl() > moved_ttl
        ))
        .await,
        "no renewal reached the lock on its new node"
    );
    assert!(!holder.is_lost(), "the hold survived the migration");
    assert!(holder.is_locked().await.unwrap());
    assert!(!waiting.is_finished(), "the waiter still waits");
    let released_at = Instant::now();
    holder.release().await.unwrap();
    let (acquired, _) = waiting.await.unwrap();
    assert!(acquired.unwrap());
    assert!(
        released_at.elapsed() < LONG_LEASE / 4,
        "the waiter was woken on the slot's new node"
    );
    waiter.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_is_replaced_by_its_replica_and_a_replicated_lock_survives() {
    init_tracing();
    let mut cluster = Cluster::start(3, 1);
    let holder_client = connect(&cluster.url(), Duration::from_secs(6)).await;
    let other = connect(&cluster.url(), Duration::from_secs(6)).await;
    let name = "cluster:failover";
    let holder = holder_client.lock(name).unwrap();
    assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
    // Let the replica take the lock before its primary dies.
    let primary = cluster.primary_for_key(name);
    let replica_port = cluster.replica_of(primary);
    let replica = cluster
        .nodes
        .iter()
        .find(|node| node.port() == replica_port)
        .unwrap();
    // A cluster replica answers reads only after READONLY.
    let mut on_replica = replica.connection().unwrap();
    let () = redis::cmd("READONLY").query(&mut on_replica).unwrap();
    assert!(
        common::eventually(Duration::from_secs(5), || {
            let exists: i64 = redis::cmd("EXISTS")
                .arg(name)
                .query(&mut on_replica)
                .unwrap();
            std::future::ready(exists == 1)
        })
        .await,
        "the replica has the lock"
    );
    let promoted = tokio::task::block_in_place(|| cluster.kill_primary(primary));
    assert_eq!(cluster.primary_for_key(name), promoted);

    // The lock survived on the promoted replica: nobody else gets it, its holder keeps it
    // (renewed there past a whole watchdog lease), and then releases it.
    let contender = other.lock(name).unwrap();
    assert!(!contender
        .acquire(AcquireOptions::new().wait(Duration::from_millis(500)))
        .await
        .unwrap());
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(
        !holder.is_lost(),
        "the hold was renewed on the promoted replica"
    );
    holder.release().await.unwrap();
    assert!(contender
        .acquire(AcquireOptions::new().wait(Duration::from_secs(5)))
        .await
        .unwrap());
    contender.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_broadcast_mode_a_release_tells_the_next_waiter_and_never_grants_it_the_lock() {
    init_tracing();
    // A cluster without SPUBLISH (renamed away; "unknown command", as on Redis 6.2): the
    // client publishes with PUBLISH (broadcast mode). A PUBLISH reply there counts one node's
    // subscribers while the message reaches every node's, so no script can learn from it
    // whether the waiter heard a grant.
    let cluster = Cluster::start_primaries_with(3, &["--rename-command", "SPUBLISH", ""]);
    let url = cluster.url();
    let holder = connect(&url, Duration::from_secs(30)).await;
    let waiter = connect(&url, Duration::from_secs(30)).await;
    let holder_lock = holder.lock("broadcast").unwrap();
    let waiter_lock = waiter.lock("broadcast").unwrap();
    assert!(holder_lock
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let primary = cluster.node(cluster.primary_for_key("broadcast"));
    // Watch every message the scripts publish, on every node (a pattern subscription).
    let mut observer = redis::Client::open(primary.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    observer.psubscribe("*broadcast*").await.unwrap();
    let waiting = wait_for(&waiter_lock);
    // Listed as a waiter, with its channels subscribed and its second look answered.
    let listed = common::eventually(Duration::from_secs(5), || async {
        primary
            .command(&["ZCARD", "polylock_lock_waiters:{broadcast}"])
            .as_deref()
            == Some(":1")
    })
    .await;
    assert!(listed, "the waiter was listed");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        primary
            .command(&["EXISTS", "polylock_lock_grants:{broadcast}"])
            .as_deref(),
        Some(":0"),
        "a waiter registered for a grant that no PUBLISH reply can confirm"
    );
    holder_lock.release().await.unwrap();
    let (acquired, waited) = waiting.await.unwrap();
    assert!(acquired.unwrap());
    assert!(waited < LONG_LEASE / 2, "woken after {waited:?}");
    assert!(waiter_lock.is_held());
    // What reached the observer: no grant (`g:...`) was ever sent.
    let mut messages = observer.on_message();
    while let Ok(Some(message)) = tokio::time::timeout(
        Duration::from_millis(300),
        futures_util::StreamExt::next(&mut messages),
    )
    .await
    {
        let payload: String = message.get_payload().unwrap();
        assert!(
            !payload.starts_with("g:"),
            "a release granted the lock in broadcast mode: {payload} on {}",
            message.get_channel_name()
        );
    }
    waiter_lock.release().await.unwrap();
}
