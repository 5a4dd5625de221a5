//! `Client::metrics()` and the metric events, each counter driven by its event for real on a
//! real server: acquires by result, waiters, holds, hand-offs, wake-ups, renewals, losses
//! (the fault proxy, `DEL`, a fixed lease run out), releases, server calls and errors,
//! subscriptions, reconnects (`CLIENT KILL`), the cardinality fold, metrics off, the events and
//! the `tracing` spans.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::*;
use polylock::metrics::{
    AcquireResult, EventDetail, LockMetrics, MetricsSnapshot, WokenBy, OTHER_LOCKS,
};
use polylock::{AcquireOptions, Client, ClientOptions, ErrorKind, Hold, MultiLock, RedLock};
use polylock_testkit::{Fault, FaultProxy, Monitor};
use redis::AsyncCommands;

const LONG: Duration = Duration::from_secs(60);

fn lock_metrics(snapshot: &MetricsSnapshot, name: &str, kind: &str) -> LockMetrics {
    snapshot
        .locks
        .iter()
        .find(|lock| lock.name == name && lock.kind == kind)
        .unwrap_or_else(|| panic!("no metrics for {kind} '{name}' in {snapshot:#?}"))
        .clone()
}

fn of(client: &Client, name: &str, kind: &str) -> LockMetrics {
    lock_metrics(&client.metrics(), name, kind)
}

fn server_errors(client: &Client, kind: &str) -> u64 {
    client
        .metrics()
        .connection
        .server_errors
        .iter()
        .find(|(counted, _)| counted == kind)
        .map_or(0, |(_, count)| *count)
}

/// Polls `check` on the client's metrics until it holds (or 10 s pass).
async fn metrics_until(client: &Client, check: impl Fn(&MetricsSnapshot) -> bool) -> bool {
    eventually(Duration::from_secs(10), || {
        std::future::ready(check(&client.metrics()))
    })
    .await
}

fn wait(wait: Duration) -> AcquireOptions {
    AcquireOptions::new().wait(wait)
}

async fn options_client(server_url: &str, options: ClientOptions) -> Client {
    Client::connect_with(server_url, options)
        .await
        .expect("connect to the test server")
}

fn short_timeouts() -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_secs(2),
        response_timeout: Duration::from_secs(2),
        ..ClientOptions::default()
    }
}

#[tokio::test]
async fn an_acquire_and_its_hold_are_counted() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("m:plain").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    let held = of(&client, "m:plain", "lock");
    assert_eq!(held.acquired, 1);
    assert_eq!(held.holds, 1);
    assert_eq!(held.waiters, 0);
    assert_eq!(held.wait_time.count, 1);
    assert_eq!(held.hold_time.count, 0);
    // Reentry is one more acquire and one more hold.
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    assert_eq!(of(&client, "m:plain", "lock").holds, 2);
    tokio::time::sleep(Duration::from_millis(30)).await;
    lock.release().await.unwrap();
    lock.release().await.unwrap();
    let released = of(&client, "m:plain", "lock");
    assert_eq!(released.holds, 0);
    assert_eq!(released.acquired, 2);
    assert_eq!(released.hold_time.count, 2);
    assert!(released.hold_time.sum_seconds >= 0.03, "{released:?}");
    assert_eq!(released.hold_time.bucket_counts.iter().sum::<u64>(), 2);
    assert_eq!(released.release_failures, 0);
    assert_eq!(client.metrics().client_name, client.name());
}

#[tokio::test]
async fn a_wait_that_runs_out_is_timed_out() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let client = client(&server).await;
    let held = holder.lock("m:busy").unwrap();
    assert!(held.acquire(AcquireOptions::new()).await.unwrap());
    let lock = client.lock("m:busy").unwrap();
    assert!(!lock
        .acquire(wait(Duration::from_millis(200)))
        .await
        .unwrap());
    let counted = of(&client, "m:busy", "lock");
    assert_eq!((counted.timed_out, counted.acquired), (1, 0));
    assert_eq!(counted.waiters, 0);
    assert_eq!(counted.wait_time.count, 1);
    assert!(counted.wait_time.sum_seconds >= 0.2, "{counted:?}");
    assert_eq!(counted.holds, 0);
}

