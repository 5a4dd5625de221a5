//! Waiting without pub/sub (`WaitMode::Poll`): a user whose ACL denies every SUBSCRIBE waits
//! for, and is woken by the release of, every lock kind; its waits end on time; it issues no
//! SUBSCRIBE at all; in pub/sub mode the same user gets a `Permission` error instead of a hang;
//! a poll waiter is never listed to be told, keeps its place in a fair queue, leaves it when
//! cancelled, and shares a lock with pub/sub waiters; a fault proxy does not stretch its bound.

mod common;

use std::future::Future;
use std::time::{Duration, Instant};

use common::{command_calls, eventually, init_tracing, raw, RedisServer};
use polylock::{AcquireOptions, Client, ErrorKind, Hold, MultiLock, RedLock, WaitMode};
use polylock_testkit::{Fault, FaultProxy};
use redis::AsyncCommands;

/// A waiter that wakes long before this lease ends was woken by looking, not by expiry.
const LONG_LEASE: Duration = Duration::from_secs(60);
/// Long enough for any wake-up here; a call that takes this long hangs.
const NO_HANG: Duration = Duration::from_secs(20);
/// A wait that runs out.
const SHORT_WAIT: Duration = Duration::from_millis(400);
/// How long after its bound a wait may end (one look and a loaded machine), far below a
/// backoff of the 5 s used where that matters.
const SLACK: Duration = Duration::from_millis(1500);
const PREFIX: &str = "app:";

/// The least-privilege rule without any way to subscribe; the scripts keep PUBLISH (and
/// SPUBLISH) and PUBSUB NUMSUB, which they call.
fn no_subscribe_rule() -> Vec<String> {
    let mut rule = common::configured_rule(PREFIX);
    for more in [
        "-@pubsub",
        "+publish",
        "+spublish",
        "+pubsub|numsub",
        "+pubsub|shardnumsub",
    ] {
        rule.push(more.to_owned());
    }
    rule
}

/// A server with user `nosub` (no SUBSCRIBE of any kind).
fn server_with_user() -> RedisServer {
    let server = RedisServer::start();
    let mut command = vec!["ACL", "SETUSER", "nosub", "on", ">secret"];
    let rule = no_subscribe_rule();
    command.extend(rule.iter().map(String::as_str));
    assert_eq!(server.command(&command).as_deref(), Some("+OK"));
    server
}

fn user_url(server: &RedisServer) -> String {
    format!("redis://nosub:secret@127.0.0.1:{}", server.port())
}

async fn connect(url: &str, mode: WaitMode) -> Client {
    let options = polylock::ClientOptions {
        wait_mode: mode,
        connect_timeout: Duration::from_secs(3),
        response_timeout: Duration::from_secs(3),
        fair_queue_timeout: Duration::from_secs(2),
        ..polylock::ClientOptions::default()
    };
    tokio::time::timeout(NO_HANG, Client::connect_with(url, options))
        .await
        .expect("connect hung")
        .expect("connect")
}

async fn within<T>(what: &str, call: impl Future<Output = T>) -> T {
    tokio::time::timeout(NO_HANG, call)
        .await
        .unwrap_or_else(|_| panic!("{what}: hung"))
}

/// `holder` takes it (`held_with`); `waiter`'s bounded wait runs out on time; then `waiter`
/// waits and is woken by the release, long before the holder's 60 s lease.
async fn waits_and_wakes<H: Hold>(kind: &str, holder: &H, held_with: AcquireOptions, waiter: &H) {
    assert!(
        within(kind, holder.acquire(held_with)).await.unwrap(),
        "{kind}: the holder got it"
    );
    let started = Instant::now();
    let acquired = within(kind, waiter.acquire(AcquireOptions::new().wait(SHORT_WAIT))).await;
    let took = started.elapsed();
    assert!(!acquired.unwrap(), "{kind}: got it while held");
    assert!(took >= SHORT_WAIT, "{kind}: gave up early, after {took:?}");
    assert!(took < SHORT_WAIT + SLACK, "{kind}: wait overran: {took:?}");

    let started = Instant::now();
    let release = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        holder.release().await.unwrap();
    };
    let (acquired, ()) = tokio::join!(
        within(kind, waiter.acquire(AcquireOptions::new().wait(NO_HANG))),
        release
    );
    assert!(acquired.unwrap(), "{kind}: not woken by the release");
    assert!(
        started.elapsed() < LONG_LEASE / 6,
        "{kind}: woke only after {:?}",
        started.elapsed()
    );
    waiter.release().await.unwrap();
}

