//! The reentrant lock against real redis-server processes.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use futures_util::{FutureExt, StreamExt};
use polylock::{AcquireOptions, Client, ErrorKind};
use polylock_testkit::{Fault, FaultProxy, ServerBuild};
use redis::AsyncCommands;

const LONG_LEASE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exclusion_between_clients_and_tasks_loses_no_increment() {
    init_tracing();
    let server = RedisServer::start();
    let work = Arc::new(AtomicUsize::new(500));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let client = client(&server).await;
        for _ in 0..8 {
            let client = client.clone();
            let work = work.clone();
            let mut con = raw(&server).await;
            tasks.push(tokio::spawn(async move {
                let lock = client.lock("exclusion").unwrap();
                while work
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
                {
                    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
                    let value: i64 = con
                        .get::<_, Option<i64>>("counter")
                        .await
                        .unwrap()
                        .unwrap_or(0);
                    let _: () = con.set("counter", value + 1).await.unwrap();
                    lock.release().await.unwrap();
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut con = raw(&server).await;
    let counter: i64 = con.get("counter").await.unwrap();
    assert_eq!(counter, 500);
    assert!(!exists(&mut con, "exclusion").await);
}

#[tokio::test]
async fn reentrancy_counts_in_the_hash_and_the_last_release_deletes_and_publishes() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("reentrant").unwrap();
    let mut con = raw(&server).await;

    let mut pubsub = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    pubsub
        .subscribe("redisson_lock__channel:{reentrant}")
        .await
        .unwrap();

    for _ in 0..3 {
        assert!(lock
            .acquire(AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap());
    }
    assert_eq!(lock.hold_count(), 3);
    assert_eq!(hget(&mut con, "reentrant", lock.owner()).await, Some(3));
    lock.release().await.unwrap();
    lock.release().await.unwrap();
    assert_eq!(hget(&mut con, "reentrant", lock.owner()).await, Some(1));
    assert!(lock.is_held());
    lock.release().await.unwrap();
    assert!(!exists(&mut con, "reentrant").await);
    assert!(!lock.is_held());

    let message = tokio::time::timeout(Duration::from_secs(5), pubsub.on_message().next())
        .await
        .expect("an unlock message")
        .unwrap();
    assert_eq!(message.get_payload::<String>().unwrap(), "0");
}

#[tokio::test]
async fn owner_string_is_client_uuid_and_holder_id() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock_with_holder("owner", 77).unwrap();
    assert_eq!(lock.owner(), format!("{}:77", client.id()));
    let id = uuid::Uuid::parse_str(client.id()).unwrap();
    assert_eq!(id.get_version_num(), 4);
    assert_eq!(client.id(), id.hyphenated().to_string());
}

#[tokio::test]
async fn a_waiter_gets_the_lock_right_after_a_killed_holder_lease() {
    let server = RedisServer::start();
    let peer = peer_binary();
    let mut child = std::process::Command::new(peer)
        .args([server.url(), "1500".into()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::{BufRead, BufReader, Write};
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert!(line.starts_with("ready"), "{line}");
        writeln!(stdin, "acquire crash - -").unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ok true");
        std::mem::forget(stdin);
    }
    let client = client(&server).await;
    let waiter = client.lock("crash").unwrap();
    assert!(
        !waiter
            .acquire(AcquireOptions::new().wait(Duration::from_secs(2)))
            .await
            .unwrap(),
        "the watchdog keeps the live holder's lock"
    );
    child.kill().unwrap();
    let killed = Instant::now();
    assert!(waiter
        .acquire(AcquireOptions::new().wait(Duration::from_secs(10)))
        .await
        .unwrap());
    // The holder's watchdog lease is 1.5 s: the waiter gets the lock once it runs out, long
    // before the 30 s a default lease would hold it (with room for a loaded machine).
    assert!(
        killed.elapsed() < Duration::from_secs(9),
        "took {:?}",
        killed.elapsed()
    );
    let _ = child.wait();
}

#[tokio::test]
async fn a_waiter_is_woken_by_the_unlock_message_long_before_the_lease() {
    let server = RedisServer::start();
    let holder_client = client(&server).await;
    let waiter_client = client(&server).await;
    let holder = holder_client.lock("wake").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().wait(Duration::ZERO).lease(LONG_LEASE))
        .await
        .unwrap());
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        holder.release().await.unwrap();
    });
    let waiter = waiter_client.lock("wake").unwrap();
    let started = Instant::now();
    assert!(waiter.acquire(AcquireOptions::new()).await.unwrap());
    release.await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "woken after {:?}",
        started.elapsed()
    );
    waiter.release().await.unwrap();
}