#[tokio::test]
async fn a_waiter_is_counted_while_it_waits_and_a_dropped_acquire_is_cancelled() {
    let server = RedisServer::start();
    let holder_client = client(&server).await;
    let client = client(&server).await;
    let holder = holder_client.lock("m:wait").unwrap();
    assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
    let lock = client.lock("m:wait").unwrap();
    let waiting = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire(AcquireOptions::new()).await })
    };
    assert!(metrics_until(&client, |m| lock_metrics(m, "m:wait", "lock").waiters == 1).await);
    // Counted at its first look, which comes before it subscribes.
    assert!(metrics_until(&client, |m| m.connection.subscriptions > 0).await);
    waiting.abort();
    assert!(
        metrics_until(&client, |m| lock_metrics(m, "m:wait", "lock").cancelled
            == 1)
        .await
    );
    let counted = of(&client, "m:wait", "lock");
    assert_eq!(counted.waiters, 0);
    assert_eq!(
        (counted.acquired, counted.timed_out, counted.failed),
        (0, 0, 0)
    );
    // The waiter left its channels.
    assert!(metrics_until(&client, |m| m.connection.subscriptions == 0).await);
}

#[tokio::test]
async fn an_acquire_that_fails_is_failed_and_its_error_counted_by_kind() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    let _: () = con.set("m:string", "not a lock").await.unwrap();
    let err = client
        .lock("m:string")
        .unwrap()
        .acquire(AcquireOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    let counted = of(&client, "m:string", "lock");
    assert_eq!((counted.failed, counted.acquired), (1, 0));
    assert_eq!(counted.waiters, 0);
    assert_eq!(
        client.metrics().connection.server_errors,
        [("wrong_type".to_owned(), 1)]
    );
}

#[tokio::test]
async fn a_release_grants_a_watchdog_waiter_and_wakes_a_fixed_lease_one() {
    let server = RedisServer::start();
    let holder_client = client(&server).await;
    let client = client(&server).await;
    client.record_metric_events(true);
    let monitor = Monitor::start(&server);
    for (kind, name, make, lease) in [
        (
            "fair_lock",
            "m:fair",
            Client::fair_lock as fn(&Client, &str) -> polylock::Result<polylock::Lock>,
            None,
        ),
        (
            "lock",
            "m:grant",
            Client::lock as fn(&Client, &str) -> polylock::Result<polylock::Lock>,
            None,
        ),
        (
            "lock",
            "m:woken",
            Client::lock as fn(&Client, &str) -> polylock::Result<polylock::Lock>,
            Some(LONG),
        ),
    ] {
        let holder = make(&holder_client, name).unwrap();
        assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
        let mark = monitor.count();
        let waiter = make(&client, name).unwrap();
        let waiting = {
            let waiter = waiter.clone();
            tokio::spawn(async move {
                let options = AcquireOptions { wait: None, lease };
                waiter.acquire(options).await
            })
        };
        assert!(metrics_until(&client, |m| lock_metrics(m, name, kind).waiters == 1).await);
        // Released only once the waiter is asleep (see `Monitor::waiter_asleep`).
        assert!(
            eventually(Duration::from_secs(10), || {
                let asleep = monitor.waiter_asleep(mark, waiter.owner());
                async move { asleep }
            })
            .await,
            "{kind} '{name}': the waiter never went to sleep"
        );
        holder.release().await.unwrap();
        assert!(waiting.await.unwrap().unwrap());
        let counted = of(&client, name, kind);
        let granted = lease.is_none();
        assert_eq!(
            (counted.handoffs_granted, counted.handoffs_woken),
            if granted { (1, 0) } else { (0, 1) },
            "{kind} '{name}': {counted:?}"
        );
        let woken_by: Vec<Option<WokenBy>> = client
            .drain_metric_events()
            .into_iter()
            .filter_map(|event| match event.detail {
                EventDetail::Acquire {
                    result: AcquireResult::Acquired,
                    woken_by,
                    ..
                } if event.lock_name == name => Some(woken_by),
                _ => None,
            })
            .collect();
        let expected = if granted {
            WokenBy::Grant
        } else {
            WokenBy::Message
        };
        assert_eq!(woken_by, [Some(expected)], "{kind} '{name}'");
        waiter.release().await.unwrap();
    }
}

