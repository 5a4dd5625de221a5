//! The kinds that share one lock hash under a name (the plain lock, the fenced lock, the fair
//! lock, the FIFO lock, and Redisson's RLock, emulated here with raw commands running its wait
//! loop) exclude each other, and a release of any of them wakes a waiter of any other at once
//! (docs/PROTOCOL.md, "Kinds that share a name"). Every bound a waiter could otherwise wake by is
//! a minute or more (the holder's lease, the fair queue timeout's half, a wait), so a waiter
//! that acquires within 30 s of the release was woken by it.

mod common;

use std::time::{Duration, Instant};

use common::*;
use polylock::{keys, AcquireOptions, Client, Lock};
use polylock_testkit::redisson;
use redis::AsyncCommands;

/// The holder's lease, and the emulated RLock's: far beyond the checks below.
const HOLDER_LEASE: Duration = Duration::from_secs(120);
/// Half of it is how long a FIFO or fair waiter sleeps at most, and a plain waiter without a
/// message on its channels.
const QUEUE_TIMEOUT: Duration = Duration::from_secs(120);
/// A waiter woken by the release acquires well within this.
const WOKEN_WITHIN: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Lock,
    Fenced,
    Fair,
    Fifo,
    /// Redisson's RLock, from raw commands.
    RLock,
}

const KINDS: [Kind; 5] = [
    Kind::Lock,
    Kind::Fenced,
    Kind::Fair,
    Kind::Fifo,
    Kind::RLock,
];

impl Kind {
    fn handle(self, client: &Client, name: &str) -> Lock {
        match self {
            Kind::Lock => client.lock(name),
            Kind::Fenced => client.fenced_lock(name),
            Kind::Fair => client.fair_lock(name),
            Kind::Fifo => client.fifo_lock(name),
            Kind::RLock => unreachable!("Redisson's RLock is emulated"),
        }
        .unwrap()
    }

    /// Whether `owner` of this kind waits in its line on `name`, subscribed to its own channel
    /// (after which it sleeps, once it has checked that the lock is still there).
    async fn waits(
        self,
        con: &mut redis::aio::MultiplexedConnection,
        name: &str,
        owner: &str,
    ) -> bool {
        let own_channel = match self {
            Kind::Lock | Kind::Fenced => keys::lock_told_channel(name, owner),
            Kind::Fair => keys::fair_waiter_channel(name, owner),
            Kind::Fifo => keys::fifo_waiter_channel(name, owner),
            Kind::RLock => unreachable!(),
        };
        let (_, listeners): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&own_channel)
            .query_async(con)
            .await
            .unwrap();
        if listeners == 0 {
            return false;
        }
        match self {
            Kind::Lock | Kind::Fenced => {
                let score: Option<f64> = con.zscore(keys::lock_waiters(name), owner).await.unwrap();
                score.is_some()
            }
            Kind::Fair => {
                let queue: Vec<String> = con.lrange(keys::fair_queue(name), 0, -1).await.unwrap();
                queue.iter().any(|queued| queued == owner)
            }
            Kind::Fifo => {
                let line: Vec<String> = con.lrange(keys::fifo_line(name), 0, -1).await.unwrap();
                line.iter().any(|queued| queued == owner)
            }
            Kind::RLock => unreachable!(),
        }
    }
}

/// An emulated Redisson client's owner (`<uuid>:<thread id>`).
fn rlock_owner(index: usize) -> String {
    format!("0b5d2f3c-1111-4222-8333-{index:012}:1")
}

/// Redisson's RLock takes `name` (free) for HOLDER_LEASE.
async fn rlock_take(con: &mut redis::aio::MultiplexedConnection, name: &str, owner: &str) {
    let reply: Option<i64> = redis::Script::new(redisson::RLOCK_TRY)
        .key(name)
        .arg(HOLDER_LEASE.as_millis() as u64)
        .arg(owner)
        .invoke_async(con)
        .await
        .unwrap();
    assert_eq!(reply, None, "the RLock holder takes the free lock");
}

/// Redisson's RLock wait loop, on a thread of its own: subscribe to the lock channel, try, and
/// sleep until a message or the PTTL replied. Signals `waiting` after its first busy try;
/// answers when it acquired.
fn rlock_wait(
    url: String,
    name: String,
    owner: String,
    waiting: tokio::sync::oneshot::Sender<()>,
) -> Instant {
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_connection().unwrap();
    let mut listener = client.get_connection().unwrap();
    let mut pubsub = listener.as_pubsub();
    pubsub.subscribe(keys::lock_channel(&name)).unwrap();
    let mut waiting = Some(waiting);
    loop {
        let reply: Option<i64> = redis::Script::new(redisson::RLOCK_TRY)
            .key(&name)
            .arg(30_000)
            .arg(&owner)
            .invoke(&mut con)
            .unwrap();
        let Some(pttl) = reply else {
            return Instant::now();
        };
        if let Some(waiting) = waiting.take() {
            let _ = waiting.send(());
        }
        let sleep = if pttl > 0 {
            Duration::from_millis(pttl as u64)
        } else {
            Duration::from_secs(60)
        };
        pubsub.set_read_timeout(Some(sleep)).unwrap();
        // A message or the timeout: either way, try again.
        let _ = pubsub.get_message();
    }
}

