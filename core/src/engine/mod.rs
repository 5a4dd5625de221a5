//! The engine every lock kind runs on. One concept per file:
//! - `acquire`: the acquire task, its hand-off to the caller, the wait loop, and resolving an
//!   acquire whose reply was lost;
//! - `client_record`: the client record `polylock:client:<id>` (who holds a lock);
//! - `context`: `ClientInner`, the state a client shares with every handle and the engine;
//! - `hold`: what a handle holds (levels, lease, expiry), the lost signal;
//! - `keep`: letting go of a hold without releasing it, its key's TTL set (the job lock);
//! - `release`: release with retries under one request id, then in the background;
//! - `release_gate`: an owner's acquire, and next release, of a lock wait while its release of
//!   it awaits an answer (the release trace is one per lock and owner);
//! - `renew`: the client's one upkeep task (watchdog renewals, fixed-lease expiry, re-checks
//!   after a reconnect).
//!
//! A kind (`crate::kinds`) brings its scripts, keys and replies.

mod acquire;
pub(crate) mod client_record;
pub(crate) mod context;
mod hold;
mod keep;
pub(crate) mod release;
pub(crate) mod release_gate;
pub(crate) mod renew;

use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::watch;

use crate::engine::acquire::WaitSubscriptions;
use crate::engine::context::ClientInner;
use crate::engine::renew::TrackedHold;
use crate::foundation::error::{Error, Result};
use crate::kinds::{LockKind, Renewal, WaitPolicy};
use crate::metrics::{LockStats, LostReason};

pub(crate) use acquire::PollBackoff;
pub(crate) use hold::{Hold, Lease, LostCallback};

/// Told on the spot when a hold is found lost (see [`LockCore::set_lost_hook`]).
pub(crate) type LostHook = Box<dyn Fn(&Error) + Send + Sync>;

/// The PTTL of a hash-based lock: see `scripts/lock_pttl.lua`.
pub(crate) static LOCK_PTTL: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("scripts/lock_pttl.lua")));

/// How long a latch (the remembered outcome of an acquire or release request) outlives the
/// lease it was written with. Every retry of one request is sent before the lease it guards
/// would end, so the latch outlives every retry, whatever the timeouts.
const LATCH_GRACE: Duration = Duration::from_secs(60);

/// A fresh request id (32 hex characters), one per logical acquire or release.
pub(crate) fn request_id() -> String {
    crate::foundation::ids::request_id()
}

pub fn latch_ms(lease: Duration) -> u64 {
    (lease + LATCH_GRACE).as_millis() as u64
}

/// Delays between retries of one request: 50 ms, doubling up to 1 s.
pub(crate) struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Self {
        Backoff(Duration::from_millis(50))
    }
}

impl Backoff {
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.0;
        self.0 = (self.0 * 2).min(Duration::from_secs(1));
        delay
    }
}

/// A call that has the same effect however many times it runs: a script made idempotent by the
/// request id among its keys, or a command idempotent by itself (`DEL`).
pub(crate) trait Idempotent: Send + Sync {
    fn send<T: redis::FromRedisValue + Send>(
        &self,
        connection: &mut crate::connection::Connection,
    ) -> impl std::future::Future<Output = redis::RedisResult<T>> + Send;
}

impl Idempotent for crate::connection::ScriptCall {
    async fn send<T: redis::FromRedisValue + Send>(
        &self,
        connection: &mut crate::connection::Connection,
    ) -> redis::RedisResult<T> {
        self.invoke_async(connection).await
    }
}

impl Idempotent for redis::Cmd {
    async fn send<T: redis::FromRedisValue + Send>(
        &self,
        connection: &mut crate::connection::Connection,
    ) -> redis::RedisResult<T> {
        self.query_async(connection).await
    }
}

/// Runs `call`, retrying a dropped connection with the same call for up to twice the response
/// timeout (so a script's latch must live at least `latch_ms(2 * response_timeout)`).
pub(crate) async fn run_idempotent<T: redis::FromRedisValue + Send>(
    client: &ClientInner,
    what: &str,
    call: &impl Idempotent,
) -> Result<T> {
    let until = tokio::time::Instant::now() + client.options.response_timeout * 2;
    let mut backoff = Backoff::default();
    loop {
        client.check_usable_for(what)?;
        let mut connection = client.connection.clone();
        match call.send::<T>(&mut connection).await {
            Ok(reply) => return Ok(reply),
            Err(err) => {
                let err = Error::from_redis(what, err);
                let left = until.saturating_duration_since(tokio::time::Instant::now());
                if !err.is_transient() || left.is_zero() {
                    return Err(err);
                }
                tokio::time::sleep(backoff.next_delay().min(left)).await;
            }
        }
    }
}

