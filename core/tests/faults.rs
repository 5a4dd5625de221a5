//! The promises that must hold under faults, each injected for real: `CLIENT PAUSE`,
//! `CLIENT KILL`, a killed and restarted server, a client closed under a waiter, a skewed
//! clock, the fault proxy (drop, cut, refuse). Each test fails on the bug it guards.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use polylock::{AcquireOptions, Client, ErrorKind};
use polylock_testkit::{Fault, FaultProxy, ServerBuild};

const LONG_LEASE: Duration = Duration::from_secs(60);

/// Runs an acquire and a release, so the server caches their scripts as in any running
/// service (a first EVALSHA that meets a fault would only get NOSCRIPT, and guard nothing).
async fn cache_scripts(client: &Client) {
    let warm = client.lock("warm-up").unwrap();
    assert!(warm.acquire(AcquireOptions::new()).await.unwrap());
    warm.release().await.unwrap();
}

/// Connected clients of `kind` (`normal`, `pubsub`) as the server lists them.
fn clients_of(server: &RedisServer, kind: &str) -> usize {
    // The connection asking is a normal client itself.
    connection_ids(server, Some(kind)).len() - usize::from(kind == "normal")
}

/// The ids of the server's connections of a type (`CLIENT LIST TYPE`), or of every type.
fn connection_ids(server: &RedisServer, kind: Option<&str>) -> Vec<String> {
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_connection().unwrap();
    let mut list = redis::cmd("CLIENT");
    list.arg("LIST");
    if let Some(kind) = kind {
        list.arg("TYPE").arg(kind);
    }
    let list: String = list.query(&mut con).unwrap();
    list.lines()
        .filter_map(|line| line.split(' ').find_map(|field| field.strip_prefix("id=")))
        .map(str::to_owned)
        .collect()
}

async fn wait_until(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    eventually(limit, || std::future::ready(check())).await
}

// ---- 1. a release's latch outlives every retry: see `proxy` below ----

// ---- 2. close() with a waiter blocked in acquire ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_pending_waits_and_reports_held_locks_lost() {
    let server = RedisServer::start();
    let other = client(&server).await;
    let blocker = other.lock("close-wait").unwrap();
    assert!(blocker.acquire(AcquireOptions::new()).await.unwrap());

    let closing = client(&server).await;
    let held = closing.lock("close-held").unwrap();
    assert!(held.acquire(AcquireOptions::new()).await.unwrap());
    let told = Arc::new(AtomicUsize::new(0));
    held.on_lost({
        let told = told.clone();
        move |err| {
            assert_eq!(err.kind(), ErrorKind::LockLost);
            told.fetch_add(1, Ordering::SeqCst);
        }
    });
    let waiter = closing.lock("close-wait").unwrap();
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            waiter
                .acquire(AcquireOptions::new().wait(Duration::from_secs(30)))
                .await
        })
    };
    assert!(
        wait_until(Duration::from_secs(5), || closing.subscribed_channels()
            == 2)
        .await
    );
    // Its pub/sub connection, the only one subscribed now (the other client waits for
    // nothing; it may subscribe later, when the released lock is kept for the closed waiter).
    let closing_pubsub = connection_ids(&server, Some("pubsub"));
    assert_eq!(closing_pubsub.len(), 1, "{closing_pubsub:?}");

    let closed_at = Instant::now();
    assert_eq!(closing.close(), vec!["close-held".to_owned()]);
    let err = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the pending wait ends at once")
        .unwrap()
        .unwrap_err();
    // Long before its 30 s wait would have ended (a loaded machine may take a while).
    assert!(closed_at.elapsed() < Duration::from_secs(10));
    assert_eq!(err.kind(), ErrorKind::Connection);
    assert!(err.to_string().contains("client is closed"), "{err}");

    // Its held lock is reported lost at once: nothing renews or releases it any more.
    assert!(!held.is_held());
    assert!(held.is_lost());
    assert!(wait_until(Duration::from_secs(2), || told.load(Ordering::SeqCst) == 1).await);
    assert_eq!(closing.watched_locks(), 0);
    assert_eq!(
        held.release().await.unwrap_err().kind(),
        ErrorKind::LockLost
    );

    // The waiter never acquires later, and the client's pub/sub connection is gone.
    blocker.release().await.unwrap();
    let taker = other.lock("close-wait").unwrap();
    assert!(taker
        .acquire(AcquireOptions::new().wait(Duration::from_secs(5)))
        .await
        .unwrap());
    assert!(!waiter.is_held());
    // Closed as the client shut down; a loaded machine may take a while to run that task.
    assert!(
        wait_until(Duration::from_secs(20), || !connection_ids(&server, None)
            .contains(&closing_pubsub[0]))
        .await,
        "the closed client's pub/sub connection {} is still open",
        closing_pubsub[0]
    );
}