#[tokio::test]
async fn a_wake_up_that_finds_the_lock_taken_is_counted() {
    let server = RedisServer::start();
    let holder_client = client(&server).await;
    let client = client(&server).await;
    let holder = holder_client.lock("m:spurious").unwrap();
    assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
    let waiter = client.lock("m:spurious").unwrap();
    let waiting = {
        let waiter = waiter.clone();
        // A fixed lease: woken by the lock's channel, not granted.
        tokio::spawn(async move { waiter.acquire(AcquireOptions::new().lease(LONG)).await })
    };
    assert!(metrics_until(&client, |m| m.connection.subscriptions > 0).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    // An unlock message while the lock is still held: the waiter looks and finds it taken.
    let mut con = raw(&server).await;
    let _: i64 = con
        .publish(polylock::keys::lock_channel("m:spurious"), "0")
        .await
        .unwrap();
    assert!(
        metrics_until(&client, |m| lock_metrics(m, "m:spurious", "lock")
            .wakeups_found_taken
            >= 1)
        .await
    );
    assert_eq!(of(&client, "m:spurious", "lock").waiters, 1);
    waiting.abort();
}

#[tokio::test]
async fn the_watchdog_renewals_are_counted() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_millis(300)).await;
    client.record_metric_events(true);
    let lock = client.lock("m:renewed").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    assert!(
        metrics_until(&client, |m| lock_metrics(m, "m:renewed", "lock").renewals
            >= 2)
        .await
    );
    let counted = of(&client, "m:renewed", "lock");
    assert_eq!(counted.renewal_failures, 0);
    assert_eq!(counted.holds, 1);
    assert!(client
        .drain_metric_events()
        .iter()
        .any(|event| event.detail == EventDetail::Renewal { ok: true }
            && event.lock_name == "m:renewed"
            && event.lock_kind == "lock"));
    lock.release().await.unwrap();
}

#[tokio::test]
async fn a_hold_whose_renewals_cannot_reach_the_server_is_lost_to_the_connection() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = client_with(
        &proxy.url(),
        Duration::from_millis(900),
        Duration::from_millis(200),
    )
    .await;
    let lock = client.lock("m:unreachable").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    proxy.set(Fault::BlackHole);
    assert!(
        metrics_until(&client, |m| lock_metrics(m, "m:unreachable", "lock")
            .lost_connection
            == 1)
        .await
    );
    let counted = of(&client, "m:unreachable", "lock");
    assert!(counted.renewal_failures >= 1, "{counted:?}");
    assert_eq!((counted.lost_taken, counted.lost_expired), (0, 0));
    assert_eq!(counted.holds, 0);
    assert_eq!(counted.hold_time.count, 1);
    assert!(
        server_errors(&client, "timeout") >= 1,
        "{:?}",
        client.metrics()
    );
    proxy.set(Fault::Pass);
}

