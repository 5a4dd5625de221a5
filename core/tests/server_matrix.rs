//! The server matrix's smoke test (`make test-matrix-smoke`): against whatever server
//! `POLYLOCK_REDIS_SERVER` names (Redis 6.2, 7.0, 8.2, Valkey 8.1), on one server and on a
//! 3-primary cluster, every lock kind is acquired, waited for, handed to the waiter on release
//! (woken by the release message, long before the holder's 60 s lease), renewed by the
//! waiter's watchdog past several leases, and released. It first checks that the server it
//! talks to is the one `POLYLOCK_EXPECT_SERVER` names (else the one the binary says it is),
//! so a misconfigured matrix cannot pass by testing the default server four times.

use std::future::Future;
use std::time::{Duration, Instant};

use polylock::{AcquireOptions, Client, Lock};
use polylock_testkit::{Cluster, RedisServer, ServerBuild};

/// The first holder's fixed lease: a waiter that gets the lock long before it ends was woken
/// by the release, not by expiry.
const LONG_LEASE: Duration = Duration::from_secs(60);
/// The waiter's watchdog lease; it holds past several of them only if renewals work.
const RENEWED_LEASE: Duration = Duration::from_millis(1500);

async fn connect(url: &str, watchdog: Duration) -> Client {
    Client::builder(url)
        .watchdog_timeout(watchdog)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap_or_else(|err| panic!("connect to {url}: {err}"))
}

/// `redis-7.0.15` or `valkey-8.1.8`, from the `INFO server` of the node at `port`. Valkey
/// also reports a `redis_version` (7.2.4, for clients that check it), so its own name wins.
fn talked_to(server: &RedisServer) -> String {
    let mut connection = server.connection().expect("connect for INFO");
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut connection)
        .expect("INFO server");
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(|value| value.trim().to_owned())
    };
    match (field("server_name").as_deref(), field("valkey_version")) {
        (Some("valkey"), Some(version)) => format!("valkey-{version}"),
        _ => format!(
            "redis-{}",
            field("redis_version").expect("INFO has redis_version")
        ),
    }
}

/// Panics unless `server` is the expected one: `POLYLOCK_EXPECT_SERVER` (a prefix such as
/// `redis-6.2.14` or `redis-7.0`) when set, and in any case the build the configured binary
/// reports.
fn assert_expected_server(server: &RedisServer) {
    let seen = talked_to(server);
    let configured = ServerBuild::configured().id();
    assert_eq!(
        seen,
        configured,
        "the server answering is not the configured binary ({})",
        polylock_testkit::server_program()
    );
    if let Ok(expected) = std::env::var("POLYLOCK_EXPECT_SERVER") {
        assert!(
            seen.starts_with(&expected),
            "POLYLOCK_EXPECT_SERVER is {expected}, but the server answering is {seen}"
        );
    }
}

/// Runs `waiting` in a task of its own; gives its outcome and how long it took.
fn in_background<T: Send + 'static>(
    waiting: impl Future<Output = T> + Send + 'static,
) -> tokio::task::JoinHandle<(T, Duration)> {
    tokio::spawn(async move {
        let started = Instant::now();
        let outcome = waiting.await;
        (outcome, started.elapsed())
    })
}

/// The waiter is still waiting a moment after it started (the holder's lease is long).
async fn assert_still_waiting<T>(what: &str, waiting: &tokio::task::JoinHandle<T>) {
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "{what}: the waiter did not wait");
}

fn assert_woken_by_release(what: &str, waited: Duration) {
    assert!(
        waited < LONG_LEASE / 4,
        "{what}: the waiter got it after {waited:?}, as if the holder's lease had run out"
    );
}

/// The lock kinds with a `Lock` handle: `holder` (of a client with a long watchdog) takes it
/// for `LONG_LEASE`, `waiter` (of a client whose watchdog lease is `RENEWED_LEASE`) waits,
/// gets it on release, keeps it past several of its leases, and releases it. Gives the
/// holder's and the waiter's fencing tokens (fenced lock).
async fn lock_round(what: &str, holder: Lock, waiter: Lock) -> (Option<i64>, Option<i64>) {
    let held = AcquireOptions::new().no_wait().lease(LONG_LEASE);
    assert!(holder.acquire(held).await.unwrap(), "{what}: acquire");
    let first_token = holder.token();
    let waiting = {
        let waiter = waiter.clone();
        in_background(async move { waiter.acquire(AcquireOptions::new().wait(LONG_LEASE)).await })
    };
    assert_still_waiting(what, &waiting).await;
    holder.release().await.unwrap();
    let (acquired, waited) = waiting.await.unwrap();
    assert!(acquired.unwrap(), "{what}: the waiter got it");
    assert_woken_by_release(what, waited);

    tokio::time::sleep(RENEWED_LEASE * 2).await;
    let (held, lost, locked) = (
        waiter.is_held(),
        waiter.is_lost(),
        waiter.is_locked().await.unwrap(),
    );
    assert!(
        held && !lost && locked,
        "{what}: the watchdog kept the waiter's hold past two leases \
         (held {held}, lost {lost}, locked {locked})"
    );
    let second_token = waiter.token();
    waiter.release().await.unwrap();
    assert!(!waiter.is_locked().await.unwrap(), "{what}: released");
    (first_token, second_token)
}

