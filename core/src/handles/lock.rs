//! The lock handle: the one API of every lock kind (`Client::lock`, `Client::fair_lock`, ...).
//! Everything happens in the engine (`crate::engine`); this is the public face.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::Instrument;

use crate::engine::LockCore;
use crate::foundation::error::{Error, Result};
use crate::foundation::runtime::Inline;
use crate::settings::options::{AcquireOptions, WaitMode};

/// A handle on one lock for one owner. Clones share the handle (and its holds).
///
/// Ownership is per handle: `client.lock(name)` makes a new owner each time; use
/// [`crate::Client::lock_with_holder`] to act as a given thread or task.
#[derive(Clone)]
pub struct Lock {
    pub(crate) core: Arc<LockCore>,
    defaults: AcquireOptions,
    /// This handle's wait mode; `None`: the client's.
    wait_mode: Option<WaitMode>,
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.name())
            .field("owner", &self.owner())
            .field("hold_count", &self.hold_count())
            .field("token", &self.token())
            .finish()
    }
}

impl Lock {
    pub(crate) fn new(core: LockCore) -> Lock {
        Lock {
            core: Arc::new(core),
            defaults: AcquireOptions::new(),
            wait_mode: None,
        }
    }

    /// This handle with per-lock defaults: the wait and lease that [`crate::Hold::lock`] and
    /// [`crate::Hold::try_lock`] use (bindings use them when a call leaves them out). Fails with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a wait or lease out of bounds. No I/O.
    pub fn with_defaults(mut self, defaults: AcquireOptions) -> Result<Lock> {
        defaults.validate()?;
        self.defaults = defaults;
        Ok(self)
    }

    /// The per-lock defaults (see [`Lock::with_defaults`]): wait without bound and the
    /// watchdog lease unless set.
    pub fn defaults(&self) -> AcquireOptions {
        self.defaults
    }

    pub fn name(&self) -> &str {
        self.core.name()
    }

    /// Who holds this lock now, as a timed-out acquire names them (see [`crate::Hold`]).
    pub(crate) async fn describe_holders(&self) -> Option<String> {
        crate::handles::inspect::describe_holders(&self.core.client, self.name()).await
    }

    /// `<client-uuid>:<holder-id>`, the hash field this handle writes.
    pub fn owner(&self) -> &str {
        &self.core.owner
    }