// ---- 3. no connection or task outlives a closed and dropped client ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_and_dropped_clients_leave_no_connection_behind() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let blocker = holder.lock("leak").unwrap();
    // Acquired from polylock's own runtime, which sends on the client's own connection: from
    // this test's runtime, the holder would open a connection for it (`per_runtime.rs`) at
    // some moment after its first call, maybe after `before` is counted.
    let acquiring = {
        let blocker = blocker.clone();
        polylock::runtime().spawn(async move { blocker.acquire(AcquireOptions::new()).await })
    };
    assert!(acquiring.await.unwrap().unwrap());
    let before = clients_of(&server, "normal") + clients_of(&server, "pubsub");
    for _ in 0..5 {
        let client = client(&server).await;
        // A wait subscribes: the pub/sub connection is in use.
        let lock = client.lock("leak").unwrap();
        assert!(!lock
            .acquire(AcquireOptions::new().wait(Duration::from_millis(50)))
            .await
            .unwrap());
        client.close();
        drop(lock);
        drop(client);
    }
    assert!(
        wait_until(Duration::from_secs(5), || {
            clients_of(&server, "normal") + clients_of(&server, "pubsub") == before
        })
        .await,
        "connections left behind: {} normal, {} pub/sub",
        clients_of(&server, "normal"),
        clients_of(&server, "pubsub")
    );
}

// ---- 4. reentrant acquisitions with different leases ----

#[tokio::test]
async fn a_shorter_reentrant_lease_is_the_lease_of_the_hold() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("mixed-short").unwrap();
    assert!(lock
        .acquire(AcquireOptions::new().lease(Duration::from_secs(5)))
        .await
        .unwrap());
    assert!(lock
        .acquire(AcquireOptions::new().lease(Duration::from_millis(300)))
        .await
        .unwrap());
    // Redis now expires the key in 300 ms, and the handle knows it.
    let mut lost = lock.lost_receiver();
    tokio::time::timeout(Duration::from_secs(2), lost.wait_for(|lost| *lost))
        .await
        .expect("the handle learns its hold ended with the 300 ms lease")
        .unwrap();
    assert!(!lock.is_held());
    // Told at the earliest moment the key can expire, counted from when the acquisition was
    // sent: the server expires it a moment later (it ran the script later, and counts whole
    // milliseconds). Well within the 5 s lease the key would otherwise still have.
    let other = client.lock("mixed-short").unwrap();
    assert!(other
        .acquire(AcquireOptions::new().wait(Duration::from_millis(100)))
        .await
        .unwrap());
}

#[tokio::test]
async fn a_watchdog_reentry_renews_a_fixed_hold() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_millis(600)).await;
    let lock = client.lock("mixed-renewed").unwrap();
    assert!(lock
        .acquire(AcquireOptions::new().lease(Duration::from_millis(300)))
        .await
        .unwrap());
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    // Well past both the fixed lease and the watchdog lease: renewed all along.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(lock.is_held(), "lost: {}", lock.is_lost());
    let mut con = raw(&server).await;
    assert_eq!(hget(&mut con, "mixed-renewed", lock.owner()).await, Some(2));
    lock.release().await.unwrap();
    lock.release().await.unwrap();
    assert!(!exists(&mut con, "mixed-renewed").await);
}

// ---- 5. a partial release of a fixed-lease hold resets its expiry ----