/// A semaphore of one permit: taken, waited for, handed over by the release, released.
/// Its permits have no lease, so there is nothing to renew.
async fn semaphore_round(holder: &Client, waiter: &Client, name: String) {
    let mine = holder.semaphore(&name).unwrap();
    let theirs = waiter.semaphore(&name).unwrap();
    assert!(mine.try_set_permits(1).await.unwrap());
    assert!(mine.acquire(1, Some(Duration::ZERO)).await.unwrap());
    let waiting = {
        let theirs = theirs.clone();
        in_background(async move { theirs.acquire(1, Some(LONG_LEASE)).await })
    };
    assert_still_waiting("semaphore", &waiting).await;
    mine.release(1).await.unwrap();
    let (acquired, waited) = waiting.await.unwrap();
    assert!(acquired.unwrap(), "semaphore: the waiter got the permit");
    assert_woken_by_release("semaphore", waited);
    theirs.release(1).await.unwrap();
    assert_eq!(theirs.available_permits().await.unwrap(), 1);
}

/// An expirable semaphore of one permit: taken for `LONG_LEASE`, waited for, handed over by
/// the release, renewed by the waiter's watchdog, released.
async fn expirable_semaphore_round(holder: &Client, waiter: &Client, name: String) {
    let mine = holder.expirable_semaphore(&name).unwrap();
    let theirs = waiter.expirable_semaphore(&name).unwrap();
    assert!(mine.try_set_permits(1).await.unwrap());
    let held = AcquireOptions::new().no_wait().lease(LONG_LEASE);
    let first = mine.acquire(held).await.unwrap().expect("a free permit");
    let waiting = {
        let theirs = theirs.clone();
        in_background(async move { theirs.acquire(AcquireOptions::new().wait(LONG_LEASE)).await })
    };
    assert_still_waiting("expirable semaphore", &waiting).await;
    mine.release(&first).await.unwrap();
    let (acquired, waited) = waiting.await.unwrap();
    let second = acquired.unwrap().expect("the waiter got the permit");
    assert_woken_by_release("expirable semaphore", waited);

    tokio::time::sleep(RENEWED_LEASE * 2).await;
    assert_eq!(
        theirs.held_permits(),
        vec![second.clone()],
        "expirable semaphore: the watchdog kept the permit past two leases"
    );
    assert_eq!(theirs.available_permits().await.unwrap(), 0);
    theirs.release(&second).await.unwrap();
    assert_eq!(theirs.available_permits().await.unwrap(), 1);
}

/// Every kind at once (their waits overlap), each on names of its own.
async fn every_kind(url: &str, prefix: &str) {
    let holder = connect(url, Duration::from_secs(30)).await;
    let waiter = connect(url, RENEWED_LEASE).await;
    let name = |kind: &str| format!("{prefix}:{kind}");
    let reentrant = lock_round(
        "reentrant lock",
        holder.lock(&name("reentrant")).unwrap(),
        waiter.lock(&name("reentrant")).unwrap(),
    );
    let fair = lock_round(
        "fair lock",
        holder.fair_lock(&name("fair")).unwrap(),
        waiter.fair_lock(&name("fair")).unwrap(),
    );
    let fifo = lock_round(
        "FIFO lock",
        holder.fifo_lock(&name("fifo")).unwrap(),
        waiter.fifo_lock(&name("fifo")).unwrap(),
    );
    let fenced = lock_round(
        "fenced lock",
        holder.fenced_lock(&name("fenced")).unwrap(),
        waiter.fenced_lock(&name("fenced")).unwrap(),
    );
    // A writer holds, a reader waits.
    let read_write = lock_round(
        "read-write lock",
        holder.read_write_lock(&name("rw")).unwrap().write_lock(),
        waiter.read_write_lock(&name("rw")).unwrap().read_lock(),
    );
    let semaphore = semaphore_round(&holder, &waiter, name("semaphore"));
    let expirable = expirable_semaphore_round(&holder, &waiter, name("expirable"));
    let (_, _, _, (first_token, second_token), _, (), ()) =
        tokio::join!(reentrant, fair, fifo, fenced, read_write, semaphore, expirable);
    let (first_token, second_token) = (first_token.unwrap(), second_token.unwrap());
    assert!(
        second_token > first_token,
        "fenced lock: the next holder's token {second_token} is above {first_token}"
    );
    holder.close();
    waiter.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lock_kind_on_one_server() {
    let server = RedisServer::start();
    assert_expected_server(&server);
    every_kind(&server.url(), "matrix").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lock_kind_on_a_three_primary_cluster() {
    let cluster = tokio::task::block_in_place(|| Cluster::start(3, 0));
    for node in &cluster.nodes {
        assert_expected_server(node);
    }
    every_kind(&cluster.url(), "matrix").await;
}

/// The least-privilege rule on this server: a fresh user with exactly `acl::rule_for` this
/// server's version (what the docs show and `polylock check --permissions` checks) runs every
/// kind, and `ACL SETUSER` takes the rule and `ACL LOG` is empty afterwards.
/// `core/tests/acl.rs` runs more recipes on every server of the matrix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lock_kind_as_a_user_with_exactly_the_rule_leaves_acl_log_empty() {
    let server = RedisServer::start();
    assert_expected_server(&server);
    let build = ServerBuild::configured();
    let (major, minor, patch) = build.version;
    let version =
        polylock::acl::RedisVersion::of_server(&build.name, &format!("{major}.{minor}.{patch}"))
            .unwrap();
    let mut command = vec!["ACL", "SETUSER", "app", "on", ">secret"];
    let rule = polylock::acl::rule_for(version, "", "matrix:");
    command.extend(rule.iter().map(String::as_str));
    assert_eq!(server.command(&command).as_deref(), Some("+OK"), "{rule:?}");
    let url = format!("redis://app:secret@127.0.0.1:{}", server.port());
    every_kind(&url, "matrix").await;
    let mut connection = server.connection().unwrap();
    let log: Vec<Vec<redis::Value>> = redis::cmd("ACL").arg("LOG").query(&mut connection).unwrap();
    assert!(log.is_empty(), "{}: ACL LOG has {log:?}", build.id());
}