/// How the holder lets go.
#[derive(Debug, Clone, Copy)]
enum Free {
    Release,
    /// A force unlock by a handle of the holder's kind.
    ForceUnlock,
}

/// A waiter of kind `waiter` behind a holder of kind `holder` on `name`: the time from the
/// holder letting go to the waiter acquiring, or what went wrong.
async fn handoff(
    server: &RedisServer,
    client: &Client,
    holder: Kind,
    waiter: Kind,
    free: Free,
    name: String,
    index: usize,
) -> Result<Duration, String> {
    let mut con = raw(server).await;
    let rlock_holder = rlock_owner(index);
    let held = match holder {
        Kind::RLock => {
            rlock_take(&mut con, &name, &rlock_holder).await;
            None
        }
        kind => {
            let lock = kind.handle(client, &name);
            assert!(lock
                .acquire(AcquireOptions::new().lease(HOLDER_LEASE))
                .await
                .unwrap());
            Some(lock)
        }
    };
    let acquired: tokio::task::JoinHandle<Option<Instant>> = match waiter {
        Kind::RLock => {
            let (waiting, wait_began) = tokio::sync::oneshot::channel();
            let (url, name, owner) = (server.url(), name.clone(), rlock_owner(100 + index));
            let waits = tokio::task::spawn_blocking(move || rlock_wait(url, name, owner, waiting));
            wait_began.await.unwrap();
            tokio::spawn(async move { Some(waits.await.unwrap()) })
        }
        kind => {
            let lock = kind.handle(client, &name);
            let owner = lock.owner().to_owned();
            let waits = tokio::spawn(async move {
                let acquired = lock
                    .acquire(AcquireOptions::new().wait(Duration::from_secs(90)))
                    .await
                    .unwrap();
                acquired.then(Instant::now)
            });
            let check = raw(server).await;
            let listed = eventually(Duration::from_secs(10), || {
                let (mut check, name, owner) = (check.clone(), name.clone(), owner.clone());
                async move { kind.waits(&mut check, &name, &owner).await }
            })
            .await;
            if !listed {
                return Err("the waiter never waited".into());
            }
            waits
        }
    };
    let freed = Instant::now();
    match (holder, free, held) {
        (Kind::RLock, Free::Release, _) => {
            let released: Option<i64> =
                redis::Script::new(&redisson::rlock_unlock(redisson::PUBLISH))
                    .key(&name)
                    .key(keys::lock_channel(&name))
                    .arg(HOLDER_LEASE.as_millis() as u64)
                    .arg(&rlock_holder)
                    .invoke_async(&mut con)
                    .await
                    .unwrap();
            assert_eq!(released, Some(1));
        }
        (_, Free::Release, Some(lock)) => lock.release().await.unwrap(),
        (kind, Free::ForceUnlock, _) => {
            assert!(kind.handle(client, &name).force_unlock().await.unwrap());
        }
        (_, Free::Release, None) => unreachable!(),
    }
    match tokio::time::timeout(WOKEN_WITHIN, acquired).await {
        Ok(Ok(Some(at))) => Ok(at - freed),
        Ok(Ok(None)) => Err("the waiter did not acquire".into()),
        Ok(Err(err)) => Err(format!("the waiter failed: {err}")),
        Err(_) => Err(format!(
            "not woken within {WOKEN_WITHIN:?} of the holder letting go"
        )),
    }
}

/// Every pair of kinds (holder, waiter) of different kinds, at once, each on a name of its own.
async fn every_pair(free: Free, holders: &[Kind]) {
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .fair_queue_timeout(QUEUE_TIMEOUT)
        .connect()
        .await
        .unwrap();
    let mut pairs = Vec::new();
    for &holder in holders {
        for waiter in KINDS {
            if holder != waiter {
                pairs.push((holder, waiter));
            }
        }
    }
    let runs: Vec<_> = pairs
        .iter()
        .enumerate()
        .map(|(index, &(holder, waiter))| {
            let name = format!("{holder:?}-{waiter:?}").to_lowercase();
            handoff(&server, &client, holder, waiter, free, name, index)
        })
        .collect();
    let outcomes = futures_util::future::join_all(runs).await;
    let failed: Vec<String> = pairs
        .iter()
        .zip(&outcomes)
        .filter_map(|((holder, waiter), outcome)| {
            outcome.as_ref().err().map(|why| {
                format!("{waiter:?} waiter behind a {holder:?} holder ({free:?}): {why}")
            })
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_release_of_each_kind_wakes_a_waiter_of_every_other_kind_at_once() {
    every_pair(Free::Release, &KINDS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_force_unlock_of_each_kind_wakes_a_waiter_of_every_other_kind_at_once() {
    every_pair(Free::ForceUnlock, &[Kind::Lock, Kind::Fair, Kind::Fifo]).await;
}
