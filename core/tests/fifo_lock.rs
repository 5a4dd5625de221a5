//! The FIFO lock (polylock's own layout) against real redis-server processes.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use polylock::{AcquireOptions, Client};
use polylock_testkit::{Fault, FaultProxy};
use redis::AsyncCommands;

const LONG_LEASE: Duration = Duration::from_secs(60);

async fn fifo_client(server: &RedisServer, queue_timeout: Duration) -> Client {
    Client::builder(server.url())
        .fair_queue_timeout(queue_timeout)
        .connect()
        .await
        .unwrap()
}

async fn line(con: &mut redis::aio::MultiplexedConnection, name: &str) -> Vec<String> {
    con.lrange(polylock::keys::fifo_line(name), 0, -1)
        .await
        .unwrap()
}

async fn line_len(server: &RedisServer, name: &str) -> usize {
    line(&mut raw(server).await, name).await.len()
}

/// Waits until the line of `name` has `count` waiters, and their second looks (after
/// subscribing) are answered.
async fn in_line(server: &RedisServer, name: &str, count: usize) {
    assert!(
        eventually(Duration::from_secs(5), || async {
            line_len(server, name).await == count
        })
        .await,
        "{count} in line"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// A FIFO lock on `name` that a client of its own holds with the long lease.
async fn held_long(server: &RedisServer, name: &str) -> polylock::Lock {
    let lock = fifo_client(server, Duration::from_secs(60))
        .await
        .fifo_lock(name)
        .unwrap();
    assert!(lock
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    lock
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_arrival_order() {
    let server = RedisServer::start();
    let client = fifo_client(&server, Duration::from_secs(60)).await;
    let mut con = raw(&server).await;
    let holder = client.fifo_lock("order").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for index in 0..10 {
        let lock = client.fifo_lock("order").unwrap();
        let order = order.clone();
        waiters.push(tokio::spawn(async move {
            assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
            order.lock().unwrap().push(index);
            tokio::time::sleep(Duration::from_millis(10)).await;
            lock.release().await.unwrap();
        }));
        // The next waiter arrives only once this one is in line.
        in_line(&server, "order", index + 1).await;
    }
    holder.release().await.unwrap();
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(20), waiter)
            .await
            .expect("every waiter is served long before the 60 s lease")
            .unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..10).collect::<Vec<_>>());
    assert!(line(&mut con, "order").await.is_empty());
    assert!(!exists(&mut con, "order").await);
    let records: Vec<String> = con.keys("polylock_fifo_waiter:*").await.unwrap();
    assert!(records.is_empty(), "{records:?}");
}

#[tokio::test]
async fn the_line_uses_polylocks_layout() {
    let server = RedisServer::start();
    let queue_timeout = Duration::from_secs(20);
    let client = fifo_client(&server, queue_timeout).await;
    let mut con = raw(&server).await;
    let holder = client.fifo_lock("layout").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    // The lock is the reentrant lock's hash: owner -> levels.
    assert_eq!(hget(&mut con, "layout", holder.owner()).await, Some(1));
    let waiter = client.fifo_lock("layout").unwrap();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.acquire(AcquireOptions::new()).await }
    });
    in_line(&server, "layout", 1).await;
    assert_eq!(
        line(&mut con, "layout").await,
        vec![waiter.owner().to_owned()]
    );
    // The waiter's record: its grant entry, alive for one queue timeout from its last look.
    let record = polylock::keys::fifo_waiter_record("layout", waiter.owner());
    let entry: String = con.get(&record).await.unwrap();
    assert!(
        entry.split(':').count() == 3,
        "a grant entry <request>:<look>:<lease>: {entry}"
    );
    let ttl: i64 = con.pttl(&record).await.unwrap();
    assert!(ttl > 0 && ttl <= queue_timeout.as_millis() as i64, "{ttl}");
    // Nothing of Redisson's fair layout.
    assert!(!exists(&mut con, "redisson_lock_queue:{layout}").await);
    assert!(!exists(&mut con, "redisson_lock_timeout:{layout}").await);
    holder.release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap());
    assert!(!exists(&mut con, &record).await);
    assert!(line(&mut con, "layout").await.is_empty());
    waiter.release().await.unwrap();
    assert!(!exists(&mut con, "layout").await);
}

