//! The fair lock (Redisson RFairLock layout) against real redis-server processes.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use polylock::{AcquireOptions, Client};
use redis::AsyncCommands;

const LONG_LEASE: Duration = Duration::from_secs(60);

async fn fair_client(server: &RedisServer, queue_timeout: Duration) -> Client {
    Client::builder(server.url())
        .fair_queue_timeout(queue_timeout)
        .connect()
        .await
        .unwrap()
}

async fn queue(con: &mut redis::aio::MultiplexedConnection, name: &str) -> Vec<String> {
    con.lrange(format!("redisson_lock_queue:{{{name}}}"), 0, -1)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_arrival_order() {
    let server = RedisServer::start();
    let client = fair_client(&server, Duration::from_secs(60)).await;
    let mut con = raw(&server).await;
    let holder = client.fair_lock("fifo").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for index in 0..10 {
        let lock = client.fair_lock("fifo").unwrap();
        let order = order.clone();
        waiters.push(tokio::spawn(async move {
            assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
            order.lock().unwrap().push(index);
            tokio::time::sleep(Duration::from_millis(10)).await;
            lock.release().await.unwrap();
        }));
        // The next waiter arrives only once this one has queued.
        assert!(
            eventually(Duration::from_secs(5), || async {
                queue(&mut raw(&server).await, "fifo").await.len() == index + 1
            })
            .await
        );
    }
    holder.release().await.unwrap();
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(20), waiter)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..10).collect::<Vec<_>>());
    assert!(queue(&mut con, "fifo").await.is_empty());
    assert!(!exists(&mut con, "fifo").await);
    let timeouts: i64 = con.zcard("redisson_lock_timeout:{fifo}").await.unwrap();
    assert_eq!(timeouts, 0);
}

#[tokio::test]
async fn the_queue_uses_the_redisson_layout() {
    let server = RedisServer::start();
    let client = fair_client(&server, Duration::from_secs(60)).await;
    let mut con = raw(&server).await;
    let holder = client.fair_lock("layout").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let waiter = client.fair_lock("layout").unwrap();
    assert!(!waiter
        .acquire(AcquireOptions::new().wait(Duration::from_millis(200)))
        .await
        .unwrap());
    // It gave up, so it left the queue; queue again with a longer wait and look at it meanwhile.
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.acquire(AcquireOptions::new()).await })
    };
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue(&mut raw(&server).await, "layout").await.len() == 1
        })
        .await
    );
    assert_eq!(
        queue(&mut con, "layout").await,
        vec![waiter.owner().to_owned()]
    );
    let deadline: f64 = con
        .zscore("redisson_lock_timeout:{layout}", waiter.owner())
        .await
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64;
    // Redisson's arithmetic: the holder's remaining lease plus one wait allowance (5 min).
    assert!(
        deadline > now + 300_000.0 && deadline <= now + 60_000.0 + 300_000.0,
        "deadline {deadline}, now {now}"
    );
    // polylock's own liveness record: last look plus the queue timeout (60 s here).
    let seen: f64 = con
        .zscore(
            "redisson_lock_timeout:{layout}:polylock_seen",
            waiter.owner(),
        )
        .await
        .unwrap();
    assert!(
        seen > now && seen <= now + 60_000.0 + 1_000.0,
        "seen {seen}, now {now}"
    );
    let numsub: (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(format!(
            "redisson_lock__channel:{{layout}}:{}",
            waiter.owner()
        ))
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(numsub.1, 1, "the waiter listens on its own channel");
    assert_eq!(hget(&mut con, "layout", holder.owner()).await, Some(1));
    holder.release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap());
    assert_eq!(hget(&mut con, "layout", waiter.owner()).await, Some(1));
}

#[tokio::test]
async fn a_waiter_that_times_out_or_is_cancelled_leaves_the_queue_at_once() {
    let server = RedisServer::start();
    // A long queue timeout: a waiter left behind would block the next for a minute.
    let client = fair_client(&server, Duration::from_secs(60)).await;
    let mut con = raw(&server).await;
    let holder = client.fair_lock("skip").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());

    let timing_out = client.fair_lock("skip").unwrap();
    let bounded = tokio::spawn(async move {
        timing_out
            .acquire(AcquireOptions::new().wait(Duration::from_millis(400)))
            .await
    });
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue(&mut raw(&server).await, "skip").await.len() == 1
        })
        .await
    );
    let cancelled = client.fair_lock("skip").unwrap();
    let cancelled_wait = tokio::spawn(async move {
        let _ = tokio::time::timeout(
            Duration::from_millis(400),
            cancelled.acquire(AcquireOptions::new()),
        )
        .await;
        cancelled
    });
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue(&mut raw(&server).await, "skip").await.len() == 2
        })
        .await
    );
    let patient = client.fair_lock("skip").unwrap();
    let patient_owner = patient.owner().to_owned();
    let patient_wait = tokio::spawn(async move {
        patient
            .acquire(AcquireOptions::new())
            .await
            .map(|got| (got, patient))
    });
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue(&mut raw(&server).await, "skip").await.len() == 3
        })
        .await
    );

    assert!(!bounded.await.unwrap().unwrap());
    let cancelled = cancelled_wait.await.unwrap();
    assert!(!cancelled.is_held());
    assert!(
        eventually(Duration::from_secs(2), || async {
            queue(&mut raw(&server).await, "skip").await == vec![patient_owner.clone()]
        })
        .await
    );

    let released = Instant::now();
    holder.release().await.unwrap();
    let (got, _patient) = tokio::time::timeout(Duration::from_secs(10), patient_wait)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(got);
    assert!(
        released.elapsed() < Duration::from_secs(10),
        "{:?}",
        released.elapsed()
    );
    assert!(queue(&mut con, "skip").await.is_empty());
}

