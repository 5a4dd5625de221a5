//! The release gate (`engine/release_gate.rs`), in a test binary of its own: it reads the
//! engine's trace events (target `polylock::handoff`) in the order they happened, which a
//! global subscriber records for every test of its binary.

mod common;

use std::time::{Duration, Instant};

use common::*;
use polylock::{AcquireOptions, Client, Lock};
use polylock_testkit::{Fault, FaultProxy};

/// A final release whose reply is lost keeps the same owner's next acquire of the lock back
/// until it has its answer. The trace its retry reads is one per lock and owner: had that
/// owner's next whole cycle run in the retry's backoff (50 ms), its final release would have
/// replaced the trace, and the retry would answer "not held" (the lock reported lost) for a
/// release that went through. The engine's events show the order: the next cycle's first
/// attempt is sent only after the release's retry has its reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_next_cycle_waits_while_its_release_of_the_lock_awaits_its_answer() {
    recorded_logs(tracing::Level::TRACE);
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = client_with(
        &proxy.url(),
        Duration::from_secs(30),
        Duration::from_secs(2),
    )
    .await;
    let lock = client.lock("gated").unwrap();
    // Scripts loaded, so that every call below is one EVALSHA.
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    lock.release().await.unwrap();
    let mut con = raw(&server).await;
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    let events_before = handoff_events("gated").len();
    proxy.set(Fault::DropReplies);
    let releasing = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.release().await })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while exists(&mut con, "gated").await {
        assert!(Instant::now() < deadline, "the release never ran");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // The release ran; its reply is lost with the connection, and its retry waits out its
    // backoff. The same handle (so the same owner) starts a whole cycle from another task.
    proxy.set(Fault::Pass);
    proxy.cut();
    let next_cycle = {
        let lock = lock.clone();
        tokio::spawn(async move {
            assert!(lock.acquire(AcquireOptions::new()).await?);
            lock.release().await
        })
    };
    releasing
        .await
        .unwrap()
        .expect("the retried final release answers released");
    next_cycle.await.unwrap().expect("then the next cycle runs");
    assert!(!exists(&mut con, "gated").await);
    use redis::AsyncCommands;
    let traces: Vec<String> = con.keys("polylock_released:{gated}:*").await.unwrap();
    assert_eq!(
        traces,
        vec![format!("polylock_released:{{gated}}:{}", lock.owner())]
    );
    // Up to the next cycle's first attempt: the release sent at least twice (the call whose
    // reply was lost, then its retries: one more when the retry goes on a second connection the
    // cut broke, the client's own after this runtime's failed) and had every reply.
    let events = handoff_events("gated")[events_before..].to_vec();
    let first_attempt = events
        .iter()
        .position(|event| event == "attempt sent")
        .expect("the next cycle's attempt");
    let before = &events[..first_attempt];
    let count = |name: &str| before.iter().filter(|event| *event == name).count();
    let (sent, replied) = (count("release sent"), count("release reply"));
    assert!(
        sent >= 2 && sent == replied,
        "the next cycle's attempt went out while the release awaited its answer: {events:?}"
    );
}

/// Defect 6: two levels of one handle released at the same time, their replies lost. Were both
/// scripts to run before either retry, one would be partial (the owner's count down to 1, its
/// level's field gone) and the other final (the hash renamed to the owner's trace, which holds
/// only the final level's field): the partial release's retry would find neither its field, nor
/// the owner's count, nor its field in the trace, and answer "not held" (`LockLost`, counted as
/// a loss) for a release that went through. The owner's releases of the lock take turns: the
/// second waits until the first has its answer (so, fixed, only the first one's reply is lost
/// here; the second runs after the first's retry, as a final release whose trace is its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_levels_released_at_once_with_their_replies_lost_both_answer_released() {
    recorded_logs(tracing::Level::TRACE);
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = client_with(
        &proxy.url(),
        Duration::from_secs(30),
        Duration::from_secs(2),
    )
    .await;
    let lock = client.lock("levels").unwrap();
    // Scripts loaded, so that every call below is one EVALSHA.
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    lock.release().await.unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    release_both_levels_with_their_replies_lost(&server, &proxy, &client, &lock).await;
}

