//! The reentrant lock (Redisson RLock layout): acquire with a bounded or unbounded wait,
//! watchdog or fixed lease; idempotent, cancellation-safe release; lost-lease notification.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};
use tracing::Instrument;

use crate::client::ClientInner;
use crate::error::{Error, Result};
use crate::keys;
use crate::runtime::runtime;
use crate::script;
use crate::waiter::Subscription;

/// Wall-clock time for fair-queue deadlines, which every client of the queue compares.
fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

/// Longest lock name accepted: a longer one is almost surely a bug (a payload used as a name).
pub const MAX_NAME_BYTES: usize = 4096;
/// Longest lease or wait accepted (10 years); for "forever" pass no wait or no lease.
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// Redisson's default `fairLockWaitTimeout` (5 min): the allowance each queued waiter adds to
/// the deadlines behind it, and which each acquisition from the head subtracts again. polylock
/// keeps this arithmetic in the shared deadline ZSET because Redisson clients rewrite it.
const FAIR_WAIT_ALLOWANCE: Duration = Duration::from_secs(300);
/// How long a release's latch (its remembered answer) lives, covering its retries.
const LATCH_LIFETIME: Duration = Duration::from_secs(10);
/// Longest single sleep of a waiter between two looks at the lock (it normally wakes by message).
const MAX_WAIT_SLICE: Duration = Duration::from_secs(3600);

pub(crate) fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidArgument("lock name must not be empty".into()));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(Error::InvalidArgument(format!(
            "lock name is {} bytes long; at most {MAX_NAME_BYTES} are accepted",
            name.len()
        )));
    }
    Ok(())
}

fn validate_lease(name: &str, lease: Option<Duration>) -> Result<()> {
    match lease {
        Some(lease) if lease < Duration::from_millis(1) => Err(Error::InvalidArgument(format!(
            "lock '{name}': lease must be at least 1 ms, got {lease:?}"
        ))),
        Some(lease) if lease > MAX_DURATION => Err(Error::InvalidArgument(format!(
            "lock '{name}': lease {lease:?} is longer than the 10 years accepted"
        ))),
        _ => Ok(()),
    }
}

fn validate_wait(name: &str, wait: Option<Duration>) -> Result<()> {
    match wait {
        Some(wait) if wait > MAX_DURATION => Err(Error::InvalidArgument(format!(
            "lock '{name}': wait {wait:?} is longer than the 10 years accepted; pass none to wait without bound"
        ))),
        _ => Ok(()),
    }
}

/// Who owns an acquisition that completes while the caller may be dropping its future: the
/// task commits it (then the caller's guard undoes it if the result never arrives), or the
/// caller abandons first (then the task undoes it). Exactly one side wins the exchange.
#[derive(Default)]
struct Handoff(std::sync::atomic::AtomicU8);

const WAITING: u8 = 0;
const COMMITTED: u8 = 1;
const ABANDONED: u8 = 2;

impl Handoff {
    /// True when the acquisition now belongs to the caller.
    fn commit(&self) -> bool {
        use std::sync::atomic::Ordering::AcqRel;
        self.0
            .compare_exchange(
                WAITING,
                COMMITTED,
                AcqRel,
                std::sync::atomic::Ordering::Acquire,
            )
            .is_ok()
    }

    fn is_abandoned(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Acquire) == ABANDONED
    }

    /// True when the task had already committed an acquisition the caller will never see.
    fn abandon(&self) -> bool {
        use std::sync::atomic::Ordering::AcqRel;
        self.0.compare_exchange(
            WAITING,
            ABANDONED,
            AcqRel,
            std::sync::atomic::Ordering::Acquire,
        ) == Err(COMMITTED)
    }
}

/// Lives in the caller's `acquire` future; dropping it before the result arrived abandons the
/// attempt (and wakes the task through `_cancel`).
struct CallerGuard {
    handoff: Arc<Handoff>,
    lock: Arc<LockInner>,
    _cancel: oneshot::Sender<()>,
    received: bool,
}

impl Drop for CallerGuard {
    fn drop(&mut self) {
        if self.received || !self.handoff.abandon() {
            return;
        }
        // The task recorded the hold before committing it, so releasing one level now undoes
        // exactly that acquisition. The level is taken off at once, here, so the handle never
        // reports a hold its caller did not receive.
        let Ok(lease) = self.lock.reserve_release() else {
            return;
        };
        let lock = self.lock.clone();
        runtime().spawn(async move {
            if let Err(err) = lock.finish_release(lease).await {
                tracing::warn!(lock = %lock.name, error = %err, "could not undo an acquire whose caller went away");
            }
        });
    }
}