#[tokio::test]
async fn a_partial_release_of_a_fixed_hold_moves_its_expiry() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("partial").unwrap();
    let lease = Some(Duration::from_millis(1000));
    assert!(lock
        .acquire(AcquireOptions { wait: None, lease })
        .await
        .unwrap());
    assert!(lock
        .acquire(AcquireOptions { wait: None, lease })
        .await
        .unwrap());
    tokio::time::sleep(Duration::from_millis(600)).await;
    lock.release().await.unwrap(); // Redis resets the TTL to 1 s
    tokio::time::sleep(Duration::from_millis(700)).await; // 1.3 s after the acquisition
    assert!(!lock.is_lost(), "a false lost signal");
    assert!(lock.is_held());
    lock.release().await.unwrap();
    assert!(!exists(&mut raw(&server).await, "partial").await);
}

// ---- 6. an acquire whose reply was lost is resolved ----

#[tokio::test]
async fn a_timed_out_acquire_leaves_no_phantom_lock() {
    let server = RedisServer::start();
    let client = client_with(
        &server.url(),
        Duration::from_secs(30),
        Duration::from_secs(1),
    )
    .await;
    cache_scripts(&client).await;
    for (name, wait) in [
        ("phantom-once", Duration::ZERO),
        ("phantom-bounded", Duration::from_millis(1500)),
    ] {
        let lock = client.lock(name).unwrap();
        pause(&server, 3000);
        let paused_at = Instant::now();
        let err = lock
            .acquire(
                AcquireOptions::new()
                    .wait(wait)
                    .lease(Duration::from_secs(30)),
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
        assert!(!lock.is_held());
        // The server runs the paused acquire when the pause ends, and the client's undo right
        // after it (queued behind it on the same connection). Look once both surely ran.
        tokio::time::sleep(Duration::from_millis(3500).saturating_sub(paused_at.elapsed())).await;
        let mut con = raw(&server).await;
        assert!(!exists(&mut con, name).await, "{name} is held by a phantom");
        let other = client.lock(name).unwrap();
        assert!(other
            .acquire(AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap());
        other.release().await.unwrap();
        assert!(!exists(&mut con, name).await);
    }
}

#[tokio::test]
async fn an_acquire_retried_through_a_pause_holds_one_level() {
    let server = RedisServer::start();
    let client = client_with(
        &server.url(),
        Duration::from_secs(30),
        Duration::from_secs(1),
    )
    .await;
    let lock = client.lock("retried").unwrap();
    pause(&server, 2500);
    // Each attempt times out; all of them run after the pause, as one request.
    assert!(lock
        .acquire(AcquireOptions::new().wait(Duration::from_secs(20)))
        .await
        .unwrap());
    assert_eq!(lock.hold_count(), 1);
    let mut con = raw(&server).await;
    assert_eq!(hget(&mut con, "retried", lock.owner()).await, Some(1));
    lock.release().await.unwrap();
    assert!(!exists(&mut con, "retried").await);
}

// ---- 8. waiters survive a dropped connection and pass wake-ups on ----

type Waiting = Vec<tokio::task::JoinHandle<polylock::Result<bool>>>;

/// Two waiters of one client on `name`, each releasing at once when it gets the lock; returns
/// once they wait.
async fn two_waiters(client: &Client, name: &str) -> Waiting {
    let mut waiting = Vec::new();
    for _ in 0..2 {
        let waiter = client.lock(name).unwrap();
        waiting.push(tokio::spawn(async move {
            let got = waiter
                .acquire(AcquireOptions::new().wait(Duration::from_secs(25)))
                .await;
            if matches!(got, Ok(true)) {
                waiter.release().await.unwrap();
            }
            got
        }));
    }
    // The lock's channel, and each waiter's own.
    assert!(wait_until(Duration::from_secs(5), || client.subscribed_channels() == 3).await);
    waiting
}

/// Every waiter gets the lock: none gives up or sleeps through a free lock.
async fn all_acquire(waiting: Waiting) {
    for waiting in waiting {
        let got = tokio::time::timeout(Duration::from_secs(15), waiting)
            .await
            .expect("a waiter slept though the lock was free")
            .unwrap();
        assert!(got.unwrap(), "a waiter gave up");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_retry_through_killed_connections() {
    let server = RedisServer::start();
    let holder_client = client(&server).await;
    let holder = holder_client.lock("killed").unwrap();
    assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
    let waiters_client = client(&server).await;
    let waiting = two_waiters(&waiters_client, "killed").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Every command connection dies; the pub/sub ones (type pubsub) stay.
    let killed = server.int(&["CLIENT", "KILL", "TYPE", "normal"]);
    assert!(killed >= 2, "{killed}");
    let released = Instant::now();
    holder.release().await.unwrap();
    all_acquire(waiting).await;
    // Long before the 30 s lease the waiters would otherwise have slept through.
    assert!(
        released.elapsed() < Duration::from_secs(8),
        "{:?}",
        released.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_get_the_lock_soon_after_a_redis_restart() {
    let mut server = RedisServer::start();
    let port = server.port();
    let holder_client = client(&server).await;
    let holder = holder_client.lock("restarted").unwrap();
    assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
    let waiters_client = client(&server).await;
    let waiting = two_waiters(&waiters_client, "restarted").await;
    server.kill();
    let _server = RedisServer::start_on(port, &[]).expect("restart on the same port");
    let restarted = Instant::now();
    all_acquire(waiting).await;
    assert!(
        restarted.elapsed() < Duration::from_secs(8),
        "{:?}",
        restarted.elapsed()
    );
}

// ---- 9. after a restart the holder learns of its loss at once ----

#[tokio::test]
async fn a_holder_learns_of_a_restart_long_before_its_next_renewal() {
    let mut server = RedisServer::start();
    let port = server.port();
    // Renewed every 10 s: the next renewal would find the loss only then.
    let client = client_with_watchdog(&server, Duration::from_secs(30)).await;
    let watched = client.lock("restart-watched").unwrap();
    assert!(watched.acquire(AcquireOptions::new()).await.unwrap());
    let fixed = client.lock("restart-fixed").unwrap();
    assert!(fixed
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    server.kill();
    let _server = RedisServer::start_on(port, &[]).expect("restart on the same port");
    let restarted = Instant::now();
    for lock in [&watched, &fixed] {
        let mut lost = lock.lost_receiver();
        tokio::time::timeout(Duration::from_secs(5), lost.wait_for(|lost| *lost))
            .await
            .unwrap_or_else(|_| panic!("{} not reported lost", lock.name()))
            .unwrap();
    }
    assert!(
        restarted.elapsed() < Duration::from_secs(5),
        "{:?}",
        restarted.elapsed()
    );
}

// ---- 10. fair lock: a client whose clock is ahead prunes no live waiter ----

async fn queue(server: &RedisServer, name: &str) -> Vec<String> {
    use redis::AsyncCommands;
    let mut con = raw(server).await;
    con.lrange(polylock::keys::fair_queue(name), 0, -1)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skewed_clock_breaks_no_fair_queue() {
    let server = RedisServer::start();
    let queue_timeout = Duration::from_millis(2000);
    let client = Client::builder(server.url())
        .fair_queue_timeout(queue_timeout)
        .connect()
        .await
        .unwrap();
    let holder = client.fair_lock("skew").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let first = client.fair_lock("skew").unwrap();
    let first_waits = {
        let first = first.clone();
        tokio::spawn(async move {
            first
                .acquire(AcquireOptions::new().wait(Duration::from_secs(30)))
                .await
        })
    };
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue(&server, "skew").await.len() == 1
        })
        .await
    );
    let mut skewed = Peer::skewed(&server, "+6s", queue_timeout.as_millis() as u64);
    skewed.send("fair_owner skew");
    let skewed_owner = skewed.reply().strip_prefix("ok ").unwrap().to_owned();
    skewed.send("fair_acquire skew - -");
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue(&server, "skew").await.len() == 2
        })
        .await
    );
    // Both look every second for a few seconds: the skewed one must not prune the first.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(
        queue(&server, "skew").await,
        vec![first.owner().to_owned(), skewed_owner]
    );
    holder.release().await.unwrap();
    assert!(tokio::time::timeout(Duration::from_secs(5), first_waits)
        .await
        .expect("the first waiter is served first")
        .unwrap()
        .unwrap());
    first.release().await.unwrap();
}

// ---- 1. a release retried long after it ran releases once ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_retried_after_a_long_outage_releases_once() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    // Retries may go on for twice the response timeout (16 s): longer than Redisson's 10 s latch
    // and the 10.5 s outage below, with seconds to spare for a loaded machine.
    let client = client_with(
        &proxy.url(),
        Duration::from_secs(30),
        Duration::from_secs(8),
    )
    .await;
    cache_scripts(&client).await;
    let lock = client.lock("latched").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    // The release script runs, its reply is cut off, then the server is unreachable for 10.5 s.
    proxy.set(Fault::CutAfterForward);
    let releasing = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.release().await })
    };
    let mut con = raw(&server).await;
    assert!(eventually(Duration::from_secs(5), || release_ran(&server)).await);
    // The script's effect shows before its reply reaches the proxy: wait for the cut.
    assert!(
        eventually(Duration::from_secs(5), || async {
            proxy.replies_lost() > 0
        })
        .await
    );
    proxy.refuse_for(Duration::from_millis(10_500));
    releasing
        .await
        .unwrap()
        .expect("the retried release replays its first answer");
    // One level was released, not two: the lock is still held and excludes others.
    assert_eq!(hget(&mut con, "latched", lock.owner()).await, Some(1));
    assert!(lock.is_held());
    let other = client.lock("latched").unwrap();
    assert!(!other
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    lock.release().await.unwrap();
    assert!(!exists(&mut con, "latched").await);
}