#[tokio::test]
async fn a_release_wakes_one_local_waiter_not_the_whole_herd() {
    let server = RedisServer::start();
    let holder_client = client(&server).await;
    let holder = holder_client.lock("herd").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().wait(Duration::ZERO).lease(LONG_LEASE))
        .await
        .unwrap());
    let waiter_client = client(&server).await;
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut waiters = Vec::new();
    for _ in 0..6 {
        let lock = waiter_client.lock("herd").unwrap();
        let acquired = acquired.clone();
        waiters.push(tokio::spawn(async move {
            assert!(lock
                .acquire(AcquireOptions::new().lease(LONG_LEASE))
                .await
                .unwrap());
            acquired.fetch_add(1, Ordering::SeqCst);
            lock // keep holding
        }));
    }
    let mut con = raw(&server).await;
    // Every waiter has subscribed (the lock's channel, and one of its own each) and is asleep.
    assert!(
        eventually(Duration::from_secs(5), || async {
            waiter_client.subscribed_channels() == 7
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = evalsha_calls(&mut con).await;
    holder.release().await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), || async {
            acquired.load(Ordering::SeqCst) == 1
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = evalsha_calls(&mut con).await;
    // The release and the one woken waiter's retry; a herd would add one retry per waiter.
    assert!(
        after - before <= 3,
        "{} script calls for one handoff",
        after - before
    );
    assert_eq!(acquired.load(Ordering::SeqCst), 1);
    for waiter in waiters {
        waiter.abort();
    }
}

#[tokio::test]
async fn a_deleted_key_is_reported_lost_within_one_renewal_period() {
    let server = RedisServer::start();
    // A renewal every 5 s: told within one period plus room for a loaded machine (3 s), which is
    // still long before the 15 s lease would end.
    let watchdog = Duration::from_secs(15);
    let client = client_with_watchdog(&server, watchdog).await;
    let lock = client.lock("lost").unwrap();
    let called = Arc::new(AtomicUsize::new(0));
    let counter = called.clone();
    lock.on_lost(move |err| {
        assert_eq!(err.kind(), ErrorKind::LockLost);
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let mut lost = lock.lost_receiver();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    let mut con = raw(&server).await;
    let _: () = con.del("lost").await.unwrap();
    let deleted = Instant::now();
    tokio::time::timeout(
        watchdog / 3 + Duration::from_secs(3),
        lost.wait_for(|lost| *lost),
    )
    .await
    .expect("told within one renewal period")
    .unwrap();
    assert!(deleted.elapsed() <= watchdog / 3 + Duration::from_secs(3));
    assert!(lock.is_lost());
    assert!(!lock.is_held());
    assert!(
        eventually(Duration::from_secs(2), || async {
            called.load(Ordering::SeqCst) == 1
        })
        .await
    );
    let err = lock.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    assert!(err.to_string().contains("'lost'"), "{err}");
    // The loss was reported once; a second release is a plain non-holder release.
    assert_eq!(lock.release().await.unwrap_err().kind(), ErrorKind::NotHeld);
}

#[tokio::test]
async fn a_taken_key_is_reported_lost_and_the_new_holder_keeps_it() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_millis(900)).await;
    let lock = client.lock("taken").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    let mut con = raw(&server).await;
    let _: () = con.del("taken").await.unwrap();
    let _: () = con.hset("taken", "someone-else:1", 1).await.unwrap();
    let mut lost = lock.lost_receiver();
    tokio::time::timeout(Duration::from_secs(2), lost.wait_for(|lost| *lost))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        lock.release().await.unwrap_err().kind(),
        ErrorKind::LockLost
    );
    assert_eq!(hget(&mut con, "taken", "someone-else:1").await, Some(1));
}

#[tokio::test]
async fn the_watchdog_keeps_a_long_hold_and_never_renews_after_release() {
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(1500);
    let client = client_with_watchdog(&server, watchdog).await;
    let lock = client.lock("watchdog").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    let mut con = raw(&server).await;
    let held_until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < held_until {
        let pttl: i64 = con.pttl("watchdog").await.unwrap();
        assert!(pttl > 0, "the key expired while held (pttl {pttl})");
        assert!(!lock.is_lost());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(client.watched_locks(), 1);
    lock.release().await.unwrap();
    assert_eq!(client.watched_locks(), 0);
    tokio::time::sleep(watchdog).await;
    assert!(
        !exists(&mut con, "watchdog").await,
        "a renewal re-created the key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_racing_renewal_is_never_a_false_loss_nor_a_late_renewal() {
    let server = RedisServer::start();
    // A 300 ms lease renews every 100 ms, so some releases land in the middle of renewals
    // (shorter leases are lost for real when a loaded test machine stalls the runtime).
    let client = client_with_watchdog(&server, Duration::from_millis(300)).await;
    let mut con = raw(&server).await;
    for round in 0..200 {
        let lock = client.lock("race").unwrap();
        assert!(
            lock.acquire(AcquireOptions::new()).await.unwrap(),
            "round {round}"
        );
        tokio::time::sleep(Duration::from_millis(round % 40)).await;
        lock.release()
            .await
            .unwrap_or_else(|err| panic!("round {round}: {err}"));
        assert!(!lock.is_lost(), "round {round}: falsely lost");
        assert!(
            !exists(&mut con, "race").await,
            "round {round}: key outlived its release"
        );
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!exists(&mut con, "race").await);
}

#[tokio::test]
async fn a_fixed_lease_expires_and_the_holder_is_told() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("fixed").unwrap();
    assert!(lock
        .acquire(AcquireOptions::new().lease(Duration::from_millis(300)))
        .await
        .unwrap());
    assert_eq!(client.watched_locks(), 0, "a fixed lease is never renewed");
    let mut con = raw(&server).await;
    let pttl: i64 = con.pttl("fixed").await.unwrap();
    assert!(pttl > 0 && pttl <= 300);
    let mut lost = lock.lost_receiver();
    tokio::time::timeout(Duration::from_secs(3), lost.wait_for(|lost| *lost))
        .await
        .unwrap()
        .unwrap();
    // The holder counts its lease from when it sent the script, so it is told
    // a little before the server expires the key: that order is the safe one.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while exists(&mut con, "fixed").await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the key outlived its fixed lease"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        lock.release().await.unwrap_err().kind(),
        ErrorKind::LockLost
    );
}

#[tokio::test]
async fn non_holder_and_double_release_are_not_held() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let holder = client.lock("notheld").unwrap();
    let other = client.lock("notheld").unwrap();
    let err = other.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    assert!(err.to_string().contains("'notheld'"), "{err}");
    assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
    assert_eq!(
        other.release().await.unwrap_err().kind(),
        ErrorKind::NotHeld
    );
    holder.release().await.unwrap();
    assert_eq!(
        holder.release().await.unwrap_err().kind(),
        ErrorKind::NotHeld
    );
}

#[tokio::test]
async fn a_string_key_of_the_same_name_is_wrong_type_and_left_alone() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    let _: () = con.set("stringkey", "payload").await.unwrap();
    let lock = client.lock("stringkey").unwrap();
    let err = lock
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    assert!(err.to_string().contains("'stringkey'"), "{err}");
    assert_eq!(
        lock.is_locked().await.unwrap_err().kind(),
        ErrorKind::WrongType
    );
    let value: String = con.get("stringkey").await.unwrap();
    assert_eq!(value, "payload");
}