/// What the current hold's lease is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lease {
    Watchdog,
    Fixed(Duration),
}

#[derive(Default)]
struct HoldState {
    count: u32,
    lease: Option<Lease>,
    /// Set when the lease was lost while held; reported by the next release.
    lost: Option<Error>,
    /// Bumped on every acquisition: a fixed-lease timer only fires for its own hold.
    epoch: u64,
}

type LostCallback = Arc<dyn Fn(&Error) + Send + Sync>;

/// Which lock the handle works on; the handle API is the same for every kind.
pub(crate) enum Kind {
    /// Redisson RLock: any waiter may win after a release.
    Reentrant,
    /// Redisson RFairLock: waiters queue in Redis and a release wakes only the head.
    Fair {
        queue: String,
        timeouts: String,
        /// polylock-only ZSET owner -> last look + queue timeout: skips dead polylock waiters
        /// long before the shared 5-minute deadlines would.
        seen: String,
        /// `redisson_lock__channel:{name}`; each waiter listens on `<prefix>:<owner>`.
        channel_prefix: String,
        /// Hold on this handle's own channel, kept between waits so it is not resubscribed.
        subscription: Mutex<Option<Subscription>>,
    },
}

pub(crate) struct LockInner {
    client: Arc<ClientInner>,
    handle: u64,
    name: String,
    owner: String,
    /// Where this handle waits: the lock's channel, or (fair) the owner's own channel.
    channel: String,
    kind: Kind,
    state: Mutex<HoldState>,
    lost: watch::Sender<bool>,
    callbacks: Mutex<Vec<LostCallback>>,
}

/// A handle on one lock for one owner. Clones share the handle (and its holds).
///
/// Ownership is per handle: `client.lock(name)` makes a new owner each time; use
/// [`crate::Client::lock_with_holder`] to act as a given thread or task.
#[derive(Clone)]
pub struct Lock {
    inner: Arc<LockInner>,
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.inner.name)
            .field("owner", &self.inner.owner)
            .field("hold_count", &self.hold_count())
            .finish()
    }
}

