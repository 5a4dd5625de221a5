//! The fair lock (Redisson RFairLock layout) against real redis-server processes.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use polylock::{AcquireOptions, Client};
use polylock_testkit::{Fault, FaultProxy};
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
    // The waiter subscribes right after the look that queued it, so the queue can show it
    // a moment before the server counts its subscription.
    let own_channel = format!("redisson_lock__channel:{{layout}}:{}", waiter.owner());
    assert!(
        eventually(Duration::from_secs(5), || async {
            let numsub: (String, i64) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&own_channel)
                .query_async(&mut raw(&server).await)
                .await
                .unwrap();
            numsub.1 == 1
        })
        .await,
        "the waiter listens on its own channel"
    );
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

/// A fair lock on `name` that a client of its own holds with the long lease.
async fn fair_held_long(server: &RedisServer, name: &str) -> polylock::Lock {
    let lock = fair_client(server, Duration::from_secs(60))
        .await
        .fair_lock(name)
        .unwrap();
    assert!(lock
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    lock
}

/// Waits until the fair queue of `name` has `count` waiters, and their second looks (after
/// subscribing) are answered.
async fn queued(server: &RedisServer, name: &str, count: usize) {
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue(&mut raw(server).await, name).await.len() == count
        })
        .await,
        "{count} queued"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// A queue of `count` waiters acquiring with `options`, each in a process (client) of its own,
/// behind a holder and served from its release on. Replies the order they were served in and
/// the script calls it took, the first release's included.
async fn serve_fair_line(name: &str, count: usize, options: AcquireOptions) -> (Vec<usize>, i64) {
    let server = RedisServer::start();
    let holder = fair_held_long(&server, name).await;
    // The server learns the release script first (its first call is a NOSCRIPT and an EVAL).
    let warm = fair_client(&server, Duration::from_secs(60))
        .await
        .fair_lock("warm")
        .unwrap();
    assert!(warm.acquire(AcquireOptions::new()).await.unwrap());
    warm.release().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for index in 0..count {
        let lock = fair_client(&server, Duration::from_secs(60))
            .await
            .fair_lock(name)
            .unwrap();
        let order = order.clone();
        waiters.push(tokio::spawn(async move {
            assert!(lock.acquire(options).await.unwrap());
            order.lock().unwrap().push(index);
            lock.release().await.unwrap();
        }));
        queued(&server, name, index + 1).await;
    }
    let mut con = raw(&server).await;
    let before = evalsha_calls(&mut con).await;
    holder.release().await.unwrap();
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(20), waiter)
            .await
            .expect("every waiter gets the lock long before the 60 s lease")
            .unwrap();
    }
    let scripts = evalsha_calls(&mut con).await - before;
    assert!(!exists(&mut con, name).await);
    assert!(!exists(&mut con, &format!("polylock_fair_grants:{{{name}}}")).await);
    let order = order.lock().unwrap().clone();
    (order, scripts)
}

#[tokio::test]
async fn a_release_tells_the_head_of_fixed_lease_waiters_which_takes_the_lock_itself() {
    let count = 6;
    let (order, scripts) =
        serve_fair_line("told", count, AcquireOptions::new().lease(LONG_LEASE)).await;
    assert_eq!(order, (0..count).collect::<Vec<_>>());
    // Each waiter told in turn: its acquire and its release.
    assert!(
        scripts <= 1 + 2 * count as i64,
        "{scripts} script calls for {count} handoffs"
    );
}

#[tokio::test]
async fn a_release_grants_the_lock_to_the_head_held_by_the_watchdog_which_sends_no_acquire() {
    let count = 6;
    let (order, scripts) = serve_fair_line("granted", count, AcquireOptions::new()).await;
    assert_eq!(order, (0..count).collect::<Vec<_>>());
    // Only the releases; a waiter told instead of granted sends its own acquire too
    // (1 + 2 * count). A holder slow enough for its first renewal (a third of the 1 s grant)
    // may add one.
    assert!(
        scripts <= 1 + count as i64 + 2,
        "{scripts} script calls for {count} handoffs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fair_holders_that_come_back_for_the_lock_take_two_scripts_per_handoff() {
    let server = RedisServer::start();
    let (processes, rounds) = (4, 50);
    let mut holders = Vec::new();
    for _ in 0..processes {
        let client = fair_client(&server, Duration::from_secs(60)).await;
        holders.push(client.fair_lock("again").unwrap());
    }
    let scripts = take_turns(&server, holders, rounds).await;
    let handoffs = (processes * rounds) as i64;
    // Each acquisition: one look that queues (the head is then granted the lock) and one
    // release. Slack: the first scripts loaded (NOSCRIPT, EVAL), and a renewal when a hold
    // outlives a third of its grant.
    assert!(
        scripts <= 2 * handoffs + 10,
        "{scripts} script calls for {handoffs} handoffs"
    );
}

#[tokio::test]
async fn a_granted_fair_hold_is_extended_to_the_watchdog_lease() {
    let server = RedisServer::start();
    let holder = fair_held_long(&server, "extended").await;
    let waiter = fair_client(&server, Duration::from_secs(60))
        .await
        .fair_lock("extended")
        .unwrap();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.acquire(AcquireOptions::new()).await }
    });
    queued(&server, "extended", 1).await;
    let mut con = raw(&server).await;
    assert!(exists(&mut con, "polylock_fair_grants:{extended}").await);
    holder.release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap());
    assert!(waiter.is_held());
    assert!(queue(&mut con, "extended").await.is_empty());
    // Granted for a second; the watchdog's first renewal makes it the 30 s watchdog lease.
    assert!(
        eventually(Duration::from_secs(5), || {
            let mut con = con.clone();
            async move { con.pttl::<_, i64>("extended").await.unwrap() > 10_000 }
        })
        .await,
        "the grant was not extended"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(waiter.is_held());
    waiter.release().await.unwrap();
    assert!(!exists(&mut con, "extended").await);
}