#[tokio::test]
async fn bad_arguments_fail_before_any_io() {
    let server = RedisServer::start();
    let client = client(&server).await;
    assert_eq!(
        client.lock("").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let huge = "x".repeat(polylock::MAX_NAME_BYTES + 1);
    assert_eq!(
        client.lock(&huge).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let lock = client.lock("args").unwrap();
    for lease in [
        Duration::ZERO,
        Duration::from_micros(500),
        polylock::MAX_DURATION * 2,
    ] {
        let err = lock
            .acquire(AcquireOptions::new().lease(lease))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{lease:?}: {err}");
    }
    let err = lock
        .acquire(AcquireOptions::new().wait(polylock::MAX_DURATION * 2))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let mut con = raw(&server).await;
    assert!(!exists(&mut con, "args").await);
    for url in ["", "http://127.0.0.1:1", "redis://127.0.0.1:notaport"] {
        let err = Client::connect(url).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{url}: {err}");
    }
    let err = Client::builder(server.url())
        .watchdog_timeout(Duration::ZERO)
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

#[tokio::test]
async fn an_unreachable_server_is_a_connection_error_within_the_timeout() {
    // Nothing listens on the first port; the second accepts but never answers.
    let refused = polylock_testkit::free_port();
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    for port in [refused, silent_port] {
        let started = Instant::now();
        let err = Client::builder(format!("redis://127.0.0.1:{port}"))
            .connect_timeout(Duration::from_millis(500))
            .connect()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Connection, "port {port}: {err}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "port {port}: {:?}",
            started.elapsed()
        );
    }
}

#[tokio::test]
async fn an_acquire_dropped_mid_wait_leaves_no_holder_and_no_subscription() {
    let server = RedisServer::start();
    let holder_client = client(&server).await;
    let holder = holder_client.lock("cancel").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let waiter_client = client(&server).await;
    let waiter = waiter_client.lock("cancel").unwrap();
    let attempt = tokio::time::timeout(
        Duration::from_millis(300),
        waiter.acquire(AcquireOptions::new()),
    )
    .await;
    assert!(attempt.is_err(), "the wait was cut short");
    assert!(
        eventually(Duration::from_secs(2), || async {
            waiter_client.subscribed_channels() == 0
        })
        .await
    );
    let mut con = raw(&server).await;
    let numsub: (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg("redisson_lock__channel:{cancel}")
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(numsub.1, 0);
    holder.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !exists(&mut con, "cancel").await,
        "the abandoned waiter took the lock"
    );
    assert!(!waiter.is_held());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_dropped_while_its_script_runs_is_undone() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    for round in 0..100u64 {
        let lock = client.lock("undo").unwrap();
        // Cut the call off at every point from before the script is sent to after it answered.
        let cut = Duration::from_micros((round * 37) % 1500);
        let _ = tokio::time::timeout(cut, lock.acquire(AcquireOptions::new())).await;
        if lock.is_held() {
            lock.release().await.unwrap();
        }
        assert!(
            eventually(Duration::from_secs(2), || async {
                !exists(&mut raw(&server).await, "undo").await
            })
            .await,
            "round {round}: an abandoned acquire left the lock held"
        );
    }
    assert!(!exists(&mut con, "undo").await);
    assert_eq!(client.watched_locks(), 0);
}

#[tokio::test]
async fn a_redis_restart_loses_the_lock_and_the_client_recovers() {
    let mut server = RedisServer::start();
    let port = server.port();
    let client = client_with_watchdog(&server, Duration::from_millis(1500)).await;
    let lock = client.lock("restart").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    let mut lost = lock.lost_receiver();
    server.kill();
    let server = RedisServer::start_on(port, &[]).expect("restart on the same port");
    tokio::time::timeout(Duration::from_secs(5), lost.wait_for(|lost| *lost))
        .await
        .expect("told the lock is lost")
        .unwrap();
    assert_eq!(
        lock.release().await.unwrap_err().kind(),
        ErrorKind::LockLost
    );
    // The connection manager reconnects: a fresh acquire works and excludes others.
    let again = client.lock("restart").unwrap();
    let mut acquired = false;
    for _ in 0..50 {
        match again
            .acquire(AcquireOptions::new().wait(Duration::ZERO))
            .await
        {
            Ok(got) => {
                acquired = got;
                break;
            }
            Err(err) => {
                assert!(
                    matches!(err.kind(), ErrorKind::Connection | ErrorKind::Timeout),
                    "{err}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    assert!(acquired, "the client did not recover");
    let other = client.lock("restart").unwrap();
    assert!(!other
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    // Waiting works again too: pub/sub resubscribes.
    let waiter = tokio::spawn(async move {
        other
            .acquire(AcquireOptions::new().wait(Duration::from_secs(20)))
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    again.release().await.unwrap();
    assert!(waiter.await.unwrap().unwrap());
    drop(server);
}

#[tokio::test]
async fn close_reports_the_locks_still_held() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let held = client.lock("held-at-close").unwrap();
    let released = client.lock("released-before-close").unwrap();
    assert!(held.acquire(AcquireOptions::new()).await.unwrap());
    assert!(released.acquire(AcquireOptions::new()).await.unwrap());
    released.release().await.unwrap();
    assert_eq!(client.close(), vec!["held-at-close".to_owned()]);
    assert_eq!(client.watched_locks(), 0);
    let err = held
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection);
    assert!(err.to_string().contains("closed"), "{err}");
}

#[tokio::test]
async fn a_dropped_held_handle_is_released_in_the_background() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("dropped").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    drop(lock);
    let mut con = raw(&server).await;
    assert!(
        eventually(Duration::from_secs(3), || async {
            !exists(&mut raw(&server).await, "dropped").await
        })
        .await
    );
    assert!(!exists(&mut con, "dropped").await);
    assert_eq!(client.watched_locks(), 0);
}

#[tokio::test]
async fn force_unlock_deletes_and_wakes_a_waiter() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let holder = client.lock("force").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let waiter = client.lock("force").unwrap();
    let started = Instant::now();
    let waiting = tokio::spawn(async move {
        waiter
            .acquire(AcquireOptions::new())
            .await
            .map(|got| (got, waiter))
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(client.lock("force").unwrap().force_unlock().await.unwrap());
    let (got, _waiter) = waiting.await.unwrap().unwrap();
    assert!(got);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!client
        .lock("nothing-here")
        .unwrap()
        .force_unlock()
        .await
        .unwrap());
}

#[tokio::test]
async fn is_locked_and_remaining_lease_report_the_holder() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("query").unwrap();
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.remaining_lease().await.unwrap(), None);
    assert!(lock
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let other = client.lock("query").unwrap();
    assert!(other.is_locked().await.unwrap());
    let left = other.remaining_lease().await.unwrap().unwrap();
    assert!(
        left > Duration::from_secs(50) && left <= LONG_LEASE,
        "{left:?}"
    );
    assert!(!other.is_held());
    assert_eq!(other.hold_count(), 0);
}

#[test]
fn a_blocking_caller_can_use_the_core_runtime() {
    let server = RedisServer::start();
    let runtime = polylock::runtime();
    let client = runtime.block_on(Client::connect(&server.url())).unwrap();
    let lock = client.lock("blocking").unwrap();
    assert!(runtime
        .block_on(lock.acquire(AcquireOptions::new().wait(Duration::ZERO)))
        .unwrap());
    runtime.block_on(lock.release()).unwrap();
}

/// The recipe in docs/rust.md: code that takes locks, spawned on polylock's runtime from the
/// caller's own, acquires, waits, is woken by a release and hands over as anywhere else.
#[tokio::test]
async fn lock_code_spawned_on_the_core_runtime_waits_and_hands_over() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let (holder, waiter) = (
        client.lock("on-core").unwrap(),
        client.lock("on-core").unwrap(),
    );
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let holding = polylock::runtime().spawn(async move {
        assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
        held_tx.send(()).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        holder.release().await.unwrap();
    });
    held_rx.await.unwrap();
    let waiting = polylock::runtime().spawn(async move {
        let acquired = waiter
            .acquire(AcquireOptions::new().wait(Duration::from_secs(20)))
            .await
            .unwrap();
        let held = waiter.is_held();
        waiter.release().await.unwrap();
        (acquired, held)
    });
    holding.await.unwrap();
    assert_eq!(waiting.await.unwrap(), (true, true));
}

#[tokio::test]
async fn acl_user_password_and_db_number_come_from_the_url() {
    let server = RedisServer::start();
    assert_eq!(
        server
            .command(&["ACL", "SETUSER", "locker", "on", ">s3cret", "~*", "&*", "+@all"])
            .as_deref(),
        Some("+OK")
    );
    let url = format!("redis://locker:s3cret@127.0.0.1:{}/3", server.port());
    let client = Client::connect(&url).await.unwrap();
    let lock = client.lock("acl").unwrap();
    assert!(lock
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    let mut db3 = redis::Client::open(format!("redis://127.0.0.1:{}/3", server.port()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    assert!(exists(&mut db3, "acl").await, "the lock lives in db 3");
    assert!(!exists(&mut raw(&server).await, "acl").await, "not in db 0");
    lock.release().await.unwrap();

    let wrong = format!("redis://locker:wrong@127.0.0.1:{}/3", server.port());
    let err = Client::connect(&wrong).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(
        !err.to_string().contains("wrong@"),
        "the password is not echoed: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_releases_of_one_level_release_it_once() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    for round in 0..20 {
        let lock = client.lock("double").unwrap();
        assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
        let (first, second) = tokio::join!(lock.release(), lock.release());
        let kinds = [
            first.err().map(|e| e.kind()),
            second.err().map(|e| e.kind()),
        ];
        assert!(
            kinds.contains(&None) && kinds.contains(&Some(ErrorKind::NotHeld)),
            "round {round}: {kinds:?}"
        );
        assert!(!lock.is_held());
        assert!(!exists(&mut con, "double").await, "round {round}");
    }
}

#[tokio::test]
async fn a_release_dropped_while_its_script_waits_still_releases() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("drop-release").unwrap();
    assert!(lock
        .acquire(AcquireOptions::new().lease(Duration::from_secs(60)))
        .await
        .unwrap());
    // The server answers nobody for a while: the release is sent and cut off unanswered.
    pause(&server, 600);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), lock.release())
            .await
            .is_err(),
        "the release could not finish while the server was paused"
    );
    // The rest of the release runs on without its caller, long before the 60 s lease ends
    // (a look that times out during the pause counts as "still there").
    assert!(
        eventually(Duration::from_secs(10), || async {
            let mut con = raw(&server).await;
            let exists: redis::RedisResult<bool> = con.exists("drop-release").await;
            exists == Ok(false)
        })
        .await,
        "a dropped release left the lock held"
    );
    assert!(!lock.is_held());
}

/// A caller whose runtime has neither timers nor I/O: the core's work runs in its own runtime's
/// context, whether it is polled on the caller's task or handed over to the core's runtime.
#[test]
fn a_caller_on_a_runtime_without_timers_or_io_is_served() {
    let server = RedisServer::start();
    let bare = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    bare.block_on(async {
        let client = Client::builder(server.url()).connect().await.unwrap();
        let holder = client.lock("bare-runtime").unwrap();
        let waiter = client.lock("bare-runtime").unwrap();
        assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
        // A bounded wait that runs out (a timer), then one that is woken by the release.
        assert!(!waiter
            .acquire(AcquireOptions::new().wait(Duration::from_millis(200)))
            .await
            .unwrap());
        let (waited, released) = tokio::join!(
            waiter.acquire(AcquireOptions::new().wait(Duration::from_secs(20))),
            holder.release()
        );
        released.unwrap();
        assert!(waited.unwrap());
        waiter.release().await.unwrap();
        // Cut off after its first step: the rest goes on in the core's runtime.
        assert!(holder.acquire(AcquireOptions::new()).await.unwrap());
        let mut cut = Box::pin(waiter.acquire(AcquireOptions::new()));
        assert!((&mut cut).now_or_never().is_none());
        drop(cut);
        holder.release().await.unwrap();
    });
    // Checked from an ordinary runtime: the abandoned acquire took nothing.
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        assert!(
            eventually(Duration::from_secs(5), || async {
                !exists(&mut raw(&server).await, "bare-runtime").await
            })
            .await,
            "an acquire abandoned on a bare runtime left the lock held"
        );
    });
}

/// Polylock waiters in different processes (clients) on one name, each registered in the waiter
/// list before the next arrives, acquiring with the long fixed lease (so they are told, not
/// granted the lock).
async fn queued_waiters(
    server: &RedisServer,
    name: &str,
    count: usize,
    order: Arc<std::sync::Mutex<Vec<usize>>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let options = AcquireOptions::new().lease(LONG_LEASE);
    queued_waiters_with(server, name, count, order, options).await
}

/// As [`queued_waiters`], acquiring with `options`.
async fn queued_waiters_with(
    server: &RedisServer,
    name: &str,
    count: usize,
    order: Arc<std::sync::Mutex<Vec<usize>>>,
    options: AcquireOptions,
) -> Vec<tokio::task::JoinHandle<()>> {
    let con = raw(server).await;
    let mut waiters = Vec::new();
    for index in 0..count {
        let lock = client(server).await.lock(name).unwrap();
        let order = order.clone();
        waiters.push(tokio::spawn(async move {
            assert!(lock.acquire(options).await.unwrap());
            order.lock().unwrap().push(index);
            lock.release().await.unwrap();
        }));
        let listed = format!("polylock_lock_waiters:{{{name}}}");
        assert!(
            eventually(Duration::from_secs(5), || {
                let mut con = con.clone();
                let listed = listed.clone();
                async move { con.zcard::<_, usize>(&listed).await.unwrap() == index + 1 }
            })
            .await,
            "waiter {index} registered"
        );
    }
    // The last one's second look (after subscribing) is answered too.
    tokio::time::sleep(Duration::from_millis(200)).await;
    waiters
}

/// A lock on `name` that a client of its own holds with the long lease.
async fn held_long(server: &RedisServer, name: &str) -> polylock::Lock {
    let lock = client(server).await.lock(name).unwrap();
    assert!(lock
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    lock
}

/// A handle on `name` whose client reaches Redis through a fault proxy (passing for now). The
/// server learns the leave script first: a first call through a slow proxy would be a NOSCRIPT
/// and an EVAL, two round trips.
async fn behind_proxy(server: &RedisServer, name: &str) -> (FaultProxy, polylock::Lock) {
    let warm = client(server).await.lock(name).unwrap();
    let briefly = AcquireOptions::new().wait(Duration::from_millis(50));
    assert!(!warm.acquire(briefly).await.unwrap());
    let proxy = FaultProxy::start(server.port());
    let lock = client_with(
        &proxy.url(),
        Duration::from_secs(30),
        Duration::from_secs(5),
    )
    .await
    .lock(name)
    .unwrap();
    (proxy, lock)
}

/// A pub/sub connection of a plain Redis client: another library's listener (Redisson's).
async fn plain_pubsub(server: &RedisServer) -> redis::aio::PubSub {
    redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap()
}

/// Waits until every queued waiter got the lock (and released it).
async fn all_served(waiters: Vec<tokio::task::JoinHandle<()>>) {
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(20), waiter)
            .await
            .expect("every waiter gets the lock long before the 60 s lease")
            .unwrap();
    }
}

