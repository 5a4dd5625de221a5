//! A release trace (`polylock_released:{name}:<owner>`) lives only as long as the caller may
//! still read a retry's answer. Calls that each use a new owner (`with_lock`, a handle per
//! critical section, a job-lock run) leave nothing on the server once that window has passed,
//! whatever the lease and however many calls ran.

mod common;

use std::time::Duration;

use common::*;
use polylock::AcquireOptions;

/// The caller's retry window of a client with this response timeout: two response timeouts of
/// retries, one more for the last reply, and a second of grace (`engine::release`).
fn window(response: Duration) -> Duration {
    response * 3 + Duration::from_secs(1)
}

/// Each of `keys` lives no longer than the caller's retry window of a client with `response`.
async fn assert_within_window(server: &RedisServer, keys: &[String], response: Duration) {
    let mut con = raw(server).await;
    for key in keys {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut con)
            .await
            .unwrap();
        assert!(
            ttl > 0 && ttl <= window(response).as_millis() as i64,
            "{key} lives {ttl} ms, beyond the caller's retry window of {:?}",
            window(response)
        );
    }
}

/// Waits until no key matches `pattern` (well within a minute).
async fn until_gone(server: &RedisServer, pattern: &str) {
    assert!(
        eventually(Duration::from_secs(60), || async {
            keys(server, pattern).await.is_empty()
        })
        .await,
        "{pattern} outlived its window"
    );
}

async fn keys(server: &RedisServer, pattern: &str) -> Vec<String> {
    let mut con = raw(server).await;
    redis::cmd("KEYS")
        .arg(pattern)
        .query_async(&mut con)
        .await
        .unwrap()
}

/// Each trace's TTL is within the window, then every trace goes, although every lease was an
/// hour long (on 06cdebb each trace lived for the rest of that hour: one key per call).
#[tokio::test]
async fn calls_with_a_new_owner_each_leave_no_trace_beyond_the_retry_window() {
    let server = RedisServer::start();
    let response = Duration::from_millis(500);
    let client = client_with(&server.url(), Duration::from_secs(3600), response).await;
    let hour = AcquireOptions::new().lease(Duration::from_secs(3600));
    const CALLS: usize = 40;
    for _ in 0..CALLS {
        client
            .with_lock("traced:with-lock", AcquireOptions::new(), || async {})
            .await
            .unwrap();
        // A handle per critical section, of every kind that leaves a trace.
        let plain = client.lock("traced:plain").unwrap();
        assert!(plain.acquire(hour).await.unwrap());
        plain.release().await.unwrap();
        let fenced = client.fenced_lock("traced:fenced").unwrap();
        assert!(fenced.acquire(hour).await.unwrap());
        fenced.release().await.unwrap();
        let fair = client.fair_lock("traced:fair").unwrap();
        assert!(fair.acquire(hour).await.unwrap());
        fair.release().await.unwrap();
        let fifo = client.fifo_lock("traced:fifo").unwrap();
        assert!(fifo.acquire(hour).await.unwrap());
        fifo.release().await.unwrap();
    }
    let left = keys(&server, "polylock_released:*").await;
    assert!(
        !left.is_empty(),
        "a final release leaves a trace for its retries"
    );
    assert_within_window(&server, &left, response).await;
    // At rest, once the window has passed: no trace, and no other key of these locks but the
    // fenced lock's token counter (one per lock, kept for good: tokens never go back).
    until_gone(&server, "polylock_released:*").await;
    assert_eq!(
        keys(&server, "*traced:*").await,
        vec!["redisson_lock_token:{traced:fenced}".to_owned()],
        "left at rest"
    );
}

/// A read-write lock's release remembers its answer under its request (an unlock latch) for
/// the caller's retry window only, whether it freed the lock or left it to other readers. Before
/// November 2026 a release that left the lock held kept its latch for the lease and 60 s more:
/// a lock shared by many readers kept one latch per release, a number that grew with the
/// release rate.
#[tokio::test]
async fn read_write_releases_leave_no_latch_beyond_the_retry_window() {
    let server = RedisServer::start();
    let response = Duration::from_millis(500);
    let client = client_with(&server.url(), Duration::from_secs(3600), response).await;
    let hour = AcquireOptions::new().lease(Duration::from_secs(3600));
    let shared = client.read_write_lock("latched:rw").unwrap();
    // A reader that stays: every other reader's release leaves the lock held.
    let staying = shared.read_lock();
    assert!(staying.acquire(hour).await.unwrap());
    const CALLS: usize = 40;
    for _ in 0..CALLS {
        let reader = client.read_write_lock("latched:rw").unwrap().read_lock();
        assert!(reader.acquire(hour).await.unwrap());
        reader.release().await.unwrap();
    }
    staying.release().await.unwrap();
    let writer = client.read_write_lock("latched:rw").unwrap().write_lock();
    assert!(writer.acquire(hour).await.unwrap());
    writer.release().await.unwrap();
    let left = keys(&server, "redisson_unlock_latch:*").await;
    assert_eq!(
        left.len(),
        CALLS + 2,
        "one latch per release, for its retries"
    );
    assert_within_window(&server, &left, response).await;
    until_gone(&server, "redisson_unlock_latch:*").await;
    let rest = keys(&server, "*latched:*").await;
    assert!(rest.is_empty(), "left at rest: {rest:?}");
}
