//! The run-once job lock (`Client::job_lock`, `Client::run_job`), against a real redis-server.

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use polylock::{AcquireOptions, ErrorKind, JobLockOptions, JobOutcome};
use polylock_testkit::FaultProxy;

const SECOND: Duration = Duration::from_secs(1);

/// The remaining TTL of `key` in ms (-2: no key).
async fn pttl(server: &RedisServer, key: &str) -> i64 {
    let mut con = raw(server).await;
    redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut con)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_held_job_lock_skips_without_waiting() {
    let server = RedisServer::start();
    let (node, other) = (client(&server).await, client(&server).await);
    let job = node
        .job_lock("job:skip", 60 * SECOND, Duration::ZERO)
        .unwrap();
    let hold = job
        .try_acquire()
        .await
        .unwrap()
        .expect("the free lock is taken");
    let called = AtomicUsize::new(0);
    let started = Instant::now();
    let outcome = other
        .job_lock("job:skip", 60 * SECOND, Duration::ZERO)
        .unwrap()
        .try_run(|| async { called.fetch_add(1, Ordering::SeqCst) })
        .await
        .unwrap();
    assert_eq!(outcome, JobOutcome::Skipped);
    assert_eq!(called.load(Ordering::SeqCst), 0);
    // Skipping is one look, not a wait for the 60 s lease.
    assert!(started.elapsed() < 10 * SECOND);
    hold.finish().await.unwrap();
    let ran = other
        .run_job(
            "job:skip",
            JobLockOptions::new(60 * SECOND, Duration::ZERO),
            || async { 7 },
        )
        .await
        .unwrap();
    assert_eq!(
        ran,
        Some(7),
        "released at once (at_least 0): the next firing runs"
    );
}

#[tokio::test]
async fn at_least_keeps_the_lock_after_a_fast_job() {
    let server = RedisServer::start();
    let (node, other) = (client(&server).await, client(&server).await);
    let options = JobLockOptions::new(10 * SECOND, 2 * SECOND);
    let first = node
        .run_job("job:at-least", options, || async { "fast" })
        .await
        .unwrap();
    assert_eq!(first, Some("fast"));
    // Kept (not released), with a TTL cut from at_most to what is left of at_least.
    let ttl = pttl(&server, "job:at-least").await;
    assert!(ttl > 0 && ttl <= 2000, "pttl {ttl}");
    assert_eq!(
        other
            .run_job("job:at-least", options, || async { "late node" })
            .await
            .unwrap(),
        None,
        "a node firing within at_least of the start skips"
    );
    assert!(
        eventually(10 * SECOND, || async {
            pttl(&server, "job:at-least").await == -2
        })
        .await
    );
    assert_eq!(
        other
            .run_job("job:at-least", options, || async { "next slot" })
            .await
            .unwrap(),
        Some("next slot")
    );
    // Nothing was left tracked: no watchdog, no hold.
    assert_eq!(node.watched_locks(), 0);
}

#[tokio::test]
async fn a_job_longer_than_at_least_releases_at_once() {
    let server = RedisServer::start();
    let node = client(&server).await;
    let options = JobLockOptions::new(30 * SECOND, Duration::from_millis(200));
    let job = node
        .job_lock("job:long", options.at_most, options.at_least)
        .unwrap();
    let outcome = job
        .try_run(|| async {
            tokio::time::sleep(Duration::from_millis(400)).await;
            Err::<(), &str>("the job failed")
        })
        .await
        .unwrap();
    assert_eq!(outcome, JobOutcome::Ran(Err("the job failed")));
    assert_eq!(
        pttl(&server, "job:long").await,
        -2,
        "released, not left to its 30 s lease"
    );
}

