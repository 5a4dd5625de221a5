//! `Client::inspect` against a real redis-server: one test per kind, each state made through the
//! core's own API, then described by one read-only snapshot.

mod common;

use std::time::{Duration, Instant};

use common::*;
use polylock::{AcquireOptions, ErrorKind, InspectedKind, KeyTtl, LockMode};
use redis::AsyncCommands;

const NOW: Option<Duration> = Some(Duration::ZERO);

fn remaining_ms(ttl: KeyTtl) -> u128 {
    match ttl {
        KeyTtl::Remaining(left) => left.as_millis(),
        other => panic!("expected a remaining TTL, got {other:?}"),
    }
}

#[tokio::test]
async fn nothing_at_a_name_is_free_and_bad_names_are_refused() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let info = client.inspect("nothing:here").await.unwrap();
    assert_eq!(info.name, "nothing:here");
    assert_eq!(info.kind, InspectedKind::None);
    assert_eq!(info.redis_type, "none");
    assert_eq!(info.ttl, KeyTtl::Missing);
    assert!(!info.is_held());
    assert!(info.queue.is_empty() && info.permits.is_empty());
    assert_eq!(info.permits_available, None);
    assert_eq!(info.fence_token, None);
    assert!(info.server_time_ms > 1_600_000_000_000, "{info:?}");

    let err = client.inspect("").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let long = "x".repeat(polylock::MAX_NAME_BYTES + 1);
    let err = client.inspect(&long).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

#[tokio::test]
async fn a_reentrant_lock_shows_its_holder_count_and_lease() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("inspect:plain").unwrap();
    let lease = Some(Duration::from_secs(20));
    assert!(lock
        .acquire(AcquireOptions { wait: NOW, lease })
        .await
        .unwrap());
    assert!(lock
        .acquire(AcquireOptions { wait: NOW, lease })
        .await
        .unwrap());

    let info = client.inspect("inspect:plain").await.unwrap();
    assert_eq!(info.kind, InspectedKind::Reentrant);
    assert_eq!(info.redis_type, "hash");
    assert_eq!(info.holders.len(), 1);
    assert_eq!(info.holders[0].owner, lock.owner());
    assert_eq!(info.holders[0].count, 2);
    assert_eq!(info.holders[0].mode, None);
    let left = remaining_ms(info.ttl);
    assert!(left > 0 && left <= 20_000, "{left}");
    assert_eq!(info.remaining_lease().map(|d| d.as_millis()), Some(left));
    assert!(info.queue.is_empty());

    lock.release().await.unwrap();
    lock.release().await.unwrap();
    let info = client.inspect("inspect:plain").await.unwrap();
    assert_eq!(info.kind, InspectedKind::None);
}