    /// Runs `work` on the core's runtime (whatever runtime, if any, the caller awaits on).
    async fn on_runtime<T, F>(&self, action: &str, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T>> + Send + 'static,
    {
        let span = tracing::debug_span!("lock", action, lock = %self.name(), owner = %self.owner());
        Inline::new(work.instrument(span), || self.core.task_panicked(action)).await
    }

    /// Acquires the lock (or re-enters it); `false` when the wait ran out.
    ///
    /// `options.wait`: `None` waits without bound, zero makes one attempt, a duration waits up
    /// to that long. `options.lease`: `None` takes the watchdog lease, renewed while held; a
    /// duration is a fixed lease that is never renewed. Every acquisition, reentrant ones too,
    /// sets the lock's lease to its own (as Redis's TTL does).
    ///
    /// While this owner's release of the lock (from another task, or another handle with the
    /// same holder id) awaits its answer, the acquire waits for it, within `wait`: a no-wait
    /// acquire then answers `false` without an attempt, as when the lock is taken.
    ///
    /// Transient errors (a dropped connection, a timeout) are retried within `wait`. Dropping
    /// the returned future leaves no lock held, and so does an attempt whose reply was lost: it
    /// is undone as soon as the server answers again. No subscription is left behind, except
    /// that a handle on a lock with a channel per owner (the fair lock) keeps its own channel
    /// subscribed for its next wait, until the handle is dropped.
    pub async fn acquire(&self, options: AcquireOptions) -> Result<bool> {
        self.core
            .acquire(options.wait, options.lease, self.wait_mode)
            .await
    }

    /// Releases one level of the hold. [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when this handle does not hold the
    /// lock, [`ErrorKind::LockLost`](crate::ErrorKind::LockLost) when its lease was lost while held. Retries on a dropped
    /// connection are idempotent; when they run out the error is returned, the lock is never
    /// renewed again, and the release goes on in the background until the lease would end.
    /// Dropping the future does not abort a release under way.
    pub async fn release(&self) -> Result<()> {
        let core = self.core.clone();
        self.on_runtime("release", async move { core.release().await })
            .await
    }

    /// Deletes the lock whoever holds it, and wakes a waiter. True when a lock was deleted.
    pub async fn force_unlock(&self) -> Result<bool> {
        let core = self.core.clone();
        self.on_runtime("force-unlock", async move { core.force_unlock().await })
            .await
    }

    /// Whether anyone holds the lock.
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.remaining_lease().await?.is_some())
    }

    /// The holder's remaining lease; `None` when nobody holds the lock. A lock written without
    /// an expiry reports [`Duration::MAX`].
    pub async fn remaining_lease(&self) -> Result<Option<Duration>> {
        let core = self.core.clone();
        self.on_runtime("inspect", async move { core.remaining_lease().await })
            .await
    }

    /// Whether this handle holds the lock (as far as it knows: no I/O).
    pub fn is_held(&self) -> bool {
        self.core.is_held()
    }

    /// How many times this handle has acquired without releasing. No I/O.
    pub fn hold_count(&self) -> u32 {
        self.core.hold_count()
    }

    /// The fencing token of the current hold (fenced locks, [`crate::Client::fenced_lock`]):
    /// the token its latest acquisition took, reentrant ones included, so it only grows while
    /// the lock is held, and a partial release keeps it. `None` when this handle holds nothing
    /// (or lost its hold), and for kinds without tokens. No I/O.
    pub fn token(&self) -> Option<i64> {
        self.core.token()
    }

    /// Whether the current hold's lease was lost.
    pub fn is_lost(&self) -> bool {
        self.core.is_lost()
    }

    /// A receiver that turns `true` when the current hold's lease is lost, and back to `false`
    /// when the handle acquires the lock afresh.
    pub fn lost_receiver(&self) -> watch::Receiver<bool> {
        self.core.lost_receiver()
    }

    /// Calls `callback` (on a blocking-pool thread, never on the caller's) each time a hold of
    /// this handle is lost.
    pub fn on_lost(&self, callback: impl Fn(&Error) + Send + Sync + 'static) {
        self.core.on_lost(Arc::new(callback));
    }

    /// This handle waiting in `mode` rather than the client's
    /// [`ClientOptions::wait_mode`](crate::ClientOptions::wait_mode) (a group of such handles
    /// waits so too). [`WaitMode::PubSub`] on a client connected in poll mode fails each acquire
    /// with [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument): it has no pub/sub
    /// connection. Fails for bounds out of range. No I/O.
    pub fn with_wait_mode(mut self, mode: WaitMode) -> Result<Lock> {
        mode.validate()?;
        self.wait_mode = Some(mode);
        Ok(self)
    }

    /// [`Lock::with_wait_mode`] as the bindings receive a mode
    /// ([`wait_mode_from_millis`](crate::options::wait_mode_from_millis): `"pubsub"` or
    /// `"poll"` with its bounds in milliseconds); unchanged when neither a mode nor a bound is
    /// given. No I/O.
    pub fn with_wait_mode_from_millis(
        self,
        mode: Option<&str>,
        poll_min_ms: Option<f64>,
        poll_max_ms: Option<f64>,
    ) -> Result<Lock> {
        match crate::settings::options::wait_mode_from_millis(mode, poll_min_ms, poll_max_ms)? {
            Some(mode) => self.with_wait_mode(mode),
            None => Ok(self),
        }
    }

    /// This handle's wait mode, `None` when it is the client's.
    pub fn wait_mode(&self) -> Option<WaitMode> {
        self.wait_mode
    }
}

crate::handles::guard::hold_by_inherent_methods!(Lock);
