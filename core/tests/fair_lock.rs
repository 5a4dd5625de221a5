//! The fair lock (Redisson RFairLock layout) against real redis-server processes. What it
//! shares with the FIFO lock runs from `common/line.rs`.

mod common;
#[path = "common/line.rs"]
mod line;

use std::time::Duration;

use common::*;
use line::{line_client, FAIR, LONG_LEASE};
use polylock::AcquireOptions;
use redis::AsyncCommands;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_arrival_order() {
    line::waiters_are_served_in_arrival_order(FAIR).await;
}

#[tokio::test]
async fn a_waiter_that_times_out_or_is_cancelled_leaves_the_queue_at_once() {
    line::a_waiter_that_times_out_or_is_cancelled_leaves_the_line_at_once(FAIR).await;
}

#[tokio::test]
async fn a_killed_waiter_is_skipped_after_its_queue_deadline() {
    line::a_killed_waiter_is_skipped(FAIR).await;
}

#[tokio::test]
async fn a_live_waiter_keeps_its_place_through_a_long_hold() {
    line::a_live_waiter_keeps_its_place_through_a_long_hold(FAIR).await;
}

#[tokio::test]
async fn fair_reentrancy_counts_in_the_hash() {
    line::reentrancy_counts_in_the_hash(FAIR).await;
}

#[tokio::test]
async fn fair_lock_processes_lose_no_increment() {
    line::processes_lose_no_increment(FAIR).await;
}

#[tokio::test]
async fn a_fair_holder_is_told_when_its_key_is_deleted() {
    line::a_holder_is_told_when_its_key_is_deleted(FAIR).await;
}

#[tokio::test]
async fn fair_force_unlock_wakes_the_head() {
    line::force_unlock_passes_the_lock_to_the_head(FAIR).await;
}

#[tokio::test]
async fn a_release_tells_the_head_of_fixed_lease_waiters_which_takes_the_lock_itself() {
    line::a_release_tells_the_head_of_fixed_lease_waiters(FAIR).await;
}

#[tokio::test]
async fn a_release_grants_the_lock_to_the_head_held_by_the_watchdog_which_sends_no_acquire() {
    line::a_release_grants_the_lock_to_the_watchdog_head(FAIR).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fair_holders_that_come_back_for_the_lock_take_two_scripts_per_handoff() {
    line::holders_that_come_back_take_two_scripts_per_handoff(FAIR).await;
}

#[tokio::test]
async fn a_granted_fair_hold_is_extended_to_the_watchdog_lease() {
    line::a_granted_hold_is_extended_to_the_watchdog_lease(FAIR).await;
}

#[tokio::test]
async fn a_fair_waiter_that_gives_up_as_it_is_granted_the_lock_passes_it_to_the_next() {
    line::a_waiter_that_gives_up_as_it_is_granted_passes_the_lock_on(FAIR).await;
}

#[tokio::test]
async fn a_granted_fair_hold_lives_its_whole_lease_through_a_stall_of_its_holder() {
    line::a_granted_hold_lives_its_whole_lease_through_a_stall(FAIR).await;
}

#[tokio::test]
async fn the_queue_uses_the_redisson_layout() {
    let server = RedisServer::start();
    let client = line_client(&server, Duration::from_secs(60)).await;
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
            FAIR.line(&server, "layout").await.len() == 1
        })
        .await
    );
    assert_eq!(
        FAIR.line(&server, "layout").await,
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

/// Server calls (INFO commandstats, each `redis.call` inside a script included) of one
/// handoff: the holder's release and the head's acquisition, with `queued` waiters in line.
/// `redisson_waiter`: also queue an entry the way a Redisson client writes one (no polylock
/// liveness record) behind them, and return how much the handoff lowered its deadline.
async fn one_handoff(name: &str, queued: usize, redisson_waiter: bool) -> (i64, f64) {
    let server = RedisServer::start();
    let client = line_client(&server, Duration::from_secs(60)).await;
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
            FAIR.line(&server, name).await.len() == queued
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
            line::reset_stats(&mut con).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            line::server_calls(&mut con, &[]).await == 0
        })
        .await
    );
    line::reset_stats(&mut con).await;
    holder.release().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), first.recv())
        .await
        .expect("the head acquires on the release");
    let calls = line::server_calls(&mut con, &[]).await;
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

#[tokio::test]
async fn a_head_not_listening_yet_is_not_granted_the_lock_and_keeps_its_place() {
    let server = RedisServer::start();
    let holder = FAIR.held_long(&server, "deaf").await;
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
    let behind = line_client(&server, Duration::from_secs(60))
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
    FAIR.in_line(&server, "deaf", 2).await;
    holder.release().await.unwrap();
    // Nobody received the grant: it is taken back, and the head keeps its place; the waiter
    // behind it is not served out of turn.
    assert!(!waiting.await.unwrap().unwrap());
    assert_eq!(FAIR.line(&server, "deaf").await, vec![deaf.to_owned()]);
    assert!(!exists(&mut con, "deaf").await);
    assert!(!exists(&mut con, "polylock_acquire_latch:{deaf}:0123").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_does_not_reenter_on_its_orphaned_level() {
    line::a_handle_does_not_reenter_on_its_orphaned_level(FAIR).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_look_that_runs_after_its_caller_gave_up_on_it_leaves_no_place() {
    line::a_look_that_runs_after_its_caller_gave_up_on_it_leaves_no_place(FAIR).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_after_an_unknown_look_queues_behind_those_who_came_meanwhile() {
    line::a_call_after_an_unknown_look_queues_behind_those_who_came_meanwhile(FAIR).await;
}