/// A final release whose reply is cut off is retried: the retry finds the level's field gone
/// and the release trace there, and answers released, not lost. Without the trace (a plain
/// `DEL`) the retry would find no lock and report `LockLost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_release_retried_after_its_reply_was_cut_answers_released() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = client_with(
        &proxy.url(),
        Duration::from_secs(30),
        Duration::from_secs(2),
    )
    .await;
    cache_scripts(&client).await;
    let lock = client.lock("traced").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    proxy.set(Fault::CutAfterForward);
    let releasing = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.release().await })
    };
    let mut con = raw(&server).await;
    assert!(
        eventually(Duration::from_secs(5), || async {
            !exists(&mut raw(&server).await, "traced").await
        })
        .await
    );
    assert!(
        eventually(Duration::from_secs(5), || async {
            proxy.replies_lost() > 0
        })
        .await
    );
    proxy.set(Fault::Pass);
    releasing
        .await
        .unwrap()
        .expect("the retried final release answers released");
    assert!(!lock.is_held());
    use redis::AsyncCommands;
    let traces: Vec<String> = con.keys("polylock_released:{traced}:*").await.unwrap();
    assert_eq!(traces.len(), 1, "{traces:?}");
    // The trace keeps what was left of the lease: it expires on its own.
    let ttl: i64 = con.pttl(&traces[0]).await.unwrap();
    assert!(ttl > 0 && ttl <= 30_000, "{ttl}");
}