/// Every kind, held by `holder` (pub/sub, default user), waited for by `waiter` (polling).
async fn every_kind(holder: &Client, waiter: &Client, tag: &str) {
    let leased = AcquireOptions::new().no_wait().lease(LONG_LEASE);
    let name = |kind: &str| format!("{PREFIX}{tag}:{kind}");
    for (kind, make) in [
        (
            "lock",
            Client::lock as fn(&Client, &str) -> polylock::Result<_>,
        ),
        ("fair_lock", Client::fair_lock),
        ("fifo_lock", Client::fifo_lock),
        ("fenced_lock", Client::fenced_lock),
    ] {
        let (h, w) = (
            make(holder, &name(kind)).unwrap(),
            make(waiter, &name(kind)).unwrap(),
        );
        waits_and_wakes(kind, &h, leased, &w).await;
    }
    let (h, w) = (
        holder.read_write_lock(&name("rw")).unwrap(),
        waiter.read_write_lock(&name("rw")).unwrap(),
    );
    waits_and_wakes(
        "write held, reader waits",
        &h.write_lock(),
        leased,
        &w.read_lock(),
    )
    .await;
    waits_and_wakes(
        "read held, writer waits",
        &h.read_lock(),
        leased,
        &w.write_lock(),
    )
    .await;

    let semaphore = holder.semaphore(&name("semaphore")).unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let waiting = waiter.semaphore(&name("semaphore")).unwrap();
    waits_and_wakes(
        "semaphore",
        &semaphore.permits(1).unwrap(),
        AcquireOptions::new().no_wait(),
        &waiting.permits(1).unwrap(),
    )
    .await;

    let group = |client: &Client, names: &[&str]| -> Vec<polylock::Lock> {
        names
            .iter()
            .map(|n| client.lock(&name(n)).unwrap())
            .collect()
    };
    let (h, w) = (
        MultiLock::new(group(holder, &["m1", "m2"])).unwrap(),
        MultiLock::new(group(waiter, &["m1", "m2"])).unwrap(),
    );
    waits_and_wakes("multi_lock", &h, leased, &w).await;
    let (h, w) = (
        RedLock::new(group(holder, &["r1", "r2", "r3"])).unwrap(),
        RedLock::new(group(waiter, &["r1", "r2", "r3"])).unwrap(),
    );
    waits_and_wakes("red_lock", &h, leased, &w).await;

    // The expirable semaphore hands out permit ids rather than a Hold.
    let held = holder.expirable_semaphore(&name("expirable")).unwrap();
    assert!(held.try_set_permits(1).await.unwrap());
    let waiting = waiter.expirable_semaphore(&name("expirable")).unwrap();
    let permit = held
        .acquire(leased)
        .await
        .unwrap()
        .expect("holder's permit");
    let started = Instant::now();
    let none = within(
        "expirable",
        waiting.acquire(AcquireOptions::new().wait(SHORT_WAIT)),
    )
    .await;
    assert!(
        none.unwrap().is_none(),
        "expirable: got a permit while none was left"
    );
    assert!(started.elapsed() >= SHORT_WAIT && started.elapsed() < SHORT_WAIT + SLACK);
    let started = Instant::now();
    let release = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        held.release(&permit).await.unwrap();
    };
    let (got, ()) = tokio::join!(
        within(
            "expirable",
            waiting.acquire(AcquireOptions::new().wait(NO_HANG))
        ),
        release
    );
    let got = got.unwrap().expect("expirable: not woken by the release");
    assert!(started.elapsed() < LONG_LEASE / 6);
    waiting.release(&got).await.unwrap();

    // The count-down latch: its await looks again rather than waiting for the zero message.
    let counted = holder.count_down_latch(&name("latch")).unwrap();
    assert!(counted.try_set_count(1).await.unwrap());
    let awaiting = waiter.count_down_latch(&name("latch")).unwrap();
    let started = Instant::now();
    assert!(!within("latch", awaiting.await_zero(SHORT_WAIT))
        .await
        .unwrap());
    assert!(started.elapsed() >= SHORT_WAIT && started.elapsed() < SHORT_WAIT + SLACK);
    let count_down = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        counted.count_down().await.unwrap();
    };
    let (opened, ()) = tokio::join!(within("latch", awaiting.await_zero(NO_HANG)), count_down);
    assert!(opened.unwrap(), "latch: not seen open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_user_denied_subscribe_polls_every_kind_and_issues_no_subscribe() {
    init_tracing();
    let server = server_with_user();
    let holder = connect(&server.url(), WaitMode::PubSub).await;
    let waiter = connect(&user_url(&server), WaitMode::poll()).await;
    let mut admin = raw(&server).await;
    // Nothing at connect either: the command connection only, no pub/sub connection.
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut admin)
        .await
        .unwrap();
    let connections = clients
        .lines()
        .filter(|line| line.contains(" user=nosub "))
        .count();
    assert_eq!(connections, 1, "{clients}");
    let subscribes = |name: &str| name.contains("subscribe");
    let before = command_calls(&mut admin, subscribes).await;

    every_kind(&holder, &waiter, "acl").await;

    assert_eq!(waiter.subscribed_channels(), 0);
    assert_eq!(
        command_calls(&mut admin, subscribes).await,
        before,
        "a poll waiter subscribed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_pubsub_mode_the_same_user_gets_a_permission_error_not_a_hang() {
    init_tracing();
    let server = server_with_user();
    let holder = connect(&server.url(), WaitMode::PubSub).await;
    let waiter = connect(&user_url(&server), WaitMode::PubSub).await;
    let name = format!("{PREFIX}denied");
    let held = holder.lock(&name).unwrap();
    assert!(held.acquire(AcquireOptions::new().no_wait()).await.unwrap());
    let lock = waiter.lock(&name).unwrap();
    let outcome = within(
        "pub/sub wait",
        lock.acquire(AcquireOptions::new().wait(NO_HANG)),
    )
    .await;
    let err = outcome.expect_err("waited without SUBSCRIBE");
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    assert!(err.to_string().contains("subscribe"), "{err}");

    // The same user, the handle overriding the client's mode, waits fine.
    let polling = waiter
        .lock(&name)
        .unwrap()
        .with_wait_mode(WaitMode::poll())
        .unwrap();
    let release = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        held.release().await.unwrap();
    };
    let (acquired, ()) = tokio::join!(
        within(
            "override",
            polling.acquire(AcquireOptions::new().wait(NO_HANG))
        ),
        release
    );
    assert!(acquired.unwrap());
}

