//! `sync_replicas` on real servers: a primary with one replica (`--replicaof`), the same with
//! the replica held still (`CLIENT PAUSE ... ALL` on a Redis 7 replica also stops it applying
//! and acknowledging the primary's stream), and a primary whose `WAIT` is renamed away.

mod common;

use std::time::Duration;

use common::*;
use polylock::{AcquireOptions, Client, ErrorKind};

/// A primary sends its first full sync at once, not after the default 5 s wait for more
/// replicas.
const PRIMARY: [&str; 2] = ["--repl-diskless-sync-delay", "0"];

/// Long enough for any acquire of these tests; only a broken sync would use it up.
const PATIENCE: Duration = Duration::from_secs(30);

/// A replica of `primary`, returned once the primary counts it as online (so `ROLE` lists it
/// and `WAIT` waits for it).
async fn replica_of(primary: &RedisServer) -> RedisServer {
    let port = primary.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    assert!(
        replica_online(primary).await,
        "the replica on port {} never came online",
        replica.port()
    );
    replica
}

/// The `ERR` replies the server sent so far (INFO errorstats; an unknown command is one).
fn err_replies(connection: &mut redis::Connection) -> i64 {
    let stats: String = redis::cmd("INFO")
        .arg("errorstats")
        .query(connection)
        .unwrap();
    stats
        .lines()
        .find_map(|line| line.strip_prefix("errorstat_ERR:count="))
        .map_or(0, |count| count.trim().parse().unwrap())
}