#[tokio::test]
async fn a_fair_lock_shows_its_queue_in_order_with_deadlines() {
    let server = RedisServer::start();
    let holder_client = client(&server).await;
    let waiter_client = client(&server).await;
    let holder = holder_client.fair_lock("inspect:fair").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    let first = waiter_client.fair_lock("inspect:fair").unwrap();
    let second = waiter_client.fair_lock("inspect:fair").unwrap();
    let mut con = raw(&server).await;
    let queue = polylock::keys::fair_queue("inspect:fair");
    let mut waits = Vec::new();
    for (place, waiter) in [&first, &second].into_iter().enumerate() {
        let waiter = waiter.clone();
        waits.push(tokio::spawn(async move {
            waiter
                .acquire(AcquireOptions::new().wait(Duration::from_secs(60)))
                .await
        }));
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let len: usize = con.llen(&queue).await.unwrap();
            if len > place {
                break;
            }
            assert!(Instant::now() < deadline, "waiter {place} never queued");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    let info = holder_client.inspect("inspect:fair").await.unwrap();
    assert_eq!(info.kind, InspectedKind::Fair);
    assert_eq!(info.holders[0].owner, holder.owner());
    assert_eq!(info.holders[0].count, 1);
    let owners: Vec<&str> = info.queue.iter().map(|w| w.owner.as_str()).collect();
    assert_eq!(owners, [first.owner(), second.owner()]);
    for waiter in &info.queue {
        let deadline = waiter.deadline_ms.expect("a deadline");
        let seen = waiter.seen_deadline_ms.expect("a liveness record");
        assert!(deadline > info.server_time_ms, "{info:?}");
        assert!(seen > info.server_time_ms, "{info:?}");
        assert_eq!(waiter.skipped_at_ms(), Some(deadline.min(seen)));
    }
    // Deadlines grow along the queue.
    assert!(info.queue[0].deadline_ms < info.queue[1].deadline_ms);

    holder.release().await.unwrap();
    assert!(waits.remove(0).await.unwrap().unwrap());
    first.release().await.unwrap();
    assert!(waits.remove(0).await.unwrap().unwrap());
    second.release().await.unwrap();
}

#[tokio::test]
async fn a_fifo_lock_shows_its_line_in_order_with_each_waiters_liveness() {
    let server = RedisServer::start();
    let holder_client = client(&server).await;
    let waiter_client = client(&server).await;
    let holder = holder_client.fifo_lock("inspect:fifo").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    let first = waiter_client.fifo_lock("inspect:fifo").unwrap();
    let second = waiter_client.fifo_lock("inspect:fifo").unwrap();
    let mut con = raw(&server).await;
    let line = polylock::keys::fifo_line("inspect:fifo");
    let mut waits = Vec::new();
    for (place, waiter) in [&first, &second].into_iter().enumerate() {
        let waiter = waiter.clone();
        waits.push(tokio::spawn(async move {
            waiter
                .acquire(AcquireOptions::new().wait(Duration::from_secs(60)))
                .await
        }));
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let len: usize = con.llen(&line).await.unwrap();
            if len > place {
                break;
            }
            assert!(Instant::now() < deadline, "waiter {place} never in line");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // A waiter that died long ago, still listed: its record has lapsed.
    let dead = "6b1f1f5e-0000-4000-8000-000000000009:1";
    let _: () = con.rpush(&line, dead).await.unwrap();

    let info = holder_client.inspect("inspect:fifo").await.unwrap();
    assert_eq!(info.kind, InspectedKind::Fifo);
    assert_eq!(info.kind.label(), "fifo");
    assert_eq!(info.holders[0].owner, holder.owner());
    let owners: Vec<&str> = info.queue.iter().map(|w| w.owner.as_str()).collect();
    assert_eq!(owners, [first.owner(), second.owner(), dead]);
    for waiter in &info.queue[..2] {
        assert_eq!(waiter.deadline_ms, None);
        let alive_until = waiter.seen_deadline_ms.expect("a liveness record");
        assert!(alive_until > info.server_time_ms, "{info:?}");
    }
    assert_eq!(info.queue[2].seen_deadline_ms, Some(info.server_time_ms));

    holder.release().await.unwrap();
    assert!(waits.remove(0).await.unwrap().unwrap());
    first.release().await.unwrap();
    assert!(waits.remove(0).await.unwrap().unwrap());
    // The last release, looking for a head, drops the dead waiter: nothing is left.
    second.release().await.unwrap();
    let info = holder_client.inspect("inspect:fifo").await.unwrap();
    assert_eq!(info.kind, InspectedKind::None);
    assert!(info.queue.is_empty());
    // A line alone (its waiters gone, nobody released since) is a free FIFO lock.
    let _: () = con.rpush(&line, dead).await.unwrap();
    let info = holder_client.inspect("inspect:fifo").await.unwrap();
    assert_eq!(info.kind, InspectedKind::Fifo);
    assert!(!info.is_held());
    assert_eq!(info.queue.len(), 1);
}

#[tokio::test]
async fn a_fenced_lock_shows_its_token_counter_held_or_free() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.fenced_lock("inspect:fenced").unwrap();
    assert!(lock.acquire(AcquireOptions::new().no_wait()).await.unwrap());
    assert!(lock.acquire(AcquireOptions::new().no_wait()).await.unwrap());
    let token = lock.token().expect("a token");

    let info = client.inspect("inspect:fenced").await.unwrap();
    assert_eq!(info.kind, InspectedKind::Fenced);
    assert_eq!(info.fence_token, Some(token));
    assert_eq!(info.holders[0].owner, lock.owner());
    assert_eq!(info.holders[0].count, 2);
    assert!(remaining_ms(info.ttl) > 0);

    lock.release().await.unwrap();
    lock.release().await.unwrap();
    let info = client.inspect("inspect:fenced").await.unwrap();
    assert_eq!(info.kind, InspectedKind::Fenced);
    assert!(!info.is_held());
    assert_eq!(info.ttl, KeyTtl::Missing);
    assert_eq!(info.fence_token, Some(token));
}

#[tokio::test]
async fn a_read_write_lock_shows_its_mode_readers_writer_and_waiting_writers() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let a = client.read_write_lock("inspect:rw").unwrap();
    let b = client.read_write_lock("inspect:rw").unwrap();
    let writer = client.read_write_lock("inspect:rw").unwrap();
    assert!(a
        .read_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
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
    // A writer waits behind the readers (and registers itself while it waits).
    let waiting = {
        let write = writer.write_lock();
        tokio::spawn(async move {
            write
                .acquire(AcquireOptions::new().wait(Duration::from_secs(60)))
                .await
        })
    };
    let mut con = raw(&server).await;
    let writers = polylock::keys::rwlock_writers("inspect:rw");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let registered: usize = con.zcard(&writers).await.unwrap();
        if registered == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the writer never registered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let info = client.inspect("inspect:rw").await.unwrap();
    assert_eq!(info.kind, InspectedKind::ReadWrite);
    assert_eq!(info.mode, Some(LockMode::Read));
    let mut readers: Vec<(String, u64, Option<LockMode>)> = info
        .holders
        .iter()
        .map(|h| (h.owner.clone(), h.count, h.mode))
        .collect();
    readers.sort();
    let mut expected = vec![
        (a.read_lock().owner().to_owned(), 2, Some(LockMode::Read)),
        (b.read_lock().owner().to_owned(), 1, Some(LockMode::Read)),
    ];
    expected.sort();
    assert_eq!(readers, expected);
    assert!(remaining_ms(info.ttl) > 0);
    assert_eq!(info.waiting_writers.len(), 1, "{info:?}");
    assert_eq!(info.waiting_writers[0].owner, writer.write_lock().owner());
    assert!(info.waiting_writers[0].until_ms > info.server_time_ms);

    a.read_lock().release().await.unwrap();
    a.read_lock().release().await.unwrap();
    b.read_lock().release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap());
    assert!(writer
        .read_lock()
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    let info = client.inspect("inspect:rw").await.unwrap();
    assert_eq!(info.kind, InspectedKind::ReadWrite);
    assert_eq!(info.mode, Some(LockMode::Write));
    let owner = writer.write_lock().owner().to_owned();
    let holders: Vec<(String, u64, Option<LockMode>)> = info
        .holders
        .iter()
        .map(|h| (h.owner.clone(), h.count, h.mode))
        .collect();
    assert_eq!(
        holders,
        [
            (owner.clone(), 1, Some(LockMode::Write)),
            (owner, 1, Some(LockMode::Read)),
        ]
    );
    assert!(info.waiting_writers.is_empty(), "{info:?}");
    writer.read_lock().release().await.unwrap();
    writer.write_lock().release().await.unwrap();
}

#[tokio::test]
async fn a_semaphore_shows_its_available_permits() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let semaphore = client.semaphore("inspect:sem").unwrap();
    assert!(semaphore.try_set_permits(5).await.unwrap());
    assert!(semaphore.acquire(2, NOW).await.unwrap());

    let info = client.inspect("inspect:sem").await.unwrap();
    assert_eq!(info.kind, InspectedKind::Semaphore);
    assert_eq!(info.redis_type, "string");
    assert_eq!(info.permits_available, Some(3));
    assert!(info.holders.is_empty() && info.permits.is_empty());
    assert_eq!(info.ttl, KeyTtl::Persistent);
}

