//! MultiLock and RedLock over 3 and 5 independent redis-server processes, one of them down
//! before the acquire or killed while held.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use polylock::{AcquireOptions, Client, ErrorKind, Hold, Lock, MultiLock, RedLock};

/// `n` independent servers and a client of each (watchdog lease `watchdog`).
async fn servers(n: usize, watchdog: Duration) -> (Vec<RedisServer>, Vec<Client>) {
    let servers: Vec<RedisServer> = (0..n).map(|_| RedisServer::start()).collect();
    let mut clients = Vec::new();
    for server in &servers {
        clients.push(client_with_watchdog(server, watchdog).await);
    }
    (servers, clients)
}

/// One handle on `name` per client.
fn locks(clients: &[Client], name: &str) -> Vec<Lock> {
    clients.iter().map(|c| c.lock(name).unwrap()).collect()
}

/// Whether `owner` holds `name` on `server` (its field in the lock hash).
async fn holds(server: &RedisServer, name: &str, owner: &str) -> bool {
    let mut con = raw(server).await;
    hget(&mut con, name, owner).await.is_some()
}

async fn key_exists(server: &RedisServer, name: &str) -> bool {
    let mut con = raw(server).await;
    exists(&mut con, name).await
}

fn wait(ms: u64) -> AcquireOptions {
    AcquireOptions::new().wait(Duration::from_millis(ms))
}