/// Whether `key` exists, asked on `connection`.
fn exists_on(connection: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query(connection).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_returns_once_the_replica_has_the_lock_and_a_release_once_it_dropped_it() {
    let primary = RedisServer::start_with(&PRIMARY);
    let replica = replica_of(&primary).await;
    let client = synced_client(&primary.url(), Duration::from_secs(1)).await;
    let lock = client.lock("synced").unwrap();

    assert!(lock
        .acquire(AcquireOptions::new().wait(PATIENCE))
        .await
        .unwrap());
    assert_eq!(
        replica.command(&["EXISTS", "synced"]).as_deref(),
        Some(":1")
    );

    lock.release().await.unwrap();
    assert_eq!(
        replica.command(&["EXISTS", "synced"]).as_deref(),
        Some(":0")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_no_replica_acknowledged_is_undone_and_fails_with_not_synced() {
    let primary = RedisServer::start_with(&PRIMARY);
    let replica = replica_of(&primary).await;
    let client = synced_client(&primary.url(), Duration::from_millis(200)).await;
    let lock = client.lock("unsynced").unwrap();

    replica.pause(Duration::from_secs(3));
    let err = lock
        .acquire(AcquireOptions::new().no_wait())
        .await
        .expect_err("no replica could acknowledge the acquisition");

    assert_eq!(err.kind(), ErrorKind::NotSynced, "{err}");
    assert_eq!(
        err.to_string(),
        "lock 'unsynced' was acquired on the primary, but not all of its 1 replicas acknowledged it \
         within 200 ms, so a failover could hand it to a second holder; it was undone \
         (sync_replicas)"
    );
    assert_eq!(
        primary.command(&["EXISTS", "unsynced"]).as_deref(),
        Some(":0")
    );
    assert!(!lock.is_held());
}

/// On a cluster the confirmation (the repeat, `INFO`, `WAIT` in one pipeline) goes to the
/// primary serving the lock's slot and waits for that primary's replica: held still, the
/// acquisition is undone; free again, acquire returns once the replica has the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_an_acquisition_waits_for_the_replica_of_its_slot() {
    let cluster = polylock_testkit::Cluster::start(3, 1);
    let client = synced_client(&cluster.url(), Duration::from_millis(300)).await;
    for name in ["synced:a", "synced:b", "synced:c"] {
        let lock = client.lock(name).unwrap();
        let primary = cluster.node(cluster.primary_for_key(name));
        let replica = cluster.node(cluster.replica_of(primary.port()));
        assert!(
            replica_online(primary).await,
            "{name}: the replica never came online"
        );
        replica.pause(Duration::from_secs(2));
        let err = lock
            .acquire(AcquireOptions::new().no_wait())
            .await
            .expect_err("the replica held still cannot have acknowledged it");
        assert_eq!(err.kind(), ErrorKind::NotSynced, "{name}: {err}");
        assert!(
            eventually(Duration::from_secs(10), || async {
                lock.acquire(AcquireOptions::new().no_wait())
                    .await
                    .unwrap_or(false)
            })
            .await,
            "{name}: never acquired once the replica was free"
        );
        // READONLY: the replica answers for its primary's slots.
        let mut connection = replica.connection().unwrap();
        let _: () = redis::cmd("READONLY").query(&mut connection).unwrap();
        let held: bool = redis::cmd("HEXISTS")
            .arg(name)
            .arg(lock.owner())
            .query(&mut connection)
            .unwrap();
        assert!(held, "{name}: acquire returned before the replica had it");
        lock.release().await.unwrap();
    }
}

// On a current-thread runtime: its calls go on the client's own connection, whose handshake
// `connect_errors` counts (a multi-thread runtime's calls open a connection of their own, whose
// CLIENT SETINFO 7.0 refuses too: `connection/per_runtime.rs`).
#[tokio::test]
async fn a_server_without_wait_turns_sync_off_and_locks_keep_working() {
    let primary =
        RedisServer::start_with(&[PRIMARY[0], PRIMARY[1], "--rename-command", "WAIT", ""]);
    // A replica, so that a WAIT after a write would wait for one.
    let _replica = replica_of(&primary).await;
    // One connection, made before the client, so that its own replies add no errors.
    let mut observer = primary.connection().unwrap();
    // What connecting costs in ERR replies without sync (CLIENT SETINFO, which 7.0 lacks).
    let errors_before = err_replies(&mut observer);
    let unsynced = Client::connect(&primary.url()).await.unwrap();
    let connect_errors = err_replies(&mut observer) - errors_before;
    unsynced.close();
    // The client checks WAIT at connect: refused ("unknown command"), sync is off.
    let errors_before = err_replies(&mut observer) + connect_errors;
    let client = synced_client(&primary.url(), Duration::from_secs(1)).await;
    let lock = client.lock("no-wait-command").unwrap();
    assert_eq!(
        err_replies(&mut observer) - errors_before,
        1,
        "the client sent WAIT once and was refused"
    );

    assert!(lock.acquire(AcquireOptions::new().no_wait()).await.unwrap());
    assert!(exists_on(&mut observer, "no-wait-command"));
    lock.release().await.unwrap();
    assert!(!exists_on(&mut observer, "no-wait-command"));
    assert_eq!(
        err_replies(&mut observer) - errors_before,
        1,
        "sync is off for the client: the release sent no WAIT"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_cut_off_from_its_replica_still_waits_for_it() {
    // The old primary of a failover, still reached by some clients: its replica left it (here:
    // killed). WAIT for the replicas it has now (none) would confirm every lock taken there.
    let primary = RedisServer::start_with(&PRIMARY);
    let mut replica = replica_of(&primary).await;
    let client = synced_client(&primary.url(), Duration::from_secs(1)).await;
    let lock = client.lock("cut-off").unwrap();
    // With its replica: acquired. Within a wait, since on a loaded machine a replica's
    // acknowledgement can take longer than the 1 s WAIT (the attempt is then undone and tried
    // again: failed in CI with no wait).
    let within = AcquireOptions::new().wait(Duration::from_secs(30));
    assert!(lock.acquire(within).await.unwrap());
    lock.release().await.unwrap();

    replica.kill();
    assert!(
        no_replica_listed(&primary).await,
        "the primary still counts the killed replica"
    );
    // Twice: a miss makes the client count the replicas again, and it then finds none online.
    for attempt in 1..=2 {
        let err = lock
            .acquire(AcquireOptions::new().no_wait())
            .await
            .expect_err("the replica that left cannot have acknowledged it");
        assert_eq!(err.kind(), ErrorKind::NotSynced, "attempt {attempt}: {err}");
        assert!(
            err.to_string().contains("not all of its 1 replicas"),
            "{err}"
        );
        assert_eq!(
            primary.command(&["EXISTS", "cut-off"]).as_deref(),
            Some(":0")
        );
    }
}

/// The fair lock (`fifo` false) or the FIFO lock `name` of `client`.
fn fair_or_fifo(client: &Client, name: &str, fifo: bool) -> polylock::Lock {
    if fifo {
        client.fifo_lock(name).unwrap()
    } else {
        client.fair_lock(name).unwrap()
    }
}

/// The length of the fair queue (or the FIFO lock's line) of `name` on `server`, as `LLEN`
/// answers it (`:2`).
fn line_length(server: &RedisServer, name: &str, fifo: bool) -> Option<String> {
    let line = if fifo {
        polylock::keys::fifo_line(name)
    } else {
        polylock::keys::fair_queue(name)
    };
    server.command(&["LLEN", &line])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_waiter_whose_acquisition_is_undone_keeps_its_place_at_the_head() {
    undone_waiter_keeps_its_place(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_waiter_whose_acquisition_is_undone_keeps_its_place_at_the_head() {
    undone_waiter_keeps_its_place(true).await;
}

async fn undone_waiter_keeps_its_place(fifo: bool) {
    let primary = RedisServer::start_with(&PRIMARY);
    let replica = replica_of(&primary).await;
    let plain = || async {
        Client::builder(primary.url())
            .connect()
            .await
            .expect("connect to the test server")
    };
    let holder = fair_or_fifo(&plain().await, "in-line", fifo);
    assert!(holder
        .acquire(AcquireOptions::new().lease(Duration::from_secs(60)))
        .await
        .unwrap());
    // First in line: a client whose acquisitions the replicas must confirm.
    let first = fair_or_fifo(
        &synced_client(&primary.url(), Duration::from_millis(200)).await,
        "in-line",
        fifo,
    );
    let first_waiting = tokio::spawn({
        let first = first.clone();
        async move {
            first
                .acquire(AcquireOptions::new().wait(Duration::from_millis(2500)))
                .await
        }
    });
    let queued = |count: &'static str| {
        let primary = &primary;
        move || async move { line_length(primary, "in-line", fifo).as_deref() == Some(count) }
    };
    assert!(eventually(Duration::from_secs(5), queued(":1")).await);
    // Second in line: a client of its own, which must not overtake the first.
    let second = fair_or_fifo(&plain().await, "in-line", fifo);
    let second_waiting = tokio::spawn({
        let second = second.clone();
        async move {
            second
                .acquire(AcquireOptions::new().wait(Duration::from_millis(1500)))
                .await
        }
    });
    assert!(eventually(Duration::from_secs(5), queued(":2")).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // No acquisition can be confirmed now: the first takes the lock, has it undone, and tries
    // again, until its wait runs out.
    replica.pause(Duration::from_secs(5));
    holder.release().await.unwrap();
    let second_took = second_waiting.await.unwrap().unwrap();
    let first_result = first_waiting.await.unwrap();
    assert!(
        !second_took,
        "the second waiter overtook the first, whose acquisition was undone"
    );
    let err = first_result.expect_err("no acquisition of the first could be confirmed");
    assert_eq!(err.kind(), ErrorKind::NotSynced, "{err}");
    // Having given up, the first left the line.
    assert_eq!(
        line_length(&primary, "in-line", fifo).as_deref(),
        Some(":0")
    );
}

/// A primary whose one replica follows it through a fault proxy (the replication link), once
/// the primary counts the replica online.
async fn primary_with_linked_replica() -> (RedisServer, polylock_testkit::FaultProxy, RedisServer) {
    let primary = RedisServer::start_with(&PRIMARY);
    let link = polylock_testkit::FaultProxy::start(primary.port());
    let link_port = link.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &link_port]);
    assert!(
        replica_online(&primary).await,
        "the replica never came online"
    );
    (primary, link, replica)
}

/// Cuts the replication link (and refuses the replica's reconnects), until the primary lists
/// no replica.
async fn partition(primary: &RedisServer, link: &polylock_testkit::FaultProxy) {
    link.set(polylock_testkit::Fault::Refuse);
    assert!(
        no_replica_listed(primary).await,
        "the primary still lists its replica"
    );
}

/// Whether `primary` lists no replica within 20 s.
async fn no_replica_listed(primary: &RedisServer) -> bool {
    eventually(Duration::from_secs(20), || async {
        primary
            .command(&["INFO", "replication"])
            .is_some_and(|info| info.contains("connected_slaves:0"))
    })
    .await
}

/// Issue 42, defect 1 (first gap): a client whose first look at a primary finds no replica
/// online (it connected during a partition) must not confirm an acquisition no replica has:
/// the promoted replica would hand the same lock out again. With the default `min_replicas`
/// (1) it fails with NotSynced and leaves nothing on the primary; once the replica is back,
/// the same client acquires. `min_replicas(0)` opts into trusting the primary's count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_first_sees_no_replica_confirms_no_acquisition() {
    let (primary, link, _replica) = primary_with_linked_replica().await;
    partition(&primary, &link).await;
    let client = synced_client(&primary.url(), Duration::from_millis(200)).await;
    let lock = client.lock("first-look").unwrap();
    let err = lock
        .acquire(AcquireOptions::new().no_wait())
        .await
        .expect_err("no replica has the lock, yet it was confirmed");
    assert_eq!(err.kind(), ErrorKind::NotSynced, "{err}");
    assert_eq!(
        primary.command(&["EXISTS", "first-look"]).as_deref(),
        Some(":0"),
        "the unconfirmed acquisition was undone"
    );

    let trusting = Client::builder(primary.url())
        .sync_replicas(true)
        .min_replicas(0)
        .replica_sync_timeout(Duration::from_millis(200))
        .connect()
        .await
        .unwrap();
    let other = trusting.lock("first-look:trusting").unwrap();
    assert!(other
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    other.release().await.unwrap();

    link.set(polylock_testkit::Fault::Pass);
    assert!(
        replica_online(&primary).await,
        "the replica never came back"
    );
    assert!(lock
        .acquire(AcquireOptions::new().wait(PATIENCE))
        .await
        .unwrap());
    lock.release().await.unwrap();
}

/// Issue 42, defect 1 (second gap): a client that had counted the replica kept waiting for it
/// only until it had been gone for 30 s (`REPLICA_GONE_AFTER`, Sentinel's default
/// down-after), then confirmed acquisitions with `WAIT 0`: 60-90 s into a partition two holders
/// were possible. Now it never waits for fewer than `min_replicas`: every acquisition fails
/// with NotSynced for as long as the partition lasts (here past those 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_gone_for_longer_than_sentinel_waits_is_still_waited_for() {
    let (primary, link, _replica) = primary_with_linked_replica().await;
    let client = synced_client(&primary.url(), Duration::from_millis(200)).await;
    let lock = client.lock("gone-long").unwrap();
    // The replica counted: it acknowledged an acquisition.
    assert!(lock
        .acquire(AcquireOptions::new().wait(PATIENCE))
        .await
        .unwrap());
    lock.release().await.unwrap();

    partition(&primary, &link).await;
    let partitioned = std::time::Instant::now();
    // Past the client's 30 s allowance for a replica that left (plus a second of margin).
    let past_allowance = Duration::from_secs(31);
    let mut attempts = 0;
    while partitioned.elapsed() < past_allowance || attempts < 2 {
        attempts += 1;
        let outcome = lock.acquire(AcquireOptions::new().no_wait()).await;
        let err = outcome.expect_err(&format!(
            "acquired {:?} into the partition, with no replica to have it",
            partitioned.elapsed()
        ));
        assert_eq!(err.kind(), ErrorKind::NotSynced, "{err}");
        assert_eq!(
            primary.command(&["EXISTS", "gone-long"]).as_deref(),
            Some(":0")
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The renewals of lock `name` counted by `client` so far.
fn renewals(client: &Client, name: &str) -> u64 {
    client
        .metrics()
        .locks
        .iter()
        .filter(|lock| lock.name == name)
        .map(|lock| lock.renewals)
        .sum()
}

/// A hold whose replica went away (the promoted primary of a failover has none) keeps its
/// lease on the primary: each watchdog renewal's `WAIT` then waits its whole timeout, as
/// `min_replicas` (1) asks for a replica that is not there, and the renewal must count from
/// when it was sent, not from when `WAIT` gave up. Before, the hold's deadline ran out while
/// `WAIT` waited and the hold was reported lost (Node's killed-primary cluster test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_whose_replica_left_is_renewed_while_each_wait_times_out() {
    let (primary, link, _replica) = primary_with_linked_replica().await;
    let client = Client::builder(primary.url())
        .sync_replicas(true)
        .replica_sync_timeout(Duration::from_millis(800))
        .watchdog_timeout(Duration::from_millis(1500))
        .connect()
        .await
        .unwrap();
    let lock = client.lock("renewed-alone").unwrap();
    assert!(lock
        .acquire(AcquireOptions::new().wait(PATIENCE))
        .await
        .unwrap());
    partition(&primary, &link).await;
    let before = renewals(&client, "renewed-alone");
    let renewed = eventually(PATIENCE, || async {
        lock.is_lost() || renewals(&client, "renewed-alone") >= before + 6
    })
    .await;
    assert!(renewed, "the watchdog stopped renewing");
    assert!(
        !lock.is_lost(),
        "the hold was reported lost while its renewals held on the primary"
    );
    lock.release().await.unwrap();
}
