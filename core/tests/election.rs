//! Leader election (`Client::election`) against real servers: campaign, resign, terms,
//! proclaim, `leader()`, `observe()`, and a leader cut off by the fault proxy or stalled by
//! `CLIENT PAUSE`, whose lost signal must fire before its lease can end on the server.

mod common;

use std::time::{Duration, Instant};

use common::*;
use futures_util::StreamExt;
use polylock::{Client, ErrorKind};
use polylock_testkit::{Fault, FaultProxy};
use redis::AsyncCommands;

const LONG_LEASE: Duration = Duration::from_secs(60);
const SHORT_LEASE: Duration = Duration::from_millis(1500);

async fn named(url: &str, name: &str, watchdog: Duration) -> Client {
    let options = polylock::ClientOptions {
        name: Some(name.to_owned()),
        watchdog_timeout: watchdog,
        connect_timeout: Duration::from_secs(2),
        response_timeout: Duration::from_secs(5),
        ..Default::default()
    };
    Client::connect_with(url, options).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_leads_resign_hands_over_with_a_higher_term() {
    let server = RedisServer::start();
    let alice = named(&server.url(), "alice", LONG_LEASE).await;
    let bob = named(&server.url(), "bob", LONG_LEASE).await;
    let election = alice.election("jobs").unwrap();
    assert_eq!(election.leader().await.unwrap(), None);

    let first = election
        .campaign("alice:8080", None)
        .await
        .unwrap()
        .unwrap();
    assert!(first.is_leader());
    let leader = election.leader().await.unwrap().unwrap();
    assert_eq!(leader.value, "alice:8080");
    assert_eq!(leader.term, first.term());
    assert_eq!(leader.client_name, "alice");
    assert_eq!(leader.owner, first.owner());

    // A second campaign of the same client is another candidate: it does not lead.
    assert!(election
        .campaign("again", Some(Duration::ZERO))
        .await
        .unwrap()
        .is_none());

    // Bob waits; alice's resign wakes him long before the 60 s lease would end.
    let bob_election = bob.election("jobs").unwrap();
    let waiting = tokio::spawn(async move { bob_election.campaign("bob:9090", None).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "bob led while alice did");
    let resigned_at = Instant::now();
    first.resign().await.unwrap();
    assert!(!first.is_leader());
    first.lost().await; // resolves on a resign too
    let second = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("bob was not woken by the resign")
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(resigned_at.elapsed() < Duration::from_secs(20));
    assert!(second.term() > first.term(), "terms must strictly increase");
    let leader = election.leader().await.unwrap().unwrap();
    assert_eq!(
        (leader.value.as_str(), leader.term),
        ("bob:9090", second.term())
    );
    assert_eq!(leader.client_name, "bob");

    // A former leader can no longer announce.
    let err = first.proclaim("alice again").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    second.proclaim("bob:9191").await.unwrap();
    assert_eq!(second.value(), "bob:9191");
    assert_eq!(election.leader().await.unwrap().unwrap().value, "bob:9191");
    // Resigning twice is fine.
    second.resign().await.unwrap();
    second.resign().await.unwrap();
    assert_eq!(election.leader().await.unwrap(), None);
}

/// The record of a leader whose lock is gone (its lease ended, or the key was deleted) is never
/// reported, and that leader can no longer proclaim: both are checked in the script against
/// the lock's holder, not against the leader's own belief.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_leaders_value_is_never_reported() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, LONG_LEASE).await;
    let election = client.election("dead").unwrap();
    let leadership = election.campaign("v1", None).await.unwrap().unwrap();
    let mut raw = raw(&server).await;
    // The lock vanishes behind the leader's back: the record stays, the leader is gone.
    let _: i64 = raw.del("dead").await.unwrap();
    let record: i64 = raw.exists("polylock_election:{dead}").await.unwrap();
    assert_eq!(record, 1);
    assert_eq!(election.leader().await.unwrap(), None);
    let err = leadership.proclaim("v2").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    let value: String = raw.hget("polylock_election:{dead}", "value").await.unwrap();
    assert_eq!(value, "v1", "a proclaim without the lock wrote");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_sees_each_leader_value_and_vacancy() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, SHORT_LEASE).await;
    let other = client_with_watchdog(&server, LONG_LEASE).await;
    let election = client.election("watched").unwrap();
    let observer = other.election("watched").unwrap().observe().await.unwrap();
    let mut changes = Box::pin(observer.changes());
    assert_eq!(next(&mut changes).await, None);
    let leadership = election.campaign("a", None).await.unwrap().unwrap();
    let seen: Option<polylock::Leader> = next(&mut changes).await;
    assert_eq!(
        seen.as_ref().map(|l| (l.value.as_str(), l.term)),
        Some(("a", leadership.term()))
    );
    leadership.proclaim("b").await.unwrap();
    assert_eq!(next(&mut changes).await.unwrap().value, "b");
    leadership.resign().await.unwrap();
    assert_eq!(next(&mut changes).await, None);

    // A leader that dies publishes nothing: the observer's poll sees it gone.
    let dying = election.campaign("c", None).await.unwrap().unwrap();
    assert_eq!(next(&mut changes).await.unwrap().term, dying.term());
    client.close();
    let gone = next(&mut changes).await;
    assert_eq!(gone, None);
}

