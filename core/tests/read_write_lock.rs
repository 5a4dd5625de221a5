//! The read-write lock (Redisson RReadWriteLock layout) against a real redis-server: readers
//! share, a writer excludes, reentrancy and downgrade, every reader woken by a write release,
//! writers not starved by a stream of readers, renewal, undo of lost replies, wrong types.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use polylock::{AcquireOptions, ErrorKind};
use redis::AsyncCommands;

async fn mode(con: &mut redis::aio::MultiplexedConnection, name: &str) -> Option<String> {
    con.hget(name, "mode").await.unwrap()
}

#[tokio::test]
async fn readers_share_and_a_writer_excludes() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    let a = client.read_write_lock("rw:share").unwrap();
    let b = client.read_write_lock("rw:share").unwrap();
    let c = client.read_write_lock("rw:share").unwrap();

    assert!(a
        .read_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    assert!(b
        .read_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    assert_eq!(mode(&mut con, "rw:share").await.as_deref(), Some("read"));
    // Redisson's layout: a field per reader, and a key per read level with its lease.
    assert_eq!(
        hget(&mut con, "rw:share", a.read_lock().owner()).await,
        Some(1)
    );
    let level = format!(
        "{}:1",
        polylock::keys::rwlock_timeout_prefix("rw:share", a.read_lock().owner())
    );
    assert!(exists(&mut con, &level).await);
    assert!(!c
        .write_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());

    a.read_lock().release().await.unwrap();
    assert!(!exists(&mut con, &level).await);
    assert!(!c
        .write_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    b.read_lock().release().await.unwrap();
    assert!(!exists(&mut con, "rw:share").await);

    assert!(c
        .write_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    assert_eq!(mode(&mut con, "rw:share").await.as_deref(), Some("write"));
    let field = format!("{}:write", c.write_lock().owner());
    assert_eq!(hget(&mut con, "rw:share", &field).await, Some(1));
    assert!(!a
        .read_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    assert!(!b
        .write_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    c.write_lock().release().await.unwrap();
    assert!(!exists(&mut con, "rw:share").await);
}

#[tokio::test]
async fn both_locks_are_reentrant_and_the_writer_may_downgrade() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    let rw = client.read_write_lock("rw:downgrade").unwrap();
    let other = client.read_write_lock("rw:downgrade").unwrap();
    let (read, write) = (rw.read_lock(), rw.write_lock());

    assert!(write
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    assert!(write
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    assert_eq!(write.hold_count(), 2);
    // The writer takes the read lock too; nobody else does.
    assert!(read.acquire(AcquireOptions::new().no_wait()).await.unwrap());
    assert!(read.acquire(AcquireOptions::new().no_wait()).await.unwrap());
    assert!(!other
        .read_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());

    write.release().await.unwrap();
    assert_eq!(
        mode(&mut con, "rw:downgrade").await.as_deref(),
        Some("write")
    );
    write.release().await.unwrap();
    // Downgraded: the owner's reads remain, so other readers enter and writers wait.
    assert_eq!(
        mode(&mut con, "rw:downgrade").await.as_deref(),
        Some("read")
    );
    assert!(read.is_held());
    assert!(other
        .read_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    assert!(!other
        .write_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());

    read.release().await.unwrap();
    read.release().await.unwrap();
    other.read_lock().release().await.unwrap();
    assert!(!exists(&mut con, "rw:downgrade").await);
    assert_eq!(read.release().await.unwrap_err().kind(), ErrorKind::NotHeld);
}

#[tokio::test]
async fn a_write_release_wakes_every_waiting_reader() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let writer = client.read_write_lock("rw:wake").unwrap();
    // A 60 s lease: readers that got in soon were woken by the release, not by the expiry.
    assert!(writer
        .write_lock()
        .acquire(
            AcquireOptions::new()
                .no_wait()
                .lease(Duration::from_secs(60))
        )
        .await
        .unwrap());
    let readers: Vec<_> = (0..5)
        .map(|_| {
            let rw = client.read_write_lock("rw:wake").unwrap();
            tokio::spawn(async move {
                let got = rw
                    .read_lock()
                    .acquire(AcquireOptions::new().wait(Duration::from_secs(60)))
                    .await
                    .unwrap();
                (got, rw)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = Instant::now();
    writer.write_lock().release().await.unwrap();
    let mut holding = Vec::new();
    for reader in readers {
        let (got, rw) = reader.await.unwrap();
        assert!(got);
        holding.push(rw);
    }
    assert!(released.elapsed() < Duration::from_secs(30));
    // All five hold it at once.
    assert!(holding.iter().all(|rw| rw.read_lock().is_held()));
    for rw in holding {
        rw.read_lock().release().await.unwrap();
    }
}

#[tokio::test]
async fn a_waiting_writer_is_not_starved_by_a_stream_of_readers() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    // Four readers overlap without a gap: without writer preference the lock is never free.
    let readers: Vec<_> = (0..4)
        .map(|i| {
            let rw = client.read_write_lock("rw:starve").unwrap();
            let (stop, reads) = (stop.clone(), reads.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(i * 25)).await;
                while !stop.load(Ordering::Relaxed) {
                    assert!(rw
                        .read_lock()
                        .acquire(AcquireOptions::new().wait(Duration::from_secs(60)))
                        .await
                        .unwrap());
                    reads.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    rw.read_lock().release().await.unwrap();
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = reads.load(Ordering::Relaxed);
    assert!(before > 0);
    let writer = client.read_write_lock("rw:starve").unwrap();
    let started = Instant::now();
    assert!(writer
        .write_lock()
        .acquire(AcquireOptions::new().wait(Duration::from_secs(20)))
        .await
        .unwrap());
    let waited = started.elapsed();
    // Readers kept coming until the writer asked; then it got in within a few read sections.
    assert!(waited < Duration::from_secs(10), "writer waited {waited:?}");
    let during = reads.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        reads.load(Ordering::Relaxed),
        during,
        "a reader got in while the writer held it"
    );
    writer.write_lock().release().await.unwrap();
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.await.unwrap();
    }
    assert!(reads.load(Ordering::Relaxed) > during);
}

#[tokio::test]
async fn a_waiting_reader_is_not_starved_by_writers_taking_turns() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicUsize::new(0));
    // Two writers hand the lock to each other: one always waits, so with writer preference
    // alone a reader never gets in.
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let rw = client.read_write_lock("rw:turns").unwrap();
            let (stop, writes) = (stop.clone(), writes.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    assert!(rw
                        .write_lock()
                        .acquire(AcquireOptions::new().wait(Duration::from_secs(60)))
                        .await
                        .unwrap());
                    writes.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    rw.write_lock().release().await.unwrap();
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(writes.load(Ordering::Relaxed) > 0);
    let reader = client.read_write_lock("rw:turns").unwrap();
    let started = Instant::now();
    assert!(reader
        .read_lock()
        .acquire(AcquireOptions::new().wait(Duration::from_secs(20)))
        .await
        .unwrap());
    let waited = started.elapsed();
    // The writers that began to wait after the reader let it in: within a few write sections.
    assert!(waited < Duration::from_secs(10), "reader waited {waited:?}");
    let during = writes.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        writes.load(Ordering::Relaxed),
        during,
        "a writer got in while the reader held it"
    );
    reader.read_lock().release().await.unwrap();
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }
    assert!(writes.load(Ordering::Relaxed) > during);
}

#[tokio::test]
async fn a_free_lock_waits_for_an_older_waiting_reader_but_not_past_its_registration() {
    let server = RedisServer::start();
    let client = client_with(
        &server.url(),
        Duration::from_secs(30),
        Duration::from_secs(1),
    )
    .await;
    let mut con = raw(&server).await;
    // A reader in a paused process: registered as waiting since a second ago, for 1.5 s more.
    let (seconds, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut con).await.unwrap();
    let now = seconds * 1000 + micros / 1000;
    let ghost = "paused-reader";
    let _: () = con
        .zadd(
            polylock::keys::rwlock_readers("rw:older"),
            ghost,
            now + 1500,
        )
        .await
        .unwrap();
    let _: () = con
        .zadd(polylock::keys::rwlock_since("rw:older"), ghost, now - 1000)
        .await
        .unwrap();
    let writer = client.read_write_lock("rw:older").unwrap();
    assert!(
        !writer
            .write_lock()
            .acquire(AcquireOptions::new().no_wait())
            .await
            .unwrap(),
        "a writer that began to wait after the reader lets it go first"
    );
    let other = client.read_write_lock("rw:older").unwrap();
    assert!(
        other
            .read_lock()
            .acquire(AcquireOptions::new().no_wait())
            .await
            .unwrap(),
        "readers do not wait for readers"
    );
    other.read_lock().release().await.unwrap();
    let started = Instant::now();
    assert!(writer
        .write_lock()
        .acquire(AcquireOptions::new().wait(Duration::from_secs(20)))
        .await
        .unwrap());
    // Only until the silent reader's registration ran out, not for the whole wait.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    writer.write_lock().release().await.unwrap();
}

#[tokio::test]
async fn a_writer_that_gives_up_lets_readers_in_at_once() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let holder = client.read_write_lock("rw:give-up").unwrap();
    assert!(holder
        .read_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    let writer = client.read_write_lock("rw:give-up").unwrap();
    assert!(!writer
        .write_lock()
        .acquire(AcquireOptions::new().wait(Duration::from_millis(300)))
        .await
        .unwrap());
    let reader = client.read_write_lock("rw:give-up").unwrap();
    assert!(reader
        .read_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    let mut con = raw(&server).await;
    let writers: i64 = con
        .zcard(polylock::keys::rwlock_writers("rw:give-up"))
        .await
        .unwrap();
    assert_eq!(writers, 0);
}

#[tokio::test]
async fn the_watchdog_renews_read_and_write_holds() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_millis(300)).await;
    let mut con = raw(&server).await;
    let a = client.read_write_lock("rw:renew").unwrap();
    let b = client.read_write_lock("rw:renew").unwrap();
    assert!(a
        .read_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    assert!(b
        .read_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(a.read_lock().is_held() && !a.read_lock().is_lost());
    let level = format!(
        "{}:1",
        polylock::keys::rwlock_timeout_prefix("rw:renew", b.read_lock().owner())
    );
    assert!(
        exists(&mut con, &level).await,
        "a read level expired while held"
    );
    a.read_lock().release().await.unwrap();
    b.read_lock().release().await.unwrap();

    assert!(a
        .write_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(a.write_lock().is_held() && !a.write_lock().is_lost());
    assert!(!b
        .read_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    a.write_lock().release().await.unwrap();
}

#[tokio::test]
async fn a_reader_whose_fixed_lease_ran_out_leaves_the_others_holding() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let short = client.read_write_lock("rw:expire").unwrap();
    let long = client.read_write_lock("rw:expire").unwrap();
    assert!(short
        .read_lock()
        .acquire(
            AcquireOptions::new()
                .no_wait()
                .lease(Duration::from_millis(200))
        )
        .await
        .unwrap());
    assert!(long
        .read_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(short.read_lock().is_lost());
    assert!(long.read_lock().is_held());
    let writer = client.read_write_lock("rw:expire").unwrap();
    assert!(!writer
        .write_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    long.read_lock().release().await.unwrap();
    // The expired reader's field may remain, but no live level does: the lock is free.
    assert!(writer
        .write_lock()
        .acquire(AcquireOptions::new().wait(Duration::from_secs(5)))
        .await
        .unwrap());
    writer.write_lock().release().await.unwrap();
}

#[tokio::test]
async fn timed_out_acquires_leave_no_phantom_reader_or_writer() {
    let server = RedisServer::start();
    let client = client_with(
        &server.url(),
        Duration::from_secs(30),
        Duration::from_secs(1),
    )
    .await;
    // Warm the script cache: a first EVALSHA that meets the pause only gets NOSCRIPT.
    let warm = client.read_write_lock("rw:warm").unwrap();
    for lock in [warm.read_lock(), warm.write_lock()] {
        assert!(lock.acquire(AcquireOptions::new().no_wait()).await.unwrap());
        lock.release().await.unwrap();
    }
    let rw = client.read_write_lock("rw:phantom").unwrap();
    for lock in [rw.read_lock(), rw.write_lock()] {
        pause(&server, 2000);
        let paused_at = Instant::now();
        let err = lock
            .acquire(AcquireOptions::new().no_wait())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
        tokio::time::sleep(Duration::from_millis(2500).saturating_sub(paused_at.elapsed())).await;
        let mut con = raw(&server).await;
        assert!(
            !exists(&mut con, "rw:phantom").await,
            "a phantom holds rw:phantom"
        );
    }
}

#[tokio::test]
async fn a_name_of_another_type_is_refused() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    let _: () = con.set("rw:string", "not a lock").await.unwrap();
    let rw = client.read_write_lock("rw:string").unwrap();
    for lock in [rw.read_lock(), rw.write_lock()] {
        let err = lock
            .acquire(AcquireOptions::new().no_wait())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    }
    let value: String = con.get("rw:string").await.unwrap();
    assert_eq!(value, "not a lock");
    assert_eq!(
        client.read_write_lock("").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}