#[tokio::test]
async fn it_excludes_a_plain_lock_of_the_same_name() {
    let server = RedisServer::start();
    let client = fifo_client(&server, Duration::from_secs(60)).await;
    let fifo = client.fifo_lock("shared-name").unwrap();
    let plain = client.lock("shared-name").unwrap();
    assert!(fifo
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    assert!(!plain
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    fifo.release().await.unwrap();
    assert!(plain
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    assert!(!fifo
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
}

#[tokio::test]
async fn a_waiter_that_times_out_or_is_cancelled_leaves_the_line_at_once() {
    let server = RedisServer::start();
    // A long queue timeout: a waiter left behind would block the next for a minute.
    let client = fifo_client(&server, Duration::from_secs(60)).await;
    let mut con = raw(&server).await;
    let holder = client.fifo_lock("skip").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let timing_out = client.fifo_lock("skip").unwrap();
    let timing_out_owner = timing_out.owner().to_owned();
    let bounded = tokio::spawn(async move {
        timing_out
            .acquire(AcquireOptions::new().wait(Duration::from_millis(400)))
            .await
    });
    in_line(&server, "skip", 1).await;
    let cancelled = client.fifo_lock("skip").unwrap();
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
            line_len(&server, "skip").await == 2
        })
        .await
    );
    let patient = client.fifo_lock("skip").unwrap();
    let patient_owner = patient.owner().to_owned();
    let patient_wait = tokio::spawn(async move {
        patient
            .acquire(AcquireOptions::new())
            .await
            .map(|got| (got, patient))
    });
    assert!(
        eventually(Duration::from_secs(5), || async {
            line_len(&server, "skip").await == 3
        })
        .await
    );
    assert!(!bounded.await.unwrap().unwrap());
    let cancelled = cancelled_wait.await.unwrap();
    assert!(!cancelled.is_held());
    assert!(
        eventually(Duration::from_secs(2), || async {
            line(&mut raw(&server).await, "skip").await == vec![patient_owner.clone()]
        })
        .await
    );
    let record = polylock::keys::fifo_waiter_record("skip", &timing_out_owner);
    assert!(!exists(&mut con, &record).await, "its record went with it");

    holder.release().await.unwrap();
    let (got, _patient) = tokio::time::timeout(Duration::from_secs(10), patient_wait)
        .await
        .expect("served long before the lease or a queue timeout")
        .unwrap()
        .unwrap();
    assert!(got);
    assert!(line(&mut con, "skip").await.is_empty());
}

#[tokio::test]
async fn a_killed_waiter_is_skipped_once_its_record_lapses() {
    let server = RedisServer::start();
    let queue_timeout = Duration::from_millis(1500);
    let client = fifo_client(&server, queue_timeout).await;
    let holder = client.fifo_lock("dead").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let mut peer = Peer::start(&server, queue_timeout.as_millis() as u64);
    peer.send("fifo_acquire dead - -");
    in_line(&server, "dead", 1).await;
    let waiter = client.fifo_lock("dead").unwrap();
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.acquire(AcquireOptions::new()).await })
    };
    in_line(&server, "dead", 2).await;
    peer.kill();
    let killed = Instant::now();
    holder.release().await.unwrap();
    assert!(tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("served long before the 60 s lease")
        .unwrap()
        .unwrap());
    // The dead head keeps its place for at most one queue timeout after its last look (and
    // the waiter behind looks every half of it).
    assert!(
        killed.elapsed() < queue_timeout * 2 + Duration::from_secs(1),
        "{:?}",
        killed.elapsed()
    );
    assert!(waiter.is_held());
    let mut con = raw(&server).await;
    assert!(line(&mut con, "dead").await.is_empty());
}