/// The bound of a wait caps the last sleep: with backoffs of up to 5 s, five waiters bounded
/// at 400 ms all end within the slack (each sleep is random, so without the cap, most of them
/// would sleep past it).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_poll_wait_ends_at_its_bound_not_a_backoff_later() {
    init_tracing();
    let server = RedisServer::start();
    let client = connect(&server.url(), WaitMode::PubSub).await;
    let slow = WaitMode::Poll {
        min: Duration::from_secs(5),
        max: Duration::from_secs(5),
    };
    let held = client.lock("bound").unwrap();
    assert!(held.acquire(AcquireOptions::new().no_wait()).await.unwrap());
    let waits = (0..5).map(|_| {
        let lock = client.lock("bound").unwrap().with_wait_mode(slow).unwrap();
        async move {
            let started = Instant::now();
            assert!(!lock
                .acquire(AcquireOptions::new().wait(SHORT_WAIT))
                .await
                .unwrap());
            started.elapsed()
        }
    });
    for took in futures_util::future::join_all(waits).await {
        assert!(took >= SHORT_WAIT, "gave up early: {took:?}");
        assert!(took < SHORT_WAIT + SLACK, "slept past the bound: {took:?}");
    }
}

/// A reentrant (and fenced) lock tells the earliest listed waiter and keeps the lock for it: a
/// poll waiter, which cannot hear that, is never listed and never given a grant entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_poll_waiter_is_never_listed_to_be_told() {
    init_tracing();
    let server = RedisServer::start();
    let holder = connect(&server.url(), WaitMode::PubSub).await;
    let waiter = connect(&server.url(), WaitMode::poll()).await;
    let mut admin = raw(&server).await;
    for (name, make) in [
        (
            "told",
            Client::lock as fn(&Client, &str) -> polylock::Result<_>,
        ),
        ("told-fenced", Client::fenced_lock),
    ] {
        let held = make(&holder, name).unwrap();
        assert!(held.acquire(AcquireOptions::new().no_wait()).await.unwrap());
        let lock = make(&waiter, name).unwrap();
        let waiting = tokio::spawn({
            let lock = lock.clone();
            async move { lock.acquire(AcquireOptions::new().wait(NO_HANG)).await }
        });
        tokio::time::sleep(Duration::from_millis(400)).await;
        let listed: Option<f64> = admin
            .zscore(polylock::keys::lock_waiters(name), lock.owner())
            .await
            .unwrap();
        assert_eq!(listed, None, "{name}: a poll waiter was listed");
        let grant: Option<String> = admin
            .hget(polylock::keys::lock_grants(name), lock.owner())
            .await
            .unwrap();
        assert_eq!(grant, None, "{name}: a poll waiter has a grant entry");
        held.release().await.unwrap();
        assert!(within(name, waiting).await.unwrap().unwrap());
        lock.release().await.unwrap();
    }
}

