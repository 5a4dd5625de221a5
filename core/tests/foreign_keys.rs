//! A key under a lock's name that is not a lock of that kind (the application's own hash, a
//! string, a list...; docs/PROTOCOL.md, "Keys that are not locks"): every kind's waiter,
//! single try, release and force unlock leave it byte for byte as it was (DUMP, TYPE, PTTL),
//! and the call times out or gets a clear error.

mod common;

use std::time::Duration;

use common::*;
use polylock::{AcquireOptions, Client, ErrorKind, Lock};
use redis::AsyncCommands;

/// Every kind's handle on `name`.
fn every_kind(client: &Client, name: &str) -> Vec<(&'static str, Lock)> {
    let read_write = client.read_write_lock(name).unwrap();
    vec![
        ("lock", client.lock(name).unwrap()),
        ("fenced_lock", client.fenced_lock(name).unwrap()),
        ("fair_lock", client.fair_lock(name).unwrap()),
        ("fifo_lock", client.fifo_lock(name).unwrap()),
        ("read_lock", read_write.read_lock()),
        ("write_lock", read_write.write_lock()),
    ]
}

/// What a key is, byte for byte: its type and its DUMP, and whether it expires.
async fn snapshot(
    con: &mut redis::aio::MultiplexedConnection,
    key: &str,
) -> (String, Vec<u8>, bool) {
    let kind: String = redis::cmd("TYPE").arg(key).query_async(con).await.unwrap();
    let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query_async(con).await.unwrap();
    (kind, dump, ttl(con, key).await >= 0)
}

/// The key's TTL in seconds (-1: none).
async fn ttl(con: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    con.ttl(key).await.unwrap()
}

/// The key is as `before` was, and its TTL has not been set again (it only ran down).
async fn unchanged(
    con: &mut redis::aio::MultiplexedConnection,
    key: &str,
    before: &(String, Vec<u8>, bool),
    ttl_before: i64,
    what: &str,
) {
    assert_eq!(&snapshot(con, key).await, before, "{what}");
    let ttl_after = ttl(con, key).await;
    assert!(
        ttl_after <= ttl_before && ttl_after > ttl_before - 60,
        "{what}: TTL {ttl_before} -> {ttl_after}"
    );
}

/// The application's keys: a hash of its own without TTL (the case found: `field value`), a
/// hash shaped almost like a lock (an owner-like field beside one of its own), a string with a
/// TTL, a list, a set and a sorted set.
async fn write_foreign_keys(con: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    let () = con.hset("app:hash", "field", "value").await.unwrap();
    let () = con
        .hset_multiple(
            "app:almost",
            &[
                ("6b1f1f5e-0000-4000-8000-000000000009:1", "1"),
                ("note", "kept"),
            ],
        )
        .await
        .unwrap();
    let () = con.set_ex("app:string", "hello", 1000).await.unwrap();
    let () = con.rpush("app:list", "a").await.unwrap();
    let () = con.sadd("app:set", "a").await.unwrap();
    let () = con.zadd("app:zset", "a", 1).await.unwrap();
    ["hash", "almost", "string", "list", "set", "zset"]
        .iter()
        .map(|name| format!("app:{name}"))
        .collect()
}