#[tokio::test]
async fn a_job_lock_is_the_plain_lock_of_its_name() {
    let server = RedisServer::start();
    let node = client(&server).await;
    let plain = node.lock("job:plain").unwrap();
    assert!(plain
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    let job = node.job_lock("job:plain", SECOND, Duration::ZERO).unwrap();
    assert!(job.try_acquire().await.unwrap().is_none());
    plain.release().await.unwrap();
    let hold = job.try_acquire().await.unwrap().unwrap();
    assert!(node.inspect("job:plain").await.unwrap().holders.len() == 1);
    hold.finish().await.unwrap();
}

/// A finish after the lease ran out and another node took the lock leaves the other's lock as
/// it is: neither released nor its TTL changed (the at_least script checks the owner); the job
/// that outlived at_most is logged as a warning.
#[tokio::test]
async fn a_late_finish_does_not_touch_the_next_holders_lock() {
    recorded_logs(tracing::Level::WARN);
    let server = RedisServer::start();
    let (node, other) = (client(&server).await, client(&server).await);
    for at_least in [Duration::ZERO, 5 * SECOND] {
        let name = format!("job:late:{}", at_least.as_millis());
        let job = node
            .job_lock(
                &name,
                Duration::from_millis(300),
                at_least.min(Duration::from_millis(300)),
            )
            .unwrap();
        let hold = job.try_acquire().await.unwrap().unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
        let next = other.lock(&name).unwrap();
        let lease = AcquireOptions::new().no_wait().lease(60 * SECOND);
        assert!(
            next.acquire(lease).await.unwrap(),
            "the lapsed lock is free"
        );
        hold.finish().await.unwrap();
        assert!(next.is_locked().await.unwrap());
        let ttl = pttl(&server, &name).await;
        assert!(
            ttl > 50_000,
            "the next holder's lease was changed: pttl {ttl}"
        );
        next.release().await.unwrap();
        let warned = recorded_logs(tracing::Level::WARN)
            .lines()
            .any(|line| line.contains("outlived its job lock's at_most") && line.contains(&name));
        assert!(warned, "no warning for {name}");
    }
}

/// The same with the hold still believed alive when its key is taken over (the key deleted
/// by force and taken, before the local lease ran out): the owner check is the server's.
#[tokio::test]
async fn the_at_least_ttl_is_set_only_for_the_owner() {
    let server = RedisServer::start();
    let (node, other) = (client(&server).await, client(&server).await);
    let job = node
        .job_lock("job:owner", 60 * SECOND, 30 * SECOND)
        .unwrap();
    let hold = job.try_acquire().await.unwrap().unwrap();
    let next = other.lock("job:owner").unwrap();
    assert!(next.force_unlock().await.unwrap());
    let lease = AcquireOptions::new().no_wait().lease(2 * SECOND);
    assert!(next.acquire(lease).await.unwrap());
    assert!(hold.is_held(), "no I/O told the job's hold");
    hold.finish().await.unwrap();
    let ttl = pttl(&server, "job:owner").await;
    assert!(
        ttl > 0 && ttl <= 2000,
        "the other's 2 s lease became {ttl} ms"
    );
    next.release().await.unwrap();
}

#[tokio::test]
async fn bad_options_are_refused_with_one_message() {
    let server = RedisServer::start();
    let node = client(&server).await;
    let err = node
        .job_lock("job:bad", Duration::ZERO, Duration::ZERO)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        err.to_string(),
        "invalid argument: at_most must be from 1 ms to 10 years, got 0 ms"
    );
    let err = node.job_lock("job:bad", SECOND, 2 * SECOND).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid argument: at_least (2000 ms) must not be longer than at_most (1000 ms)"
    );
    assert_eq!(
        JobLockOptions::from_millis(1000.0, 2000.0).unwrap_err(),
        err,
        "the bindings' path gives the same error"
    );
    assert_eq!(
        JobLockOptions::from_millis(f64::NAN, 0.0)
            .unwrap_err()
            .to_string(),
        "invalid argument: at_most must be a finite number of milliseconds >= 0, got NaN"
    );
    assert_eq!(
        JobLockOptions::from_millis(1e12, 0.0)
            .unwrap_err()
            .to_string(),
        "invalid argument: at_most must be from 1 ms to 10 years, got 1000000000000 ms"
    );
    assert_eq!(
        JobLockOptions::from_millis(1000.0, 2e12)
            .unwrap_err()
            .to_string(),
        "invalid argument: at_least (2000000000000 ms) must not be longer than at_most (1000 ms)"
    );
    assert_eq!(
        JobLockOptions::from_millis(1500.0, 500.0).unwrap(),
        JobLockOptions::new(Duration::from_millis(1500), Duration::from_millis(500))
    );
    assert_eq!(
        node.job_lock("", SECOND, SECOND).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

fn example_binary() -> std::path::PathBuf {
    peer_binary().with_file_name("job_lock")
}

/// A node SIGKILLed mid-job blocks the job no longer than at_most: its fixed lease lapses (no
/// watchdog renews it, nothing releases it). Slots every second for 30 s: the worker fires the
/// first one it is up for, however long it takes to start; the job (60 s) holds the lock then,
/// and at_most (10 s) outlasts the time the test takes to see the run and kill the worker.
#[tokio::test]
async fn a_killed_holders_lock_lapses_after_at_most() {
    let server = RedisServer::start();
    let node = client(&server).await;
    let first_slot = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 1000)
        .to_string();
    // 30 slots a second apart; a 60 s job; held at most 10 s.
    let mut worker = Command::new(example_binary())
        .args([
            &server.url(),
            "fleet",
            "job:killed",
            "w",
            &first_slot,
            "30",
            "1000",
        ])
        .args(["60000", "10000", "0"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut con = raw(&server).await;
    assert!(
        eventually(30 * SECOND, || async {
            let runs: i64 = redis::cmd("LLEN")
                .arg("job:killed:runs")
                .query_async(&mut raw(&server).await)
                .await
                .unwrap();
            runs == 1
        })
        .await,
        "the worker never ran the job"
    );
    worker.kill().unwrap();
    worker.wait().unwrap();
    let killed = Instant::now();
    let job = node.job_lock("job:killed", SECOND, Duration::ZERO).unwrap();
    assert!(
        job.try_acquire().await.unwrap().is_none(),
        "held by the dead node"
    );
    assert!(
        eventually(30 * SECOND, || async {
            match job.try_acquire().await.unwrap() {
                Some(hold) => {
                    hold.finish().await.unwrap();
                    true
                }
                None => false,
            }
        })
        .await
    );
    assert!(
        killed.elapsed() < 30 * SECOND,
        "lapsed with at_most (10 s), long before the job's 60 s"
    );
    let _: () = redis::cmd("DEL")
        .arg("job:killed:runs")
        .query_async(&mut con)
        .await
        .unwrap();
}

/// The example runs against a launched server: one node runs the job, the other skips.
#[test]
fn the_example_runs() {
    let server = RedisServer::start();
    let output = Command::new(example_binary())
        .arg(server.url())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    assert_eq!(text.matches("Some(\"report sent\")").count(), 1, "{text}");
    assert_eq!(text.matches("None").count(), 2, "{text}");
}

/// A hold dropped unfinished (a cancelled job) is finished in the background: at_least still
/// holds after it.
#[tokio::test]
async fn a_dropped_hold_keeps_at_least() {
    let server = RedisServer::start();
    let node = client(&server).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let job = node
        .job_lock("job:dropped", 10 * SECOND, 3 * SECOND)
        .unwrap();
    let calls_in_job = calls.clone();
    let run = job.try_run(|| async move {
        calls_in_job.fetch_add(1, Ordering::SeqCst);
        std::future::pending::<()>().await
    });
    assert!(tokio::time::timeout(Duration::from_millis(200), run)
        .await
        .is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(
        eventually(5 * SECOND, || async {
            let ttl = pttl(&server, "job:dropped").await;
            ttl > 0 && ttl <= 3000
        })
        .await,
        "not cut to at_least"
    );
}

/// A finish that cannot reach Redis (connections refused) fails, and leaves the lock held by
/// its lease: never released in the background once Redis is back, which would end it before
/// at_least.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_that_cannot_reach_redis_never_releases_early() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let node = client_with(&proxy.url(), 30 * SECOND, Duration::from_millis(300)).await;
    let job = node
        .job_lock("job:unreachable", 8 * SECOND, 6 * SECOND)
        .unwrap();
    let hold = job.try_acquire().await.unwrap().unwrap();
    proxy.refuse_for(Duration::from_millis(1200));
    proxy.cut();
    let err = hold.finish().await.unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Connection | ErrorKind::Timeout),
        "{err}"
    );
    // Reachable again for a while: nothing released it.
    tokio::time::sleep(3 * SECOND).await;
    assert!(pttl(&server, "job:unreachable").await > 0, "released early");
}