#[tokio::test]
async fn a_live_waiter_keeps_its_place_through_a_long_hold() {
    let server = RedisServer::start();
    // The holder holds for several queue timeouts; the waiters must not fall out of line.
    let queue_timeout = Duration::from_millis(300);
    let client = fifo_client(&server, queue_timeout).await;
    let holder = client.fifo_lock("long").unwrap();
    assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
    let first = client.fifo_lock("long").unwrap();
    let second = client.fifo_lock("long").unwrap();
    let first_wait = {
        let first = first.clone();
        tokio::spawn(async move { first.acquire(AcquireOptions::new()).await })
    };
    in_line(&server, "long", 1).await;
    let second_wait = {
        let second = second.clone();
        tokio::spawn(async move { second.acquire(AcquireOptions::new()).await })
    };
    tokio::time::sleep(queue_timeout * 5).await;
    let mut con = raw(&server).await;
    assert_eq!(
        line(&mut con, "long").await,
        vec![first.owner().to_owned(), second.owner().to_owned()]
    );
    holder.release().await.unwrap();
    assert!(first_wait.await.unwrap().unwrap());
    assert!(!second.is_held());
    first.release().await.unwrap();
    assert!(second_wait.await.unwrap().unwrap());
}

#[tokio::test]
async fn fifo_reentrancy_counts_in_the_hash_and_a_single_try_takes_no_place() {
    let server = RedisServer::start();
    let client = fifo_client(&server, Duration::from_secs(10)).await;
    let mut con = raw(&server).await;
    let lock = client.fifo_lock("fifo-reentrant").unwrap();
    for _ in 0..3 {
        assert!(lock
            .acquire(AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap());
    }
    assert_eq!(
        hget(&mut con, "fifo-reentrant", lock.owner()).await,
        Some(3)
    );
    assert_eq!(lock.hold_count(), 3);
    let other = client.fifo_lock("fifo-reentrant").unwrap();
    assert!(!other
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    assert!(line(&mut con, "fifo-reentrant").await.is_empty());
    let record = polylock::keys::fifo_waiter_record("fifo-reentrant", other.owner());
    assert!(!exists(&mut con, &record).await);
    for _ in 0..3 {
        lock.release().await.unwrap();
    }
    assert!(!exists(&mut con, "fifo-reentrant").await);
    assert_eq!(
        lock.release().await.unwrap_err().kind(),
        polylock::ErrorKind::NotHeld
    );
}

#[tokio::test]
async fn fifo_lock_processes_lose_no_increment() {
    let server = RedisServer::start();
    let mut peers: Vec<Peer> = (0..4).map(|_| Peer::start(&server, 10_000)).collect();
    for peer in &mut peers {
        peer.send("fifo_increment shared counter 50");
    }
    for peer in &mut peers {
        assert_eq!(peer.reply(), "ok");
    }
    let mut con = raw(&server).await;
    let counter: i64 = con.get("counter").await.unwrap();
    assert_eq!(counter, 200);
    assert!(!exists(&mut con, "shared").await);
    assert!(line(&mut con, "shared").await.is_empty());
    for mut peer in peers {
        peer.send("quit");
        let _ = peer.child.wait();
    }
}

#[tokio::test]
async fn fifo_force_unlock_passes_the_lock_to_the_head() {
    let server = RedisServer::start();
    let client = fifo_client(&server, Duration::from_secs(60)).await;
    let holder = client.fifo_lock("fifo-force").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let waiter = client.fifo_lock("fifo-force").unwrap();
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.acquire(AcquireOptions::new()).await })
    };
    in_line(&server, "fifo-force", 1).await;
    assert!(client
        .fifo_lock("fifo-force")
        .unwrap()
        .force_unlock()
        .await
        .unwrap());
    assert!(tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("served long before the 60 s lease")
        .unwrap()
        .unwrap());
    assert!(waiter.is_held());
}

#[tokio::test]
async fn a_head_told_of_an_expired_lock_takes_it_and_the_next_waits_its_turn() {
    // A holder dies: nobody releases, the lock expires; the head (which looks when the lease
    // ends) takes it, not the waiter behind, nor a newcomer.
    let server = RedisServer::start();
    let client = fifo_client(&server, Duration::from_secs(60)).await;
    let holder = client.fifo_lock("expired").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(Duration::from_millis(700)))
        .await
        .unwrap());
    let first = client.fifo_lock("expired").unwrap();
    let first_wait = tokio::spawn({
        let first = first.clone();
        async move { first.acquire(AcquireOptions::new().lease(LONG_LEASE)).await }
    });
    in_line(&server, "expired", 1).await;
    let second = client.fifo_lock("expired").unwrap();
    let second_wait = tokio::spawn({
        let second = second.clone();
        async move {
            second
                .acquire(AcquireOptions::new().lease(LONG_LEASE))
                .await
        }
    });
    in_line(&server, "expired", 2).await;
    assert!(tokio::time::timeout(Duration::from_secs(10), first_wait)
        .await
        .expect("the head takes the expired lock long before a queue timeout")
        .unwrap()
        .unwrap());
    let newcomer = client.fifo_lock("expired").unwrap();
    assert!(!newcomer
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    assert!(!second.is_held());
    first.release().await.unwrap();
    assert!(tokio::time::timeout(Duration::from_secs(10), second_wait)
        .await
        .unwrap()
        .unwrap()
        .unwrap());
}