#[tokio::test]
async fn a_hold_whose_key_is_deleted_is_lost_as_taken() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_millis(300)).await;
    client.record_metric_events(true);
    let lock = client.lock("m:taken").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    let mut con = raw(&server).await;
    let _: i64 = con.del("m:taken").await.unwrap();
    assert!(
        metrics_until(&client, |m| lock_metrics(m, "m:taken", "lock").lost_taken
            == 1)
        .await
    );
    let counted = of(&client, "m:taken", "lock");
    assert_eq!(counted.renewal_failures, 1);
    assert_eq!((counted.holds, counted.hold_time.count), (0, 1));
    let events = client.drain_metric_events();
    assert!(events.iter().any(|event| event.detail
        == EventDetail::Lost {
            reason: polylock::metrics::LostReason::Taken
        }));
    assert!(events
        .iter()
        .any(|event| event.detail == EventDetail::Hold { lost: true }));
    // Its release reports the loss: a release that failed, and no second loss.
    let err = lock.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    let counted = of(&client, "m:taken", "lock");
    assert_eq!((counted.release_failures, counted.lost_taken), (1, 1));
    assert_eq!(counted.hold_time.count, 1);
}

#[tokio::test]
async fn a_fixed_lease_that_runs_out_is_lost_as_expired() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("m:expired").unwrap();
    let options = AcquireOptions::new().lease(Duration::from_millis(200));
    assert!(lock.acquire(options).await.unwrap());
    assert!(
        metrics_until(&client, |m| lock_metrics(m, "m:expired", "lock")
            .lost_expired
            == 1)
        .await
    );
    let counted = of(&client, "m:expired", "lock");
    assert_eq!((counted.lost_taken, counted.lost_connection), (0, 0));
    assert_eq!((counted.holds, counted.hold_time.count), (0, 1));
    // Counted from the reply, the lease from the request: a little less than the lease.
    assert!(counted.hold_time.sum_seconds >= 0.1, "{counted:?}");
}

#[tokio::test]
async fn a_release_that_finds_the_lock_gone_fails() {
    let server = RedisServer::start();
    let client = client(&server).await;
    client.record_metric_events(true);
    let lock = client.lock("m:gone").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    let mut con = raw(&server).await;
    let _: i64 = con.del("m:gone").await.unwrap();
    let err = lock.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    let counted = of(&client, "m:gone", "lock");
    assert_eq!(counted.release_failures, 1);
    assert_eq!(counted.lost_taken, 1);
    assert_eq!(counted.holds, 0);
    assert!(client.drain_metric_events().iter().any(|event| event.detail
        == EventDetail::Release {
            ok: false,
            retries: 0
        }));
    // Releasing what is not held is a misuse, not a failed release.
    assert_eq!(lock.release().await.unwrap_err().kind(), ErrorKind::NotHeld);
    assert_eq!(of(&client, "m:gone", "lock").release_failures, 1);
}

#[tokio::test]
async fn a_release_that_cannot_reach_the_server_is_retried_in_the_background() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = client_with(&proxy.url(), LONG, Duration::from_millis(300)).await;
    let lock = client.lock("m:retried").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    proxy.refuse_for(Duration::from_millis(1200));
    let err = lock.release().await.unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Timeout | ErrorKind::Connection),
        "{err}"
    );
    let counted = of(&client, "m:retried", "lock");
    assert_eq!(counted.release_retries, 1);
    assert_eq!(counted.release_failures, 1);
    assert_eq!(counted.holds, 0);
    // The background release gets through once the server is reachable again.
    let con = raw(&server).await;
    assert!(
        eventually(Duration::from_secs(10), || {
            let mut con = con.clone();
            async move { !exists(&mut con, "m:retried").await }
        })
        .await
    );
}

#[tokio::test]
async fn server_calls_count_each_script_once() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let before = client.metrics().connection.server_calls;
    let lock = client.lock("m:calls").unwrap();
    // The first call of each script also loads it: still one call each.
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    lock.release().await.unwrap();
    assert_eq!(client.metrics().connection.server_calls - before, 2);
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    lock.release().await.unwrap();
    assert_eq!(client.metrics().connection.server_calls - before, 4);
    assert!(client.metrics().connection.server_errors.is_empty());
}

