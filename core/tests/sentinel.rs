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
