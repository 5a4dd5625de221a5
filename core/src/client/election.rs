//! Leader election (`Client::election`) on the fenced lock of the election's name: the holder
//! leads, and the lock's fencing token is its **term**, so terms strictly increase from one
//! leader to the next (Redisson RFencedLock users of the same name included). The leader's
//! announced value lives in polylock's record `polylock_election:{name}`, written and read by
//! scripts that check it against the lock's holder; changes are published on
//! `polylock_election_channel:{name}` (docs/PROTOCOL.md).
//!
//! Leadership ends when the lock's hold does: a resign releases it (waking the next candidate),
//! and a lost lease is the engine's lost hold, reported at the earliest moment the key can have
//! expired on the server (the send time of the last confirmed renewal + the lease).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use futures_util::Stream;
use tokio::sync::watch;

use crate::client::Client;
use crate::engine::run_idempotent;
use crate::foundation::error::{Error, ErrorKind, Result};
use crate::foundation::keys;
use crate::foundation::runtime::on_runtime;
use crate::handles::lock::Lock;
use crate::kinds::election::{ANNOUNCE, LEADER, WITHDRAW};
use crate::kinds::messages::LockSubscription;
use crate::settings::options::AcquireOptions;

/// The longest an observer goes without reading the leader: a change whose message was missed
/// (a leader that died publishes nothing) is seen within it.
pub const OBSERVE_POLL: Duration = Duration::from_secs(1);

/// The leader of an election as [`Election::leader`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// The value the leader announced (at its campaign, or its latest [`Leadership::proclaim`]).
    pub value: String,
    /// Its term: the fencing token of its hold on the election's lock.
    pub term: i64,
    /// The lock owner it holds as (`<client-id>:<holder-id>`).
    pub owner: String,
    /// The name of its client ([`Client::name`]: the `name` option, default `host:pid`).
    pub client_name: String,
}

/// An election among every client that campaigns on the same name. Cheap to clone. No I/O
/// until a call.
#[derive(Clone)]
pub struct Election {
    client: Client,
    name: Arc<str>,
    /// The election's lock key: the name under the client's key prefix. The record and the
    /// channel derive from it, as the lock's own keys do.
    key: Arc<str>,
    record: Arc<str>,
    channel: Arc<str>,
}

impl std::fmt::Debug for Election {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Election")
            .field("name", &self.name)
            .finish()
    }
}