#[tokio::test]
async fn a_server_that_does_not_answer_in_time_counts_a_timeout() {
    let server = RedisServer::start();
    let client = client_with(&server.url(), LONG, Duration::from_millis(100)).await;
    pause(&server, 600);
    let err = client
        .lock("m:paused")
        .unwrap()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(server_errors(&client, "timeout") >= 1);
    assert_eq!(of(&client, "m:paused", "lock").failed, 1);
}

#[tokio::test]
async fn reconnects_of_both_connections_are_counted() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("m:reconnect").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    // A waiter puts the pub/sub connection in pub/sub mode (a client type of its own).
    let waiter = client.lock("m:reconnect").unwrap();
    let waiting = tokio::spawn(async move { waiter.acquire(AcquireOptions::new()).await });
    assert!(metrics_until(&client, |m| m.connection.subscriptions > 0).await);
    assert_eq!(client.metrics().connection.reconnects, 0);
    assert!(server.kill_clients("pubsub") >= 1);
    assert!(metrics_until(&client, |m| m.connection.reconnects == 1).await);
    waiting.abort();
    lock.release().await.unwrap();
    // Only the command connection (the one whose last command was a script).
    assert_eq!(kill_clients_after(&server, "evalsha"), 1);
    // The next call finds the connection gone; the client connects again.
    assert!(lock.acquire(wait(Duration::from_secs(5))).await.unwrap());
    lock.release().await.unwrap();
    assert_eq!(client.metrics().connection.reconnects, 2);
}

/// Kills the connections whose last command was `command` (CLIENT LIST, CLIENT KILL ID).
fn kill_clients_after(server: &RedisServer, command: &str) -> usize {
    let list = server.command(&["CLIENT", "LIST"]).unwrap_or_default();
    let ids: Vec<String> = list
        .lines()
        .filter(|line| line.contains(&format!(" cmd={command} ")))
        .filter_map(|line| line.split(' ').find_map(|field| field.strip_prefix("id=")))
        .map(str::to_owned)
        .collect();
    for id in &ids {
        server.command(&["CLIENT", "KILL", "ID", id]);
    }
    ids.len()
}

#[tokio::test]
async fn names_beyond_the_limit_are_counted_together() {
    let server = RedisServer::start();
    let options = ClientOptions {
        metrics_max_lock_names: 2,
        ..short_timeouts()
    };
    let client = options_client(&server.url(), options).await;
    for name in ["m:a", "m:b", "m:c", "m:d"] {
        let lock = client.lock(name).unwrap();
        assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
        lock.release().await.unwrap();
    }
    let snapshot = client.metrics();
    let names: Vec<&str> = snapshot
        .locks
        .iter()
        .map(|lock| lock.name.as_str())
        .collect();
    assert_eq!(names, ["m:a", "m:b", OTHER_LOCKS]);
    assert_eq!(lock_metrics(&snapshot, OTHER_LOCKS, "lock").acquired, 2);
}

#[tokio::test]
async fn a_client_with_metrics_off_counts_nothing() {
    let server = RedisServer::start();
    let options = ClientOptions {
        metrics: false,
        ..short_timeouts()
    };
    let client = options_client(&server.url(), options).await;
    client.record_metric_events(true);
    let lock = client.lock("m:off").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    lock.release().await.unwrap();
    let snapshot = client.metrics();
    assert_eq!(
        lock_metrics(&snapshot, "m:off", "lock"),
        LockMetrics {
            name: "m:off".into(),
            kind: "lock".into(),
            wait_time: lock_metrics(&snapshot, "m:off", "lock").wait_time,
            hold_time: lock_metrics(&snapshot, "m:off", "lock").hold_time,
            ..LockMetrics::default()
        }
    );
    assert_eq!(lock_metrics(&snapshot, "m:off", "lock").wait_time.count, 0);
    assert_eq!(snapshot.connection.server_calls, 0);
    assert!(client.drain_metric_events().is_empty());
}