/// A line of `count` waiters acquiring with `options`, each in a process (client) of its own,
/// queued behind a holder and served from its release on. Replies the order they were served
/// in and the script calls it took, the first release's included.
async fn serve_line(
    server: &RedisServer,
    name: &str,
    count: usize,
    options: AcquireOptions,
) -> (Vec<usize>, i64) {
    let holder_client = client(server).await;
    // The server learns the release script first (its first call is a NOSCRIPT and an EVAL).
    let warm = holder_client.lock("warm").unwrap();
    assert!(warm.acquire(AcquireOptions::new()).await.unwrap());
    warm.release().await.unwrap();
    let holder = holder_client.lock(name).unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let waiters = queued_waiters_with(server, name, count, order.clone(), options).await;
    let mut con = raw(server).await;
    let before = evalsha_calls(&mut con).await;
    holder.release().await.unwrap();
    all_served(waiters).await;
    let scripts = evalsha_calls(&mut con).await - before;
    let order = order.lock().unwrap().clone();
    (order, scripts)
}

#[tokio::test]
async fn a_release_tells_one_waiter_in_one_process_in_arrival_order() {
    let server = RedisServer::start();
    let count = 6;
    // Fixed leases: each waiter is told, and takes the lock with a script of its own.
    let (order, scripts) = serve_line(
        &server,
        "line",
        count,
        AcquireOptions::new().lease(LONG_LEASE),
    )
    .await;
    // Each process told in turn: its acquire and its release; a herd (every process woken by
    // every release) adds a look per waiter per release, and takes them in any order.
    assert_eq!(order, (0..count).collect::<Vec<_>>());
    assert!(
        scripts <= 1 + 2 * count as i64,
        "{scripts} script calls for {count} handoffs"
    );
}