/// Defect 6 with the first level granted by a release's message (`g:<request>:<look>`, taken
/// without an attempt of its own, so past no gate): its release takes its turn like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_level_granted_by_message_released_with_another_at_once_both_answer_released() {
    recorded_logs(tracing::Level::TRACE);
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = client_with(
        &proxy.url(),
        Duration::from_secs(30),
        Duration::from_secs(2),
    )
    .await;
    let lock = client.lock("granted").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    lock.release().await.unwrap();
    let other = common::client(&server).await;
    let theirs = other.lock("granted").unwrap();
    let granted_so_far = |client: &polylock::Client| {
        client
            .metrics()
            .locks
            .iter()
            .find(|counted| counted.name == "granted")
            .map_or(0, |counted| counted.handoffs_granted)
    };
    // A waiter listed for a grant and listening is usually granted the lock by the release's
    // message; a look of its own that races the release takes it instead. The scenario needs
    // the grant: the hand-over is tried again (bounded) until one came by message.
    let mut con = raw(&server).await;
    let mut tries = 0;
    loop {
        tries += 1;
        let before = granted_so_far(&client);
        assert!(theirs.acquire(AcquireOptions::new()).await.unwrap());
        let waiting = {
            let lock = lock.clone();
            tokio::spawn(async move { lock.acquire(AcquireOptions::new()).await })
        };
        // Listed to be granted the lock, and listening on its own channel.
        let told = polylock::keys::lock_told_channel("granted", lock.owner());
        assert!(
            eventually(Duration::from_secs(5), || {
                let told = told.clone();
                let owner = lock.owner().to_owned();
                let server = &server;
                async move {
                    let mut con = raw(server).await;
                    let entry: Option<String> = redis::cmd("HGET")
                        .arg(polylock::keys::lock_grants("granted"))
                        .arg(&owner)
                        .query_async(&mut con)
                        .await
                        .unwrap();
                    let (_, listening): (String, i64) = redis::cmd("PUBSUB")
                        .arg("NUMSUB")
                        .arg(&told)
                        .query_async(&mut con)
                        .await
                        .map(|mut pairs: Vec<(String, i64)>| pairs.remove(0))
                        .unwrap();
                    entry.is_some() && listening > 0
                }
            })
            .await,
            "the waiter never listened for a grant"
        );
        theirs.release().await.unwrap();
        assert!(waiting.await.unwrap().unwrap());
        if granted_so_far(&client) > before {
            break;
        }
        assert!(
            tries < 5,
            "the level was never granted by message in {tries} hand-overs"
        );
        lock.release().await.unwrap();
    }
    // A second level, re-entered.
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    assert_eq!(hget(&mut con, "granted", lock.owner()).await, Some(2));
    release_both_levels_with_their_replies_lost(&server, &proxy, &client, &lock).await;
}