#[tokio::test]
async fn events_tell_each_operation_with_its_details() {
    let server = RedisServer::start();
    let client = client(&server).await;
    client.record_metric_events(true);
    let lock = client.lock("m:events").unwrap();
    let before = std::time::SystemTime::now();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    tokio::time::sleep(Duration::from_millis(20)).await;
    lock.release().await.unwrap();
    let events = client.drain_metric_events();
    let details: Vec<&EventDetail> = events.iter().map(|event| &event.detail).collect();
    assert_eq!(
        details,
        [
            &EventDetail::Acquire {
                result: AcquireResult::Acquired,
                attempts: 1,
                woken_by: None
            },
            &EventDetail::Hold { lost: false },
            &EventDetail::Release {
                ok: true,
                retries: 0
            },
        ]
    );
    for event in &events {
        assert_eq!(
            (event.lock_name.as_str(), event.lock_kind.as_str()),
            ("m:events", "lock")
        );
        assert!(event.started >= before);
    }
    assert!(events[1].duration >= Duration::from_millis(20));
    assert!(client.drain_metric_events().is_empty());
    // Stopped: nothing is buffered.
    client.record_metric_events(false);
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    lock.release().await.unwrap();
    assert!(client.drain_metric_events().is_empty());
}

/// Acquires and releases `hold` once (held for a moment), as any kind's handle.
async fn take_and_give_back(hold: &impl Hold) {
    assert!(hold.acquire(AcquireOptions::new()).await.unwrap());
    tokio::time::sleep(Duration::from_millis(5)).await;
    hold.release().await.unwrap();
}

fn assert_one_hold(client: &Client, name: &str, kind: &str) {
    let counted = of(client, name, kind);
    assert_eq!(
        (counted.acquired, counted.holds, counted.hold_time.count),
        (1, 0, 1),
        "{kind} '{name}': {counted:?}"
    );
    assert_eq!(counted.wait_time.count, 1, "{kind} '{name}'");
}

#[tokio::test]
async fn every_kind_is_counted_under_its_own_name_and_kind() {
    let server = RedisServer::start();
    let client = client(&server).await;
    take_and_give_back(&client.fair_lock("k:fair").unwrap()).await;
    assert_one_hold(&client, "k:fair", "fair_lock");
    take_and_give_back(&client.fenced_lock("k:fenced").unwrap()).await;
    assert_one_hold(&client, "k:fenced", "fenced_lock");
    // Its read and write locks count together.
    let read_write = client.read_write_lock("k:rw").unwrap();
    take_and_give_back(&read_write.write_lock()).await;
    take_and_give_back(&read_write.read_lock()).await;
    let counted = of(&client, "k:rw", "read_write_lock");
    assert_eq!((counted.acquired, counted.hold_time.count), (2, 2));
    // A semaphore's permits: held by their handle, the plain acquire only counted.
    let semaphore = client.semaphore("k:sem").unwrap();
    assert!(semaphore.try_set_permits(3).await.unwrap());
    take_and_give_back(&semaphore.permits(2).unwrap()).await;
    assert_one_hold(&client, "k:sem", "semaphore");
    assert!(semaphore.acquire(1, None).await.unwrap());
    let counted = of(&client, "k:sem", "semaphore");
    assert_eq!((counted.acquired, counted.holds), (2, 0));
    let expirable = client.expirable_semaphore("k:xsem").unwrap();
    assert!(expirable.try_set_permits(1).await.unwrap());
    let permit = expirable
        .acquire(AcquireOptions::new())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(of(&client, "k:xsem", "expirable_semaphore").holds, 1);
    expirable.release(&permit).await.unwrap();
    assert_one_hold(&client, "k:xsem", "expirable_semaphore");
    // The expirable semaphore's counter is no semaphore of its own.
    assert!(!client
        .metrics()
        .locks
        .iter()
        .any(|lock| lock.name == "k:xsem" && lock.kind == "semaphore"));
    let multi = MultiLock::new(vec![
        client.lock("k:m1").unwrap(),
        client.lock("k:m2").unwrap(),
    ])
    .unwrap();
    take_and_give_back(&multi).await;
    assert_one_hold(&client, "k:m1, k:m2", "multi_lock");
    // Its locks count too, each as a lock.
    assert_one_hold(&client, "k:m1", "lock");
    let other = polylock_testkit::RedisServer::start();
    let other_client = common::client(&other).await;
    let red = RedLock::new(vec![
        client.lock("k:red").unwrap(),
        other_client.lock("k:red").unwrap(),
    ])
    .unwrap();
    take_and_give_back(&red).await;
    // In the metrics of its first lock's client.
    assert_one_hold(&client, "k:red", "red_lock");
}