#[tokio::test]
async fn a_release_grants_the_lock_to_the_next_watchdog_waiter_which_sends_no_acquire() {
    let server = RedisServer::start();
    let count = 6;
    // Watchdog leases: each waiter accepts the lock straight from the release before it.
    let (order, scripts) = serve_line(&server, "granted", count, AcquireOptions::new()).await;
    assert_eq!(order, (0..count).collect::<Vec<_>>());
    // Only the releases: a waiter told (not granted) sends its own acquire too (1 + 2 * count).
    // A holder slow enough for its first renewal (a third of the 1 s grant) may add one.
    assert!(
        scripts <= 1 + count as i64 + 2,
        "{scripts} script calls for {count} handoffs"
    );
    let mut con = raw(&server).await;
    assert!(!exists(&mut con, "polylock_lock_grants:{granted}").await);
    assert!(!exists(&mut con, "granted").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn holders_that_come_back_for_the_lock_take_two_scripts_per_handoff() {
    let server = RedisServer::start();
    let (processes, rounds) = (4, 50);
    let mut clients = Vec::new();
    let mut holders = Vec::new();
    for _ in 0..processes {
        let client = client(&server).await;
        holders.push(client.lock("again").unwrap());
        clients.push(client);
    }
    let scripts = take_turns(&server, holders, rounds).await;
    let handoffs = (processes * rounds) as i64;
    let counted = |field: fn(&polylock::metrics::LockMetrics) -> u64| -> i64 {
        let metrics = clients.iter().map(|client| client.metrics());
        let locks = metrics.flat_map(|snapshot| snapshot.locks);
        locks
            .filter(|lock| lock.name == "again")
            .map(|lock| field(&lock) as i64)
            .sum()
    };
    // A renewal is one script of its own: a granted hold's lease is short (the reservation's),
    // so on a loaded machine a hold can outlive a third of it.
    let renewals = counted(|lock| lock.renewals + lock.renewal_failures);
    // A look on a wake-up that finds the lock taken is one script more. A few are expected on
    // a loaded machine (a waiter looks after a long silence; a release that found no waiters
    // mark wakes every waiter); the bug below makes one per handoff.
    let found_taken = counted(|lock| lock.wakeups_found_taken);
    let counts = format!(
        "{scripts} script calls for {handoffs} handoffs, {renewals} renewals and {found_taken} \
         wake-ups that found it taken (granted {}, woken {})",
        counted(|lock| lock.handoffs_granted),
        counted(|lock| lock.handoffs_woken),
    );
    // Each acquisition: one look that finds the lock held (the waiter is then granted it) and
    // one release. A grant meant for a process's earlier call must not wake its next one to
    // look again (three scripts per handoff). Slack: the first scripts loaded (NOSCRIPT, EVAL).
    assert!(found_taken <= handoffs / 20, "{counts}");
    assert!(
        scripts <= 2 * handoffs + 10 + renewals + found_taken,
        "{counts}"
    );
}

#[tokio::test]
async fn a_granted_hold_is_extended_to_the_watchdog_lease_and_released_as_usual() {
    let server = RedisServer::start();
    let holder = held_long(&server, "extended").await;
    let waiter = client(&server).await.lock("extended").unwrap();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.acquire(AcquireOptions::new()).await }
    });
    let mut con = raw(&server).await;
    assert!(
        eventually(Duration::from_secs(5), || {
            let mut con = con.clone();
            async move { exists(&mut con, "polylock_lock_grants:{extended}").await }
        })
        .await
    );
    // Its own channel is subscribed before its second look; then it sleeps.
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap());
    assert!(waiter.is_held());
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
    assert!(exists(&mut con, "extended").await);
    waiter.release().await.unwrap();
    assert!(!exists(&mut con, "extended").await);
}

#[tokio::test]
async fn a_waiter_that_gives_up_as_it_is_granted_the_lock_gives_it_back_to_the_next() {
    let server = RedisServer::start();
    let holder = held_long(&server, "given-back").await;
    // The first waiter reaches Redis through a proxy, which will hold back the grant message.
    let (proxy, first) = behind_proxy(&server, "given-back").await;
    let first_waiting = tokio::spawn({
        let first = first.clone();
        async move { first.acquire(AcquireOptions::new()).await }
    });
    let mut con = raw(&server).await;
    let listed = |count: usize| {
        let con = con.clone();
        move || {
            let mut con = con.clone();
            async move {
                con.zcard::<_, usize>("polylock_lock_waiters:{given-back}")
                    .await
                    .unwrap()
                    == count
            }
        }
    };
    assert!(eventually(Duration::from_secs(5), listed(1)).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The second waiter would sleep 30 s (half its queue timeout) unless someone tells it.
    let second_client = Client::builder(server.url())
        .fair_queue_timeout(Duration::from_secs(60))
        .connect()
        .await
        .unwrap();
    let second = second_client.lock("given-back").unwrap();
    let second_waiting = tokio::spawn({
        let second = second.clone();
        async move { second.acquire(AcquireOptions::new()).await }
    });
    assert!(eventually(Duration::from_secs(5), listed(2)).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The release grants the lock to the first waiter; the message reaches it late, after its
    // caller gave up, whose leave reaches Redis while the 1 s grant still holds.
    proxy.set(Fault::Delay(Duration::from_millis(300)));
    holder.release().await.unwrap();
    first_waiting.abort();
    let acquired = tokio::time::timeout(Duration::from_secs(10), second_waiting)
        .await
        .expect("the waiter that gave up handed the lock on, long before a 30 s wait")
        .unwrap()
        .unwrap();
    assert!(acquired);
    assert!(!first.is_held());
    second.release().await.unwrap();
    assert!(!exists(&mut con, "given-back").await);
}

#[tokio::test]
async fn a_told_waiter_that_gives_up_leaves_no_reservation_behind() {
    let server = RedisServer::start();
    let holder = held_long(&server, "unreserved").await;
    // Sees what the scripts publish on the shared channel, uncounted by PUBSUB NUMSUB.
    let mut observer = plain_pubsub(&server).await;
    observer
        .psubscribe("redisson_lock__channel:{unreserved}")
        .await
        .unwrap();
    let mut published = observer.on_message();
    let (proxy, waiter) = behind_proxy(&server, "unreserved").await;
    // A fixed lease: the release tells it `0` and keeps the free lock for it (the reservation)
    // rather than granting it the lock.
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move {
            let options = AcquireOptions::new().lease(Duration::from_secs(30));
            waiter.acquire(options).await
        }
    });
    let mut con = raw(&server).await;
    let reservation = "polylock_lock_reserved:{unreserved}";
    // Listed, and listening on its own channel.
    let told_channel = format!("polylock_lock_told:{{unreserved}}:{}", waiter.owner());
    let listening = || {
        let mut con = con.clone();
        let told_channel = told_channel.clone();
        async move {
            let listed: usize = con
                .zcard("polylock_lock_waiters:{unreserved}")
                .await
                .unwrap();
            let counts: Vec<(String, usize)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&told_channel)
                .query_async(&mut con)
                .await
                .unwrap();
            listed == 1 && counts[0].1 == 1
        }
    };
    assert!(eventually(Duration::from_secs(5), listening).await);
    // The message telling it reaches it only after it gave up.
    proxy.set(Fault::Delay(Duration::from_secs(3)));
    holder.release().await.unwrap();
    let kept_for: Option<String> = con.get(reservation).await.unwrap();
    assert_eq!(
        kept_for.as_deref(),
        Some(waiter.owner()),
        "the waiter was told"
    );
    proxy.set(Fault::Pass);
    waiting.abort();
    // Its leave finds the lock free and kept for it: it tells the next (nobody: `0` on the
    // shared channel) and deletes the reservation, which would otherwise keep every polylock
    // client off the free lock for up to a second.
    let told: String = tokio::time::timeout(Duration::from_secs(5), published.next())
        .await
        .expect("the waiter that gave up told the next")
        .unwrap()
        .get_payload()
        .unwrap();
    assert_eq!(told, "0");
    assert!(!exists(&mut con, reservation).await);
    assert!(!waiter.is_held());
    let newcomer = client(&server).await.lock("unreserved").unwrap();
    let single_try = AcquireOptions::new().wait(Duration::ZERO);
    assert!(newcomer.acquire(single_try).await.unwrap());
    newcomer.release().await.unwrap();
}