/// A line of `count` waiters acquiring with `options`, each in a process (client) of its own,
/// behind a holder and served from its release on. Replies the order they were served in and
/// the script calls it took, the first release's included.
async fn serve_line(name: &str, count: usize, options: AcquireOptions) -> (Vec<usize>, i64) {
    let server = RedisServer::start();
    let holder = held_long(&server, name).await;
    // The server learns the release script first (its first call is a NOSCRIPT and an EVAL).
    let warm = fifo_client(&server, Duration::from_secs(60))
        .await
        .fifo_lock("warm")
        .unwrap();
    assert!(warm.acquire(AcquireOptions::new()).await.unwrap());
    warm.release().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for index in 0..count {
        let lock = fifo_client(&server, Duration::from_secs(60))
            .await
            .fifo_lock(name)
            .unwrap();
        let order = order.clone();
        waiters.push(tokio::spawn(async move {
            assert!(lock.acquire(options).await.unwrap());
            order.lock().unwrap().push(index);
            lock.release().await.unwrap();
        }));
        in_line(&server, name, index + 1).await;
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
    assert!(line(&mut con, name).await.is_empty());
    let order = order.lock().unwrap().clone();
    (order, scripts)
}

#[tokio::test]
async fn a_release_tells_the_head_of_fixed_lease_waiters_which_takes_the_lock_itself() {
    let count = 6;
    let (order, scripts) = serve_line("told", count, AcquireOptions::new().lease(LONG_LEASE)).await;
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
    let (order, scripts) = serve_line("granted", count, AcquireOptions::new()).await;
    assert_eq!(order, (0..count).collect::<Vec<_>>());
    // Only the releases (a holder slow enough for its first renewal may add one or two).
    assert!(
        scripts <= 1 + count as i64 + 2,
        "{scripts} script calls for {count} handoffs"
    );
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
    command_calls(con, |name| {
        name != "info" && name != "lrange" && !name.starts_with("config")
    })
    .await
}

/// Server calls (INFO commandstats, each `redis.call` inside a script included; the test's
/// own LRANGE left out) of one critical section's protocol with `queued` waiters in line: the
/// look with which the last waiter takes its place, then the holder's release and the head's
/// acquisition.
async fn one_handoff(name: &str, queued: usize) -> i64 {
    let server = RedisServer::start();
    let client = fifo_client(&server, Duration::from_secs(60)).await;
    let mut con = raw(&server).await;
    let holder = client.fifo_lock(name).unwrap();
    // The last waiter comes back for the lock: it was served once, so it keeps its channel
    // subscribed (and the server knows every script).
    let last = client.fifo_lock(name).unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let served = tokio::spawn({
        let last = last.clone();
        async move { last.acquire(AcquireOptions::new()).await }
    });
    in_line(&server, name, 1).await;
    holder.release().await.unwrap();
    assert!(served.await.unwrap().unwrap());
    last.release().await.unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let (acquired, mut first) = tokio::sync::mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for _ in 0..queued - 1 {
        let lock = client.fifo_lock(name).unwrap();
        let acquired = acquired.clone();
        waiters.push(tokio::spawn(async move {
            assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
            let _ = acquired.send(());
            // Hold until the test ends.
            std::future::pending::<()>().await;
        }));
    }
    in_line(&server, name, queued - 1).await;
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
    let last_waits = tokio::spawn({
        let last = last.clone();
        async move { last.acquire(AcquireOptions::new()).await }
    });
    in_line(&server, name, queued).await;
    holder.release().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), first.recv())
        .await
        .expect("the head acquires on the release");
    let calls = server_calls(&mut con).await;
    for waiter in waiters {
        waiter.abort();
    }
    last_waits.abort();
    calls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_critical_section_costs_at_most_20_server_calls_whatever_the_line_length() {
    let short = one_handoff("short-line", 2).await;
    let long = one_handoff("long-line", 24).await;
    assert_eq!(
        short, long,
        "server calls of one critical section: {short} with 2 in line, {long} with 24"
    );
    assert!(short <= 20, "{short} server calls per critical section");
}