#[tokio::test]
async fn a_multi_lock_over_3_servers_takes_all_or_none() {
    let (servers, clients) = servers(3, Duration::from_secs(30)).await;
    let components = locks(&clients, "multi:all");
    let owners: Vec<String> = components.iter().map(|l| l.owner().to_owned()).collect();
    let multi = MultiLock::new(components).unwrap();
    let other = clients[1].lock("multi:all").unwrap();
    assert!(other
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());

    assert!(!multi.acquire(wait(300)).await.unwrap());
    assert!(!multi.is_held());
    for (server, owner) in servers.iter().zip(&owners) {
        assert!(
            !holds(server, "multi:all", owner).await,
            "nothing left held"
        );
    }
    assert!(!key_exists(&servers[0], "multi:all").await);
    assert!(!key_exists(&servers[2], "multi:all").await);

    other.release().await.unwrap();
    assert!(multi.acquire(wait(2000)).await.unwrap());
    assert!(multi.is_held());
    for (server, owner) in servers.iter().zip(&owners) {
        assert!(holds(server, "multi:all", owner).await);
    }
    assert!(!other
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    multi.release().await.unwrap();
    for server in &servers {
        assert!(!key_exists(server, "multi:all").await);
    }
    assert_eq!(
        multi.release().await.unwrap_err().kind(),
        ErrorKind::NotHeld
    );
}

#[tokio::test]
async fn a_red_lock_over_5_servers_acquires_with_one_down_and_one_held_by_another() {
    let (mut servers, clients) = servers(5, Duration::from_secs(30)).await;
    let components = locks(&clients, "red:minority");
    let owners: Vec<String> = components.iter().map(|l| l.owner().to_owned()).collect();
    let red = RedLock::new(components).unwrap();
    assert_eq!(red.quorum(), 3);
    servers[4].kill();
    let other = clients[0].lock("red:minority").unwrap();
    assert!(other
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());

    assert!(red.acquire(wait(2000)).await.unwrap());
    assert!(red.is_held());
    for i in 1..4 {
        assert!(holds(&servers[i], "red:minority", &owners[i]).await);
    }
    red.release().await.unwrap();
    for server in &servers[1..4] {
        assert!(!key_exists(server, "red:minority").await);
    }
    assert!(holds(&servers[0], "red:minority", other.owner()).await);
}

#[tokio::test]
async fn a_red_lock_without_a_quorum_fails_and_leaves_nothing_held() {
    let (mut servers, clients) = servers(3, Duration::from_secs(30)).await;
    let components = locks(&clients, "red:noquorum");
    let owners: Vec<String> = components.iter().map(|l| l.owner().to_owned()).collect();
    let red = RedLock::new(components).unwrap();
    let others = locks(&clients[..2], "red:noquorum");
    for other in &others {
        assert!(other
            .acquire(AcquireOptions::new().no_wait())
            .await
            .unwrap());
    }
    assert!(!red.acquire(wait(500)).await.unwrap());
    assert!(!red.is_held());
    for (server, owner) in servers.iter().zip(&owners) {
        assert!(!holds(server, "red:noquorum", owner).await);
    }
    let scoped = red.acquire_or_fail(wait(100)).await.unwrap_err();
    assert_eq!(scoped.kind(), ErrorKind::Timeout);
    // Then who held it, lock by lock (the holders' client records).
    let message = scoped.to_string();
    assert!(
        message.starts_with(
            "lock 'red:noquorum' was not acquired within 100 ms: another owner held it all that \
             time ('red:noquorum' held by '"
        ),
        "{message}"
    );

    // Two of three servers down: no other owner, the failures are the answer.
    for other in &others {
        other.release().await.unwrap();
    }
    servers[0].kill();
    servers[1].kill();
    let err = red.acquire(wait(500)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(err.to_string().contains("2 of its 3 locks failed"), "{err}");
    assert!(!holds(&servers[2], "red:noquorum", &owners[2]).await);
}

#[tokio::test]
async fn a_server_killed_mid_hold_loses_the_multi_lock_but_not_the_red_lock() {
    let watchdog = Duration::from_millis(600);
    let (mut servers, clients) = servers(3, watchdog).await;
    let red = RedLock::new(locks(&clients, "killed:red")).unwrap();
    let multi = MultiLock::new(locks(&clients, "killed:multi")).unwrap();
    let multi_lost = Arc::new(AtomicUsize::new(0));
    let counter = multi_lost.clone();
    multi.on_lost(move |err| {
        assert_eq!(err.kind(), ErrorKind::LockLost);
        counter.fetch_add(1, Ordering::SeqCst);
    });
    assert!(red.acquire(wait(2000)).await.unwrap());
    assert!(multi.acquire(wait(2000)).await.unwrap());

    servers[2].kill();
    assert!(
        eventually(Duration::from_secs(10), || async { multi.is_lost() }).await,
        "the multi-lock reports its lost lock"
    );
    assert!(
        eventually(Duration::from_secs(5), || async {
            multi_lost.load(Ordering::SeqCst) == 1
        })
        .await
    );
    assert!(!multi.is_held());
    // Several watchdog leases later the red-lock still holds its quorum, renewed.
    tokio::time::sleep(watchdog * 3).await;
    assert!(red.is_held() && !red.is_lost());
    assert!(red.locks()[2].is_lost());
    for server in &servers[..2] {
        assert!(key_exists(server, "killed:red").await);
    }

    red.release().await.unwrap();
    let err = multi.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost);
    assert!(
        err.to_string()
            .starts_with("multi-lock 'killed:multi' was lost"),
        "{err}"
    );
    for server in &servers[..2] {
        assert!(!key_exists(server, "killed:red").await);
        assert!(
            !key_exists(server, "killed:multi").await,
            "released everywhere"
        );
    }
}

#[tokio::test]
async fn a_red_lock_loses_its_hold_when_a_majority_of_servers_dies() {
    let watchdog = Duration::from_millis(600);
    let (mut servers, clients) = servers(3, watchdog).await;
    let red = RedLock::new(locks(&clients, "majority:red")).unwrap();
    let mut lost = red.lost_receiver();
    assert!(red.acquire(wait(2000)).await.unwrap());
    servers[0].kill();
    servers[1].kill();
    tokio::time::timeout(Duration::from_secs(10), lost.wait_for(|lost| *lost))
        .await
        .expect("lost within 10 s")
        .unwrap();
    let err = red.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost);
    assert!(
        err.to_string().contains("fewer than its quorum of 2"),
        "{err}"
    );
    assert!(!key_exists(&servers[2], "majority:red").await);
}

#[tokio::test]
async fn a_fixed_lease_counts_only_with_validity_left_and_ends_the_hold() {
    let (servers, clients) = servers(3, Duration::from_secs(30)).await;
    let red = RedLock::new(locks(&clients, "validity:red")).unwrap();
    // 1 ms minus the 2 ms drift allowance: never valid, and nothing stays behind.
    let tiny = AcquireOptions::new()
        .no_wait()
        .lease(Duration::from_millis(1));
    assert!(!red.acquire(tiny).await.unwrap());
    assert!(!red.is_held());

    let lease = Duration::from_millis(800);
    assert!(red
        .acquire(AcquireOptions::new().no_wait().lease(lease))
        .await
        .unwrap());
    let mut con = raw(&servers[0]).await;
    let pttl: i64 = redis::cmd("PTTL")
        .arg("validity:red")
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(
        pttl > 0 && pttl <= 800,
        "fixed lease on each server: {pttl}"
    );
    assert!(eventually(Duration::from_secs(5), || async { red.is_lost() }).await);
    assert_eq!(red.release().await.unwrap_err().kind(), ErrorKind::LockLost);
    // The loss is reported no later than each server's expiry, which may come a moment after.
    for server in &servers {
        assert!(
            eventually(Duration::from_secs(5), || async {
                !key_exists(server, "validity:red").await
            })
            .await
        );
    }
}