/// A busy answer: a timeout (false), or an error naming the wrong type.
fn timed_out_or_wrong_type(outcome: polylock::Result<bool>, what: &str) {
    match outcome {
        Ok(acquired) => assert!(!acquired, "{what}: acquired a key that is not a lock"),
        Err(err) => assert_eq!(err.kind(), ErrorKind::WrongType, "{what}: {err}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kinds_waiter_single_try_and_release_leave_a_key_that_is_not_its_lock_as_it_is() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    for key in write_foreign_keys(&mut con).await {
        let before = snapshot(&mut con, &key).await;
        let ttl_before = ttl(&mut con, &key).await;
        for (kind, lock) in every_kind(&client, &key) {
            let what = format!("{kind} on {key}");
            timed_out_or_wrong_type(
                lock.acquire(AcquireOptions::new().wait(Duration::ZERO))
                    .await,
                &format!("{what}, a single try"),
            );
            // A waiter registers and sleeps; its wait runs out.
            timed_out_or_wrong_type(
                lock.acquire(AcquireOptions::new().wait(Duration::from_millis(100)))
                    .await,
                &format!("{what}, a waiter"),
            );
            assert!(!lock.is_held(), "{what}");
            unchanged(&mut con, &key, &before, ttl_before, &what).await;
        }
    }
    let fields: Vec<String> = con.hgetall("app:hash").await.unwrap();
    assert_eq!(fields, vec!["field", "value"]);
    // A release whose lock is gone, and whose name the application has since used for a key of
    // its own, leaves that key as it is: the holder learns it lost the lock.
    for (kind, lock) in every_kind(&client, "replaced") {
        assert!(lock
            .acquire(AcquireOptions::new().lease(Duration::from_secs(60)))
            .await
            .unwrap());
        let () = con.del("replaced").await.unwrap();
        let () = con.hset("replaced", "field", "value").await.unwrap();
        let before = snapshot(&mut con, "replaced").await;
        assert!(lock.release().await.is_err(), "{kind}: released");
        unchanged(&mut con, "replaced", &before, -1, kind).await;
        let () = con.del("replaced").await.unwrap();
    }
}

#[tokio::test]
async fn every_kinds_force_unlock_leaves_a_key_that_is_not_its_lock_as_it_is_with_an_error() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    for key in write_foreign_keys(&mut con).await {
        let before = snapshot(&mut con, &key).await;
        let ttl_before = ttl(&mut con, &key).await;
        for (kind, lock) in every_kind(&client, &key) {
            let what = format!("{kind} on {key}");
            match lock.force_unlock().await {
                // The read-write lock deletes only a hash in the mode asked.
                Ok(deleted) => assert!(!deleted, "{what}: deleted"),
                Err(err) => assert_eq!(err.kind(), ErrorKind::WrongType, "{what}: {err}"),
            }
            unchanged(&mut con, &key, &before, ttl_before, &what).await;
        }
    }
    // A hash lock's force unlock says why.
    let err = client
        .lock("app:hash")
        .unwrap()
        .force_unlock()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
}

/// The read-write lock and the hash locks keep different hashes under one name: a read or
/// write lock never writes its `mode` into a held lock's hash (it took the lock beside its
/// holder), it waits until the hash is gone.
#[tokio::test]
async fn a_read_write_lock_does_not_take_a_held_hash_lock() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    let holder = client.lock("shared").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(Duration::from_secs(60)))
        .await
        .unwrap());
    let before = snapshot(&mut con, "shared").await;
    let read_write = client.read_write_lock("shared").unwrap();
    for lock in [read_write.read_lock(), read_write.write_lock()] {
        assert!(!lock
            .acquire(AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap());
    }
    assert_eq!(snapshot(&mut con, "shared").await, before);
    holder.release().await.unwrap();
    assert!(read_write
        .write_lock()
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
}

/// A latch's delete deletes only a latch (a string holding a count).
#[tokio::test]
async fn a_latch_delete_leaves_a_key_that_is_not_a_latch_as_it_is_with_an_error() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    for key in write_foreign_keys(&mut con).await {
        let before = snapshot(&mut con, &key).await;
        let ttl_before = ttl(&mut con, &key).await;
        let err = client
            .count_down_latch(&key)
            .unwrap()
            .delete()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{key}: {err}");
        unchanged(&mut con, &key, &before, ttl_before, &key).await;
    }
    let latch = client.count_down_latch("latch").unwrap();
    assert!(latch.try_set_count(2).await.unwrap());
    assert!(latch.delete().await.unwrap());
    assert!(!exists(&mut con, "latch").await);
}
