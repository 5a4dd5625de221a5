//! The semaphore and the expirable semaphore (Redisson RSemaphore and
//! RPermitExpirableSemaphore layouts) against a real redis-server: permits conserved under
//! concurrent acquire and release, waiters woken by release messages, a dead holder's permit
//! coming back (expirable) or not (plain), watchdog-renewed permits, lost replies, bad input.

mod common;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use polylock::{AcquireOptions, ErrorKind};
use redis::AsyncCommands;

const NOW: Option<Duration> = Some(Duration::ZERO);
const LONG: Option<Duration> = Some(Duration::from_secs(60));

async fn counter(con: &mut redis::aio::MultiplexedConnection, name: &str) -> Option<i64> {
    con.get(name).await.unwrap()
}

// ---- the semaphore ----

#[tokio::test]
async fn permits_are_set_once_taken_and_given_back() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    let semaphore = client.semaphore("sem:basic").unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    assert!(!semaphore.acquire(1, NOW).await.unwrap());
    assert!(semaphore.try_set_permits(3).await.unwrap());
    assert!(!semaphore.try_set_permits(5).await.unwrap());
    assert_eq!(counter(&mut con, "sem:basic").await, Some(3));

    assert!(semaphore.acquire(2, NOW).await.unwrap());
    assert!(!semaphore.acquire(2, NOW).await.unwrap());
    assert!(semaphore.acquire(1, NOW).await.unwrap());
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    semaphore.release(3).await.unwrap();
    semaphore.add_permits(2).await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 5);
    semaphore.add_permits(-4).await.unwrap();
    assert_eq!(counter(&mut con, "sem:basic").await, Some(1));
    // No request latch is left behind once the caller has its permits.
    let latches: Vec<String> = con.keys("polylock_acquire_latch:*").await.unwrap();
    assert!(
        eventually(Duration::from_secs(2), || {
            let mut con = con.clone();
            async move {
                let left: Vec<String> = con.keys("polylock_acquire_latch:*").await.unwrap();
                left.is_empty()
            }
        })
        .await,
        "latches left: {latches:?}"
    );
}

#[tokio::test]
async fn permits_are_conserved_under_concurrent_acquire_and_release() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let other = common::client(&server).await;
    let semaphore = client.semaphore("sem:conserve").unwrap();
    assert!(semaphore.try_set_permits(3).await.unwrap());
    let inside = Arc::new(AtomicI64::new(0));
    let most = Arc::new(AtomicI64::new(0));
    let workers: Vec<_> = (0..8)
        .map(|i| {
            let semaphore = if i % 2 == 0 { &client } else { &other }
                .semaphore("sem:conserve")
                .unwrap();
            let (inside, most) = (inside.clone(), most.clone());
            tokio::spawn(async move {
                for _ in 0..25 {
                    assert!(semaphore.acquire(1, LONG).await.unwrap());
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    semaphore.release(1).await.unwrap();
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    assert!(most.load(Ordering::SeqCst) <= 3);
    assert_eq!(
        most.load(Ordering::SeqCst),
        3,
        "permits were never all in use"
    );
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);
}

#[tokio::test]
async fn a_waiter_is_woken_by_the_release_message() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let semaphore = client.semaphore("sem:wake").unwrap();
    assert!(semaphore.try_set_permits(0).await.unwrap());
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let semaphore = semaphore.clone();
            tokio::spawn(async move { semaphore.acquire(1, LONG).await.unwrap() })
        })
        .collect();
    let two = {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire(2, LONG).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = Instant::now();
    // Releases of 3 and then 2 permits: every waiter (1 + 1 + 1 + 2) is served, whichever
    // order the server saw them in.
    semaphore.release(3).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    semaphore.release(2).await.unwrap();
    for waiter in waiters {
        assert!(waiter.await.unwrap());
    }
    assert!(two.await.unwrap());
    // Waiters sleep up to an hour between looks: only messages can have woken them.
    assert!(released.elapsed() < Duration::from_secs(30));
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
}

#[tokio::test]
async fn a_dead_holders_permits_stay_taken() {
    let server = RedisServer::start();
    let dying = client(&server).await;
    let client = client(&server).await;
    let semaphore = client.semaphore("sem:dead").unwrap();
    assert!(semaphore.try_set_permits(2).await.unwrap());
    assert!(dying
        .semaphore("sem:dead")
        .unwrap()
        .acquire(1, NOW)
        .await
        .unwrap());
    dying.close();
    drop(dying);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A plain semaphore cannot know: the permit is gone until someone adds it back.
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
}

#[tokio::test]
async fn a_timed_out_acquire_takes_no_permit() {
    let server = RedisServer::start();
    let client = client_with(
        &server.url(),
        Duration::from_secs(30),
        Duration::from_secs(1),
    )
    .await;
    let semaphore = client.semaphore("sem:phantom").unwrap();
    assert!(semaphore.try_set_permits(2).await.unwrap());
    assert!(semaphore.acquire(1, NOW).await.unwrap());
    semaphore.release(1).await.unwrap();
    pause(&server, 2000);
    let paused_at = Instant::now();
    let err = semaphore.acquire(1, NOW).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    tokio::time::sleep(Duration::from_millis(2500).saturating_sub(paused_at.elapsed())).await;
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);

    // Retried through the pause: one request, taken once.
    pause(&server, 2000);
    assert!(semaphore
        .acquire(1, Some(Duration::from_secs(20)))
        .await
        .unwrap());
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    // A release retried through the pause gives back once. A release retries for two response
    // timeouts (its latch's life), so the pause outlasts one timeout but ends well inside two:
    // a 2 s pause left the retry's answer to a race with the server's 100 ms timer tick.
    pause(&server, 1400);
    semaphore.release(1).await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
}