/// A fair queue drops a waiter that stops looking for a queue timeout; a poll waiter looks
/// often enough to keep its place ahead of a later pub/sub waiter over a hold of several
/// queue timeouts, and a cancelled one leaves the queue at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fair_poll_waiter_keeps_its_place_and_leaves_when_cancelled() {
    init_tracing();
    let server = RedisServer::start();
    let holder = connect(&server.url(), WaitMode::PubSub).await;
    let poller = connect(&server.url(), WaitMode::poll()).await;
    let admin = raw(&server).await;
    let name = "fair-poll";
    let held = holder.fair_lock(name).unwrap();
    assert!(held.acquire(AcquireOptions::new().no_wait()).await.unwrap());

    // Cancelled: dropped while waiting, it leaves the queue.
    let cancelled = poller.fair_lock(name).unwrap();
    let dropped = tokio::time::timeout(
        Duration::from_millis(300),
        cancelled.acquire(AcquireOptions::new().wait(NO_HANG)),
    )
    .await;
    assert!(dropped.is_err(), "the wait ended by itself");
    // The dropped call leaves the queue on its own task, at once.
    let owner = cancelled.owner().to_owned();
    let left = eventually(Duration::from_secs(5), || {
        let (mut admin, owner) = (admin.clone(), owner.clone());
        async move {
            let queued: Vec<String> = admin
                .lrange(polylock::keys::fair_queue(name), 0, -1)
                .await
                .unwrap();
            !queued.contains(&owner)
        }
    })
    .await;
    assert!(left, "a cancelled poll waiter kept its place in the queue");

    let first = poller.fair_lock(name).unwrap();
    let second = holder.fair_lock(name).unwrap();
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let wait = |lock: polylock::Lock, who: &'static str| {
        let order = order.clone();
        tokio::spawn(async move {
            assert!(lock
                .acquire(AcquireOptions::new().wait(NO_HANG))
                .await
                .unwrap());
            order.lock().unwrap().push(who);
            tokio::time::sleep(Duration::from_millis(100)).await;
            lock.release().await.unwrap();
        })
    };
    let first_waits = wait(first, "poll");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second_waits = wait(second, "pubsub");
    // Longer than the queue timeout (2 s): a waiter that did not look would be dropped.
    tokio::time::sleep(Duration::from_secs(5)).await;
    held.release().await.unwrap();
    within("first", first_waits).await.unwrap();
    within("second", second_waits).await.unwrap();
    assert_eq!(*order.lock().unwrap(), vec!["poll", "pubsub"]);
}