/// An observer's `next` dropped while it waits (a `select!` that took another branch) does not
/// swallow the change it was waiting for: the next call returns it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_observe_call_loses_no_change() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, LONG_LEASE).await;
    let election = client.election("dropped-next").unwrap();
    let observer = election.observe().await.unwrap();
    assert_eq!(observer.next().await.unwrap(), None);
    let waiting = tokio::time::timeout(Duration::from_millis(200), observer.next()).await;
    assert!(waiting.is_err(), "a change without a leader");
    let leadership = election.campaign("v", None).await.unwrap().unwrap();
    // The dropped call's search, finishing in the background, sees the change first.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = tokio::time::timeout(Duration::from_secs(10), observer.next())
        .await
        .expect("the change was swallowed by the dropped call")
        .unwrap();
    assert_eq!(seen.map(|leader| leader.term), Some(leadership.term()));
}

/// The next change of `changes`, within 10 s.
async fn next<S>(changes: &mut std::pin::Pin<Box<S>>) -> Option<polylock::Leader>
where
    S: futures_util::Stream<Item = polylock::Result<Option<polylock::Leader>>>,
{
    tokio::time::timeout(Duration::from_secs(10), changes.next())
        .await
        .expect("no change seen")
        .unwrap()
        .unwrap()
}

/// Polls the server until `leadership` no longer holds the lock `name` (its key expired, and
/// maybe the next candidate took it already); returns whether the leadership still believed it
/// led right after the server said it no longer held the lock.
async fn believed_after_the_hold_ended(
    server: &RedisServer,
    name: &str,
    leadership: &polylock::Leadership,
) -> bool {
    let mut raw = raw(server).await;
    loop {
        let held: bool = raw.hexists(name, leadership.owner()).await.unwrap();
        if !held {
            return leadership.is_leader();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A leader cut off by the network (the fault proxy forwards nothing): by the time the server
/// no longer has its hold it no longer believes it leads (`is_leader` reads the clock against
/// the lease's earliest end), its lost signal fires from that deadline (not from the renewal's
/// 10 s response timeout), and another candidate leads within the lease and a bound, with a
/// higher term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_leader_learns_it_lost_before_the_server_lets_another_lead() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let cut = client_with(&proxy.url(), SHORT_LEASE, Duration::from_secs(10)).await;
    let other = client_with_watchdog(&server, LONG_LEASE).await;
    let leadership = cut
        .election("cut")
        .unwrap()
        .campaign("cut", None)
        .await
        .unwrap()
        .unwrap();
    let contender = other.election("cut").unwrap();
    let waiting = tokio::spawn(async move { contender.campaign("other", None).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished());

    let cut_at = Instant::now();
    proxy.set(Fault::BlackHole);
    // is_leader() reads the clock against the lease's earliest end: once the server says the
    // hold is gone, it can no longer say true, however late the tasks here are scheduled.
    let believed = tokio::time::timeout(
        Duration::from_secs(10),
        believed_after_the_hold_ended(&server, "cut", &leadership),
    )
    .await
    .expect("the cut-off leader's hold never ended on the server");
    assert!(
        !believed,
        "the leader still believed it led after its hold ended"
    );
    // The lost signal comes from the lease's deadline, not from the 10 s response timeout of
    // the renewal hanging in the silent network.
    tokio::time::timeout(SHORT_LEASE + Duration::from_secs(3), leadership.lost())
        .await
        .expect("the lost signal did not fire within the lease and a bound");
    assert!(leadership.is_lost() && !leadership.is_leader());
    let next = tokio::time::timeout(SHORT_LEASE + Duration::from_secs(5), waiting)
        .await
        .expect("no new leader within the lease and a bound")
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(cut_at.elapsed() < SHORT_LEASE + Duration::from_secs(5));
    assert!(next.term() > leadership.term());
    proxy.set(Fault::Pass);
}

/// `CLIENT PAUSE` past the lease: no renewal is confirmed, so the leader reports itself lost
/// while the server still stands still; once it resumes another candidate leads, and the old
/// leader's proclaim is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_server_makes_the_leader_step_down_in_time() {
    let server = RedisServer::start();
    let leader_client = client_with(&server.url(), SHORT_LEASE, Duration::from_secs(10)).await;
    let other = client_with_watchdog(&server, LONG_LEASE).await;
    let leadership = leader_client
        .election("paused")
        .unwrap()
        .campaign("first", None)
        .await
        .unwrap()
        .unwrap();
    let pause_ms = 4000;
    let paused_at = Instant::now();
    pause(&server, pause_ms);
    tokio::time::timeout(Duration::from_secs(3), leadership.lost())
        .await
        .expect("the leader did not step down while the server was paused");
    assert!(
        paused_at.elapsed() < Duration::from_millis(pause_ms),
        "lost only after the pause"
    );
    assert!(!leadership.is_leader());
    let next = other
        .election("paused")
        .unwrap()
        .campaign("second", Some(Duration::from_secs(15)))
        .await
        .unwrap()
        .expect("no new leader after the pause");
    assert!(next.term() > leadership.term());
    let err = leadership.proclaim("still me").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost);
    let leader = other
        .election("paused")
        .unwrap()
        .leader()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(leader.value, "second");
}

/// A leader's term fences its writes: after a new leader wrote with its higher term, the old
/// term is refused (what a paused ex-leader meets when it wakes and writes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terms_fence_an_old_leaders_writes() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, LONG_LEASE).await;
    let election = client.election("fenced-writes").unwrap();
    let old = election.campaign("old", None).await.unwrap().unwrap();
    client
        .fenced_set("config", "from old", old.term())
        .await
        .unwrap();
    old.resign().await.unwrap();
    let new = election.campaign("new", None).await.unwrap().unwrap();
    client
        .fenced_set("config", "from new", new.term())
        .await
        .unwrap();
    let err = client
        .fenced_set("config", "late", old.term())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::StaleToken);
}