/// A release that cannot reach the server within its caller's time (two response timeouts)
/// returns an error, and is sent again in the background with the same request id: permits
/// never expire, so ones not given back would be gone for good (the driven explorer's
/// `semaphore` scenario found it, seed 1305).
#[tokio::test]
async fn a_release_that_could_not_reach_the_server_gives_back_in_the_background() {
    let server = RedisServer::start();
    let proxy = polylock_testkit::FaultProxy::start(server.port());
    let client = client_with(
        &proxy.url(),
        Duration::from_secs(30),
        Duration::from_millis(200),
    )
    .await;
    let semaphore = client.semaphore("sem:unreachable").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    assert!(semaphore.acquire(1, NOW).await.unwrap());
    // Refused past the caller's 400 ms, well within the background's minute.
    proxy.refuse_for(Duration::from_millis(1_500));
    let err = semaphore.release(1).await.unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Connection | ErrorKind::Timeout),
        "{err}"
    );
    assert!(err.to_string().contains("in the background"), "{err}");
    let mut con = raw(&server).await;
    assert!(
        eventually(Duration::from_secs(20), || {
            let mut con = con.clone();
            async move { counter(&mut con, "sem:unreachable").await == Some(1) }
        })
        .await,
        "the permit never came back"
    );
    // Given back once: a later copy of the release (its background retries stop once one is
    // answered) adds nothing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(counter(&mut con, "sem:unreachable").await, Some(1));
}

#[tokio::test]
async fn a_dropped_acquire_future_takes_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let semaphore = client.semaphore("sem:dropped").unwrap();
    assert!(semaphore.try_set_permits(0).await.unwrap());
    let waiting =
        tokio::time::timeout(Duration::from_millis(300), semaphore.acquire(1, LONG)).await;
    assert!(waiting.is_err());
    semaphore.release(1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
}

#[tokio::test]
async fn bad_permits_and_wrong_types_are_refused() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    let semaphore = client.semaphore("sem:bad").unwrap();
    for (call, message) in [
        (
            semaphore.acquire(0, NOW).await.map(|_| ()),
            "permits must be from 1 to 2147483647, got 0",
        ),
        (
            semaphore.release(-1).await,
            "permits must be from 1 to 2147483647, got -1",
        ),
        (
            semaphore.try_set_permits(-1).await.map(|_| ()),
            "permits must be from 0 to 2147483647, got -1",
        ),
        (
            semaphore.add_permits(1 << 31).await,
            "permits must be from -2147483647 to 2147483647, got 2147483648",
        ),
    ] {
        let err = call.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert_eq!(err.to_string(), format!("invalid argument: {message}"));
    }
    let _: () = con.hset("sem:hash", "a", "1").await.unwrap();
    let _: () = con.set("sem:text", "many").await.unwrap();
    for name in ["sem:hash", "sem:text"] {
        let semaphore = client.semaphore(name).unwrap();
        let err = semaphore.acquire(1, NOW).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        let err = semaphore.release(1).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    }
    let value: String = con.get("sem:text").await.unwrap();
    assert_eq!(value, "many");
}

// ---- the expirable semaphore ----