#[tokio::test]
async fn a_fifo_waiter_that_gives_up_as_it_is_granted_the_lock_passes_it_to_the_next() {
    let server = RedisServer::start();
    let holder = held_long(&server, "given-back").await;
    // The server learns the cancel script first (a first call through the slow proxy below is
    // a NOSCRIPT and an EVAL: two round trips).
    let warm = fifo_client(&server, Duration::from_secs(60))
        .await
        .fifo_lock("given-back")
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
        .fifo_lock("given-back")
        .unwrap();
    let first_waiting = tokio::spawn({
        let first = first.clone();
        async move { first.acquire(AcquireOptions::new()).await }
    });
    in_line(&server, "given-back", 1).await;
    // The second waits up to 30 s (half its queue timeout) unless the lock is passed to it.
    let second = fifo_client(&server, Duration::from_secs(60))
        .await
        .fifo_lock("given-back")
        .unwrap();
    let second_waiting = tokio::spawn({
        let second = second.clone();
        async move { second.acquire(AcquireOptions::new()).await }
    });
    in_line(&server, "given-back", 2).await;
    // The release grants the lock to the head; the message reaches it late, after its caller
    // gave up, whose cancel reaches Redis while the grant still holds.
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
    assert!(line(&mut con, "given-back").await.is_empty());
}

#[tokio::test]
async fn a_head_not_listening_yet_is_not_granted_the_lock_and_keeps_its_place() {
    let server = RedisServer::start();
    let holder = held_long(&server, "deaf").await;
    // A polylock head that registered for grants but has not subscribed yet (its next look,
    // once subscribed, would take the free lock).
    let mut con = raw(&server).await;
    let deaf = "6b1f1f5e-0000-4000-8000-000000000002:1";
    let _: () = con
        .rpush(polylock::keys::fifo_line("deaf"), deaf)
        .await
        .unwrap();
    let _: () = con
        .set(
            polylock::keys::fifo_waiter_record("deaf", deaf),
            "0123:1:30000",
        )
        .await
        .unwrap();
    let behind = fifo_client(&server, Duration::from_secs(60))
        .await
        .fifo_lock("deaf")
        .unwrap();
    let waiting = tokio::spawn({
        let behind = behind.clone();
        async move {
            behind
                .acquire(AcquireOptions::new().wait(Duration::from_secs(2)))
                .await
        }
    });
    in_line(&server, "deaf", 2).await;
    holder.release().await.unwrap();
    // Nobody received the grant: it is not made, and the head keeps its place; the waiter
    // behind it is not served out of turn.
    assert!(!waiting.await.unwrap().unwrap());
    assert_eq!(line(&mut con, "deaf").await, vec![deaf.to_owned()]);
    assert!(!exists(&mut con, "deaf").await);
}

#[tokio::test]
async fn a_granted_fifo_hold_lives_its_whole_lease_through_a_stall_of_its_holder() {
    let server = RedisServer::start();
    let holder = held_long(&server, "stalled-fifo").await;
    // The server learns the acquire script first (a first call through the proxy would be a
    // NOSCRIPT and an EVAL).
    let warm = fifo_client(&server, Duration::from_secs(60))
        .await
        .fifo_lock("warm-fifo")
        .unwrap();
    assert!(warm.acquire(AcquireOptions::new()).await.unwrap());
    // The head reaches Redis through a proxy that will swallow its renewals.
    let proxy = FaultProxy::start(server.port());
    let waiter = Client::builder(proxy.url())
        .fair_queue_timeout(Duration::from_secs(60))
        .connect()
        .await
        .unwrap()
        .fifo_lock("stalled-fifo")
        .unwrap();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.acquire(AcquireOptions::new()).await }
    });
    in_line(&server, "stalled-fifo", 1).await;
    holder.release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap(), "granted");
    let competitor = fifo_client(&server, Duration::from_secs(60))
        .await
        .fifo_lock("stalled-fifo")
        .unwrap();
    granted_holder_survives_a_stall(&proxy, &waiter, &competitor).await;
}
