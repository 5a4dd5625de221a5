//! The Rust idioms on top of the engine: the guard, named options, per-lock defaults, and a
//! client made from an existing `redis::Client`.

mod common;

use std::time::{Duration, Instant};

use common::*;
use polylock::{AcquireOptions, Client, ClientOptions, ErrorKind, Hold};

#[tokio::test]
async fn a_dropped_guard_releases_the_lock_and_an_explicit_release_reports_its_outcome() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("guard:drop").unwrap();
    let other = client.lock("guard:drop").unwrap();
    {
        let guard = lock.lock().await.unwrap();
        assert!(guard.is_held());
        assert!(other.try_lock().await.unwrap().is_none());
    }
    // Dropped: released in the background, so the other owner gets it without a lease running out.
    let started = Instant::now();
    let guard = other
        .try_lock_with(AcquireOptions::new().wait(Duration::from_secs(20)))
        .await
        .unwrap()
        .expect("the dropped guard released the lock");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!lock.is_held());
    guard.release().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn a_guard_whose_lease_ran_out_reports_the_loss_on_release() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("guard:lost").unwrap();
    let guard = lock
        .try_lock_with(AcquireOptions::new().lease(Duration::from_millis(100)))
        .await
        .unwrap()
        .expect("free");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(guard.is_lost());
    assert_eq!(
        guard.release().await.unwrap_err().kind(),
        ErrorKind::LockLost
    );
}

#[tokio::test]
async fn guards_release_one_reentrant_level_each() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("guard:reentrant").unwrap();
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count(), 2);
    inner.release().await.unwrap();
    assert_eq!(lock.hold_count(), 1);
    assert!(lock.is_locked().await.unwrap());
    outer.release().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn per_lock_defaults_give_the_lease_and_the_wait() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let defaults = AcquireOptions::new()
        .wait(Duration::from_millis(200))
        .lease(Duration::from_secs(7));
    let lock = client
        .lock("guard:defaults")
        .unwrap()
        .with_defaults(defaults)
        .unwrap();
    assert_eq!(lock.defaults(), defaults);
    let guard = lock.lock().await.unwrap();
    let lease = lock.remaining_lease().await.unwrap().unwrap();
    assert!(
        lease <= Duration::from_secs(7) && lease > Duration::from_secs(5),
        "{lease:?}"
    );
    // Another owner with the same defaults waits 200 ms, then gives up.
    let other = client
        .lock("guard:defaults")
        .unwrap()
        .with_defaults(defaults)
        .unwrap();
    let started = Instant::now();
    assert!(other.try_lock().await.unwrap().is_none());
    assert!(started.elapsed() >= Duration::from_millis(200));
    guard.release().await.unwrap();
}

#[tokio::test]
async fn bad_defaults_are_refused_before_any_io() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let err = client
        .lock("guard:bad")
        .unwrap()
        .with_defaults(AcquireOptions::new().lease(Duration::from_micros(500)))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid argument: lease must be from 1 ms to 10 years, got 0.5 ms"
    );
    let err = client
        .lock("guard:bad")
        .unwrap()
        .acquire(AcquireOptions::new().wait(Duration::from_secs(11 * 365 * 24 * 3600)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

#[tokio::test]
async fn a_client_made_from_a_redis_client_shares_its_address_and_database() {
    let server = RedisServer::start();
    let redis_client = redis::Client::open(format!("{}/3", server.url())).expect("a redis client");
    let client = Client::from_redis_client(redis_client, ClientOptions::default())
        .await
        .unwrap();
    let lock = client.lock("from-redis-client").unwrap();
    let guard = lock.lock().await.unwrap();
    let mut con = redis::Client::open(format!("{}/3", server.url()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let exists: bool = redis::cmd("EXISTS")
        .arg("from-redis-client")
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(exists, "the lock was written to database 3");
    guard.release().await.unwrap();
}

#[tokio::test]
async fn a_scoped_hold_whose_default_wait_runs_out_is_a_timeout_with_the_shared_message() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let holder = client.lock("guard:scoped").unwrap();
    let held = holder.lock().await.unwrap();
    let waiter = client
        .lock("guard:scoped")
        .unwrap()
        .with_defaults(AcquireOptions::new().wait(Duration::from_millis(150)))
        .unwrap();
    let err = waiter.lock().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    // Then who held it (the holder's client record; core/tests/client_record.rs).
    let message = err.to_string();
    assert!(
        message.starts_with(
            "lock 'guard:scoped' was not acquired within 150 ms: another owner held it all that \
             time (held by '"
        ),
        "{message}"
    );
    let err = waiter
        .acquire_or_fail(AcquireOptions::new().no_wait())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("within 0 ms"), "{err}");
    assert!(!waiter.is_held());
    held.release().await.unwrap();
    waiter
        .acquire_or_fail(AcquireOptions::new().no_wait())
        .await
        .unwrap();
    assert!(waiter.is_held());
    waiter.release().await.unwrap();
}