impl Lock {
    pub(crate) fn new(client: Arc<ClientInner>, name: &str, holder_id: u64, fair: bool) -> Lock {
        let owner = format!("{}:{holder_id}", client.id);
        let (kind, channel) = if fair {
            let kind = Kind::Fair {
                queue: keys::fair_queue(name),
                timeouts: keys::fair_timeouts(name),
                seen: keys::fair_seen(name),
                channel_prefix: keys::lock_channel(name),
                subscription: Mutex::new(None),
            };
            (kind, keys::fair_waiter_channel(name, &owner))
        } else {
            (Kind::Reentrant, keys::lock_channel(name))
        };
        Lock {
            inner: Arc::new(LockInner {
                handle: client.next_handle_id(),
                client,
                name: name.to_owned(),
                owner,
                channel,
                kind,
                state: Mutex::new(HoldState::default()),
                lost: watch::Sender::new(false),
                callbacks: Mutex::new(Vec::new()),
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// `<client-uuid>:<holder-id>`, the hash field this handle writes.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// Acquires the lock (or re-enters it).
    ///
    /// `wait`: `None` waits without bound, zero makes one attempt, a duration waits up to that
    /// long and then returns `false`. `lease`: `None` takes the watchdog lease, renewed while
    /// held; a duration is a fixed lease that is never renewed.
    ///
    /// Dropping the returned future leaves no lock held and no subscription behind.
    pub async fn acquire(&self, wait: Option<Duration>, lease: Option<Duration>) -> Result<bool> {
        let inner = &self.inner;
        validate_wait(&inner.name, wait)?;
        validate_lease(&inner.name, lease)?;
        inner.client.check_usable(&inner.name)?;
        let lease = lease.map_or(Lease::Watchdog, Lease::Fixed);
        let deadline = wait.map(|wait| Instant::now() + wait);
        // The attempt runs as its own task, so a script already sent is always answered, and
        // an acquisition nobody receives is undone (see `Handoff`).
        let (cancel, cancelled) = oneshot::channel::<()>();
        let handoff = Arc::new(Handoff::default());
        let mut caller = CallerGuard {
            handoff: handoff.clone(),
            lock: inner.clone(),
            _cancel: cancel,
            received: false,
        };
        let span = tracing::debug_span!("acquire", lock = %inner.name, owner = %inner.owner);
        let task = runtime().spawn(
            inner
                .clone()
                .acquire_task(deadline, lease, cancelled, handoff)
                .instrument(span),
        );
        let outcome = task.await.map_err(|err| {
            Error::Redis(format!("lock '{}': acquire task failed: {err}", inner.name))
        });
        caller.received = true;
        outcome?
    }

    /// Releases one level of the hold. [`Error::NotHeld`] when this handle does not hold the
    /// lock, [`Error::LockLost`] when its lease was lost while held. Retries on a dropped
    /// connection are idempotent, and dropping the future does not abort a release under way.
    pub async fn release(&self) -> Result<()> {
        let inner = self.inner.clone();
        let span = tracing::debug_span!("release", lock = %inner.name, owner = %inner.owner);
        runtime()
            .spawn(async move { inner.release_once().await }.instrument(span))
            .await
            .map_err(|err| {
                Error::Redis(format!(
                    "lock '{}': release task failed: {err}",
                    self.inner.name
                ))
            })?
    }

    /// Deletes the lock whoever holds it, and wakes a waiter. True when a lock was deleted.
    pub async fn force_unlock(&self) -> Result<bool> {
        let inner = self.inner.clone();
        runtime()
            .spawn(async move {
                let mut connection = inner.client.connection.clone();
                let mut invocation =
                    inner.invocation(&script::FORCE_UNLOCK, &script::FAIR_FORCE_UNLOCK);
                if inner.is_fair() {
                    invocation.arg(epoch_ms());
                }
                invocation
                    .invoke_async::<i64>(&mut connection)
                    .await
                    .map(|deleted| deleted == 1)
                    .map_err(|err| Error::from_redis(&inner.what("force-unlock"), err))
            })
            .await
            .map_err(|err| {
                Error::Redis(format!("lock '{}': task failed: {err}", self.inner.name))
            })?
    }

    /// Whether anyone holds the lock.
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.remaining_lease().await?.is_some())
    }

    /// The holder's remaining lease; `None` when nobody holds the lock. A lock written without
    /// an expiry reports [`Duration::MAX`].
    pub async fn remaining_lease(&self) -> Result<Option<Duration>> {
        let inner = self.inner.clone();
        runtime()
            .spawn(async move {
                inner.client.check_usable(&inner.name)?;
                let mut connection = inner.client.connection.clone();
                let pttl: i64 = script::INSPECT
                    .key(&inner.name)
                    .invoke_async(&mut connection)
                    .await
                    .map_err(|err| Error::from_redis(&inner.what("inspect"), err))?;
                Ok(match pttl {
                    -2 => None,
                    ms if ms < 0 => Some(Duration::MAX),
                    ms => Some(Duration::from_millis(ms as u64)),
                })
            })
            .await
            .map_err(|err| {
                Error::Redis(format!("lock '{}': task failed: {err}", self.inner.name))
            })?
    }

    /// Whether this handle holds the lock (as far as it knows: no I/O).
    pub fn is_held(&self) -> bool {
        let state = self.inner.state();
        state.count > 0 && state.lost.is_none()
    }

    /// How many times this handle has acquired without releasing. No I/O.
    pub fn hold_count(&self) -> u32 {
        self.inner.state().count
    }

    /// Whether the current hold's lease was lost.
    pub fn is_lost(&self) -> bool {
        *self.inner.lost.borrow()
    }

    /// A receiver that turns `true` when the current hold's lease is lost, and back to `false`
    /// when the handle acquires the lock afresh.
    pub fn lost_receiver(&self) -> watch::Receiver<bool> {
        self.inner.lost.subscribe()
    }

    /// Calls `callback` (on a blocking-pool thread, never on the caller's) each time a hold of
    /// this handle is lost.
    pub fn on_lost(&self, callback: impl Fn(&Error) + Send + Sync + 'static) {
        self.inner
            .callbacks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::new(callback));
    }
}

impl LockInner {
    fn state(&self) -> MutexGuard<'_, HoldState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn is_fair(&self) -> bool {
        matches!(self.kind, Kind::Fair { .. })
    }