#[tokio::test]
async fn a_group_lost_with_its_lock_counts_the_lock_s_reason() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let multi = MultiLock::new(vec![client.lock("k:lost").unwrap()]).unwrap();
    assert!(multi
        .acquire(AcquireOptions::new().lease(Duration::from_millis(200)))
        .await
        .unwrap());
    assert!(
        metrics_until(&client, |m| lock_metrics(m, "k:lost", "multi_lock")
            .lost_expired
            == 1)
        .await
    );
    let counted = of(&client, "k:lost", "multi_lock");
    assert_eq!((counted.holds, counted.hold_time.count), (0, 1));
    assert_eq!(
        multi.release().await.unwrap_err().kind(),
        ErrorKind::LockLost
    );
    assert_eq!(of(&client, "k:lost", "multi_lock").release_failures, 1);
}

/// The spans seen by the test subscriber: name -> the fields recorded on each.
type SeenSpans = Arc<Mutex<Vec<(String, HashMap<String, String>)>>>;

struct SpanRecorder(SeenSpans);

struct FieldsOf<'a>(&'a mut HashMap<String, String>);

impl tracing::field::Visit for FieldsOf<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
}

impl<S> tracing_subscriber::Layer<S> for SpanRecorder
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut fields = HashMap::new();
        attrs.record(&mut FieldsOf(&mut fields));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id) {
            if let Some(fields) = span.extensions_mut().get_mut::<HashMap<String, String>>() {
                values.record(&mut FieldsOf(fields));
            }
        }
    }

    fn on_close(&self, id: tracing::span::Id, ctx: tracing_subscriber::layer::Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            if span.metadata().target() == "polylock" {
                let fields = span
                    .extensions_mut()
                    .remove::<HashMap<String, String>>()
                    .unwrap_or_default();
                self.0
                    .lock()
                    .unwrap()
                    .push((span.name().to_owned(), fields));
            }
        }
    }
}

/// The spans closed so far in this process (a global subscriber: the engine's work runs on
/// the core's runtime threads too).
fn recorded_spans() -> SeenSpans {
    static SEEN: OnceLock<SeenSpans> = OnceLock::new();
    SEEN.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        let seen = SeenSpans::default();
        let subscriber = tracing_subscriber::registry().with(SpanRecorder(seen.clone()));
        tracing::subscriber::set_global_default(subscriber).expect("no other subscriber");
        seen
    })
    .clone()
}

fn spans_of(seen: &SeenSpans, name: &str, lock: &str) -> Vec<HashMap<String, String>> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|(span, fields)| {
            span == name && fields.get("polylock.lock.name").map(String::as_str) == Some(lock)
        })
        .map(|(_, fields)| fields.clone())
        .collect()
}