/// A pub/sub waiter and a poll waiter on the same lock both get it, in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pubsub_and_poll_waiters_on_one_lock_both_get_it() {
    init_tracing();
    let server = RedisServer::start();
    let pubsub = connect(&server.url(), WaitMode::PubSub).await;
    let poll = connect(&server.url(), WaitMode::poll()).await;
    for (name, make) in [
        (
            "mixed",
            Client::lock as fn(&Client, &str) -> polylock::Result<_>,
        ),
        ("mixed-fair", Client::fair_lock),
        ("mixed-fifo", Client::fifo_lock),
    ] {
        let held = make(&pubsub, name).unwrap();
        assert!(held.acquire(AcquireOptions::new().no_wait()).await.unwrap());
        // A client that polls has no pub/sub connection to wait on.
        let no_hub = make(&poll, name)
            .unwrap()
            .with_wait_mode(WaitMode::PubSub)
            .unwrap();
        let err = no_hub.acquire(AcquireOptions::new()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        let waiters = [make(&pubsub, name).unwrap(), make(&poll, name).unwrap()].map(|lock| {
            tokio::spawn(async move {
                let acquired = lock.acquire(AcquireOptions::new().wait(NO_HANG)).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
                lock.release().await.unwrap();
                acquired.unwrap()
            })
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        held.release().await.unwrap();
        for waiter in waiters {
            assert!(
                within(name, waiter).await.unwrap(),
                "{name}: a waiter timed out"
            );
        }
    }
}

/// Replies delayed past the wait, or never coming, do not stretch a poll wait beyond its bound
/// plus one response timeout (the attempt under way), and the loop recovers when they pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fault_proxy_does_not_break_the_poll_bound() {
    init_tracing();
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let response = Duration::from_millis(500);
    let options = polylock::ClientOptions {
        wait_mode: WaitMode::poll(),
        response_timeout: response,
        connect_timeout: Duration::from_secs(1),
        ..polylock::ClientOptions::default()
    };
    let waiter = Client::connect_with(&proxy.url(), options).await.unwrap();
    let holder = connect(&server.url(), WaitMode::PubSub).await;
    let held = holder.lock("faulty").unwrap();
    assert!(held.acquire(AcquireOptions::new().no_wait()).await.unwrap());
    let lock = waiter.lock("faulty").unwrap();
    for fault in [
        Fault::Delay(Duration::from_millis(300)),
        Fault::BlackHole,
        Fault::DropReplies,
        Fault::CutAfterForward,
    ] {
        proxy.set(fault);
        let started = Instant::now();
        let outcome = within(
            "faulty wait",
            lock.acquire(AcquireOptions::new().wait(SHORT_WAIT)),
        )
        .await;
        let took = started.elapsed();
        match outcome {
            Ok(acquired) => assert!(!acquired, "{fault:?}: got it while held"),
            Err(err) => assert!(
                matches!(err.kind(), ErrorKind::Timeout | ErrorKind::Connection),
                "{fault:?}: {err}"
            ),
        }
        assert!(
            took < SHORT_WAIT + response + SLACK,
            "{fault:?}: the wait overran its bound: {took:?}"
        );
        // Replies lost for good would pair later requests with earlier replies: start afresh.
        proxy.set(Fault::Pass);
        proxy.cut();
    }
    let release = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        held.release().await.unwrap();
    };
    let (acquired, ()) = tokio::join!(
        within(
            "after the faults",
            lock.acquire(AcquireOptions::new().wait(NO_HANG))
        ),
        release
    );
    assert!(acquired.unwrap());
}

#[tokio::test]
async fn poll_bounds_are_validated_in_the_core() {
    let bad = polylock::ClientOptions {
        wait_mode: WaitMode::Poll {
            min: Duration::from_millis(50),
            max: Duration::from_millis(10),
        },
        ..polylock::ClientOptions::default()
    };
    let err = bad.validate().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        err.to_string(),
        "invalid argument: poll_max must be at least poll_min (50 ms), got 10 ms"
    );
    let zero = WaitMode::Poll {
        min: Duration::ZERO,
        max: Duration::from_millis(10),
    };
    assert_eq!(
        zero.validate().unwrap_err().to_string(),
        "invalid argument: poll_min must be from 1 ms to 10 years, got 0 ms"
    );
    use polylock::options::wait_mode_from_millis;
    assert_eq!(
        wait_mode_from_millis(Some("poll"), None, None).unwrap(),
        Some(WaitMode::poll())
    );
    assert_eq!(
        wait_mode_from_millis(Some("spin"), None, None)
            .unwrap_err()
            .to_string(),
        "invalid argument: wait_mode must be 'pubsub' or 'poll', got 'spin'"
    );
    assert_eq!(
        wait_mode_from_millis(None, Some(5.0), None)
            .unwrap_err()
            .to_string(),
        "invalid argument: poll_min and poll_max apply only with wait_mode 'poll'"
    );
}

