//! The fenced lock (Redisson RFencedLock layout) against a real redis-server: exclusion, tokens
//! that only grow (across holders, on reentry, through retries and undos), and the failures
//! of a name or counter that holds something else.

mod common;

use std::time::{Duration, Instant};

use common::*;
use polylock::{AcquireOptions, Client, ErrorKind};
use polylock_testkit::{Fault, FaultProxy};
use redis::AsyncCommands;

const WAIT: Duration = Duration::from_secs(10);

fn counter_key(name: &str) -> String {
    polylock::keys::fenced_token(name)
}

async fn counter(con: &mut redis::aio::MultiplexedConnection, name: &str) -> Option<i64> {
    con.get(counter_key(name)).await.unwrap()
}

async fn get(con: &mut redis::aio::MultiplexedConnection, key: &str) -> Option<String> {
    con.get(key).await.unwrap()
}

/// Runs a fenced acquire and release, so the server caches their scripts (a first EVALSHA
/// that meets a fault only gets NOSCRIPT, and would guard nothing).
async fn cache_scripts(client: &Client) {
    let warm = client.fenced_lock("warm-up").unwrap();
    assert!(warm.acquire(AcquireOptions::new()).await.unwrap());
    warm.release().await.unwrap();
}

// ---- the lock ----

#[tokio::test]
async fn a_fenced_lock_excludes_other_holders_and_plain_locks_of_the_name() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    let a = client.fenced_lock("fenced:orders").unwrap();
    let b = client.fenced_lock("fenced:orders").unwrap();
    let plain = client.lock("fenced:orders").unwrap();

    assert!(a
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    // The reentrant lock's hash, and the counter beside it.
    assert_eq!(hget(&mut con, "fenced:orders", a.owner()).await, Some(1));
    assert_eq!(counter(&mut con, "fenced:orders").await, a.token());
    assert!(!b
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    assert!(!plain
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    assert_eq!(b.token(), None);

    // A waiter is woken by the release, and takes the next token.
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move { b.acquire(AcquireOptions::new().wait(WAIT)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "b must wait while a holds the lock");
    let first = a.token().unwrap();
    let released_at = Instant::now();
    a.release().await.unwrap();
    assert!(waiter.await.unwrap().unwrap());
    assert!(
        released_at.elapsed() < Duration::from_secs(5),
        "woken by the release"
    );
    assert_eq!(b.token(), Some(first + 1));
    assert_eq!(a.token(), None, "no token once released");
    assert!(!plain
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    b.release().await.unwrap();
    assert!(!exists(&mut con, "fenced:orders").await);

    // A plain lock's holder excludes the fenced lock too, and has no token.
    assert!(plain
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    assert_eq!(plain.token(), None);
    assert!(!a
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    plain.release().await.unwrap();
    assert_eq!(counter(&mut con, "fenced:orders").await, Some(first + 1));
}

#[tokio::test]
async fn tokens_grow_across_holders_and_on_reentry_and_survive_the_hold() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    for name in ["fenced:tokens", "fenced{eu}:tokens"] {
        let a = client.fenced_lock(name).unwrap();
        let b = client.fenced_lock_with_holder(name, 7).unwrap();
        assert_eq!(a.token(), None);
        let mut seen = Vec::new();
        for _ in 0..3 {
            assert!(a
                .acquire(AcquireOptions::new().wait(Duration::ZERO))
                .await
                .unwrap());
            seen.push(a.token().unwrap());
            assert!(a
                .acquire(AcquireOptions::new().wait(Duration::ZERO))
                .await
                .unwrap());
            seen.push(a.token().unwrap());
            // A partial release keeps the latest token: writes made with it stay valid.
            a.release().await.unwrap();
            assert_eq!(a.token(), seen.last().copied());
            a.release().await.unwrap();
            assert_eq!(a.token(), None);
            // Another holder, with a fixed lease this time.
            assert!(b
                .acquire(
                    AcquireOptions::new()
                        .wait(Duration::ZERO)
                        .lease(Duration::from_secs(30))
                )
                .await
                .unwrap());
            seen.push(b.token().unwrap());
            b.release().await.unwrap();
        }
        assert_eq!(seen, (1..=9).collect::<Vec<i64>>(), "{name}");
        assert_eq!(counter(&mut con, name).await, Some(9));
        let ttl: i64 = con.pttl(counter_key(name)).await.unwrap();
        assert_eq!(ttl, -1, "the counter never expires");

        // Deleting the lock (force unlock) leaves the counter: tokens go on growing.
        assert!(a
            .acquire(AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap());
        assert!(b.force_unlock().await.unwrap());
        assert!(b
            .acquire(AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap());
        assert_eq!(b.token(), Some(11));
        b.release().await.unwrap();
    }
}

#[tokio::test]
async fn a_lost_hold_has_no_token() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.fenced_lock("fenced:lost").unwrap();
    assert!(lock
        .acquire(
            AcquireOptions::new()
                .wait(Duration::ZERO)
                .lease(Duration::from_millis(100))
        )
        .await
        .unwrap());
    assert_eq!(lock.token(), Some(1));
    assert!(
        eventually(Duration::from_secs(5), || std::future::ready(
            lock.is_lost()
        ))
        .await
    );
    assert_eq!(lock.token(), None);
    assert_eq!(
        lock.release().await.unwrap_err().kind(),
        ErrorKind::LockLost
    );
    assert!(lock
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    assert_eq!(lock.token(), Some(2));
    lock.release().await.unwrap();
}

// ---- retries and undos ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_whose_reply_was_lost_replays_its_token() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = client_with(
        &proxy.url(),
        Duration::from_secs(30),
        Duration::from_millis(500),
    )
    .await;
    cache_scripts(&client).await;
    let mut con = raw(&server).await;
    let name = "fenced:replayed";
    let lock = client.fenced_lock(name).unwrap();

    // The script runs, its reply is cut off (with the connection: a dropped reply would leave
    // the multiplexed connection one reply behind), and so are the retries' until `Pass`.
    proxy.set(Fault::CutAfterForward);
    let acquiring = {
        let lock = lock.clone();
        tokio::spawn(async move {
            lock.acquire(AcquireOptions::new().wait(Duration::from_secs(20)))
                .await
        })
    };
    // The script ran, its reply was lost; let the retries meet the same fault a while.
    assert!(
        eventually(WAIT, || {
            let mut con = con.clone();
            async move { counter(&mut con, name).await == Some(1) }
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;
    proxy.set(Fault::Pass);

    assert!(acquiring.await.unwrap().unwrap());
    assert_eq!(lock.token(), Some(1), "the retry replays the first token");
    assert_eq!(counter(&mut con, name).await, Some(1), "one token taken");
    assert_eq!(
        hget(&mut con, name, lock.owner()).await,
        Some(1),
        "one level"
    );
    lock.release().await.unwrap();
    assert!(!exists(&mut con, name).await);
}

#[tokio::test]
async fn a_timed_out_acquire_is_undone_and_leaves_no_phantom_lock() {
    let server = RedisServer::start();
    let client = client_with(
        &server.url(),
        Duration::from_secs(30),
        Duration::from_secs(1),
    )
    .await;
    let name = "fenced:phantom";
    // A few tokens first: the acquire latch then holds a token other than `1`.
    let earlier = client.fenced_lock(name).unwrap();
    for _ in 0..3 {
        assert!(earlier.acquire(AcquireOptions::new()).await.unwrap());
        earlier.release().await.unwrap();
    }
    let lock = client.fenced_lock(name).unwrap();
    server.pause(Duration::from_millis(2500));
    let paused_at = Instant::now();
    let err = lock
        .acquire(
            AcquireOptions::new()
                .wait(Duration::ZERO)
                .lease(Duration::from_secs(30)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert_eq!(lock.token(), None);
    // The paused acquire runs when the pause ends, the undo right after it.
    tokio::time::sleep(Duration::from_millis(3000).saturating_sub(paused_at.elapsed())).await;
    let mut con = raw(&server).await;
    assert_eq!(
        counter(&mut con, name).await,
        Some(4),
        "the undone acquire took token 4"
    );
    assert!(!exists(&mut con, name).await, "{name} is held by a phantom");
    assert!(earlier
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    assert_eq!(
        earlier.token(),
        Some(5),
        "an undone token is never given again"
    );
    earlier.release().await.unwrap();
}

// ---- keys that hold something else ----

#[tokio::test]
async fn a_name_or_counter_of_another_type_fails_and_writes_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;

    let () = con.set("fenced:a-string", "x").await.unwrap();
    let lock = client.fenced_lock("fenced:a-string").unwrap();
    let err = lock
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    assert!(err.to_string().contains("fenced:a-string"), "{err}");
    assert_eq!(counter(&mut con, "fenced:a-string").await, None);

    // The counter is a hash, text, negative: refused, naming it, before the lock is written.
    let name = "fenced:bad-counter";
    let lock = client.fenced_lock(name).unwrap();
    let () = con.hset(counter_key(name), "f", 1).await.unwrap();
    let err = lock
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Redis, "{err}");
    assert!(
        err.to_string().contains("holds a hash, not a count"),
        "{err}"
    );
    assert!(!exists(&mut con, name).await);
    for bad in ["many", "-5"] {
        let () = con.set(counter_key(name), bad).await.unwrap();
        let err = lock
            .acquire(AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Redis, "{err}");
        let expected = format!(
            "the token counter {} holds \"{bad}\", not a count",
            counter_key(name)
        );
        assert!(err.to_string().contains(&expected), "{err}");
        assert!(!exists(&mut con, name).await);
        assert_eq!(
            get(&mut con, &counter_key(name)).await.as_deref(),
            Some(bad)
        );
    }
    assert!(!lock.is_held());

    // A bad name is refused before any I/O, as for every lock.
    for bad in ["".to_owned(), "x".repeat(polylock::MAX_NAME_BYTES + 1)] {
        let err = client.fenced_lock(&bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    }
}

// ---- fenced writes ----

#[tokio::test]
async fn a_holder_whose_lease_ran_out_cannot_overwrite_the_next_holders_write() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    let (name, key) = ("fenced:stock", "stock:7");
    let slow = client.fenced_lock(name).unwrap();
    let next = client.fenced_lock(name).unwrap();

    assert!(slow
        .acquire(
            AcquireOptions::new()
                .wait(Duration::ZERO)
                .lease(Duration::from_millis(150))
        )
        .await
        .unwrap());
    let stale = slow.token().unwrap();
    client.fenced_set(key, "from slow", stale).await.unwrap();
    // Equal tokens are accepted: one hold writes as often as it likes.
    client
        .fenced_set(key, "from slow, again", stale)
        .await
        .unwrap();

    // The slow holder's lease runs out; the next holder takes the lock and writes.
    assert!(next
        .acquire(AcquireOptions::new().wait(WAIT))
        .await
        .unwrap());
    let fresh = next.token().unwrap();
    assert!(fresh > stale);
    client.fenced_set(key, "from next", fresh).await.unwrap();

    let err = client
        .fenced_set(key, b"late write".as_slice(), stale)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::StaleToken, "{err}");
    let message = err.to_string();
    assert!(
        message.contains(key)
            && message.contains(&format!("token {stale} "))
            && message.contains(&format!("token {fresh} ")),
        "{message}"
    );
    assert_eq!(get(&mut con, key).await.as_deref(), Some("from next"));
    assert_eq!(
        get(&mut con, &polylock::keys::fence(key)).await,
        Some(fresh.to_string())
    );
    // A reentry's higher token writes too, and then the earlier one of the same hold is stale.
    assert!(next
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    client
        .fenced_set(key, "from next, reentered", next.token().unwrap())
        .await
        .unwrap();
    let err = client.fenced_set(key, "x", fresh).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::StaleToken, "{err}");
    assert_eq!(
        get(&mut con, key).await.as_deref(),
        Some("from next, reentered")
    );
    next.release().await.unwrap();
    next.release().await.unwrap();
}

#[tokio::test]
async fn a_fenced_delete_is_guarded_and_the_fence_outlives_the_key() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    for key in ["orders:9", "orders{eu}:9"] {
        let fence = polylock::keys::fence(key);
        client.fenced_set(key, "v", 5).await.unwrap();
        let err = client.fenced_delete(key, 4).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::StaleToken, "{err}");
        assert!(err.to_string().contains("delete"), "{err}");
        assert_eq!(get(&mut con, key).await.as_deref(), Some("v"));

        assert!(client.fenced_delete(key, 5).await.unwrap());
        assert!(!exists(&mut con, key).await);
        assert!(!client.fenced_delete(key, 5).await.unwrap(), "nothing left");
        // The fence stays, without expiry: an older token cannot bring the key back.
        let ttl: i64 = con.pttl(&fence).await.unwrap();
        assert_eq!(ttl, -1);
        let err = client.fenced_set(key, "zombie", 3).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::StaleToken, "{err}");
        assert!(!exists(&mut con, key).await);
        // An applied delete raises the fence even when there is no key.
        assert!(!client.fenced_delete(key, 9).await.unwrap());
        assert_eq!(get(&mut con, &fence).await, Some("9".to_owned()));
        let err = client.fenced_set(key, "v", 8).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::StaleToken, "{err}");
        // A first write to a key with no fence is applied; the value is stored as given.
        let fresh = format!("{key}:fresh");
        client
            .fenced_set(&fresh, [0u8, 159, 255].as_slice(), 1)
            .await
            .unwrap();
        let bytes: Vec<u8> = con.get(&fresh).await.unwrap();
        assert_eq!(bytes, vec![0, 159, 255]);
    }
}

#[tokio::test]
async fn tokens_are_compared_exactly_up_to_the_largest() {
    let server = RedisServer::start();
    let client = client(&server).await;
    // 2^53 + 1 and 2^53 are one number as doubles (Lua's numbers), two tokens here.
    let big = (1i64 << 53) + 1;
    client.fenced_set("exact", "big", big).await.unwrap();
    let err = client
        .fenced_set("exact", "smaller", big - 1)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::StaleToken, "{err}");
    // Fewer digits is lower, whatever the digits.
    client.fenced_set("digits", "x", 10).await.unwrap();
    let err = client.fenced_set("digits", "y", 9).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::StaleToken, "{err}");
    client
        .fenced_set("exact", "largest", i64::MAX)
        .await
        .unwrap();
    let mut con = raw(&server).await;
    assert_eq!(get(&mut con, "exact").await.as_deref(), Some("largest"));
}

#[tokio::test]
async fn a_fenced_write_to_a_key_or_fence_of_another_type_fails_and_writes_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;

    let () = con.hset("a-hash", "field", "1").await.unwrap();
    for result in [
        client.fenced_set("a-hash", "v", 1).await.map(|_| false),
        client.fenced_delete("a-hash", 1).await,
    ] {
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        assert!(
            err.to_string().contains("'a-hash'") && err.to_string().contains("hash"),
            "{err}"
        );
    }
    assert_eq!(hget(&mut con, "a-hash", "field").await, Some(1));
    assert!(!exists(&mut con, &polylock::keys::fence("a-hash")).await);

    let () = con
        .rpush(polylock::keys::fence("fenced-by-a-list"), "1")
        .await
        .unwrap();
    let err = client
        .fenced_set("fenced-by-a-list", "v", 1)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    assert!(err.to_string().contains("fence"), "{err}");
    assert!(!exists(&mut con, "fenced-by-a-list").await);

    let () = con
        .set(polylock::keys::fence("fenced-by-text"), "soon")
        .await
        .unwrap();
    let err = client
        .fenced_set("fenced-by-text", "v", 1)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Redis, "{err}");
    assert!(err.to_string().contains("not a token"), "{err}");
    assert!(!exists(&mut con, "fenced-by-text").await);
}