#[tokio::test]
async fn a_waiter_acquires_when_the_holder_releases_long_before_the_lease_ends() {
    let (_servers, clients) = servers(3, Duration::from_secs(30)).await;
    let holder = RedLock::new(locks(&clients, "wait:red")).unwrap();
    let waiter = RedLock::new(locks(&clients, "wait:red")).unwrap();
    let lease = AcquireOptions::new().lease(Duration::from_secs(60));
    assert!(holder.acquire(lease.no_wait()).await.unwrap());
    let started = Instant::now();
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.acquire(AcquireOptions::new()).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished());
    holder.release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap());
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "woken by the release"
    );
    assert!(waiter.is_held());
    let guard = holder.try_lock().await.unwrap();
    assert!(guard.is_none(), "the waiter holds it now");
    waiter.release().await.unwrap();
}

#[tokio::test]
async fn the_watchdog_keeps_a_red_lock_over_5_servers_past_its_lease() {
    let watchdog = Duration::from_millis(500);
    let (servers, clients) = servers(5, watchdog).await;
    let red = RedLock::new(locks(&clients, "watchdog:red")).unwrap();
    let guard = red.lock().await.unwrap();
    tokio::time::sleep(watchdog * 4).await;
    assert!(guard.is_held() && !guard.is_lost());
    for server in &servers {
        assert!(key_exists(server, "watchdog:red").await);
    }
    guard.release().await.unwrap();
    for server in &servers {
        assert!(!key_exists(server, "watchdog:red").await);
    }
}

#[tokio::test]
async fn a_multi_lock_over_5_servers_is_reentrant_and_a_dropped_acquire_leaves_nothing() {
    let (servers, clients) = servers(5, Duration::from_secs(30)).await;
    let components = locks(&clients, "reenter:multi");
    let owners: Vec<String> = components.iter().map(|l| l.owner().to_owned()).collect();
    let multi = MultiLock::new(components.clone()).unwrap();
    let outer = multi.lock().await.unwrap();
    let inner = multi.lock().await.unwrap();
    assert_eq!(multi.hold_count(), 2);
    assert!(components.iter().all(|lock| lock.hold_count() == 2));
    inner.release().await.unwrap();
    assert!(multi.is_held());
    outer.release().await.unwrap();
    assert_eq!(multi.hold_count(), 0);

    // One component busy: an unbounded acquire dropped midway gives back what it took.
    let other = clients[3].lock("reenter:multi").unwrap();
    assert!(other
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    let dropped = tokio::time::timeout(
        Duration::from_millis(400),
        multi.acquire(AcquireOptions::new()),
    )
    .await;
    assert!(dropped.is_err(), "still waiting for the busy lock");
    assert!(
        eventually(Duration::from_secs(5), || async {
            for (server, owner) in servers.iter().zip(&owners) {
                if holds(server, "reenter:multi", owner).await {
                    return false;
                }
            }
            true
        })
        .await
    );
    assert!(!multi.is_held());
}

#[tokio::test]
async fn bad_groups_are_rejected_before_any_io() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let err = MultiLock::new(Vec::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        err.to_string(),
        "invalid argument: a multi-lock needs at least one lock, got none"
    );
    let lock = client.lock("bad:twice").unwrap();
    let err = RedLock::new(vec![lock.clone(), lock]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        err.to_string(),
        "invalid argument: a red-lock takes each lock once, but lock 'bad:twice' of one client \
         is given twice (it would wait for itself)"
    );
    let same_name = vec![
        client.lock("bad:twice").unwrap(),
        client.lock("bad:twice").unwrap(),
    ];
    assert_eq!(
        MultiLock::new(same_name).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let group = RedLock::new(vec![client.lock("bad:one").unwrap()]).unwrap();
    assert_eq!(group.quorum(), 1);
    let err = group
        .acquire(AcquireOptions::new().lease(Duration::ZERO))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}