#[tokio::test]
async fn an_expirable_semaphore_shows_held_permits_and_never_gives_back_on_its_own() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let semaphore = client.expirable_semaphore("inspect:xsem").unwrap();
    assert!(semaphore.try_set_permits(3).await.unwrap());
    let long = semaphore
        .acquire(
            AcquireOptions::new()
                .no_wait()
                .lease(Duration::from_secs(60)),
        )
        .await
        .unwrap()
        .expect("a permit");
    let short = semaphore
        .acquire(
            AcquireOptions::new()
                .no_wait()
                .lease(Duration::from_millis(50)),
        )
        .await
        .unwrap()
        .expect("a permit");

    let info = client.inspect("inspect:xsem").await.unwrap();
    assert_eq!(info.kind, InspectedKind::ExpirableSemaphore);
    assert_eq!(info.permits_available, Some(1));
    let mut ids: Vec<&str> = info.permits.iter().map(|p| p.id.as_str()).collect();
    ids.sort();
    let mut expected = vec![long.as_str(), short.as_str()];
    expected.sort();
    assert_eq!(ids, expected);
    let long_expiry = info
        .permits
        .iter()
        .find(|p| p.id == long)
        .and_then(|p| p.expires_at_ms)
        .expect("an expiry");
    assert!(long_expiry > info.server_time_ms + 50_000, "{info:?}");

    // Once the short permit's expiry has passed, inspecting shows it, and gives nothing back.
    let deadline = Instant::now() + Duration::from_secs(10);
    let info = loop {
        let info = client.inspect("inspect:xsem").await.unwrap();
        let expiry = info
            .permits
            .iter()
            .find(|p| p.id == short)
            .and_then(|p| p.expires_at_ms)
            .expect("the short permit is listed");
        if expiry < info.server_time_ms {
            break info;
        }
        assert!(
            Instant::now() < deadline,
            "the server clock never passed {expiry}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(info.permits.len(), 2);
    assert_eq!(info.permits_available, Some(1));
    let mut con = raw(&server).await;
    let stored: i64 = con.get("inspect:xsem").await.unwrap();
    assert_eq!(stored, 1);
    // The semaphore's own call gives it back.
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    let info = client.inspect("inspect:xsem").await.unwrap();
    assert_eq!(info.permits.len(), 1);
    assert_eq!(info.permits[0].id, long);
    semaphore.release(&long).await.unwrap();
}

#[tokio::test]
async fn other_values_are_unknown() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    let _: () = con.set("inspect:text", "hello").await.unwrap();
    let _: () = con.hset("inspect:user", "name", "ada").await.unwrap();
    let _: () = con.rpush("inspect:list", "a").await.unwrap();
    let _: () = con.hset("inspect:rwbad", "mode", "sideways").await.unwrap();
    for (name, redis_type) in [
        ("inspect:text", "string"),
        ("inspect:user", "hash"),
        ("inspect:list", "list"),
        ("inspect:rwbad", "hash"),
    ] {
        let info = client.inspect(name).await.unwrap();
        assert_eq!(info.kind, InspectedKind::Unknown, "{name}: {info:?}");
        assert_eq!(info.redis_type, redis_type);
        assert!(info.holders.is_empty());
    }
}

