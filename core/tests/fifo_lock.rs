//! The FIFO lock (polylock's own layout) against real redis-server processes. What it shares
//! with the fair lock runs from `common/line.rs`.

mod common;
#[path = "common/line.rs"]
mod line;

use std::time::Duration;

use common::*;
use line::{line_client, FIFO, LONG_LEASE};
use polylock::AcquireOptions;
use redis::AsyncCommands;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_arrival_order() {
    line::waiters_are_served_in_arrival_order(FIFO).await;
}

#[tokio::test]
async fn a_waiter_that_times_out_or_is_cancelled_leaves_the_line_at_once() {
    line::a_waiter_that_times_out_or_is_cancelled_leaves_the_line_at_once(FIFO).await;
}

#[tokio::test]
async fn a_killed_waiter_is_skipped_once_its_record_lapses() {
    line::a_killed_waiter_is_skipped(FIFO).await;
}

#[tokio::test]
async fn a_live_waiter_keeps_its_place_through_a_long_hold() {
    line::a_live_waiter_keeps_its_place_through_a_long_hold(FIFO).await;
}

#[tokio::test]
async fn fifo_reentrancy_counts_in_the_hash_and_a_single_try_takes_no_place() {
    line::reentrancy_counts_in_the_hash(FIFO).await;
}

#[tokio::test]
async fn fifo_lock_processes_lose_no_increment() {
    line::processes_lose_no_increment(FIFO).await;
}

#[tokio::test]
async fn a_fifo_holder_is_told_when_its_key_is_deleted() {
    line::a_holder_is_told_when_its_key_is_deleted(FIFO).await;
}

#[tokio::test]
async fn fifo_force_unlock_passes_the_lock_to_the_head() {
    line::force_unlock_passes_the_lock_to_the_head(FIFO).await;
}

#[tokio::test]
async fn a_release_tells_the_head_of_fixed_lease_waiters_which_takes_the_lock_itself() {
    line::a_release_tells_the_head_of_fixed_lease_waiters(FIFO).await;
}

#[tokio::test]
async fn a_release_grants_the_lock_to_the_head_held_by_the_watchdog_which_sends_no_acquire() {
    line::a_release_grants_the_lock_to_the_watchdog_head(FIFO).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifo_holders_that_come_back_for_the_lock_take_two_scripts_per_handoff() {
    line::holders_that_come_back_take_two_scripts_per_handoff(FIFO).await;
}

#[tokio::test]
async fn a_granted_fifo_hold_is_extended_to_the_watchdog_lease() {
    line::a_granted_hold_is_extended_to_the_watchdog_lease(FIFO).await;
}

#[tokio::test]
async fn a_fifo_waiter_that_gives_up_as_it_is_granted_the_lock_passes_it_to_the_next() {
    line::a_waiter_that_gives_up_as_it_is_granted_passes_the_lock_on(FIFO).await;
}

#[tokio::test]
async fn a_granted_fifo_hold_lives_its_whole_lease_through_a_stall_of_its_holder() {
    line::a_granted_hold_lives_its_whole_lease_through_a_stall(FIFO).await;
}

#[tokio::test]
async fn the_line_uses_polylocks_layout() {
    let server = RedisServer::start();
    let queue_timeout = Duration::from_secs(20);
    let client = line_client(&server, queue_timeout).await;
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
    FIFO.in_line(&server, "layout", 1).await;
    assert_eq!(
        FIFO.line(&server, "layout").await,
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
    assert!(FIFO.line(&server, "layout").await.is_empty());
    waiter.release().await.unwrap();
    assert!(!exists(&mut con, "layout").await);
}

#[tokio::test]
async fn it_excludes_a_plain_lock_of_the_same_name() {
    let server = RedisServer::start();
    let client = line_client(&server, Duration::from_secs(60)).await;
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
async fn a_head_told_of_an_expired_lock_takes_it_and_the_next_waits_its_turn() {
    // A holder dies: nobody releases, the lock expires; the head (which looks when the lease
    // ends) takes it, not the waiter behind, nor a newcomer.
    let server = RedisServer::start();
    let client = line_client(&server, Duration::from_secs(60)).await;
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
    FIFO.in_line(&server, "expired", 1).await;
    let second = client.fifo_lock("expired").unwrap();
    let second_wait = tokio::spawn({
        let second = second.clone();
        async move {
            second
                .acquire(AcquireOptions::new().lease(LONG_LEASE))
                .await
        }
    });
    FIFO.in_line(&server, "expired", 2).await;
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

/// Server calls (INFO commandstats, each `redis.call` inside a script included; the test's
/// own LRANGE left out) of one critical section's protocol with `queued` waiters in line: the
/// look with which the last waiter takes its place, then the holder's release and the head's
/// acquisition.
async fn one_handoff(name: &str, queued: usize) -> i64 {
    let server = RedisServer::start();
    let client = line_client(&server, Duration::from_secs(60)).await;
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
    FIFO.in_line(&server, name, 1).await;
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
    FIFO.in_line(&server, name, queued - 1).await;
    // Quiet first: every waiter has subscribed and made its last look.
    assert!(
        eventually(Duration::from_secs(10), || async {
            let mut con = raw(&server).await;
            line::reset_stats(&mut con).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            line::server_calls(&mut con, &["lrange"]).await == 0
        })
        .await
    );
    line::reset_stats(&mut con).await;
    let last_waits = tokio::spawn({
        let last = last.clone();
        async move { last.acquire(AcquireOptions::new()).await }
    });
    FIFO.in_line(&server, name, queued).await;
    holder.release().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), first.recv())
        .await
        .expect("the head acquires on the release");
    let calls = line::server_calls(&mut con, &["lrange"]).await;
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
async fn a_head_not_listening_yet_is_not_granted_the_lock_and_keeps_its_place() {
    let server = RedisServer::start();
    let holder = FIFO.held_long(&server, "deaf").await;
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
    let behind = line_client(&server, Duration::from_secs(60))
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
    FIFO.in_line(&server, "deaf", 2).await;
    holder.release().await.unwrap();
    // Nobody received the grant: it is not made, and the head keeps its place; the waiter
    // behind it is not served out of turn.
    assert!(!waiting.await.unwrap().unwrap());
    assert_eq!(FIFO.line(&server, "deaf").await, vec![deaf.to_owned()]);
    assert!(!exists(&mut con, "deaf").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_does_not_reenter_on_its_orphaned_level() {
    line::a_handle_does_not_reenter_on_its_orphaned_level(FIFO).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_look_that_runs_after_its_caller_gave_up_on_it_leaves_no_place() {
    line::a_look_that_runs_after_its_caller_gave_up_on_it_leaves_no_place(FIFO).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_after_an_unknown_look_queues_behind_those_who_came_meanwhile() {
    line::a_call_after_an_unknown_look_queues_behind_those_who_came_meanwhile(FIFO).await;
}