/// [`run_idempotent`], and when it fails for a transient reason, the same call again in the
/// background ([`retry_idempotent_in_background`]): the error says so.
pub(crate) async fn run_idempotent_or_in_background<T: redis::FromRedisValue + Send>(
    client: &Arc<ClientInner>,
    what: &str,
    call: impl Idempotent + 'static,
) -> Result<T> {
    let first_sent = tokio::time::Instant::now();
    match run_idempotent::<T>(client, what, &call).await {
        Err(err) if err.is_transient() => {
            retry_idempotent_in_background(client.clone(), what.to_owned(), call, first_sent);
            Err(err.with_note(
                "it is sent again in the background for a minute, and takes effect once",
            ))
        }
        answer => answer,
    }
}

/// A call of [`run_idempotent`], first sent at `first_sent`, that failed in its caller's time:
/// sent again in the background, the same call, until `first_sent` + `LATCH_GRACE`. A script's
/// latch lives `latch_ms(2 * response_timeout)` from when the call first ran, so every copy
/// still lands within it: what the call does (a semaphore's permits given back) happens once,
/// even when the server was out of reach for longer than the caller waited.
fn retry_idempotent_in_background(
    client: Arc<ClientInner>,
    what: String,
    call: impl Idempotent + 'static,
    first_sent: tokio::time::Instant,
) {
    let until = first_sent + LATCH_GRACE;
    crate::foundation::runtime::runtime().spawn(async move {
        let mut backoff = Backoff::default();
        while tokio::time::Instant::now() < until && !client.is_closed() {
            tokio::time::sleep(backoff.next_delay()).await;
            let mut connection = client.connection.clone();
            match call.send::<redis::Value>(&mut connection).await {
                Ok(_) => {
                    tracing::info!(%what, "done in the background");
                    return;
                }
                Err(err) if Error::from_redis(&what, err.clone()).is_transient() => {}
                Err(err) => {
                    tracing::warn!(%what, error = %err, "gave up in the background");
                    return;
                }
            }
        }
        tracing::warn!(%what, "could not reach Redis in the background either; gave up");
    });
}

/// One handle's engine: the lock kind, the owner, and what it holds. Clones of a
/// [`crate::Lock`] share it.
pub(crate) struct LockCore {
    pub(crate) client: Arc<ClientInner>,
    /// Identifies this handle in the client's registries.
    pub(crate) id: u64,
    pub(crate) kind: Arc<dyn LockKind>,
    pub(crate) owner: String,
    hold: Mutex<Hold>,
    lost: watch::Sender<bool>,
    callbacks: Mutex<Vec<LostCallback>>,
    /// The owner of this handle, told on the spot when its hold is lost.
    lost_hook: OnceLock<LostHook>,
    /// The wait channels, kept subscribed between waits by kinds with a channel per owner.
    kept_subscriptions: Mutex<WaitSubscriptions>,
    /// The counters of this handle's lock name and kind, taken once when the handle was made.
    pub(crate) stats: Arc<LockStats>,
    /// False for a semaphore's acquisition, whose permits leave the engine at once (the
    /// permits' own handle counts their holds).
    counts_holds: bool,
    /// Why the latest hold was lost, for a group of locks reporting its own loss.
    last_lost_reason: Mutex<Option<LostReason>>,
    /// This handle's acquire calls under way (see `AcquireArgs::reenters`).
    pub(crate) acquiring: std::sync::atomic::AtomicUsize,
}

impl LockCore {
    pub(crate) fn new(
        client: Arc<ClientInner>,
        kind: Arc<dyn LockKind>,
        holder_id: u64,
        stats: Arc<LockStats>,
    ) -> Self {
        let owner = format!("{}:{holder_id}", client.id);
        LockCore::with_owner(client, kind, owner, stats)
    }