#[tokio::test]
async fn a_fair_waiter_that_gives_up_as_it_is_granted_the_lock_passes_it_to_the_next() {
    let server = RedisServer::start();
    let holder = fair_held_long(&server, "given-back").await;
    // The server learns the cancel script first (a first call through the slow proxy below is
    // a NOSCRIPT and an EVAL: two round trips).
    let warm = fair_client(&server, Duration::from_secs(60))
        .await
        .fair_lock("given-back")
        .unwrap();
    let briefly = AcquireOptions::new().wait(Duration::from_millis(50));
    assert!(!warm.acquire(briefly).await.unwrap());
    // The head reaches Redis through a proxy, which will hold back the grant message.
    let proxy = FaultProxy::start(server.port());
    let first = Client::builder(proxy.url())
        .fair_queue_timeout(Duration::from_secs(60))
        .connect()
        .await
        .unwrap()
        .fair_lock("given-back")
        .unwrap();
    let first_waiting = tokio::spawn({
        let first = first.clone();
        async move { first.acquire(AcquireOptions::new()).await }
    });
    queued(&server, "given-back", 1).await;
    // The second waits up to 30 s (half its queue timeout) unless the lock is passed to it.
    let second = fair_client(&server, Duration::from_secs(60))
        .await
        .fair_lock("given-back")
        .unwrap();
    let second_waiting = tokio::spawn({
        let second = second.clone();
        async move { second.acquire(AcquireOptions::new()).await }
    });
    queued(&server, "given-back", 2).await;
    // The release grants the lock to the head; the message reaches it late, after its caller
    // gave up, whose cancel reaches Redis while the 1 s grant still holds.
    proxy.set(Fault::Delay(Duration::from_millis(300)));
    holder.release().await.unwrap();
    first_waiting.abort();
    let acquired = tokio::time::timeout(Duration::from_secs(10), second_waiting)
        .await
        .expect("the waiter that gave up passed the lock on, long before a 30 s wait")
        .unwrap()
        .unwrap();
    assert!(acquired);
    assert!(!first.is_held());
    second.release().await.unwrap();
    let mut con = raw(&server).await;
    assert!(!exists(&mut con, "given-back").await);
    assert!(queue(&mut con, "given-back").await.is_empty());
}

#[tokio::test]
async fn a_head_not_listening_yet_is_not_granted_the_lock_and_keeps_its_place() {
    let server = RedisServer::start();
    let holder = fair_held_long(&server, "deaf").await;
    // A polylock head that registered for grants but has not subscribed yet (its second look,
    // once subscribed, would take the free lock).
    let mut con = raw(&server).await;
    let (deaf, far) = (
        "6b1f1f5e-0000-4000-8000-000000000002:1",
        4_000_000_000_000.0,
    );
    let _: () = con.rpush("redisson_lock_queue:{deaf}", deaf).await.unwrap();
    let _: () = con
        .zadd("redisson_lock_timeout:{deaf}", deaf, far)
        .await
        .unwrap();
    let _: () = con
        .zadd("redisson_lock_timeout:{deaf}:polylock_seen", deaf, far)
        .await
        .unwrap();
    let _: () = con
        .hset("polylock_fair_grants:{deaf}", deaf, "0123")
        .await
        .unwrap();
    let behind = fair_client(&server, Duration::from_secs(60))
        .await
        .fair_lock("deaf")
        .unwrap();
    let waiting = tokio::spawn({
        let behind = behind.clone();
        async move {
            behind
                .acquire(AcquireOptions::new().wait(Duration::from_secs(2)))
                .await
        }
    });
    queued(&server, "deaf", 2).await;
    holder.release().await.unwrap();
    // Nobody received the grant: it is taken back, and the head keeps its place; the waiter
    // behind it is not served out of turn.
    assert!(!waiting.await.unwrap().unwrap());
    assert_eq!(queue(&mut con, "deaf").await, vec![deaf.to_owned()]);
    assert!(!exists(&mut con, "deaf").await);
    assert!(!exists(&mut con, "polylock_acquire_latch:{deaf}:0123").await);
}

#[tokio::test]
async fn a_granted_fair_hold_lives_its_whole_lease_through_a_stall_of_its_holder() {
    let server = RedisServer::start();
    let holder = fair_held_long(&server, "stalled-fair").await;
    // The server learns the acquire script first (a first call through the proxy would be a
    // NOSCRIPT and an EVAL).
    let warm = fair_client(&server, Duration::from_secs(60))
        .await
        .fair_lock("warm-fair")
        .unwrap();
    assert!(warm.acquire(AcquireOptions::new()).await.unwrap());
    // The head reaches Redis through a proxy that will swallow its renewals.
    let proxy = FaultProxy::start(server.port());
    let waiter = Client::builder(proxy.url())
        .fair_queue_timeout(Duration::from_secs(60))
        .connect()
        .await
        .unwrap()
        .fair_lock("stalled-fair")
        .unwrap();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.acquire(AcquireOptions::new()).await }
    });
    queued(&server, "stalled-fair", 1).await;
    holder.release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap(), "granted");
    let competitor = fair_client(&server, Duration::from_secs(60))
        .await
        .fair_lock("stalled-fair")
        .unwrap();
    granted_holder_survives_a_stall(&proxy, &waiter, &competitor).await;
}