#[tokio::test]
async fn a_release_still_wakes_redisson_waiters_on_the_shared_channel() {
    let server = RedisServer::start();
    let holder = held_long(&server, "mixed").await;
    // A Redisson waiter listens on the shared channel and reads the payload as a long.
    let mut redisson = plain_pubsub(&server).await;
    redisson
        .subscribe("redisson_lock__channel:{mixed}")
        .await
        .unwrap();
    let mut messages = redisson.on_message();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let waiters = queued_waiters(&server, "mixed", 1, order.clone()).await;
    holder.release().await.unwrap();
    let told: String = messages.next().await.unwrap().get_payload().unwrap();
    // `00`: Redisson's Long.valueOf reads 0, an unlock; polylock's own waiter was told directly.
    assert_eq!(told, "00");
    assert_eq!(told.parse::<i64>().unwrap(), 0);
    for waiter in waiters {
        waiter.await.unwrap();
    }
    // With no polylock waiter listed, a release sends Redisson's own `0`.
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    holder.release().await.unwrap();
    let plain: String = messages.next().await.unwrap().get_payload().unwrap();
    assert_eq!(plain, "0");
}

#[tokio::test]
async fn a_release_among_polylock_clients_only_publishes_nothing_on_the_shared_channel() {
    let server = RedisServer::start();
    let holder = held_long(&server, "quiet").await;
    // A pattern subscriber sees what is published without being counted by PUBSUB NUMSUB, as
    // a Redisson waiter (SUBSCRIBE) would be.
    let mut observer = plain_pubsub(&server).await;
    observer
        .psubscribe("redisson_lock__channel:{quiet}")
        .await
        .unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let count = 3;
    let waiters = queued_waiters(&server, "quiet", count, order.clone()).await;
    // Every polylock process on the shared channel is counted on the listening channel too.
    // (The holder never waited, so it never subscribed.)
    assert_eq!(listeners(&server, "quiet").await, (count, count));
    holder.release().await.unwrap();
    all_served(waiters).await;
    assert_eq!(*order.lock().unwrap(), (0..count).collect::<Vec<_>>());
    // Each release told the next waiter directly and woke no other process; the last one, with
    // nobody listed, sent Redisson's `0`.
    let mut messages = observer.on_message();
    let mut published = Vec::new();
    while let Ok(Some(message)) =
        tokio::time::timeout(Duration::from_millis(300), messages.next()).await
    {
        published.push(message.get_payload::<String>().unwrap());
    }
    assert_eq!(published, ["0"]);
}

/// The subscriber counts of a lock's shared channel and of polylock's listening channel.
async fn listeners(server: &RedisServer, name: &str) -> (usize, usize) {
    let counts: Vec<(String, usize)> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(format!("redisson_lock__channel:{{{name}}}"))
        .arg(format!("polylock_lock_listening:{{{name}}}"))
        .query_async(&mut raw(server).await)
        .await
        .unwrap();
    (counts[0].1, counts[1].1)
}

#[tokio::test]
async fn a_waiter_whose_pubsub_connection_was_cut_listens_and_is_counted_again() {
    let server = RedisServer::start();
    let holder = held_long(&server, "recount").await;
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let waiters = queued_waiters(&server, "recount", 1, order).await;
    assert_eq!(listeners(&server, "recount").await, (1, 1));
    let mut con = raw(&server).await;
    let _: () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut con)
        .await
        .unwrap();
    // Resubscribed: on both channels again, never on the listening one alone.
    assert!(
        eventually(Duration::from_secs(5), || async {
            let counts = listeners(&server, "recount").await;
            assert!(counts.1 <= counts.0, "{counts:?}");
            counts == (1, 1)
        })
        .await
    );
    holder.release().await.unwrap();
    all_served(waiters).await;
    // The waiter that acquired keeps its channels while it held; released, nothing is left.
    assert!(
        eventually(Duration::from_secs(5), || async {
            listeners(&server, "recount").await == (0, 0)
        })
        .await
    );
}

#[tokio::test]
async fn a_told_waiter_whose_process_is_paused_holds_up_the_next_only_briefly() {
    let server = RedisServer::start();
    let queue_timeout = Duration::from_millis(2000);
    let holder = client(&server).await.lock("paused").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let con = raw(&server).await;
    let listed = "polylock_lock_waiters:{paused}";
    let mut peer = Peer::start(&server, queue_timeout.as_millis() as u64);
    // A fixed lease: the release tells it and keeps the lock for it briefly (the reservation).
    // (A watchdog waiter would be granted the lock for its whole lease, and paused, hold it as
    // long as a paused holder does.)
    peer.send("acquire paused - 60000");
    assert!(
        eventually(Duration::from_secs(5), || {
            let mut con = con.clone();
            async move { con.zcard::<_, usize>(listed).await.unwrap() == 1 }
        })
        .await
    );
    // Its own channel is subscribed before its second look; then it sleeps, and is stopped.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = peer.child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    let waiter_client = Client::builder(server.url())
        .fair_queue_timeout(queue_timeout)
        .connect()
        .await
        .unwrap();
    let waiter = waiter_client.lock("paused").unwrap();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move {
            waiter
                .acquire(AcquireOptions::new().lease(LONG_LEASE))
                .await
        }
    });
    assert!(
        eventually(Duration::from_secs(5), || {
            let mut con = con.clone();
            async move { con.zcard::<_, usize>(listed).await.unwrap() == 2 }
        })
        .await
    );
    let released = Instant::now();
    // Tells the stopped peer (still connected, so the message is delivered to its socket).
    holder.release().await.unwrap();
    let acquired = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the next waiter looks again long before the 60 s lease")
        .unwrap()
        .unwrap();
    assert!(acquired);
    assert!(
        released.elapsed() < Duration::from_secs(10),
        "took {:?}",
        released.elapsed()
    );
    waiter.release().await.unwrap();
    assert!(std::process::Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap()
        .success());
    // The peer, resumed, gets the lock too.
    assert_eq!(peer.reply(), "ok true");
}