    /// A call of `reentrant` or `fair`, by this handle's kind, with the keys every script of
    /// that kind starts with: [lock, channel] or [lock, queue, timeouts, channel prefix, seen].
    fn invocation(
        &self,
        reentrant: &'static redis::Script,
        fair: &'static redis::Script,
    ) -> redis::ScriptInvocation<'static> {
        match &self.kind {
            Kind::Reentrant => {
                let mut invocation = reentrant.prepare_invoke();
                invocation.key(&self.name).key(&self.channel);
                invocation
            }
            Kind::Fair {
                queue,
                timeouts,
                seen,
                channel_prefix,
                ..
            } => {
                let mut invocation = fair.prepare_invoke();
                invocation
                    .key(&self.name)
                    .key(queue)
                    .key(timeouts)
                    .key(channel_prefix)
                    .key(seen);
                invocation
            }
        }
    }

    fn what(&self, action: &str) -> String {
        format!("{action} lock '{}'", self.name)
    }

    fn lease_ms(&self, lease: Lease) -> u64 {
        match lease {
            Lease::Watchdog => self.client.watchdog.lease().as_millis() as u64,
            Lease::Fixed(lease) => lease.as_millis() as u64,
        }
    }

    /// One acquire attempt: `None` when acquired, else the holder's PTTL in ms.
    async fn try_acquire(&self, lease: Lease) -> Result<Option<i64>> {
        let mut connection = self.client.connection.clone();
        let mut invocation = self.invocation(&script::ACQUIRE, &script::FAIR_ACQUIRE);
        invocation.arg(self.lease_ms(lease)).arg(&self.owner);
        if self.is_fair() {
            invocation
                .arg(self.client.fair_queue_timeout.as_millis() as u64)
                .arg(epoch_ms())
                .arg(FAIR_WAIT_ALLOWANCE.as_millis() as u64);
        }
        invocation
            .invoke_async(&mut connection)
            .await
            .map_err(|err| Error::from_redis(&self.what("acquire"), err))
    }

    /// A fair waiter that gives up leaves the queue at once (and wakes the next if the lock is
    /// free). Best effort: if this fails, its deadline skips it later.
    async fn leave_queue(&self) {
        if !self.is_fair() {
            return;
        }
        let mut connection = self.client.connection.clone();
        let left = self
            .invocation(&script::FAIR_CANCEL, &script::FAIR_CANCEL)
            .arg(&self.owner)
            .arg(epoch_ms())
            .arg(FAIR_WAIT_ALLOWANCE.as_millis() as u64)
            .invoke_async::<i64>(&mut connection)
            .await;
        if let Err(err) = left {
            tracing::warn!(lock = %self.name, error = %err, "could not leave the fair queue; the queue timeout will skip this waiter");
        }
    }

    /// Takes the subscription a fair handle kept from its last wait.
    fn kept_subscription(&self) -> Option<Subscription> {
        match &self.kind {
            Kind::Fair { subscription, .. } => subscription
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
            Kind::Reentrant => None,
        }
    }

    /// A fair handle keeps its own channel subscribed for its next wait; a plain one lets go.
    fn keep_subscription(&self, kept: Option<Subscription>) {
        if let (Kind::Fair { subscription, .. }, Some(kept)) = (&self.kind, kept) {
            *subscription.lock().unwrap_or_else(|p| p.into_inner()) = Some(kept);
        }
    }

    async fn acquire_task(
        self: Arc<Self>,
        deadline: Option<Instant>,
        lease: Lease,
        cancelled: oneshot::Receiver<()>,
        handoff: Arc<Handoff>,
    ) -> Result<bool> {
        let mut subscription = self.kept_subscription();
        let outcome = self
            .acquire_loop(deadline, lease, cancelled, &handoff, &mut subscription)
            .await;
        if !matches!(outcome, Ok(true)) {
            self.leave_queue().await;
        }
        self.keep_subscription(subscription);
        outcome
    }

    async fn acquire_loop(
        self: &Arc<Self>,
        deadline: Option<Instant>,
        lease: Lease,
        mut cancelled: oneshot::Receiver<()>,
        handoff: &Handoff,
        subscription: &mut Option<Subscription>,
    ) -> Result<bool> {
        loop {
            let attempt = self.try_acquire(lease).await;
            if let Ok(None) = attempt {
                // Record the hold, then hand it to the caller, unless the caller is gone.
                self.acquired(lease);
                if handoff.commit() {
                    return Ok(true);
                }
                if let Err(err) = self.release_once().await {
                    tracing::warn!(lock = %self.name, error = %err, "could not undo an acquire whose caller went away");
                }
            }
            if handoff.is_abandoned() {
                if let Some(subscription) = subscription.as_ref() {
                    // We may have consumed a wake-up meant for the next local waiter.
                    subscription.waiters().pass_on();
                }
                return Ok(false);
            }
            let pttl = match attempt? {
                Some(pttl) => pttl,
                // An acquisition is committed or abandoned, and both returned above.
                None => return Ok(false),
            };
            let remaining = match deadline {
                Some(deadline) => deadline.saturating_duration_since(Instant::now()),
                None => MAX_WAIT_SLICE,
            };
            if remaining.is_zero() {
                return Ok(false);
            }
            let Some(active) = subscription.as_ref() else {
                // Subscribe before the retry, so an unlock after our attempt is never missed.
                *subscription = Some(self.client.hub.subscribe(&self.channel).await?);
                continue;
            };
            // A holder without expiry only wakes us by message; look again now and then anyway.
            let holder_lease = if pttl >= 0 {
                Duration::from_millis(pttl as u64).max(Duration::from_millis(1))
            } else {
                MAX_WAIT_SLICE
            };
            let mut slice = remaining.min(holder_lease).min(MAX_WAIT_SLICE);
            if let Kind::Fair { .. } = self.kind {
                // Look again before our queue deadline passes, or we would lose our place.
                slice = slice.min(self.client.fair_queue_timeout / 2);
            }
            tokio::select! {
                _ = active.wait(slice) => {}
                _ = &mut cancelled => {
                    return Ok(false);
                }
            }
        }
    }

    fn acquired(self: &Arc<Self>, lease: Lease) {
        let epoch = {
            let mut state = self.state();
            state.count += 1;
            state.epoch += 1;
            if state.count == 1 || state.lost.is_some() {
                state.count = 1;
                state.lost = None;
                state.lease = Some(lease);
                self.lost.send_replace(false);
                self.client.set_held(self.handle, Some(&self.name));
                if lease == Lease::Watchdog {
                    self.client.watchdog.register(
                        self.handle,
                        &self.name,
                        &self.owner,
                        Arc::downgrade(self),
                    );
                }
            }
            state.epoch
        };
        if let Lease::Fixed(lease) = lease {
            if self.state().lease == Some(Lease::Fixed(lease)) {
                self.watch_fixed_lease(epoch, lease);
            }
        }
    }

    /// Tells the holder when a fixed lease runs out while it still holds (no Redis command).
    fn watch_fixed_lease(self: &Arc<Self>, epoch: u64, lease: Duration) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(lease).await;
            let Some(lock) = weak.upgrade() else {
                return;
            };
            let expired = {
                let state = lock.state();
                state.epoch == epoch && state.count > 0 && state.lost.is_none()
            };
            if expired {
                lock.mark_lost(Error::LockLost(format!(
                    "lock '{}' was lost: its fixed lease of {lease:?} ran out while held",
                    lock.name
                )));
            }
        });
    }

    /// Records that the current hold was lost and tells everyone listening.
    pub(crate) fn mark_lost(&self, error: Error) {
        {
            let mut state = self.state();
            if state.count == 0 || state.lost.is_some() {
                return;
            }
            state.lost = Some(error.clone());
        }
        let span = tracing::warn_span!("lost", lock = %self.name, owner = %self.owner);
        let _enter = span.enter();
        tracing::warn!(%error, "lock lost");
        self.client.watchdog.unregister(self.handle);
        self.lost.send_replace(true);
        let callbacks: Vec<LostCallback> = self
            .callbacks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if !callbacks.is_empty() {
            tokio::task::spawn_blocking(move || {
                for callback in callbacks {
                    callback(&error);
                }
            });
        }
    }

    async fn release_once(self: &Arc<Self>) -> Result<()> {
        let lease = self.reserve_release()?;
        self.finish_release(lease).await
    }

    /// Takes one level off this handle's hold before the release script runs, so that a
    /// concurrent release or `is_held` sees it gone at once (never two releases of one level).
    fn reserve_release(&self) -> Result<Lease> {
        let mut state = self.state();
        if let Some(lost) = state.lost.take() {
            state.count = 0;
            drop(state);
            self.forget_hold();
            return Err(lost);
        }
        if state.count == 0 {
            return Err(Error::NotHeld(format!(
                "lock '{}' is not held by this owner ({}): release without acquire, or released twice",
                self.name, self.owner
            )));
        }
        state.count -= 1;
        let lease = state.lease.unwrap_or(Lease::Watchdog);
        drop(state);
        // From here a "gone" renewal may be our own release deleting the key.
        self.client.watchdog.set_releasing(self.handle, true);
        Ok(lease)
    }

    /// Gives a reserved level back after a release that did not happen.
    fn restore_level(&self) {
        self.state().count += 1;
        self.client.watchdog.set_releasing(self.handle, false);
    }

    async fn finish_release(self: &Arc<Self>, lease: Lease) -> Result<()> {
        if let Err(err) = self.client.check_usable(&self.name) {
            self.restore_level();
            return Err(err);
        }
        let request = uuid::Uuid::new_v4().simple().to_string();
        let reply = self.release_script(lease, &request).await;
        let mut state = self.state();
        match reply {
            // Redis still counts holds (ours, or another handle's of the same owner).
            Ok(Some(0)) if state.count > 0 => {
                drop(state);
                self.client.watchdog.set_releasing(self.handle, false);
                Ok(())
            }
            Ok(Some(_)) => {
                state.count = 0;
                drop(state);
                self.forget_hold();
                Ok(())
            }
            Ok(None) => {
                state.count = 0;
                state.lost = None;
                drop(state);
                self.forget_hold();
                Err(Error::LockLost(format!(
                    "lock '{}' was lost before release: its lease ran out or another client took or deleted it",
                    self.name
                )))
            }
            Err(err) => {
                drop(state);
                self.restore_level();
                Err(err)
            }
        }
    }

    fn forget_hold(&self) {
        self.client.watchdog.unregister(self.handle);
        self.client.set_held(self.handle, None);
    }

    /// Runs the release script for one logical release, retrying a dropped connection with the
    /// same request id (the latch replays the first answer) until the response timeout has
    /// passed twice.
    async fn release_script(&self, lease: Lease, request: &str) -> Result<Option<i64>> {
        let latch = keys::unlock_latch(&self.name, request);
        let give_up = Instant::now() + self.client.timeouts.response * 2;
        loop {
            let mut connection = self.client.connection.clone();
            let mut invocation = self.invocation(&script::RELEASE, &script::FAIR_RELEASE);
            invocation.key(&latch);
            invocation
                .arg(self.lease_ms(lease))
                .arg(&self.owner)
                .arg(LATCH_LIFETIME.as_millis() as u64);
            if self.is_fair() {
                invocation.arg(epoch_ms());
            }
            let reply = invocation
                .invoke_async::<Option<i64>>(&mut connection)
                .await
                .map_err(|err| Error::from_redis(&self.what("release"), err));
            match reply {
                Err(err) if err.is_transient() && Instant::now() < give_up => {
                    tracing::debug!(%err, "release failed; retrying with the same request id");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                other => return other,
            }
        }
    }
}