#[tokio::test]
async fn permits_have_ids_and_are_released_by_id() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let other = common::client(&server).await;
    let mut con = raw(&server).await;
    let semaphore = client.expirable_semaphore("xsem:ids").unwrap();
    assert!(semaphore.try_set_permits(2).await.unwrap());
    let a = semaphore
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap()
        .unwrap();
    let b = semaphore
        .acquire(
            AcquireOptions::new()
                .no_wait()
                .lease(Duration::from_secs(60)),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.len(), 32);
    assert!(semaphore
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap()
        .is_none());
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    // Redisson's layout: each permit is 16 raw bytes in the ZSET, scored by its expiry.
    let members: Vec<Vec<u8>> = con
        .zrange(polylock::keys::permit_timeouts("xsem:ids"), 0, -1)
        .await
        .unwrap();
    assert_eq!(members.len(), 2);
    assert!(members.iter().all(|member| member.len() == 16));

    semaphore.release(&a).await.unwrap();
    // Any client may release a permit by its id.
    other
        .expirable_semaphore("xsem:ids")
        .unwrap()
        .release(&b.to_uppercase())
        .await
        .unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    let err = semaphore.release(&a).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld, "{err}");
    let err = semaphore.release("not-an-id").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        err.to_string(),
        "invalid argument: permit id must be 32 hexadecimal characters (an id that acquire returned), got 'not-an-id'"
    );
}

#[tokio::test]
async fn a_dead_holders_permit_comes_back_when_its_lease_runs_out() {
    let server = RedisServer::start();
    let dying = client(&server).await;
    let client = client(&server).await;
    let semaphore = client.expirable_semaphore("xsem:dead").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let dead = dying.expirable_semaphore("xsem:dead").unwrap();
    let taken = dead
        .acquire(
            AcquireOptions::new()
                .no_wait()
                .lease(Duration::from_millis(500)),
        )
        .await
        .unwrap();
    assert!(taken.is_some());
    // Closed: it neither renews nor releases, as a process that died.
    dying.close();
    drop(dead);
    // The waiter is told when to look: the permit's expiry, not a poll.
    let started = Instant::now();
    let id = semaphore
        .acquire(AcquireOptions::new().wait(Duration::from_secs(10)))
        .await
        .unwrap();
    assert!(id.is_some());
    assert!(started.elapsed() >= Duration::from_millis(300));
    semaphore.release(&id.unwrap()).await.unwrap();
}

#[tokio::test]
async fn the_watchdog_renews_a_permit_while_its_holder_lives() {
    let server = RedisServer::start();
    let holder = client_with_watchdog(&server, Duration::from_millis(300)).await;
    let client = client(&server).await;
    let held = holder.expirable_semaphore("xsem:watchdog").unwrap();
    assert!(held.try_set_permits(1).await.unwrap());
    let id = held
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let semaphore = client.expirable_semaphore("xsem:watchdog").unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    assert!(semaphore
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap()
        .is_none());
    // The holder's process "dies": nothing renews it, and it comes back within its lease.
    holder.close();
    let back = semaphore
        .acquire(AcquireOptions::new().wait(Duration::from_secs(10)))
        .await
        .unwrap();
    assert!(back.is_some());
    let err = held.release(&id).await.unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::LockLost | ErrorKind::Connection),
        "{err}"
    );
}

#[tokio::test]
async fn a_permit_whose_lease_ran_out_is_lost_to_its_holder() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let semaphore = client.expirable_semaphore("xsem:lost").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let id = semaphore
        .acquire(
            AcquireOptions::new()
                .no_wait()
                .lease(Duration::from_millis(200)),
        )
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let err = semaphore.release(&id).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
}

#[tokio::test]
async fn a_timed_out_permit_acquire_takes_nothing() {
    let server = RedisServer::start();
    let client = client_with(
        &server.url(),
        Duration::from_secs(30),
        Duration::from_secs(1),
    )
    .await;
    let semaphore = client.expirable_semaphore("xsem:phantom").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let warm = semaphore
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap()
        .unwrap();
    semaphore.release(&warm).await.unwrap();
    pause(&server, 2000);
    let paused_at = Instant::now();
    let err = semaphore
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    tokio::time::sleep(Duration::from_millis(2500).saturating_sub(paused_at.elapsed())).await;
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    let mut con = raw(&server).await;
    let acquired: i64 = con
        .zcard(polylock::keys::permit_timeouts("xsem:phantom"))
        .await
        .unwrap();
    assert_eq!(acquired, 0);
}

#[tokio::test]
async fn dropping_the_handle_gives_its_permits_back() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let semaphore = client.expirable_semaphore("xsem:drop").unwrap();
    assert!(semaphore.try_set_permits(2).await.unwrap());
    {
        let holder = client.expirable_semaphore("xsem:drop").unwrap();
        holder
            .acquire(AcquireOptions::new().no_wait())
            .await
            .unwrap()
            .unwrap();
        holder
            .acquire(AcquireOptions::new().no_wait())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(holder.held_permits().len(), 2);
    }
    assert!(
        eventually(Duration::from_secs(5), || {
            let semaphore = semaphore.clone();
            async move { semaphore.available_permits().await.unwrap() == 2 }
        })
        .await
    );
}