/// True once the release script ran on the server: of the two levels' fields in the lock hash
/// (`polylock:level:<request>`), the released one is gone.
async fn release_ran(server: &RedisServer) -> bool {
    use redis::AsyncCommands;
    let mut con = raw(server).await;
    let fields: Vec<String> = con.hkeys("latched").await.unwrap();
    fields
        .iter()
        .filter(|field| field.starts_with("polylock:level:"))
        .count()
        == 1
}

// ---- 7. a release that fails is never renewed again ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_release_is_never_renewed_and_finishes_in_the_background() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = client_with(
        &proxy.url(),
        Duration::from_millis(1500),
        Duration::from_millis(300),
    )
    .await;
    let lock = client.lock("unreleased").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    proxy.refuse_for(Duration::from_millis(1200));
    let refused_at = Instant::now();
    let err = lock.release().await.unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Connection | ErrorKind::Timeout),
        "{err}"
    );
    assert!(!lock.is_held());
    assert_eq!(
        client.watched_locks(),
        0,
        "a lock whose release failed is still renewed"
    );
    // Reachable again: the background release (or the lease) ends it, and nothing renews it.
    let mut con = raw(&server).await;
    tokio::time::sleep(Duration::from_secs(3).saturating_sub(refused_at.elapsed())).await;
    assert!(
        !exists(&mut con, "unreleased").await,
        "renewed after a failed release"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !exists(&mut con, "unreleased").await,
        "renewed after a failed release"
    );
    let other = client.lock("unreleased").unwrap();
    assert!(other
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
}