impl Election {
    pub(crate) fn new(client: Client, name: &str) -> Election {
        let key = client.inner.key_of(name);
        Election {
            record: keys::election_record(&key).into(),
            channel: keys::election_channel(&key).into(),
            key: key.into(),
            name: name.into(),
            client,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A script call on the election's three keys.
    fn call(
        &self,
        script: &'static crate::kinds::script::LockScript,
    ) -> crate::connection::ScriptCall {
        let mut call = script.prepare_invoke(self.client.inner.publish);
        call.key(&*self.key).key(&*self.record).key(&*self.channel);
        call
    }

    /// Runs `call` (idempotent) on the core's runtime.
    async fn run<T>(&self, action: &str, call: crate::connection::ScriptCall) -> Result<T>
    where
        T: redis::FromRedisValue + Send + 'static,
    {
        let what = format!("{action} election '{}'", self.name);
        let client = self.client.inner.clone();
        on_runtime(&what.clone(), async move {
            run_idempotent(&client, &what, &call).await
        })
        .await
    }

    /// Writes `value` as the announced value of `owner`, term `term`, if `owner` holds the lock.
    async fn announce(&self, owner: &str, term: i64, value: &str) -> Result<bool> {
        let mut call = self.call(&ANNOUNCE);
        call.arg(owner).arg(value).arg(term).arg(self.client.name());
        Ok(self.run::<i64>("announce in", call).await? == 1)
    }

    /// Waits until this candidate leads, announcing `value`; `None` when `wait` ran out (`None`
    /// waits without bound, zero makes one attempt). Each campaign is a new lock owner.
    /// Dropping the future leaves nothing held. Fails with the acquire's errors
    /// ([`ErrorKind::Connection`], [`ErrorKind::WrongType`] when the name holds something else).
    pub async fn campaign(
        &self,
        value: &str,
        wait: Option<Duration>,
    ) -> Result<Option<Leadership>> {
        let deadline = wait.map(|wait| Instant::now() + wait);
        loop {
            let lock = self.client.fenced_lock(&self.name)?;
            let mut options = AcquireOptions::new();
            if let Some(deadline) = deadline {
                options = options.wait(deadline.saturating_duration_since(Instant::now()));
            }
            if !lock.acquire(options).await? {
                return Ok(None);
            }
            // No token: the hold was lost already. Announcing after it was lost is refused by
            // the script. Either way the next round takes the lock afresh (a new owner).
            let Some(term) = lock.token() else { continue };
            match self.announce(lock.owner(), term, value).await {
                Ok(true) => return Ok(Some(Leadership::new(self.clone(), lock, term, value))),
                Ok(false) => continue,
                Err(err) => {
                    let _ = lock.release().await;
                    return Err(err);
                }
            }
        }
    }

    /// The current leader (its value, term, owner and client name), or `None` when nobody
    /// leads, read in one script: a record whose owner no longer holds the lock (a dead
    /// leader's) is never reported, nor a holder that has not announced yet.
    pub async fn leader(&self) -> Result<Option<Leader>> {
        type Row = (String, String, i64, String);
        let row: Option<Row> = self.run("read the leader of", self.call(&LEADER)).await?;
        Ok(row.map(|(owner, value, term, client)| Leader {
            value,
            term,
            owner,
            client_name: client,
        }))
    }

    /// Watches the leader: [`Observer::next`] returns the leader now, then each change (a new
    /// leader, a new value, nobody). Woken by the election's channel, and reads again at least
    /// every [`OBSERVE_POLL`], so a missed message (a leader that died) costs at most that.
    /// A client in the poll wait mode (no pub/sub) reads every [`OBSERVE_POLL`].
    pub async fn observe(&self) -> Result<Observer> {
        let what = format!("observe election '{}'", self.name);
        self.client.inner.check_usable_for(&what)?;
        let subscription = match self.client.inner.hub.clone() {
            Some(hub) => {
                let channel = self.channel.to_string();
                Some(on_runtime(&what, async move { hub.subscribe(&channel, None).await }).await?)
            }
            None => None,
        };
        Ok(Observer {
            inner: Arc::new(ObserverInner {
                election: self.clone(),
                subscription,
                last: Mutex::new(None),
            }),
        })
    }
}

/// This candidate's term as leader, from [`Election::campaign`]. Clones share it. Dropping the
/// last clone without [`Leadership::resign`] releases the lock in the background.
#[derive(Clone)]
pub struct Leadership {
    inner: Arc<LeadershipInner>,
}

struct LeadershipInner {
    election: Election,
    lock: Lock,
    term: i64,
    value: Mutex<String>,
    resigned: watch::Sender<bool>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("election", &self.inner.election.name)
            .field("term", &self.inner.term)
            .field("is_leader", &self.is_leader())
            .finish()
    }
}

impl Leadership {
    fn new(election: Election, lock: Lock, term: i64, value: &str) -> Leadership {
        Leadership {
            inner: Arc::new(LeadershipInner {
                election,
                lock,
                term,
                value: Mutex::new(value.to_owned()),
                resigned: watch::Sender::new(false),
            }),
        }
    }

    /// The term: the fencing token of this leadership, higher than every earlier leader's.
    /// Pass it to [`Client::fenced_set`] to make writes that a later leader's refuse.
    pub fn term(&self) -> i64 {
        self.inner.term
    }

