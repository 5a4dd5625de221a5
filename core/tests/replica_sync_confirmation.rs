//! `sync_replicas` when the connection changes between an acquire and its confirmation: a
//! failover (the connection's server stops being the primary, so whatever it says about its
//! replicas says nothing about the lock) or a reconnect (the confirmation runs on a new
//! connection). A binary of its own: the tests step in at a trace event of
//! the engine, through a global subscriber, one test at a time.

mod common;

use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use common::*;
use polylock::AcquireOptions;
use polylock_testkit::{Fault, FaultProxy};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// A primary (or a promoted replica) sends its first full sync at once.
const SERVES_SYNC_AT_ONCE: [&str; 2] = ["--repl-diskless-sync-delay", "0"];

/// Long enough for a replica that follows to acknowledge; a held-back one never does.
const SYNC_TIMEOUT: Duration = Duration::from_secs(2);

type Hook = Box<dyn FnOnce() + Send>;

/// Run once, on the engine's task, when the next acquire attempt's reply has come
/// (`attempt reply`): after the acquire, before anything confirms it.
static AFTER_ATTEMPT_REPLY: Mutex<Option<Hook>> = Mutex::new(None);

struct StepIn;

/// Installs the subscriber (once) and makes the calling test the only one that steps in.
async fn stepping_in() -> tokio::sync::MutexGuard<'static, ()> {
    static INSTALLED: Once = Once::new();
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    INSTALLED.call_once(|| tracing_subscriber::registry().with(StepIn).init());
    ONE_AT_A_TIME.lock().await
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for StepIn {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != "polylock::handoff" {
            return;
        }
        let mut message = Message::default();
        event.record(&mut message);
        if message.0 == "attempt reply" {
            let hook = AFTER_ATTEMPT_REPLY.lock().unwrap().take();
            if let Some(hook) = hook {
                hook();
            }
        }
    }
}

#[derive(Default)]
struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

fn info(port: u16) -> String {
    let mut connection = redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .get_connection()
        .unwrap();
    redis::cmd("INFO")
        .arg("replication")
        .query(&mut connection)
        .unwrap()
}

fn command(port: u16, args: &[&str]) {
    let mut connection = redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<redis::Value>(&mut connection).unwrap();
}

/// Waits (blocking: it runs inside the hook) until `check` holds.
fn until(what: &str, check: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A primary and its replica, online, which follows it through a proxy (to hold its stream
/// back).
async fn primary_and_replica() -> (RedisServer, FaultProxy, RedisServer) {
    let primary = RedisServer::start_with(&SERVES_SYNC_AT_ONCE);
    let stream = FaultProxy::start(primary.port());
    let stream_port = stream.port().to_string();
    let mut replica_args = vec!["--replicaof", "127.0.0.1", &stream_port];
    replica_args.extend(SERVES_SYNC_AT_ONCE);
    let replica = RedisServer::start_with(&replica_args);
    assert!(
        replica_online(&primary).await,
        "the replica never came online"
    );
    (primary, stream, replica)
}

/// The failover: the acquire ran on the primary, whose replica never got it (its stream is
/// held back). Then the replica is promoted and the old primary follows it, taking its data:
/// the lock is gone everywhere, and the client's open connection now leads to a replica of a
/// new primary with no replicas of its own. An acquire confirmed from what that connection says
/// (`INFO`: a new replication id, no replicas, so nothing to wait for) would return true with
/// no lock anywhere. It must return true only with the lock held on the new primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquisition_is_confirmed_only_where_it_is_held_after_a_failover_in_between() {
    let _alone = stepping_in().await;
    let (primary, stream, replica) = primary_and_replica().await;

    let client = synced_client(&primary.url(), SYNC_TIMEOUT).await;
    let lock = client.lock("moved").unwrap();
    // Scripts loaded and the replica counted, as in any client already at work.
    assert!(lock.acquire(AcquireOptions::new().no_wait()).await.unwrap());
    lock.release().await.unwrap();
    // Past the time a replica count is trusted without asking again.
    tokio::time::sleep(Duration::from_millis(1_200)).await;

    stream.set(Fault::BlackHole);
    let (primary_port, replica_port) = (primary.port(), replica.port());
    let failed_over = Arc::new(Mutex::new(false));
    let done = failed_over.clone();
    *AFTER_ATTEMPT_REPLY.lock().unwrap() = Some(Box::new(move || {
        command(replica_port, &["REPLICAOF", "NO", "ONE"]);
        command(
            primary_port,
            &["REPLICAOF", "127.0.0.1", &replica_port.to_string()],
        );
        until("the old primary synced from the new one", || {
            info(primary_port).contains("master_link_status:up")
        });
        *done.lock().unwrap() = true;
    }));

    let outcome = lock
        .acquire(AcquireOptions::new().wait(Duration::from_secs(3)))
        .await;
    assert!(*failed_over.lock().unwrap(), "the failover never ran");
    let on_new_primary = replica
        .command(&["HEXISTS", "moved", lock.owner()])
        .as_deref()
        == Some(":1");
    assert!(
        on_new_primary || !matches!(outcome, Ok(true)),
        "acquire returned {outcome:?}, but the new primary does not hold the lock"
    );
}

/// The reconnect: a semaphore's permits are taken, the connection drops before the
/// confirmation, and the retry of the same request finds them taken and is confirmed on the new
/// connection. The replica, held back, never got them: acquire must not return true. (The
/// retry writes, as every kind's does, so that its `WAIT` covers it: see
/// `every_kinds_retry_of_an_acquisition_writes` in `kinds/mod.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_acquisition_retried_on_a_new_connection_is_confirmed_only_when_replicated() {
    let _alone = stepping_in().await;
    let (primary, stream, replica) = primary_and_replica().await;
    let address = Arc::new(FaultProxy::start(primary.port()));
    let client = synced_client(&address.url(), SYNC_TIMEOUT).await;
    let semaphore = client.semaphore("permits").unwrap();
    assert!(semaphore.try_set_permits(3).await.unwrap());
    assert!(semaphore.acquire(1, Some(Duration::ZERO)).await.unwrap());
    semaphore.release(1).await.unwrap();
    let replicated = eventually(Duration::from_secs(10), || async {
        replica.command(&["GET", "permits"]).as_deref() == Some("3")
    })
    .await;
    assert!(replicated, "the replica never got the release");

    stream.set(Fault::BlackHole);
    let cut = address.clone();
    *AFTER_ATTEMPT_REPLY.lock().unwrap() = Some(Box::new(move || cut.cut()));
    let outcome = semaphore.acquire(1, Some(Duration::from_secs(3))).await;
    assert!(
        !matches!(outcome, Ok(true)),
        "the replica never got the permits, yet acquire returned {outcome:?}"
    );
    assert_eq!(
        replica.command(&["GET", "permits"]).as_deref(),
        Some("3"),
        "the replica is held back"
    );
}