// ---- a server that answers "not now" (BUSY, LOADING, ...) is retried, not given up on ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_replies_are_retried_like_a_dropped_connection() {
    // Past 50 ms, a running script makes the server answer every other command with BUSY.
    // The option is `busy-reply-threshold` from Redis 7.0 on, `lua-time-limit` on 6.2.
    let threshold = format!("--{}", ServerBuild::configured().busy_threshold_config());
    let server = RedisServer::start_with(&[&threshold, "50"]);
    let client = client_with(
        &server.url(),
        Duration::from_secs(30),
        Duration::from_secs(2),
    )
    .await;
    cache_scripts(&client).await;
    let holder = client.lock("busy").unwrap();
    assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
    let url = server.url();
    let runaway = std::thread::spawn(move || {
        let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
        // Ends with an error when SCRIPT KILL stops it.
        let _ = redis::cmd("EVAL")
            .arg("while true do end")
            .arg(0)
            .query::<()>(&mut con);
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let releasing = {
        let holder = holder.clone();
        tokio::spawn(async move { holder.release().await })
    };
    let waiter = client.lock("busy").unwrap();
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            waiter
                .acquire(AcquireOptions::new().wait(Duration::from_secs(10)))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(server.command(&["SCRIPT", "KILL"]).as_deref(), Some("+OK"));
    runaway.join().unwrap();
    releasing
        .await
        .unwrap()
        .expect("the release retried through BUSY");
    assert!(waiting
        .await
        .unwrap()
        .expect("the waiter retried through BUSY"));
    assert!(waiter.is_held());
    waiter.release().await.unwrap();
}

// ---- 11. a holder is told it lost the lock before another client can take it ----

/// The watchdog lease of the holders below; their response timeout is longer, so a renewal sent
/// into a silent network cannot come back before the lease it was to extend has ended (the
/// defaults' shape: 30 s lease, renewals every 10 s, 5 s response timeout).
const SHORT_LEASE: Duration = Duration::from_millis(1500);
const LONG_RESPONSE: Duration = Duration::from_secs(6);
/// Timers on both sides count whole milliseconds, and a busy machine schedules the holder's
/// task and this test's a little late: "told lost before another client acquired" within this.
const RACE_SLACK: Duration = Duration::from_millis(25);
/// How late "told lost" may come after the last moment its lease can have ended: room for a
/// loaded machine's scheduling, and still well short of the lease + LONG_RESPONSE at which a
/// report that waited for the hung renewal's own timeout would come.
const DEADLINE_SLACK: Duration = Duration::from_secs(2);

/// Counts the lost callbacks of `lock`.
fn count_lost(lock: &polylock::Lock) -> Arc<AtomicUsize> {
    let told = Arc::new(AtomicUsize::new(0));
    lock.on_lost({
        let told = told.clone();
        move |err| {
            assert_eq!(err.kind(), ErrorKind::LockLost);
            told.fetch_add(1, Ordering::SeqCst);
        }
    });
    told
}

/// While `lock` is held behind a failing network, `other` (connected directly to the server)
/// tries to take the same lock every 5 ms. Replies when the holder was told it lost the lock,
/// and when the other client got it; asserts that the holder no longer counted itself holder
/// by then.
async fn told_lost_and_taken(lock: &polylock::Lock, other: &Client) -> (Instant, Instant) {
    let told = {
        let mut lost = lock.lost_receiver();
        tokio::spawn(async move {
            lost.wait_for(|lost| *lost).await.unwrap();
            Instant::now()
        })
    };
    let taker = other.lock(lock.name()).unwrap();
    let started = Instant::now();
    let taken = loop {
        if taker
            .acquire(AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap()
        {
            break Instant::now();
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{} never expired",
            lock.name()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let told = tokio::time::timeout(Duration::from_secs(15), told)
        .await
        .unwrap_or_else(|_| panic!("{} never reported lost", lock.name()))
        .unwrap();
    assert!(
        told <= taken + RACE_SLACK,
        "{}: another client acquired it {:?} before its holder was told it was lost",
        lock.name(),
        told - taken
    );
    taker.release().await.unwrap();
    (told, taken)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_holder_is_told_lost_before_another_client_can_acquire() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let holder = client_with(&proxy.url(), SHORT_LEASE, LONG_RESPONSE).await;
    cache_scripts(&holder).await;
    let other = client(&server).await;
    let lock = holder.lock("cut-off").unwrap();
    let callbacks = count_lost(&lock);
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    // Every confirmed renewal (or the acquisition itself, when its first renewal never comes)
    // was sent before this: the lease ends by `silent_at` + the lease, whatever happens next.
    proxy.set(Fault::BlackHole);
    let silent_at = Instant::now();
    let (told, _) = told_lost_and_taken(&lock, &other).await;
    assert!(
        told <= silent_at + SHORT_LEASE + DEADLINE_SLACK,
        "told {:?} after the network went silent, with a lease of {SHORT_LEASE:?}",
        told - silent_at
    );
    assert!(!lock.is_held());
    assert!(lock.is_lost());
    assert!(
        wait_until(Duration::from_secs(2), || callbacks.load(Ordering::SeqCst)
            == 1)
        .await
    );
    assert_eq!(holder.watched_locks(), 0);
    assert_eq!(
        lock.release().await.unwrap_err().kind(),
        ErrorKind::LockLost
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_is_reported_at_its_end_while_a_renewal_hangs() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let holder = client_with(&proxy.url(), SHORT_LEASE, LONG_RESPONSE).await;
    cache_scripts(&holder).await;
    let other = client(&server).await;
    // Renewed by the watchdog: its renewal hangs in the silent network past the fixed lease's end.
    let renewed = holder.lock("hung-renewed").unwrap();
    assert!(renewed.acquire(AcquireOptions::new()).await.unwrap());
    let fixed = holder.lock("hung-fixed").unwrap();
    let lease = Duration::from_millis(1000);
    let callbacks = count_lost(&fixed);
    assert!(fixed
        .acquire(AcquireOptions::new().lease(lease))
        .await
        .unwrap());
    let acquired = Instant::now();
    proxy.set(Fault::BlackHole);
    let ((fixed_told, _), (renewed_told, _)) = tokio::join!(
        told_lost_and_taken(&fixed, &other),
        told_lost_and_taken(&renewed, &other)
    );
    assert!(
        fixed_told <= acquired + lease + DEADLINE_SLACK,
        "told {:?} after the acquisition, with a fixed lease of {lease:?}",
        fixed_told - acquired
    );
    assert!(renewed_told <= acquired + SHORT_LEASE + DEADLINE_SLACK);
    assert!(!fixed.is_held());
    assert!(!renewed.is_held());
    assert!(
        wait_until(Duration::from_secs(2), || callbacks.load(Ordering::SeqCst)
            == 1)
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_confirmed_after_the_lease_ended_brings_no_hold_back() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let holder = client_with(&proxy.url(), SHORT_LEASE, Duration::from_secs(5)).await;
    cache_scripts(&holder).await;
    let lock = holder.lock("late-reply").unwrap();
    let callbacks = count_lost(&lock);
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    // A first renewal (every 500 ms) caches the renewal script: a renewal meeting NOSCRIPT
    // would take three round trips, and find the key expired.
    tokio::time::sleep(Duration::from_millis(700)).await;
    // 400 ms each way: a renewal is confirmed 800 ms after it was sent, and the next one goes
    // 500 ms later, 1.3 s after the last confirmed one was sent; it reaches the server while the
    // key lives and renews it, but is confirmed 2.1 s after the last one, past the 1.5 s lease.
    proxy.set(Fault::Delay(Duration::from_millis(400)));
    let mut lost = lock.lost_receiver();
    tokio::time::timeout(Duration::from_secs(6), lost.wait_for(|lost| *lost))
        .await
        .expect("a renewal confirmed too late does not keep the hold")
        .unwrap();
    // The renewal that was in flight comes back (a success) within 800 ms: it changes nothing.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(!lock.is_held());
    assert!(lock.is_lost());
    assert_eq!(callbacks.load(Ordering::SeqCst), 1);
    assert_eq!(holder.watched_locks(), 0);
    assert_eq!(
        lock.release().await.unwrap_err().kind(),
        ErrorKind::LockLost
    );
    // Nothing renews the key any more: it expires with the lease of that late renewal.
    let other = client(&server).await;
    let taker = other.lock("late-reply").unwrap();
    assert!(taker
        .acquire(AcquireOptions::new().wait(Duration::from_secs(4)))
        .await
        .unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_releasing_one_level_into_a_silent_network_is_told_lost_in_time() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let holder = client_with(&proxy.url(), SHORT_LEASE, LONG_RESPONSE).await;
    cache_scripts(&holder).await;
    let other = client(&server).await;
    let lock = holder.lock("releasing").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    proxy.set(Fault::BlackHole);
    let silent_at = Instant::now();
    // The release of the inner level waits for a reply up to the response timeout; the outer
    // level is still held meanwhile, as far as the handle knows.
    let releasing = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.release().await })
    };
    let (told, _) = told_lost_and_taken(&lock, &other).await;
    assert!(told <= silent_at + SHORT_LEASE + DEADLINE_SLACK);
    assert!(!lock.is_held());
    let err = releasing.await.unwrap().unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Connection | ErrorKind::Timeout),
        "{err}"
    );
    assert_eq!(
        lock.release().await.unwrap_err().kind(),
        ErrorKind::LockLost
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquisition_confirmed_after_its_lease_ended_is_lost_at_once() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let holder = client_with(&proxy.url(), SHORT_LEASE, LONG_RESPONSE).await;
    cache_scripts(&holder).await;
    let lock = holder.lock("slow-grant").unwrap();
    let callbacks = count_lost(&lock);
    // 200 ms each way: the acquisition is confirmed 400 ms after it was sent, when its fixed
    // lease of 300 ms, counted from then, has run out.
    proxy.set(Fault::Delay(Duration::from_millis(200)));
    assert!(lock
        .acquire(AcquireOptions::new().lease(Duration::from_millis(300)))
        .await
        .unwrap());
    assert!(!lock.is_held(), "held past the lease it was acquired with");
    assert!(lock.is_lost());
    assert!(
        wait_until(Duration::from_secs(2), || callbacks.load(Ordering::SeqCst)
            == 1)
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquisition_confirmed_after_its_lease_ended_leaves_no_lock_held_by_nobody() {
    let server = RedisServer::start();
    let holder = client_with(
        &server.url(),
        Duration::from_secs(30),
        Duration::from_secs(10),
    )
    .await;
    cache_scripts(&holder).await;
    let lock = holder.lock("late-grant").unwrap();
    // The server holds the acquire for 2 s (CLIENT PAUSE), then runs it: the key gets a lease
    // of 1.5 s from then, and the reply comes 2 s after the send, when the lease, as this
    // client must count it, has run out. The key still has 1.5 s to live, held by nobody;
    // what the client sends from then on runs at once.
    pause(&server, 2_000);
    assert!(lock
        .acquire(AcquireOptions::new().lease(Duration::from_millis(1500)))
        .await
        .unwrap());
    assert!(lock.is_lost(), "confirmed after its lease ended");
    let mut con = raw(&server).await;
    let left: i64 = redis::cmd("PTTL")
        .arg("late-grant")
        .query_async(&mut con)
        .await
        .unwrap();
    // -2: already undone; else the key's lease must still be running for the test to tell.
    assert!(left == -2 || left > 0, "PTTL {left}");
    // Undone at once, not left to expire: well within half the lease it has left.
    let half = Duration::from_millis(left.max(0) as u64 / 2);
    let gone = eventually(half, || {
        let mut con = con.clone();
        async move { !exists(&mut con, "late-grant").await }
    })
    .await;
    assert!(
        gone,
        "the lock stayed held by nobody for its lease's last {left} ms"
    );
    // The handle's next call takes the lock afresh, one level, and its release frees it.
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    assert_eq!(lock.hold_count(), 1);
    lock.release().await.unwrap();
    assert!(
        !exists(&mut con, "late-grant").await,
        "a level of the late acquisition was left behind"
    );
}