    /// The value this leader announced last.
    pub fn value(&self) -> String {
        self.inner
            .value
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The lock owner this leader holds as.
    pub fn owner(&self) -> &str {
        self.inner.lock.owner()
    }

    /// Whether this candidate still leads, as far as it knows (no I/O): not resigned, not
    /// reported lost, and before the moment its lease can end on the server. That last check
    /// reads the clock, so a process resumed after a pause past its lease (SIGSTOP, a VM
    /// freeze) learns here that it lost, even before the lost signal is delivered.
    pub fn is_leader(&self) -> bool {
        let lock = &self.inner.lock;
        if *self.inner.resigned.borrow() || !lock.is_held() {
            return false;
        }
        lock.core
            .client
            .upkeep
            .horizon(lock.core.id)
            .is_some_and(|horizon| Instant::now() < horizon)
    }

    /// Whether this leadership ended because its lease was lost (not by a resign).
    pub fn is_lost(&self) -> bool {
        self.inner.lock.is_lost()
    }

    /// Resolves when this leadership ends: its lease lost (no later than the moment it can
    /// have ended on the server) or resigned.
    pub async fn lost(&self) {
        let mut lost = self.inner.lock.lost_receiver();
        let mut resigned = self.inner.resigned.subscribe();
        tokio::select! {
            _ = lost.wait_for(|lost| *lost) => {}
            _ = resigned.wait_for(|resigned| *resigned) => {}
        }
    }

    /// [`Leadership::lost`] for at most `wait` (`None`: without bound): true when the
    /// leadership ended, false when the wait ran out. For bindings that block a thread.
    pub async fn wait_lost(&self, wait: Option<Duration>) -> Result<bool> {
        let leadership = self.clone();
        on_runtime("wait for the end of a leadership", async move {
            match wait {
                None => {
                    leadership.lost().await;
                    Ok(true)
                }
                Some(wait) => Ok(tokio::time::timeout(wait, leadership.lost()).await.is_ok()),
            }
        })
        .await
    }

    /// A receiver of the lease's lost flag (see [`Lock::lost_receiver`]).
    pub fn lost_receiver(&self) -> watch::Receiver<bool> {
        self.inner.lock.lost_receiver()
    }

    /// Calls `callback` (on a blocking-pool thread) when the lease is lost.
    pub fn on_lost(&self, callback: impl Fn(&Error) + Send + Sync + 'static) {
        self.inner.lock.on_lost(callback);
    }

    /// Announces `value` instead, checked in the script against the lock's holder:
    /// [`ErrorKind::LockLost`] when this candidate no longer leads (nothing is written).
    pub async fn proclaim(&self, value: &str) -> Result<()> {
        let not_leader = || {
            Error::lock_lost(format!(
                "election '{}': term {} no longer leads, so it cannot proclaim",
                self.inner.election.name, self.inner.term
            ))
        };
        if !self.is_leader() {
            return Err(not_leader());
        }
        let announced = self
            .inner
            .election
            .announce(self.owner(), self.inner.term, value)
            .await?;
        if !announced {
            return Err(not_leader());
        }
        *self.inner.value.lock().unwrap_or_else(|p| p.into_inner()) = value.to_owned();
        Ok(())
    }

    /// Steps down: releases the lock (waking the next candidate), withdraws the announced
    /// value and tells the observers. Resigning a leadership already lost or resigned does
    /// nothing more and succeeds.
    pub async fn resign(&self) -> Result<()> {
        if self.inner.resigned.send_replace(true) {
            return Ok(());
        }
        match self.inner.lock.release().await {
            Ok(()) => {}
            Err(err) if matches!(err.kind(), ErrorKind::LockLost | ErrorKind::NotHeld) => {}
            Err(err) => return Err(err),
        }
        let election = &self.inner.election;
        let mut call = election.call(&WITHDRAW);
        call.arg(self.owner());
        election.run::<i64>("withdraw from", call).await?;
        Ok(())
    }
}

/// The changes of an election's leader, from [`Election::observe`]. Clones share it.
#[derive(Clone)]
pub struct Observer {
    inner: Arc<ObserverInner>,
}

struct ObserverInner {
    election: Election,
    /// None for a client that polls (no pub/sub connection).
    subscription: Option<LockSubscription>,
    /// What the latest `next` returned (`None` before the first).
    last: Mutex<Option<Option<Leader>>>,
}

impl Observer {
    /// The leader now on the first call; then waits for the next change (another leader or
    /// term, another value, nobody leading) and returns it. Dropping the future loses no
    /// change: the change it was waiting for is returned by the next call. Meant for one caller
    /// at a time (concurrent calls may each return the same change).
    pub async fn next(&self) -> Result<Option<Leader>> {
        let inner = self.inner.clone();
        let last = self.last();
        let what = format!("observe election '{}'", inner.election.name);
        let change = on_runtime(&what, async move {
            loop {
                let messages = inner.subscription.as_ref().map(|s| s.messages());
                let now = inner.election.leader().await?;
                if last.as_ref() != Some(&now) {
                    return Ok(now);
                }
                match (&inner.subscription, messages) {
                    (Some(subscription), Some(messages)) => {
                        subscription.wait(OBSERVE_POLL, messages).await;
                    }
                    _ => tokio::time::sleep(OBSERVE_POLL).await,
                }
            }
        })
        .await?;
        // Only once delivered: a dropped call (whose search ends in the background) must not
        // mark its change as seen.
        *self.inner.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(change.clone());
        Ok(change)
    }

    fn last(&self) -> Option<Option<Leader>> {
        self.inner
            .last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// [`Observer::next`] for at most `wait`: `None` when the wait ran out without a change.
    /// For bindings that block a thread.
    pub async fn next_within(&self, wait: Duration) -> Result<Option<Option<Leader>>> {
        let observer = self.clone();
        on_runtime("observe an election", async move {
            match tokio::time::timeout(wait, observer.next()).await {
                Ok(next) => next.map(Some),
                Err(_) => Ok(None),
            }
        })
        .await
    }

    /// The changes as a stream (each [`Observer::next`]).
    pub fn changes(&self) -> impl Stream<Item = Result<Option<Leader>>> + Send + 'static {
        futures_util::stream::unfold(self.clone(), |observer| async move {
            let next = observer.next().await;
            Some((next, observer))
        })
    }
}