#[tokio::test]
async fn a_waiter_that_gives_up_leaves_the_waiter_list() {
    let server = RedisServer::start();
    let holder = client(&server).await.lock("leave").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    let waiter_client = client(&server).await;
    let waiter = waiter_client.lock("leave").unwrap();
    let mut con = raw(&server).await;
    // A single try takes no place at all.
    assert!(!waiter
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    assert!(!exists(&mut con, "polylock_lock_waiters:{leave}").await);
    assert!(!waiter
        .acquire(AcquireOptions::new().wait(Duration::from_millis(300)))
        .await
        .unwrap());
    assert!(!exists(&mut con, "polylock_lock_waiters:{leave}").await);
    assert!(
        eventually(Duration::from_secs(2), || async {
            waiter_client.subscribed_channels() == 0
        })
        .await,
        "a waiter that gave up keeps no channel"
    );
    holder.release().await.unwrap();
}

#[tokio::test]
async fn a_first_wait_looks_once_when_nothing_was_missed_while_subscribing() {
    let server = RedisServer::start();
    let holder_client = client(&server).await;
    let holder = holder_client.lock("once").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap());
    // The server learns the acquire script first (a NOSCRIPT and an EVAL).
    let other = holder_client.lock("once").unwrap();
    assert!(!other
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    let mut con = raw(&server).await;
    let before = evalsha_calls(&mut con).await;
    let waiter_client = client(&server).await;
    let waiter = waiter_client.lock("once").unwrap();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move {
            waiter
                .acquire(AcquireOptions::new().lease(LONG_LEASE))
                .await
        }
    });
    assert!(
        eventually(Duration::from_secs(5), || async {
            waiter_client.subscribed_channels() == 2
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    // One look; after subscribing, EXISTS and ZSCORE show nothing was missed, so no second.
    assert_eq!(evalsha_calls(&mut con).await - before, 1);
    holder.release().await.unwrap();
    assert!(tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("told at once")
        .unwrap()
        .unwrap());
    waiter.release().await.unwrap();
}

/// Waits until `count` waiters are listed on `name`, then a moment more for the last one's
/// second look (after subscribing) to be answered.
async fn listed_waiters(server: &RedisServer, name: &str, count: usize) {
    let con = raw(server).await;
    let listed = format!("polylock_lock_waiters:{{{name}}}");
    assert!(
        eventually(Duration::from_secs(5), || {
            let mut con = con.clone();
            let listed = listed.clone();
            async move { con.zcard::<_, usize>(&listed).await.unwrap() == count }
        })
        .await,
        "{count} waiters listed"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[tokio::test]
async fn a_granted_hold_lives_its_whole_lease_through_a_stall_of_its_holder() {
    let server = RedisServer::start();
    let holder = held_long(&server, "stalled-grant").await;
    // The waiter reaches Redis through a proxy that will swallow its renewals.
    let (proxy, waiter) = behind_proxy(&server, "stalled-grant").await;
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.acquire(AcquireOptions::new()).await }
    });
    listed_waiters(&server, "stalled-grant", 1).await;
    holder.release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap(), "granted");
    let competitor = client(&server).await.lock("stalled-grant").unwrap();
    granted_holder_survives_a_stall(&proxy, &waiter, &competitor).await;
}

#[tokio::test]
async fn a_waiter_whose_leave_failed_is_never_granted_that_request_later() {
    let server = RedisServer::start();
    // The holder's client loads the acquire and release scripts into the server.
    let holder = held_long(&server, "stale-grant").await;
    // The waiter's user may run loaded scripts only: the leave script, which nobody has run on
    // this server yet, fails for it (a leave the server did not carry out, for good). Redis
    // 6.2's ACL cannot take SCRIPT LOAD alone away: there the user loses all of SCRIPT.
    let no_script_load = if ServerBuild::configured().acl_denies_subcommands() {
        "-script|load"
    } else {
        "-script"
    };
    assert_eq!(
        server
            .command(&[
                "ACL",
                "SETUSER",
                "waiter",
                "on",
                ">secret",
                "~*",
                "&*",
                "+@all",
                "-eval",
                no_script_load,
            ])
            .as_deref(),
        Some("+OK")
    );
    let url = server
        .url()
        .replacen("redis://", "redis://waiter:secret@", 1);
    let waiter = client_with(&url, Duration::from_secs(30), Duration::from_secs(2))
        .await
        .lock("stale-grant")
        .unwrap();
    // A watchdog waiter registers its request for a grant, then gives up; its leave fails.
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move {
            waiter
                .acquire(AcquireOptions::new().wait(Duration::from_millis(1000)))
                .await
        }
    });
    listed_waiters(&server, "stale-grant", 1).await;
    assert!(!waiting.await.unwrap().unwrap());
    // The same handle waits again, with a fixed lease (it accepts no grant).
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move {
            waiter
                .acquire(AcquireOptions::new().lease(LONG_LEASE))
                .await
        }
    });
    listed_waiters(&server, "stale-grant", 1).await;
    holder.release().await.unwrap();
    assert!(tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("told long before the 60 s lease")
        .unwrap()
        .unwrap());
    assert_eq!(waiter.hold_count(), 1);
    let mut con = raw(&server).await;
    assert_eq!(
        hget(&mut con, "stale-grant", waiter.owner()).await,
        Some(1),
        "the server counts the hold as the handle does"
    );
    waiter.release().await.unwrap();
    assert!(
        !exists(&mut con, "stale-grant").await,
        "released, the lock is still held"
    );
}

/// The server cost of an uncontended cycle (`docs/PROTOCOL.md`, "What each call of an
/// uncontended cycle is for"): INFO commandstats, each call inside a script included, per
/// acquire and release of a free lock nobody waits for: 9 for the lock (2 EVALSHA, EXISTS,
/// HSET, PEXPIRE, HMGET, RENAME, PEXPIRE of the release trace, PUBLISH), 11 for the fair lock
/// (EXISTS, HSET and PEXPIRE too, LINDEX in both scripts, PEXPIRE of the trace, and the PUBLISH
/// on the shared channel, for waiters of the other kinds on the name) and the FIFO lock (PTTL,
/// EXISTS, HSET, PEXPIRE; HMGET, RENAME, PEXPIRE, LINDEX, PUBLISH).
#[tokio::test]
async fn an_uncontended_cycle_costs_nine_commands_and_a_fair_or_fifo_one_eleven() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    let cycles = 10;
    let calls = |con: &mut redis::aio::MultiplexedConnection| {
        let mut con = con.clone();
        async move {
            command_calls(&mut con, |name| {
                name != "info" && !name.starts_with("config")
            })
            .await
        }
    };
    let reset = |con: &mut redis::aio::MultiplexedConnection| {
        let mut con = con.clone();
        async move {
            let _: () = redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query_async(&mut con)
                .await
                .unwrap();
        }
    };
    let lock = client.lock("cost").unwrap();
    let fair = client.fair_lock("cost-fair").unwrap();
    let fifo = client.fifo_lock("cost-fifo").unwrap();
    // Scripts loaded first: a cold cycle also sends SCRIPT LOAD.
    for handle in [&lock, &fair, &fifo] {
        assert!(handle.acquire(AcquireOptions::new()).await.unwrap());
        handle.release().await.unwrap();
    }
    for (handle, per_cycle) in [(&lock, 9), (&fair, 11), (&fifo, 11)] {
        reset(&mut con).await;
        for _ in 0..cycles {
            assert!(handle.acquire(AcquireOptions::new()).await.unwrap());
            handle.release().await.unwrap();
        }
        assert_eq!(
            calls(&mut con).await,
            per_cycle * cycles,
            "{}",
            handle.name()
        );
    }
}