#[tokio::test]
async fn bad_fenced_writes_are_refused_before_any_io() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let long = "k".repeat(polylock::MAX_NAME_BYTES + 1);
    let cases: [(&str, i64, &str); 4] = [
        ("", 1, "invalid argument: fenced key must not be empty"),
        (
            &long,
            1,
            "invalid argument: fenced key is 4097 bytes long; at most 4096 are accepted",
        ),
        (
            "k",
            0,
            "invalid argument: token must be from 1 to 9223372036854775807 (a token a fenced lock gave), got 0",
        ),
        (
            "k",
            -5,
            "invalid argument: token must be from 1 to 9223372036854775807 (a token a fenced lock gave), got -5",
        ),
    ];
    for (key, token, message) in cases {
        let set = client.fenced_set(key, "v", token).await.unwrap_err();
        let delete = client.fenced_delete(key, token).await.unwrap_err();
        assert_eq!(set.kind(), ErrorKind::InvalidArgument);
        assert_eq!(set.to_string(), message);
        assert_eq!(delete, set);
    }
    let mut con = raw(&server).await;
    // Every key but the client record (written at connect).
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut con)
        .await
        .unwrap();
    let keys = keys
        .iter()
        .filter(|key| !key.starts_with(polylock::keys::CLIENT_RECORD_PREFIX))
        .count();
    assert_eq!(keys, 0, "nothing was written");

    client.close();
    let err = client.fenced_set("k", "v", 1).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection);
    assert_eq!(err.to_string(), "key 'k': the client is closed");
}