/// `Client::client_records`: every open client's record by SCAN, or those of given ids; a
/// missing record is left out, and so is a key under the prefix that is not a hash.
#[tokio::test]
async fn client_records_are_read_by_scan_or_by_id() {
    let server = RedisServer::start();
    let options = polylock::ClientOptions {
        name: Some("worker-7".into()),
        ..polylock::ClientOptions::default()
    };
    let named = polylock::Client::connect_with(&server.url(), options)
        .await
        .unwrap();
    let other = client(&server).await;
    let mut con = raw(&server).await;
    let _: () = con.set("polylock:client:junk", "x").await.unwrap();

    let mut every = other.client_records(None).await.unwrap();
    every.sort_by(|a, b| a.client_id.cmp(&b.client_id));
    let mut ids = vec![named.id().to_owned(), other.id().to_owned()];
    ids.sort();
    let read: Vec<&str> = every.iter().map(|r| r.client_id.as_str()).collect();
    assert_eq!(read, ids);

    let given = vec![named.id().to_owned(), "no-such-client".to_owned()];
    let records = other.client_records(Some(given)).await.unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    let fields = &records[0].fields;
    assert_eq!(fields["name"], "worker-7");
    assert_eq!(fields["pid"], std::process::id().to_string());
    for field in ["host", "connected_ms", "refreshed_ms", "holds", "metrics"] {
        assert!(fields.contains_key(field), "{field}: {fields:?}");
    }
    named.close();
    other.close();
}