/// The bindings' per-lock wait mode (`client.lock(name, wait_mode=...)` and the like): a mode
/// and bounds in milliseconds, checked by the core, or nothing given: the client's mode.
#[tokio::test]
async fn a_lock_takes_its_wait_mode_as_the_bindings_give_it() {
    let server = RedisServer::start();
    let client = connect(&server.url(), WaitMode::PubSub).await;
    let lock = || client.lock("own-mode").unwrap();
    assert_eq!(
        lock()
            .with_wait_mode_from_millis(None, None, None)
            .unwrap()
            .wait_mode(),
        None
    );
    assert_eq!(
        lock()
            .with_wait_mode_from_millis(Some("poll"), Some(10.0), Some(20.0))
            .unwrap()
            .wait_mode(),
        Some(WaitMode::Poll {
            min: Duration::from_millis(10),
            max: Duration::from_millis(20),
        })
    );
    let err = lock()
        .with_wait_mode_from_millis(None, Some(5.0), None)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        err.to_string(),
        "invalid argument: poll_min and poll_max apply only with wait_mode 'poll'"
    );
}

/// `polylock check`'s permission probe asks for SUBSCRIBE only of a client that will use it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_permission_check_wants_subscribe_only_in_pubsub_mode() {
    init_tracing();
    let server = server_with_user();
    let missing = |mode: WaitMode| {
        let url = user_url(&server);
        async move {
            let options = polylock::ClientOptions {
                wait_mode: mode,
                ..polylock::ClientOptions::default()
            };
            let report = within("check", polylock::acl::check(&url, options, PREFIX))
                .await
                .unwrap();
            report
                .missing
                .into_iter()
                .filter(|missing| !missing.optional)
                .map(|missing| missing.grant)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(missing(WaitMode::poll()).await, Vec::<String>::new());
    assert_eq!(
        missing(WaitMode::PubSub).await,
        vec!["+subscribe".to_owned()]
    );
}

/// `examples/wait_poll.rs` runs against a launched server (cargo test builds examples).
#[test]
fn the_example_runs() {
    let server = RedisServer::start();
    let deps = std::env::current_exe().unwrap();
    let example = deps
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join("wait_poll");
    assert!(
        example.exists(),
        "{} is missing: run `cargo build -p polylock --example wait_poll`",
        example.display()
    );
    let output = std::process::Command::new(example)
        .arg(server.url())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("acquired=true"), "{stdout}");
    assert!(stdout.contains("subscribed channels: 0"), "{stdout}");
}

/// Under a key prefix a polling latch waiter reads the prefixed count: it waits while the count
/// is 1 and sees it open after the count down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polling_latch_waiter_reads_the_prefixed_count() {
    let server = RedisServer::start();
    let prefixed = |mode: WaitMode| polylock::ClientOptions {
        wait_mode: mode,
        key_prefix: Some("p:".to_owned()),
        connect_timeout: Duration::from_secs(3),
        response_timeout: Duration::from_secs(3),
        ..polylock::ClientOptions::default()
    };
    let counter = Client::connect_with(&server.url(), prefixed(WaitMode::PubSub))
        .await
        .unwrap();
    let waiter = Client::connect_with(&server.url(), prefixed(WaitMode::poll()))
        .await
        .unwrap();
    let counted = counter.count_down_latch("ready").unwrap();
    assert!(counted.try_set_count(1).await.unwrap());
    let awaiting = waiter.count_down_latch("ready").unwrap();
    assert!(
        !within("latch", awaiting.await_zero(SHORT_WAIT))
            .await
            .unwrap(),
        "a polling waiter saw the latch open while its count was 1"
    );
    let count_down = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        counted.count_down().await.unwrap();
    };
    let (opened, ()) = tokio::join!(within("latch", awaiting.await_zero(NO_HANG)), count_down);
    assert!(opened.unwrap(), "latch: not seen open");
}