/// Releases the two levels `lock` holds at the same time, through `proxy` dropping the replies,
/// and checks that both answer released, the lock is free and no loss was counted.
async fn release_both_levels_with_their_replies_lost(
    server: &RedisServer,
    proxy: &FaultProxy,
    client: &Client,
    lock: &Lock,
) {
    let name = lock.name();
    let mut con = raw(server).await;
    assert_eq!(hget(&mut con, name, lock.owner()).await, Some(2));
    let events_before = handoff_events(name).len();
    proxy.set(Fault::DropReplies);
    let releases: Vec<_> = (0..2)
        .map(|_| {
            let lock = lock.clone();
            tokio::spawn(async move { lock.release().await })
        })
        .collect();
    // Both releases ran on the server (the key is gone), or one did and the other waits its
    // turn: either way before any retry, as the replies are lost.
    let deadline = Instant::now() + Duration::from_secs(5);
    let ran = loop {
        if !exists(&mut con, name).await {
            break 2;
        }
        let waits = handoff_events(name)[events_before..]
            .iter()
            .any(|event| event == "release waits its turn");
        if waits && hget(&mut con, name, lock.owner()).await == Some(1) {
            break 1;
        }
        assert!(Instant::now() < deadline, "the releases never ran");
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    assert!(
        eventually(Duration::from_secs(5), || async {
            proxy.replies_lost() >= ran
        })
        .await
    );
    // The replies were lost; the connection drops, and the releases are retried.
    proxy.set(Fault::Pass);
    proxy.cut();
    for release in releases {
        release
            .await
            .unwrap()
            .expect("each level's release answers released");
    }
    assert!(!lock.is_held());
    assert!(!exists(&mut con, name).await);
    let metrics = client.metrics();
    let counted = metrics
        .locks
        .iter()
        .find(|counted| counted.name == name)
        .expect("the lock's metrics");
    assert_eq!(
        (
            counted.lost_expired,
            counted.lost_taken,
            counted.lost_connection,
            counted.release_failures
        ),
        (0, 0, 0, 0),
        "{counted:?}"
    );
}

/// A no-wait acquire (`try_lock`) behind the same owner's release still awaiting its answer
/// does not wait for it (up to the release's retry window, twice the response timeout): it
/// answers "not acquired" at once, as when the lock is taken. An acquire with a wait bound
/// waits for the release no longer than that bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_wait_acquire_behind_its_owners_release_in_flight_answers_within_its_bound() {
    recorded_logs(tracing::Level::TRACE);
    let response_timeout = Duration::from_secs(30);
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = client_with(&proxy.url(), Duration::from_secs(60), response_timeout).await;
    let lock = client.lock("no-wait").unwrap();
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    lock.release().await.unwrap();
    let mut con = raw(&server).await;
    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
    proxy.set(Fault::DropReplies);
    let releasing = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.release().await })
    };
    // The release ran; its reply is lost, and it waits for one up to the response timeout.
    assert!(
        eventually(Duration::from_secs(5), || async {
            !exists(&mut raw(&server).await, "no-wait").await
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
    let no_wait = tokio::time::timeout(
        response_timeout,
        lock.acquire(AcquireOptions::new().wait(Duration::ZERO)),
    )
    .await
    .expect("the no-wait acquire waited for the release's answer");
    assert!(
        !no_wait.unwrap(),
        "acquired while its release was in flight"
    );
    let bounded = tokio::time::timeout(
        response_timeout,
        lock.acquire(AcquireOptions::new().wait(Duration::from_millis(200))),
    )
    .await
    .expect("the bounded acquire waited past its bound for the release's answer");
    assert!(
        !bounded.unwrap(),
        "acquired while its release was in flight"
    );
    assert!(
        !releasing.is_finished(),
        "the release ended first: the acquires proved nothing"
    );
    assert!(
        !exists(&mut con, "no-wait").await,
        "an acquire went through"
    );
    // The connection drops: the release is retried and answers released; the gate opens.
    proxy.cut();
    releasing
        .await
        .unwrap()
        .expect("the retried release answers released");
    assert!(lock
        .acquire(AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap());
    lock.release().await.unwrap();
}

/// The engine's hand-off events recorded so far for lock `name` (the other tests of this binary
/// run at the same time), in order (`release sent`, `attempt sent`, ...): each line names its
/// lock in its span (`lock=<name>`, or `polylock.lock.name=<name>`).
fn handoff_events(name: &str) -> Vec<String> {
    let names = ["lock=", "lock.name="].map(|field| format!("{field}{name}"));
    let names_lock = |line: &str| {
        names.iter().any(|named| {
            line.match_indices(named.as_str())
                .any(|(at, _)| matches!(line.as_bytes().get(at + named.len()), Some(b' ' | b'}')))
        })
    };
    recorded_logs(tracing::Level::TRACE)
        .lines()
        .filter(|line| line.contains("polylock::handoff"))
        .filter(|line| names_lock(line))
        .filter_map(|line| line.rsplit("polylock::handoff: ").next())
        .map(|event| event.trim().to_owned())
        .collect()
}