/// The paged sweeps return, over the pages of one sweep, exactly what the whole scan does (the
/// names without their side keys; the client records' ids), several pages for a keyspace past
/// one `COUNT`, and start again once through; `inspect_without_records` reads the lock as
/// `inspect` does without naming its holder.
#[tokio::test]
async fn paged_sweeps_return_what_a_whole_scan_does_and_start_again_once_through() {
    let server = RedisServer::start();
    let (client, other) = (client(&server).await, client(&server).await);
    let mut con = raw(&server).await;
    let mut pipe = redis::pipe();
    for index in 0..1_200 {
        pipe.hset(format!("paged:{index}"), "owner:1", 1).ignore();
    }
    let _: () = pipe.query_async(&mut con).await.unwrap();
    // A lock with side keys (a fair queue), which a sweep must not return as names.
    let held = client.fair_lock("paged:fair").unwrap();
    assert!(held.acquire(AcquireOptions::new()).await.unwrap());
    let waiting = {
        let lock = other.fair_lock("paged:fair").unwrap();
        tokio::spawn(async move {
            lock.acquire(AcquireOptions::new().wait(Duration::from_secs(30)))
                .await
        })
    };
    assert!(
        eventually(Duration::from_secs(10), || {
            let mut con = con.clone();
            async move {
                con.llen::<_, i64>("redisson_lock_queue:{paged:fair}")
                    .await
                    .unwrap()
                    == 1
            }
        })
        .await
    );

    let whole = client.scan_names("paged:*").await.unwrap();
    assert_eq!(
        whole.len(),
        1_201,
        "the names, without the fair lock's queue and timeouts"
    );
    for round in 1..=2 {
        let mut sweep = polylock::ScanSweep::default();
        let mut paged = std::collections::BTreeSet::new();
        let mut pages = 0;
        loop {
            paged.extend(client.scan_names_page("paged:*", &mut sweep).await.unwrap());
            pages += 1;
            if sweep.is_through() {
                break;
            }
            assert!(pages < 1_000, "round {round}: the sweep never ended");
        }
        assert!(
            pages > 1,
            "round {round}: 1,201 keys past one COUNT in one page"
        );
        assert_eq!(
            paged.into_iter().collect::<Vec<_>>(),
            whole,
            "round {round}"
        );
    }

    let mut sweep = polylock::ScanSweep::default();
    let mut ids = Vec::new();
    loop {
        ids.extend(client.scan_client_ids_page(&mut sweep).await.unwrap());
        if sweep.is_through() {
            break;
        }
    }
    ids.sort();
    ids.dedup();
    let mut expected = vec![client.id().to_owned(), other.id().to_owned()];
    expected.sort();
    assert_eq!(ids, expected);

    let named = client.inspect("paged:fair").await.unwrap();
    let bare = client.inspect_without_records("paged:fair").await.unwrap();
    assert_eq!(named.holders.len(), 1);
    assert!(named.holders[0].client_name.is_some(), "{named:?}");
    assert_eq!(bare.kind, named.kind);
    assert_eq!(bare.queue.len(), 1, "{bare:?}");
    assert_eq!(bare.holders.len(), 1);
    assert_eq!(bare.holders[0].owner, named.holders[0].owner);
    assert_eq!(bare.holders[0].client_name, None);
    held.release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap());
}

/// A count-down latch is stored as a semaphore is (a string holding an integer): polylock's
/// latch mark beside it tells it, with its count; counted down to zero it goes, mark and all.
#[tokio::test]
async fn a_latch_shows_its_count_and_is_told_from_a_semaphore() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let latch = client.count_down_latch("inspect:latch").unwrap();
    assert!(latch.try_set_count(3).await.unwrap());
    latch.count_down().await.unwrap();
    let semaphore = client.semaphore("inspect:sem-beside").unwrap();
    assert!(semaphore.try_set_permits(2).await.unwrap());

    let info = client.inspect("inspect:latch").await.unwrap();
    assert_eq!(info.kind, InspectedKind::Latch, "{info:?}");
    assert_eq!(info.kind.label(), "latch");
    assert_eq!(info.latch_count, Some(2));
    assert_eq!(info.permits_available, None);
    assert!(!info.is_held() && !info.kind.is_lock());
    let info = client.inspect("inspect:sem-beside").await.unwrap();
    assert_eq!(info.kind, InspectedKind::Semaphore);
    assert_eq!(info.latch_count, None);

    // Each name once, without the mark beside the latch.
    let names = client.scan_names("*").await.unwrap();
    assert_eq!(names, ["inspect:latch", "inspect:sem-beside"]);

    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    let info = client.inspect("inspect:latch").await.unwrap();
    assert_eq!(info.kind, InspectedKind::None, "{info:?}");
    let mut con = raw(&server).await;
    let marks: i64 = con
        .exists(polylock::keys::latch_mark("inspect:latch"))
        .await
        .unwrap();
    assert_eq!(marks, 0, "the mark goes with the count");
    // A deleted latch takes its mark with it too.
    assert!(latch.try_set_count(5).await.unwrap());
    assert!(latch.delete().await.unwrap());
    let marks: i64 = con
        .exists(polylock::keys::latch_mark("inspect:latch"))
        .await
        .unwrap();
    assert_eq!(marks, 0);
}