#[tokio::test]
async fn a_killed_waiter_is_skipped_after_its_queue_deadline() {
    let server = RedisServer::start();
    let queue_timeout = Duration::from_millis(1500);
    let client = fair_client(&server, queue_timeout).await;
    let holder = client.fair_lock("dead").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let mut peer = Peer::start(&server, queue_timeout.as_millis() as u64);
    peer.send("fair_acquire dead - -");
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue(&mut raw(&server).await, "dead").await.len() == 1
        })
        .await
    );
    let waiter = client.fair_lock("dead").unwrap();
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.acquire(AcquireOptions::new()).await })
    };
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue(&mut raw(&server).await, "dead").await.len() == 2
        })
        .await
    );
    peer.kill();
    let killed = Instant::now();
    holder.release().await.unwrap();
    assert!(tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap());
    // The dead head keeps its place for at most one queue timeout after its last look.
    assert!(
        killed.elapsed() < queue_timeout * 2 + Duration::from_secs(1),
        "{:?}",
        killed.elapsed()
    );
    assert!(waiter.is_held());
}

#[tokio::test]
async fn a_live_waiter_keeps_its_place_through_a_long_hold() {
    let server = RedisServer::start();
    // The holder holds for several queue timeouts; the waiter must not fall out of the queue.
    let queue_timeout = Duration::from_millis(300);
    let client = fair_client(&server, queue_timeout).await;
    let holder = client.fair_lock("long").unwrap();
    assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
    let first = client.fair_lock("long").unwrap();
    let second = client.fair_lock("long").unwrap();
    let first_wait = {
        let first = first.clone();
        tokio::spawn(async move { first.acquire(AcquireOptions::new()).await })
    };
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue(&mut raw(&server).await, "long").await.len() == 1
        })
        .await
    );
    let second_wait = {
        let second = second.clone();
        tokio::spawn(async move { second.acquire(AcquireOptions::new()).await })
    };
    tokio::time::sleep(queue_timeout * 5).await;
    let mut con = raw(&server).await;
    assert_eq!(
        queue(&mut con, "long").await,
        vec![first.owner().to_owned(), second.owner().to_owned()]
    );
    holder.release().await.unwrap();
    assert!(first_wait.await.unwrap().unwrap());
    assert!(!second.is_held());
    first.release().await.unwrap();
    assert!(second_wait.await.unwrap().unwrap());
}