/// The lock hash of a free lock, as `(field, value)` with the owner's field named `owner` and
/// the level's `level`, its encoding and its PTTL.
async fn lock_hash(
    con: &mut redis::aio::MultiplexedConnection,
    name: &str,
) -> (Vec<(String, String)>, String, i64) {
    let hash: std::collections::HashMap<String, String> = con.hgetall(name).await.unwrap();
    let mut fields: Vec<(String, String)> = hash
        .into_iter()
        .map(
            |(field, value)| match field.starts_with("polylock:level:") {
                true => ("level".to_owned(), value),
                false => ("owner".to_owned(), value),
            },
        )
        .collect();
    fields.sort();
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(name)
        .query_async(con)
        .await
        .unwrap();
    let pttl: i64 = con.pttl(name).await.unwrap();
    (fields, encoding, pttl)
}

/// A free lock's acquire writes Redisson's layout with HSET and PEXPIRE: `{owner: 1, level
/// field: 1}` with the lease as its TTL, for the reentrant, fair and FIFO locks alike. The hash
/// re-enters (count 2, a second level field), counts down and releases as Redisson's does.
#[tokio::test]
async fn a_free_lock_is_written_in_redissons_layout() {
    let server = RedisServer::start();
    let mut con = raw(&server).await;
    let client = client(&server).await;
    let lease = Duration::from_secs(30);
    for lock in [
        client.lock("written").unwrap(),
        client.fair_lock("written-fair").unwrap(),
        client.fifo_lock("written-fifo").unwrap(),
    ] {
        let name = lock.name().to_owned();
        assert!(lock
            .acquire(AcquireOptions::new().no_wait().lease(lease))
            .await
            .unwrap());
        let (fields, encoding, pttl) = lock_hash(&mut con, &name).await;
        assert!(pttl > 25_000 && pttl <= 30_000, "{name}: PTTL {pttl}");
        let one_level = vec![
            ("level".to_owned(), "1".to_owned()),
            ("owner".to_owned(), "1".to_owned()),
        ];
        assert_eq!(fields, one_level, "{name}");
        assert!(
            ["listpack", "ziplist"].contains(&encoding.as_str()),
            "{name}: {encoding}"
        );
        // Re-entered: Redisson's count goes to 2, a second level field beside the first.
        assert!(lock
            .acquire(AcquireOptions::new().no_wait().lease(lease))
            .await
            .unwrap());
        let (fields, _, _) = lock_hash(&mut con, &name).await;
        assert!(
            fields.contains(&("owner".to_owned(), "2".to_owned())),
            "{fields:?}"
        );
        assert_eq!(fields.len(), 3, "{fields:?}");
        lock.release().await.unwrap();
        assert!(
            exists(&mut con, &name).await,
            "{name}: one level is still held"
        );
        lock.release().await.unwrap();
        assert!(!exists(&mut con, &name).await, "{name}: released");
    }
}

/// A release that begins after a fixed lease ended reports the hold lost (`LockLost`), as the
/// upkeep reports it at the lease's end, whichever of the two runs first. It was a `Timeout`
/// ("the lease it guarded has ended") when the release came first (Kotlin's semaphore test saw
/// it on a loaded machine).
#[tokio::test]
async fn a_release_after_a_fixed_lease_ended_reports_the_lock_lost() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("lapsed").unwrap();
    let lease = Duration::from_millis(20);
    for round in 0..100 {
        assert!(lock
            .acquire(AcquireOptions::new().lease(lease))
            .await
            .unwrap());
        // The lease, counted from before the acquire was sent, has ended when this sleep does.
        tokio::time::sleep(lease).await;
        let err = lock.release().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LockLost, "round {round}: {err}");
        assert!(!lock.is_held());
    }
}

/// A final release renames the hash to the owner's trace of the lock, which replaces the
/// owner's previous one: however many cycles run, a lock keeps one trace per owner (each with
/// what was left of its lease), not one per cycle. The reentrant, fenced and fair locks alike.
#[tokio::test]
async fn cycles_leave_one_release_trace_per_lock_and_owner() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    let kinds = [
        (
            "plain",
            client.lock("plain").unwrap(),
            client.lock("plain").unwrap(),
        ),
        (
            "fenced",
            client.fenced_lock("fenced").unwrap(),
            client.fenced_lock("fenced").unwrap(),
        ),
        (
            "fair",
            client.fair_lock("fair").unwrap(),
            client.fair_lock("fair").unwrap(),
        ),
    ];
    for (name, first, second) in kinds {
        assert_ne!(first.owner(), second.owner());
        for handle in [&first, &second, &first, &first, &second] {
            assert!(handle.acquire(AcquireOptions::new()).await.unwrap());
            handle.release().await.unwrap();
        }
        let mut traces: Vec<String> = con
            .keys(format!("polylock_released:{{{name}}}:*"))
            .await
            .unwrap();
        traces.sort();
        let mut expected = vec![
            format!("polylock_released:{{{name}}}:{}", first.owner()),
            format!("polylock_released:{{{name}}}:{}", second.owner()),
        ];
        expected.sort();
        assert_eq!(traces, expected, "{name}");
        for trace in &traces {
            let ttl: i64 = con.pttl(trace).await.unwrap();
            assert!(ttl > 0 && ttl <= 30_000, "{name}: {trace} {ttl}");
        }
    }
}

/// The owner's trace of its previous cycle does not answer for a later level: a hold deleted
/// behind its owner's back (here by a `DEL`, as a force-unlock or an eviction would) is
/// reported lost at its release, although the owner's trace of an earlier final release is
/// still there. The trace answers only for the level whose field it holds.
#[tokio::test]
async fn a_lost_hold_is_reported_lost_beside_the_owners_earlier_trace() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    for (name, lock) in [
        ("plain", client.lock("plain").unwrap()),
        ("fair", client.fair_lock("fair").unwrap()),
    ] {
        assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
        lock.release().await.unwrap();
        let trace = format!("polylock_released:{{{name}}}:{}", lock.owner());
        assert!(exists(&mut con, &trace).await, "{name}");
        assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
        let _: () = con.del(name).await.unwrap();
        let err = lock.release().await.expect_err(name);
        assert_eq!(err.kind(), ErrorKind::LockLost, "{name}: {err}");
    }
}