/// An election: its leader (owner, the client it announced, its value and term) while it
/// leads; after a resign nobody leads and the last term given stays; the next leader has the
/// next term.
#[tokio::test]
async fn an_election_shows_its_leader_value_and_term() {
    let server = RedisServer::start();
    let named = |name: &str| polylock::ClientOptions {
        name: Some(name.into()),
        ..polylock::ClientOptions::default()
    };
    let first = polylock::Client::connect_with(&server.url(), named("leader-a"))
        .await
        .unwrap();
    let second = polylock::Client::connect_with(&server.url(), named("leader-b"))
        .await
        .unwrap();
    let reader = client(&server).await;
    let leadership = first
        .election("inspect:election")
        .unwrap()
        .campaign("http://a:80", NOW)
        .await
        .unwrap()
        .expect("the first candidate leads");

    let info = reader.inspect("inspect:election").await.unwrap();
    assert_eq!(info.kind, InspectedKind::Election, "{info:?}");
    assert_eq!(info.kind.label(), "election");
    let leader = info.leader.clone().expect("a leader");
    assert_eq!(leader.owner, leadership.owner());
    assert_eq!(leader.value, "http://a:80");
    assert_eq!(leader.term, leadership.term());
    assert_eq!(leader.client_name, "leader-a");
    assert_eq!(info.holders.len(), 1);
    assert_eq!(info.holders[0].owner, leadership.owner());
    assert_eq!(info.fence_token, Some(leadership.term()));
    assert_eq!(
        reader.scan_names("*").await.unwrap(),
        ["inspect:election"],
        "the name once, not its record nor its token counter"
    );

    leadership.proclaim("http://a:81").await.unwrap();
    let info = reader.inspect("inspect:election").await.unwrap();
    assert_eq!(info.leader.unwrap().value, "http://a:81");

    let term = leadership.term();
    leadership.resign().await.unwrap();
    let info = reader.inspect("inspect:election").await.unwrap();
    // The resign deleted the record: a free fenced lock is all that is left.
    assert_eq!(info.leader, None);
    assert!(!info.is_held());
    assert_eq!(info.fence_token, Some(term));

    let next = second
        .election("inspect:election")
        .unwrap()
        .campaign("http://b:80", NOW)
        .await
        .unwrap()
        .expect("the second candidate leads");
    let info = reader.inspect("inspect:election").await.unwrap();
    assert_eq!(info.kind, InspectedKind::Election);
    let leader = info.leader.unwrap();
    assert_eq!(
        (leader.term, leader.client_name.as_str()),
        (term + 1, "leader-b")
    );
    assert_eq!(leader.value, "http://b:80");
    next.resign().await.unwrap();
    for client in [first, second, reader] {
        client.close();
    }
}

/// A leader whose lock is gone (its lease ran out: here the lock deleted under it) is no
/// leader, though its record stays: the election shows nobody leading.
#[tokio::test]
async fn an_election_whose_leader_lost_its_lock_shows_no_leader() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let leadership = client
        .election("inspect:lost")
        .unwrap()
        .campaign("v", NOW)
        .await
        .unwrap()
        .unwrap();
    let mut con = raw(&server).await;
    let _: () = con.del("inspect:lost").await.unwrap();
    let info = client.inspect("inspect:lost").await.unwrap();
    assert_eq!(info.kind, InspectedKind::Election, "{info:?}");
    assert_eq!(info.leader, None);
    assert_eq!(info.fence_token, Some(leadership.term()));
    drop(leadership);
    client.close();
}