#[tokio::test]
async fn fair_reentrancy_counts_in_the_hash() {
    let server = RedisServer::start();
    let client = fair_client(&server, Duration::from_secs(10)).await;
    let mut con = raw(&server).await;
    let lock = client.fair_lock("fair-reentrant").unwrap();
    for _ in 0..3 {
        assert!(lock
            .acquire(AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap());
    }
    assert_eq!(
        hget(&mut con, "fair-reentrant", lock.owner()).await,
        Some(3)
    );
    assert_eq!(lock.hold_count(), 3);
    let other = client.fair_lock("fair-reentrant").unwrap();
    assert!(!other
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    assert!(
        queue(&mut con, "fair-reentrant").await.is_empty(),
        "a one-shot attempt does not stay queued"
    );
    for _ in 0..3 {
        lock.release().await.unwrap();
    }
    assert!(!exists(&mut con, "fair-reentrant").await);
    assert_eq!(
        lock.release().await.unwrap_err().kind(),
        polylock::ErrorKind::NotHeld
    );
}

#[tokio::test]
async fn fair_lock_processes_lose_no_increment() {
    let server = RedisServer::start();
    let mut peers: Vec<Peer> = (0..4).map(|_| Peer::start(&server, 10_000)).collect();
    for peer in &mut peers {
        peer.send("fair_increment shared counter 50");
    }
    for peer in &mut peers {
        assert_eq!(peer.reply(), "ok");
    }
    let mut con = raw(&server).await;
    let counter: i64 = con.get("counter").await.unwrap();
    assert_eq!(counter, 200);
    assert!(!exists(&mut con, "shared").await);
    assert!(queue(&mut con, "shared").await.is_empty());
    for mut peer in peers {
        peer.send("quit");
        let _ = peer.child.wait();
    }
}

#[tokio::test]
async fn a_fair_holder_is_told_when_its_key_is_deleted() {
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .watchdog_timeout(Duration::from_millis(900))
        .connect()
        .await
        .unwrap();
    let lock = client.fair_lock("fair-lost").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    let mut con = raw(&server).await;
    let _: () = con.del("fair-lost").await.unwrap();
    let mut lost = lock.lost_receiver();
    tokio::time::timeout(Duration::from_secs(2), lost.wait_for(|lost| *lost))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        lock.release().await.unwrap_err().kind(),
        polylock::ErrorKind::LockLost
    );
}

#[tokio::test]
async fn fair_force_unlock_wakes_the_head() {
    let server = RedisServer::start();
    let client = fair_client(&server, Duration::from_secs(60)).await;
    let holder = client.fair_lock("fair-force").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let waiter = client.fair_lock("fair-force").unwrap();
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.acquire(AcquireOptions::new()).await })
    };
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue(&mut raw(&server).await, "fair-force").await.len() == 1
        })
        .await
    );
    let started = Instant::now();
    assert!(client
        .fair_lock("fair-force")
        .unwrap()
        .force_unlock()
        .await
        .unwrap());
    assert!(tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap());
    assert!(started.elapsed() < Duration::from_secs(10));
}

async fn reset_stats(con: &mut redis::aio::MultiplexedConnection) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(con)
        .await
        .unwrap();
}

/// Calls since the last reset in INFO commandstats, INFO and CONFIG left out.
async fn server_calls(con: &mut redis::aio::MultiplexedConnection) -> i64 {
    command_calls(con, |name| name != "info" && !name.starts_with("config")).await
}

/// Server calls (INFO commandstats, each `redis.call` inside a script included) of one
/// handoff: the holder's release and the head's acquisition, with `queued` waiters in line.
/// `redisson_waiter`: also queue an entry the way a Redisson client writes one (no polylock
/// liveness record) behind them, and return how much the handoff lowered its deadline.
async fn one_handoff(name: &str, queued: usize, redisson_waiter: bool) -> (i64, f64) {
    let server = RedisServer::start();
    let client = fair_client(&server, Duration::from_secs(60)).await;
    let mut con = raw(&server).await;
    let holder = client.fair_lock(name).unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let (acquired, mut first) = tokio::sync::mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for _ in 0..queued {
        let lock = client.fair_lock(name).unwrap();
        let acquired = acquired.clone();
        waiters.push(tokio::spawn(async move {
            assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
            let _ = acquired.send(());
            // Hold until the test ends.
            std::future::pending::<()>().await;
        }));
    }
    assert!(
        eventually(Duration::from_secs(10), || async {
            queue(&mut raw(&server).await, name).await.len() == queued
        })
        .await
    );
    let timeouts = format!("redisson_lock_timeout:{{{name}}}");
    let java = "6b1f1f5e-0000-4000-8000-000000000001:1";
    let java_deadline = 4_000_000_000_000.0;
    if redisson_waiter {
        let _: () = con
            .rpush(format!("redisson_lock_queue:{{{name}}}"), java)
            .await
            .unwrap();
        let _: () = con.zadd(&timeouts, java, java_deadline).await.unwrap();
    }
    // Quiet first: every waiter has subscribed and made its last look.
    assert!(
        eventually(Duration::from_secs(10), || async {
            let mut con = raw(&server).await;
            reset_stats(&mut con).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            server_calls(&mut con).await == 0
        })
        .await
    );
    reset_stats(&mut con).await;
    holder.release().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), first.recv())
        .await
        .expect("the head acquires on the release");
    let calls = server_calls(&mut con).await;
    let lowered = if redisson_waiter {
        let now: f64 = con.zscore(&timeouts, java).await.unwrap();
        java_deadline - now
    } else {
        0.0
    };
    for waiter in waiters {
        waiter.abort();
    }
    (calls, lowered)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_costs_the_same_server_calls_whatever_the_queue_length() {
    let (short, _) = one_handoff("short-queue", 2, false).await;
    let (long, _) = one_handoff("long-queue", 24, false).await;
    assert_eq!(
        short, long,
        "server calls of one handoff: {short} with 2 queued, {long} with 24 queued"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_redisson_waiter_still_gets_redissons_deadline_arithmetic() {
    // Redisson lowers every queued deadline by its allowance (5 min) on each acquisition from
    // the head; with a Redisson waiter in line, polylock does the same.
    let (_, lowered) = one_handoff("mixed-queue", 3, true).await;
    assert_eq!(lowered, 300_000.0);
}