/// Permits whose fixed lease ran out leave the handle that took them, by its own clock: a
/// handle that kept them would list permits it no longer has and grow with every past one.
/// Their release still tells the holder they were lost, and gives back nobody else's permit.
#[tokio::test]
async fn permits_whose_lease_ran_out_leave_their_handle() {
    const PERMITS: usize = 200;
    let lease = Duration::from_millis(300);
    let server = RedisServer::start();
    let client = client(&server).await;
    let other = common::client(&server).await;
    let name = "xsem:expired";
    let semaphore = client.expirable_semaphore(name).unwrap();
    assert!(semaphore.try_set_permits(PERMITS as i64).await.unwrap());
    let started = Instant::now();
    let mut ids = Vec::with_capacity(PERMITS);
    for _ in 0..PERMITS {
        let options = AcquireOptions::new().no_wait().lease(lease);
        ids.push(semaphore.acquire(options).await.unwrap().unwrap());
    }
    let acquired_at = Instant::now();
    if acquired_at - started < lease {
        // No lease can have ended yet (each runs from its request, sent after `started`).
        assert_eq!(semaphore.held_permits().len(), PERMITS);
    }
    // The server takes them back once their lease ran out.
    assert!(
        eventually(Duration::from_secs(10), || {
            let semaphore = semaphore.clone();
            async move { semaphore.available_permits().await.unwrap() == PERMITS as i64 }
        })
        .await,
        "the server never took the permits back"
    );
    // The handle lets them go by its own clock, which ends each lease no later than the
    // server's: a few seconds after the last lease ended is a generous bound.
    let bound =
        (acquired_at + lease + Duration::from_secs(3)).saturating_duration_since(Instant::now());
    assert!(
        eventually(bound, || {
            let held = semaphore.held_permits().is_empty();
            async move { held }
        })
        .await,
        "the handle still lists {} of {PERMITS} expired permits",
        semaphore.held_permits().len()
    );
    assert_eq!(client.watched_locks(), 0);

    // Another client takes every permit; the expired ids must not give any of them back.
    let taker = other.expirable_semaphore(name).unwrap();
    for _ in 0..PERMITS {
        let options = AcquireOptions::new()
            .no_wait()
            .lease(Duration::from_secs(60));
        assert!(taker.acquire(options).await.unwrap().is_some());
    }
    assert_eq!(taker.available_permits().await.unwrap(), 0);
    // This handle's own expired permit: lost (as a lock whose lease ran out), once.
    let err = semaphore.release(&ids[0]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    let err = semaphore.release(&ids[0]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld, "{err}");
    // From a handle that never held it: nobody holds it.
    let stranger = other.expirable_semaphore(name).unwrap();
    let err = stranger.release(&ids[1]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld, "{err}");
    for id in &ids[1..] {
        let err = semaphore.release(id).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    }
    assert_eq!(taker.available_permits().await.unwrap(), 0);
    assert_eq!(taker.held_permits().len(), PERMITS);
    let mut con = raw(&server).await;
    let taken: i64 = con
        .zcard(polylock::keys::permit_timeouts(name))
        .await
        .unwrap();
    assert_eq!(
        taken, PERMITS as i64,
        "another client's permits were given back"
    );
}

/// A watchdog-renewed permit that another client released leaves its handle once the
/// watchdog finds it gone, and its release reports it lost.
#[tokio::test]
async fn a_watchdog_permit_found_gone_leaves_its_handle() {
    let server = RedisServer::start();
    let holder = client_with_watchdog(&server, Duration::from_millis(300)).await;
    let other = client(&server).await;
    let semaphore = holder.expirable_semaphore("xsem:gone").unwrap();
    assert!(semaphore.try_set_permits(2).await.unwrap());
    let kept = semaphore
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap()
        .unwrap();
    let id = semaphore
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(holder.watched_locks(), 2);
    other
        .expirable_semaphore("xsem:gone")
        .unwrap()
        .release(&id)
        .await
        .unwrap();
    // The watchdog looks every 100 ms: seconds are a generous bound.
    assert!(
        eventually(Duration::from_secs(5), || {
            let held = semaphore.held_permits() == vec![kept.clone()];
            async move { held }
        })
        .await,
        "the handle still lists {:?}",
        semaphore.held_permits()
    );
    assert_eq!(holder.watched_locks(), 1);
    let err = semaphore.release(&id).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    semaphore.release(&kept).await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    assert!(semaphore.held_permits().is_empty());
    assert_eq!(holder.watched_locks(), 0);
}