impl Drop for LockInner {
    fn drop(&mut self) {
        let count = self.state().count;
        let lease = self.state().lease.unwrap_or(Lease::Watchdog);
        if count == 0 || self.state().lost.is_some() {
            self.forget_hold();
            return;
        }
        tracing::warn!(lock = %self.name, holds = count, "lock handle dropped while held; releasing in the background");
        self.forget_hold();
        if self.client.check_usable(&self.name).is_err() {
            return;
        }
        // A stand-in with the same identity performs the release; Drop never blocks.
        let kind = match &self.kind {
            Kind::Reentrant => Kind::Reentrant,
            Kind::Fair {
                queue,
                timeouts,
                seen,
                channel_prefix,
                ..
            } => Kind::Fair {
                queue: queue.clone(),
                timeouts: timeouts.clone(),
                seen: seen.clone(),
                channel_prefix: channel_prefix.clone(),
                subscription: Mutex::new(None),
            },
        };
        let stand_in = LockInner {
            client: self.client.clone(),
            handle: self.handle,
            name: self.name.clone(),
            owner: self.owner.clone(),
            channel: self.channel.clone(),
            kind,
            state: Mutex::new(HoldState::default()),
            lost: watch::Sender::new(false),
            callbacks: Mutex::new(Vec::new()),
        };
        runtime().spawn(async move {
            for _ in 0..count {
                let request = uuid::Uuid::new_v4().simple().to_string();
                match stand_in.release_script(lease, &request).await {
                    Ok(Some(0)) => continue,
                    Ok(_) => break,
                    Err(err) => {
                        tracing::warn!(lock = %stand_in.name, error = %err, "background release failed; the lock expires with its lease");
                        break;
                    }
                }
            }
        });
    }
}