    /// A handle whose owner is `owner` as given (an expirable semaphore's permit id).
    pub(crate) fn with_owner(
        client: Arc<ClientInner>,
        kind: Arc<dyn LockKind>,
        owner: String,
        stats: Arc<LockStats>,
    ) -> Self {
        LockCore {
            stats,
            counts_holds: true,
            last_lost_reason: Mutex::new(None),
            owner,
            id: client.next_handle_id(),
            client,
            kind,
            hold: Mutex::new(Hold::default()),
            lost: watch::Sender::new(false),
            callbacks: Mutex::new(Vec::new()),
            lost_hook: OnceLock::new(),
            kept_subscriptions: Mutex::new(WaitSubscriptions::default()),
            acquiring: Default::default(),
        }
    }

    /// This handle without counting holds (see `counts_holds`).
    pub(crate) fn without_hold_counts(mut self) -> Self {
        self.counts_holds = false;
        self
    }

    pub(crate) fn name(&self) -> &str {
        self.kind.name()
    }

    /// How messages name this handle: `semaphore 'permits'`, `lock 'orders:42'`.
    pub(crate) fn described(&self) -> String {
        self.kind.described()
    }

    /// Fails when the client was closed, or was made before a fork (`ClientInner::check_usable`).
    pub(crate) fn check_usable(&self) -> Result<()> {
        self.client.check_usable(|| self.described())
    }

    /// Why the latest hold was lost (`None` while none was, or when closing the client ended it).
    pub(crate) fn last_lost_reason(&self) -> Option<LostReason> {
        *self
            .last_lost_reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// How this handle's kind waits, with the client's options.
    pub(crate) fn wait_policy(&self) -> WaitPolicy {
        self.kind.wait_policy(&self.client.options)
    }

    fn what(&self, action: &str) -> String {
        format!("{action} {}", self.described())
    }

    /// The error of a call whose work panicked (see [`crate::foundation::runtime::Inline`]).
    pub(crate) fn task_panicked(&self, action: &str) -> Error {
        Error::redis(format!(
            "{}: {action} task failed: it panicked",
            self.described()
        ))
    }

    pub(crate) fn lost_receiver(&self) -> watch::Receiver<bool> {
        self.lost.subscribe()
    }

    pub(crate) fn on_lost(&self, callback: LostCallback) {
        self.callbacks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(callback);
    }

    /// Sets the hook `mark_lost` calls on the thread that found the hold lost, before the
    /// callbacks (which run elsewhere, as they may block): it must not block, nor wait for
    /// this handle. An expirable semaphore drops the permit from its handle with it. Set once.
    pub(crate) fn set_lost_hook(&self, hook: LostHook) {
        let _ = self.lost_hook.set(hook);
    }

    /// Deletes the lock whoever holds it, and wakes a waiter. True when a lock was deleted.
    pub(crate) async fn force_unlock(&self) -> Result<bool> {
        self.check_usable()?;
        let Some(call) = self.kind.force_unlock() else {
            return Ok(false);
        };
        let mut connection = self.client.connection.clone();
        call.invoke_async::<i64>(&mut connection)
            .await
            .map(|deleted| deleted == 1)
            .map_err(|err| Error::from_redis(&self.what("force-unlock"), err))
    }

    /// The holder's remaining lease: `None` when nobody holds it, `Duration::MAX` without expiry.
    pub(crate) async fn remaining_lease(&self) -> Result<Option<Duration>> {
        self.check_usable()?;
        let mut connection = self.client.connection.clone();
        let pttl: i64 = LOCK_PTTL
            .key(self.kind.key())
            .invoke_async(&mut connection)
            .await
            .map_err(|err| Error::from_redis(&self.what("inspect"), err))?;
        Ok(match pttl {
            -2 => None,
            ms if ms < 0 => Some(Duration::MAX),
            ms => Some(Duration::from_millis(ms as u64)),
        })
    }
}

impl TrackedHold for LockCore {
    fn id(&self) -> u64 {
        self.id
    }

    fn name(&self) -> &str {
        LockCore::name(self)
    }

    fn described(&self) -> String {
        LockCore::described(self)
    }

    fn renewal(&self) -> Renewal {
        self.kind.renewal(&self.owner)
    }

    fn stats(&self) -> Arc<LockStats> {
        self.stats.clone()
    }

    fn mark_lost(&self, error: Error, reason: Option<LostReason>) {
        LockCore::mark_lost(self, error, reason);
    }

    fn kind_name(&self) -> &'static str {
        self.kind.kind_name()
    }

    fn held_since(&self) -> Option<std::time::SystemTime> {
        LockCore::held_since(self)
    }
}

impl Drop for LockCore {
    fn drop(&mut self) {
        self.release_on_drop();
    }
}