#[tokio::test]
async fn bad_names_are_refused() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let err = client.election("").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

#[path = "../examples/election.rs"]
mod example;

/// The runnable example (`cargo run --example election URL`) against a server of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_runs() {
    let server = RedisServer::start();
    example::run(&server.url()).await.unwrap();
}

async fn connect_with_options(url: &str, options: polylock::ClientOptions) -> Client {
    let options = polylock::ClientOptions {
        connect_timeout: Duration::from_secs(2),
        response_timeout: Duration::from_secs(5),
        ..options
    };
    Client::connect_with(url, options).await.unwrap()
}

/// Under a key prefix the election's lock, record and channel all carry it, and elections of
/// the same name under two prefixes are two elections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_follows_the_key_prefix() {
    let server = RedisServer::start();
    let prefixed = |prefix: &str| polylock::ClientOptions {
        key_prefix: Some(prefix.to_owned()),
        ..Default::default()
    };
    let a = connect_with_options(&server.url(), prefixed("a:")).await;
    let a2 = connect_with_options(&server.url(), prefixed("a:")).await;
    let b = connect_with_options(&server.url(), prefixed("b:")).await;
    let bound = Duration::from_secs(10);

    let first = tokio::time::timeout(bound, a.election("jobs").unwrap().campaign("a1", None))
        .await
        .expect("a campaign under a prefix must not hang")
        .unwrap()
        .unwrap();
    let seen = a2
        .election("jobs")
        .unwrap()
        .leader()
        .await
        .unwrap()
        .unwrap();
    assert_eq!((seen.value.as_str(), seen.term), ("a1", first.term()));
    // Another prefix: another election, led at once.
    let other = tokio::time::timeout(bound, b.election("jobs").unwrap().campaign("b1", None))
        .await
        .expect("the other prefix's campaign must not wait")
        .unwrap()
        .unwrap();
    assert_eq!(
        b.election("jobs")
            .unwrap()
            .leader()
            .await
            .unwrap()
            .unwrap()
            .value,
        "b1"
    );

    // The same prefix: one election; the resign hands over with a higher term.
    let waiting = tokio::spawn({
        let election = a2.election("jobs").unwrap();
        async move { election.campaign("a2", None).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "two leaders under one prefix");
    first.resign().await.unwrap();
    let second = tokio::time::timeout(bound, waiting)
        .await
        .expect("the resign woke the waiting candidate")
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(second.term() > first.term());

    let mut raw = raw(&server).await;
    for key in [
        "a:jobs",
        "polylock_election:{a:jobs}",
        "b:jobs",
        "polylock_election:{b:jobs}",
    ] {
        assert!(exists(&mut raw, key).await, "{key} missing");
    }
    assert!(!exists(&mut raw, "jobs").await);
    assert!(!exists(&mut raw, "polylock_election:{jobs}").await);
    other.resign().await.unwrap();
    second.resign().await.unwrap();
}

/// A client in the poll wait mode campaigns and observes without subscribing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_works_in_the_poll_wait_mode() {
    let server = RedisServer::start();
    let polling = || polylock::ClientOptions {
        wait_mode: polylock::WaitMode::poll(),
        ..Default::default()
    };
    let leader = connect_with_options(&server.url(), polling()).await;
    let candidate = connect_with_options(&server.url(), polling()).await;
    let watcher = connect_with_options(&server.url(), polling()).await;
    let bound = Duration::from_secs(10);
    let observer = watcher.election("polled").unwrap().observe().await.unwrap();
    let mut changes = Box::pin(observer.changes());
    assert_eq!(next(&mut changes).await, None);

    let first = leader
        .election("polled")
        .unwrap()
        .campaign("one", None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next(&mut changes).await.unwrap().value, "one");
    let waiting = tokio::spawn({
        let election = candidate.election("polled").unwrap();
        async move { election.campaign("two", None).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished());
    first.resign().await.unwrap();
    let second = tokio::time::timeout(bound, waiting)
        .await
        .expect("a polling candidate leads after the resign")
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(second.term() > first.term());
    assert_eq!(next(&mut changes).await.unwrap().value, "two");
    assert_eq!(watcher.subscribed_channels(), 0);
    second.resign().await.unwrap();
}