/// Built on the plain lock, a job lock follows the client's key prefix: its key is the prefixed
/// name, the at_least TTL is set on that key, and a client of another prefix does not exclude it.
#[tokio::test]
async fn a_job_lock_follows_the_key_prefix() {
    let server = RedisServer::start();
    let prefixed = polylock::Client::builder(server.url())
        .key_prefix("tenant-a:")
        .connect()
        .await
        .unwrap();
    let other_tenant = polylock::Client::builder(server.url())
        .key_prefix("tenant-b:")
        .connect()
        .await
        .unwrap();
    let options = JobLockOptions::new(10 * SECOND, 2 * SECOND);
    let ran = prefixed
        .run_job("job:prefixed", options, || async { 1 })
        .await;
    assert_eq!(ran.unwrap(), Some(1));
    let ttl = pttl(&server, "tenant-a:job:prefixed").await;
    assert!(ttl > 0 && ttl <= 2000, "pttl {ttl}");
    assert_eq!(pttl(&server, "job:prefixed").await, -2);
    let skipped = prefixed
        .run_job("job:prefixed", options, || async { 2 })
        .await;
    assert_eq!(skipped.unwrap(), None);
    let ran = other_tenant
        .run_job("job:prefixed", options, || async { 3 })
        .await;
    assert_eq!(ran.unwrap(), Some(3), "another prefix is another lock");
}