#[tokio::test]
async fn the_engine_makes_a_span_per_acquire_hold_release_and_renewal() {
    let seen = recorded_spans();
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_millis(300)).await;
    let lock = client.lock("s:spans").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    assert!(
        metrics_until(&client, |m| lock_metrics(m, "s:spans", "lock").renewals
            >= 1)
        .await
    );
    lock.release().await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), || std::future::ready(
            !spans_of(&seen, "polylock.renewal", "s:spans").is_empty()
                && !spans_of(&seen, "polylock.hold", "s:spans").is_empty()
        ))
        .await
    );
    let acquire = &spans_of(&seen, "polylock.acquire", "s:spans")[0];
    assert_eq!(acquire["polylock.lock.kind"], "lock");
    assert_eq!(acquire["polylock.acquire.result"], "acquired");
    assert_eq!(acquire["polylock.acquire.attempts"], "1");
    assert!(!acquire.contains_key("polylock.acquire.woken_by"));
    assert_eq!(
        spans_of(&seen, "polylock.hold", "s:spans")[0]["polylock.hold.lost"],
        "false"
    );
    let release = &spans_of(&seen, "polylock.release", "s:spans")[0];
    assert_eq!(
        (
            release["polylock.release.ok"].as_str(),
            release["polylock.release.retries"].as_str()
        ),
        ("true", "0")
    );
    assert_eq!(
        spans_of(&seen, "polylock.renewal", "s:spans")[0]["polylock.renewal.result"],
        "ok"
    );
}

#[tokio::test]
async fn a_closed_client_has_no_subscription_left() {
    let server = RedisServer::start();
    let holder_client = client(&server).await;
    let holder = holder_client.lock("m:closed").unwrap();
    assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
    let client = client(&server).await;
    let waiter = client.lock("m:closed").unwrap();
    let waiting = tokio::spawn(async move { waiter.acquire(AcquireOptions::new()).await });
    assert!(metrics_until(&client, |m| m.connection.subscriptions > 0).await);
    client.close();
    assert!(waiting.await.unwrap().is_err());
    assert!(metrics_until(&client, |m| m.connection.subscriptions == 0).await);
    assert_eq!(of(&client, "m:closed", "lock").failed, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_client_counts_its_calls_and_subscriptions_the_same() {
    let cluster = polylock_testkit::cluster::Cluster::start_primaries_with(3, &[]);
    let client = client_with(&cluster.url(), LONG, Duration::from_secs(2)).await;
    let before = client.metrics().connection.server_calls;
    let lock = client.lock("c:calls").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    assert_eq!(client.metrics().connection.server_calls - before, 1);
    let waiter = client.lock("c:calls").unwrap();
    let waiting = tokio::spawn(async move {
        let acquired = waiter.acquire(AcquireOptions::new()).await;
        waiter.release().await.unwrap();
        acquired
    });
    assert!(metrics_until(&client, |m| m.connection.subscriptions > 0).await);
    // Subscribed first, listed after: the release grants the lock only to a listed waiter.
    let listed = "polylock_lock_waiters:{c:calls}";
    let node = cluster.node(cluster.primary_for_key(listed));
    assert!(
        eventually(Duration::from_secs(10), || async {
            node.int(&["ZCARD", listed]) == 1
        })
        .await,
        "the waiter was never listed"
    );
    lock.release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap());
    assert!(metrics_until(&client, |m| m.connection.subscriptions == 0).await);
    let counted = of(&client, "c:calls", "lock");
    assert_eq!(
        (counted.acquired, counted.holds, counted.handoffs_granted),
        (2, 0, 1)
    );
    assert!(client.metrics().connection.server_errors.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_counts_a_reconnect_of_each_connection() {
    let set = polylock_testkit::SentinelSet::start(1, 3);
    let client = client_with(&set.url(), LONG, Duration::from_secs(2)).await;
    let lock = client.lock("m:failover").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    lock.release().await.unwrap();
    assert_eq!(client.metrics().connection.reconnects, 0);
    tokio::task::block_in_place(|| set.failover());
    // The command connection follows the new primary, and so does the pub/sub hub.
    assert!(metrics_until(&client, |m| m.connection.reconnects >= 2).await);
    assert!(lock.acquire(wait(Duration::from_secs(10))).await.unwrap());
    lock.release().await.unwrap();
}
