//! [`LockGroup`]: the handle API shared by [`crate::MultiLock`] and [`crate::RedLock`], and the
//! one routine that acquires a set of locks with a limit on how many may fail.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use futures_util::future::join_all;
use tokio::sync::{oneshot, watch};

use crate::engine::LostCallback;
use crate::foundation::error::{Error, Result};
use crate::foundation::runtime::runtime;
use crate::handles::lock::Lock;
use crate::metrics::{kind as metric_kind, AcquireRecord, LockStats, LostReason};
use crate::settings::options::AcquireOptions;

/// How long each lock of a group may wait per round when the group's wait has no bound
/// (Redisson's base lock wait): a round that falls short gives back what it took after this.
pub const PER_LOCK_WAIT: Duration = Duration::from_millis(1500);

/// The longest pause between two rounds, drawn at random so that two contending groups do not
/// keep taking halves of each other's set.
const MAX_ROUND_PAUSE: Duration = Duration::from_millis(50);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupKind {
    /// All locks (MultiLock).
    Multi,
    /// A majority of the locks (RedLock).
    Red,
}

impl GroupKind {
    fn label(self) -> &'static str {
        match self {
            GroupKind::Multi => "multi-lock",
            GroupKind::Red => "red-lock",
        }
    }

    fn metric_kind(self) -> &'static str {
        match self {
            GroupKind::Multi => metric_kind::MULTI_LOCK,
            GroupKind::Red => metric_kind::RED_LOCK,
        }
    }

    /// How many of `n` locks must be held.
    fn required(self, n: usize) -> usize {
        match self {
            GroupKind::Multi => n,
            GroupKind::Red => n / 2 + 1,
        }
    }
}

/// The clock drift allowance of a fixed lease, as in the Redis docs' Redlock: 1 % + 2 ms.
pub(crate) fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

/// One acquisition of the group: which locks it took (one level of each).
struct Level {
    taken: Vec<usize>,
    /// When it was taken (its hold is counted from then).
    started: SystemTime,
    since: Instant,
    /// Dropped when the level ends, which stops its lost watchers.
    _ended: watch::Sender<()>,
}

#[derive(Default)]
struct GroupState {
    levels: Vec<Level>,
    lost: Option<Error>,
    /// Counts fresh holds, so that a late lost signal never touches a newer hold.
    epoch: u64,
}

struct GroupInner {
    kind: GroupKind,
    name: String,
    locks: Vec<Lock>,
    defaults: AcquireOptions,
    state: Mutex<GroupState>,
    lost: watch::Sender<bool>,
    callbacks: Mutex<Vec<LostCallback>>,
    /// Counted in the metrics of the client of its first lock, under the group's name.
    stats: Arc<LockStats>,
}

/// Several locks (handles made by clients of one or several servers) with the lock API:
/// [`crate::MultiLock`] needs all of them, [`crate::RedLock`] a majority. Clones share the
/// handle and its hold.
///
/// Each acquisition takes one level of each lock it gets (a component already held by its
/// handle is re-entered, and a handle may be part of several groups); the release gives back
/// exactly those levels. The group is reentrant the same way: each acquire is one more level,
/// released by one release. There is no fencing token (the components' counters are
/// independent) and no `force_unlock`: use the components for those.
#[derive(Clone)]
pub struct LockGroup {
    inner: Arc<GroupInner>,
}

impl std::fmt::Debug for LockGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(self.kind_label())
            .field("name", &self.name())
            .field("locks", &self.inner.locks.len())
            .field("hold_count", &self.hold_count())
            .finish()
    }
}

impl LockGroup {
    pub(crate) fn new(kind: GroupKind, locks: Vec<Lock>) -> Result<LockGroup> {
        let label = kind.label();
        if locks.is_empty() {
            return Err(Error::invalid_argument(format!(
                "a {label} needs at least one lock, got none"
            )));
        }
        for (i, lock) in locks.iter().enumerate() {
            let twice = locks[..i].iter().any(|earlier| {
                Arc::ptr_eq(&earlier.core, &lock.core)
                    || (Arc::ptr_eq(&earlier.core.client, &lock.core.client)
                        && earlier.name() == lock.name())
            });
            if twice {
                return Err(Error::invalid_argument(format!(
                    "a {label} takes each lock once, but lock '{}' of one client is given twice \
                     (it would wait for itself)",
                    lock.name()
                )));
            }
        }
        let mut names: Vec<&str> = Vec::new();
        for lock in &locks {
            if !names.contains(&lock.name()) {
                names.push(lock.name());
            }
        }
        let name = names.join(", ");
        let stats = locks[0].core.client.metrics.lock(&name, kind.metric_kind());
        Ok(LockGroup {
            inner: Arc::new(GroupInner {
                stats,
                kind,
                name,
                defaults: AcquireOptions::new(),
                locks,
                state: Mutex::new(GroupState::default()),
                lost: watch::Sender::new(false),
                callbacks: Mutex::new(Vec::new()),
            }),
        })
    }

    /// This group with defaults for [`crate::Hold::lock`] and [`crate::Hold::try_lock`] (and the
    /// bindings' calls that leave them out), as [`Lock::with_defaults`]. Only on a group not
    /// cloned yet; [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) otherwise or for a value out of bounds.
    pub fn with_defaults(self, defaults: AcquireOptions) -> Result<LockGroup> {
        defaults.validate()?;
        let Ok(mut inner) = Arc::try_unwrap(self.inner) else {
            return Err(Error::invalid_argument(
                "defaults are set on a new multi-lock or red-lock, before it is cloned",
            ));
        };
        inner.defaults = defaults;
        Ok(LockGroup {
            inner: Arc::new(inner),
        })
    }

    /// The defaults (see [`LockGroup::with_defaults`]).
    pub fn defaults(&self) -> AcquireOptions {
        self.inner.defaults
    }

    /// The distinct names of its locks, joined by ", " (a red-lock's locks usually share one).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Who holds its locks now, lock by lock (`'a' held by ...; 'b' held by ...`), as a
    /// timed-out acquire names them.
    pub(crate) async fn describe_holders(&self) -> Option<String> {
        let described = futures_util::future::join_all(self.inner.locks.iter().map(|lock| async {
            let held_by = lock.describe_holders().await?;
            Some(format!("'{}' {held_by}", lock.name()))
        }))
        .await;
        // A RedLock's locks share one name: the same holder on every server is told once.
        let mut distinct: Vec<String> = Vec::new();
        for text in described.into_iter().flatten() {
            if !distinct.contains(&text) {
                distinct.push(text);
            }
        }
        (!distinct.is_empty()).then(|| distinct.join("; "))
    }

    /// "multi-lock" or "red-lock", as messages say.
    pub fn kind_label(&self) -> &'static str {
        self.inner.kind.label()
    }

    /// Its locks, in the order given.
    pub fn locks(&self) -> &[Lock] {
        &self.inner.locks
    }

    /// How many of its locks must be held: all for a multi-lock, `n / 2 + 1` for a red-lock.
    pub fn quorum(&self) -> usize {
        self.inner.kind.required(self.inner.locks.len())
    }

    /// Acquires (one more level of) the group; `false` when the wait ran out.
    ///
    /// `options.wait`: `None` waits without bound, zero makes one round of single attempts, a
    /// duration bounds the whole acquisition. Each round tries every lock in parallel, each
    /// waiting at most what is left, and at most 1.5 s when the group waits without bound
    /// (a red-lock: at most its wait / n). A round that falls short of the quorum gives back
    /// everything it took and the next starts after a short random pause. `options.lease`:
    /// `None`, each lock's watchdog lease; a duration, a fixed lease on each lock, and the
    /// round counts only if `lease - elapsed - drift` (drift = 1 % of the lease + 2 ms) is
    /// positive. When the wait ends on rounds where no lock was taken by another owner but
    /// some failed (servers down), that error is returned instead of `false`. Dropping the
    /// future leaves nothing held.
    pub async fn acquire(&self, options: AcquireOptions) -> Result<bool> {
        options.validate()?;
        // Dropped with this future: then counted as cancelled.
        let mut record = AcquireRecord::start(&self.inner.stats);
        let progress = record.progress();
        let (sender, receiver) = oneshot::channel();
        let inner = self.inner.clone();
        runtime().spawn(async move {
            let taken = Mutex::new(Vec::new());
            let mut sender = sender;
            let outcome = tokio::select! {
                outcome = inner.acquire_rounds(options, &taken, &progress) => outcome,
                // The caller went away: give back what this round took.
                _ = sender.closed() => {
                    let taken = std::mem::take(&mut *lock_vec(&taken));
                    inner.give_back(&taken).await;
                    return;
                }
            };
            let outcome = outcome.map(|taken| match taken {
                Some(taken) => {
                    inner.record_level(taken);
                    true
                }
                None => false,
            });
            if let Err(Ok(true)) = sender.send(outcome) {
                if let Err(err) = inner.release_level().await {
                    tracing::warn!(lock = %inner.name, %err, "could not undo an acquire whose caller went away");
                }
            }
        });
        let outcome = receiver.await.map_err(|_| {
            Error::redis(format!(
                "{} '{}': acquire task failed",
                self.kind_label(),
                self.name()
            ))
        });
        let outcome = outcome.and_then(|outcome| outcome);
        record.end(&outcome);
        outcome
    }

    /// Releases one level: every lock that acquisition took, on every server, in parallel.
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the group holds nothing; [`ErrorKind::LockLost`](crate::ErrorKind::LockLost) when the group was
    /// lost while held (then every level is released). Otherwise the first error of a lock
    /// that could not be released (for a red-lock, only when fewer than the quorum were
    /// released: the rest expire with their lease).
    pub async fn release(&self) -> Result<()> {
        let inner = self.inner.clone();
        let (started, since) = (SystemTime::now(), Instant::now());
        let span = tracing::debug_span!(target: "polylock", "polylock.release",
            polylock.lock.name = %self.inner.stats.name(),
            polylock.lock.kind = self.inner.stats.kind(),
            polylock.release.ok = tracing::field::Empty,
            polylock.release.retries = tracing::field::Empty);
        let released = runtime()
            .spawn(async move { inner.release_level().await })
            .await
            .map_err(|err| {
                Error::redis(format!(
                    "{} '{}': release task failed: {err}",
                    self.kind_label(),
                    self.name()
                ))
            })
            .and_then(|released| released);
        if !matches!(&released, Err(err) if err.kind() == crate::ErrorKind::NotHeld) {
            span.record("polylock.release.ok", released.is_ok());
            span.record("polylock.release.retries", 0);
            // Each lock counts its own retries.
            self.inner
                .stats
                .release_ended(released.is_ok(), 0, started, since.elapsed());
        }
        released
    }

    /// Whether the group holds its locks (as far as it knows: no I/O).
    pub fn is_held(&self) -> bool {
        let state = self.inner.state();
        !state.levels.is_empty() && state.lost.is_none()
    }

    /// How many times the group was acquired and not released. No I/O.
    pub fn hold_count(&self) -> u32 {
        self.inner.state().levels.len() as u32
    }

    /// Whether the current hold was lost: a multi-lock when any of its locks was, a red-lock
    /// when fewer than the quorum remain held.
    pub fn is_lost(&self) -> bool {
        *self.inner.lost.borrow()
    }

    /// A receiver that turns `true` when the current hold is lost, and back to `false` when
    /// the group acquires afresh.
    pub fn lost_receiver(&self) -> watch::Receiver<bool> {
        self.inner.lost.subscribe()
    }

    /// Calls `callback` (on a blocking-pool thread) each time a hold of the group is lost.
    pub fn on_lost(&self, callback: impl Fn(&Error) + Send + Sync + 'static) {
        lock_vec(&self.inner.callbacks).push(Arc::new(callback));
    }
}

fn lock_vec<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl GroupInner {
    fn state(&self) -> MutexGuard<'_, GroupState> {
        lock_vec(&self.state)
    }

    fn label(&self) -> &'static str {
        self.kind.label()
    }

    fn required(&self) -> usize {
        self.kind.required(self.locks.len())
    }

    /// Rounds until enough locks are taken at once (`Some` of their indices) or the wait runs
    /// out (`None`). `taken` holds what the round under way took, for a caller that goes away.
    async fn acquire_rounds(
        &self,
        options: AcquireOptions,
        taken: &Mutex<Vec<usize>>,
        progress: &crate::metrics::Progress,
    ) -> Result<Option<Vec<usize>>> {
        let n = self.locks.len();
        let deadline = options.wait.map(|wait| Instant::now() + wait);
        let per_lock = match (options.wait, self.kind) {
            (None, _) => PER_LOCK_WAIT,
            (Some(wait), GroupKind::Multi) => wait,
            (Some(wait), GroupKind::Red) => (wait / n as u32).max(Duration::from_millis(1)),
        };
        loop {
            // A group's attempt is a round.
            progress.attempt_sent();
            let round_started = Instant::now();
            let left = deadline.map(|deadline| deadline.saturating_duration_since(round_started));
            let lock_wait = left.map_or(per_lock, |left| left.min(per_lock));
            let attempts = self.locks.iter().enumerate().map(|(i, lock)| async move {
                let attempt = AcquireOptions {
                    wait: Some(lock_wait),
                    lease: options.lease,
                };
                let outcome = lock.acquire(attempt).await;
                if matches!(outcome, Ok(true)) {
                    // Recorded in the same poll as the acquisition: never lost to a drop.
                    lock_vec(taken).push(i);
                }
                outcome
            });
            let outcomes = join_all(attempts).await;
            let held = lock_vec(taken).clone();
            let valid = match options.lease {
                None => true,
                Some(lease) => round_started.elapsed() + drift(lease) < lease,
            };
            if held.len() >= self.required() && valid {
                lock_vec(taken).clear();
                return Ok(Some(held));
            }
            let given_back = std::mem::take(&mut *lock_vec(taken));
            self.give_back(&given_back).await;
            let busy = outcomes.iter().any(|outcome| matches!(outcome, Ok(false)));
            let failed = outcomes.iter().filter(|outcome| outcome.is_err()).count();
            let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
            if left.is_some_and(|left| left.is_zero()) {
                if !busy && valid {
                    if let Some(Err(err)) = outcomes.into_iter().find(Result::is_err) {
                        return Err(err.with_note(&format!(
                            "{} '{}' was not acquired: {failed} of its {n} locks failed",
                            self.label(),
                            self.name
                        )));
                    }
                }
                return Ok(None);
            }
            tracing::debug!(group = %self.name, held = held.len(), failed, "round fell short; retrying");
            let pause = random_pause().min(left.unwrap_or(MAX_ROUND_PAUSE));
            tokio::time::sleep(pause).await;
        }
    }

    /// Releases one level of each lock in `taken` (a round that fell short), in parallel.
    async fn give_back(&self, taken: &[usize]) {
        let releases = taken.iter().map(|&i| self.locks[i].release());
        for (outcome, &i) in join_all(releases).await.into_iter().zip(taken) {
            if let Err(err) = outcome {
                tracing::warn!(lock = %self.locks[i].name(), %err, "could not give back a lock of a group that fell short; it expires with its lease");
            }
        }
    }

    fn record_level(self: &Arc<Self>, taken: Vec<usize>) {
        let (ended, ended_receiver) = watch::channel(());
        let epoch = {
            let mut state = self.state();
            if state.levels.is_empty() || state.lost.is_some() {
                state.levels.clear();
                state.lost = None;
                state.epoch += 1;
                self.lost.send_replace(false);
            }
            state.levels.push(Level {
                taken: taken.clone(),
                started: SystemTime::now(),
                since: Instant::now(),
                _ended: ended,
            });
            self.stats.hold_started();
            state.epoch
        };
        self.watch_level(&taken, epoch, ended_receiver);
    }

    /// Watches the locks of one level: the group is lost once fewer than it requires remain.
    fn watch_level(self: &Arc<Self>, taken: &[usize], epoch: u64, ended: watch::Receiver<()>) {
        let lost_count = Arc::new(AtomicUsize::new(0));
        let tolerated = taken.len() - self.required();
        for &i in taken {
            let mut lost = self.locks[i].lost_receiver();
            let mut ended = ended.clone();
            let group: Weak<GroupInner> = Arc::downgrade(self);
            let lost_count = lost_count.clone();
            let total = taken.len();
            runtime().spawn(async move {
                tokio::select! {
                    _ = lost.wait_for(|lost| *lost) => {}
                    _ = ended.changed() => return,
                }
                let count = lost_count.fetch_add(1, Ordering::AcqRel) + 1;
                if count <= tolerated {
                    return;
                }
                let Some(group) = group.upgrade() else { return };
                let lock = group.locks[i].name().to_owned();
                let reason = group.locks[i].core.last_lost_reason();
                let message = match group.kind {
                    GroupKind::Multi => format!(
                        "multi-lock '{}' was lost: its lock '{lock}' was lost while held",
                        group.name
                    ),
                    GroupKind::Red => format!(
                        "red-lock '{}' was lost: {count} of the {total} locks it held were lost, \
                         fewer than its quorum of {} remain",
                        group.name,
                        group.required()
                    ),
                };
                group.mark_lost(epoch, Error::lock_lost(message), reason);
            });
        }
    }

    /// The group's hold was lost: its levels' holds end now, lost for `reason` (that of the
    /// lock whose loss made the group lost).
    fn mark_lost(&self, epoch: u64, error: Error, reason: Option<LostReason>) {
        {
            let mut state = self.state();
            if state.epoch != epoch || state.levels.is_empty() || state.lost.is_some() {
                return;
            }
            state.lost = Some(error.clone());
            if let Some(reason) = reason {
                self.stats.lost(reason);
            }
            for level in &state.levels {
                self.stats
                    .hold_ended(level.started, level.since.elapsed(), true);
            }
        }
        tracing::warn!(group = %self.name, %error, "lock group lost");
        self.lost.send_replace(true);
        let callbacks: Vec<LostCallback> = lock_vec(&self.callbacks).clone();
        if !callbacks.is_empty() {
            runtime().spawn_blocking(move || {
                for callback in callbacks {
                    callback(&error);
                }
            });
        }
    }

    async fn release_level(&self) -> Result<()> {
        let (levels, lost) = {
            let mut state = self.state();
            match state.lost.take() {
                Some(lost) => (std::mem::take(&mut state.levels), Some(lost)),
                None => match state.levels.pop() {
                    Some(level) => (vec![level], None),
                    None => {
                        return Err(Error::not_held(format!(
                            "{} '{}' is not held by this handle: release without acquire, or \
                             released twice",
                            self.label(),
                            self.name
                        )))
                    }
                },
            }
        };
        // Several levels only for a lost hold: the newest first, as reentrant releases go.
        let mut first_error = None;
        for level in levels.into_iter().rev() {
            if lost.is_none() {
                // A lost hold's levels ended when it was found lost.
                self.stats
                    .hold_ended(level.started, level.since.elapsed(), false);
            }
            let releases = level.taken.iter().map(|&i| self.locks[i].release());
            let outcomes = join_all(releases).await;
            let released = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
            if released < self.required() && first_error.is_none() {
                first_error = outcomes.into_iter().find_map(Result::err);
            }
        }
        match (lost, first_error) {
            (Some(lost), _) => Err(lost),
            (None, Some(err)) => {
                Err(err.with_note(&format!("while releasing {} '{}'", self.label(), self.name)))
            }
            (None, None) => Ok(()),
        }
    }
}

/// A pause from 0 to [`MAX_ROUND_PAUSE`], random enough to part two contenders.
fn random_pause() -> Duration {
    let random = crate::foundation::ids::random_u64();
    MAX_ROUND_PAUSE.mul_f64((random % 1000) as f64 / 1000.0)
}

impl Drop for GroupInner {
    /// A group dropped while held gives its levels back in the background (its locks may be
    /// kept elsewhere, so their own drop would not).
    fn drop(&mut self) {
        let (levels, lost) = {
            let mut state = self.state();
            (std::mem::take(&mut state.levels), state.lost.is_some())
        };
        if levels.is_empty() {
            return;
        }
        if !lost {
            for level in &levels {
                self.stats
                    .hold_ended(level.started, level.since.elapsed(), false);
            }
        }
        let locks: Vec<Lock> = levels
            .iter()
            .flat_map(|level| level.taken.iter().map(|&i| self.locks[i].clone()))
            .collect();
        runtime().spawn(async move {
            for outcome in join_all(locks.iter().map(Lock::release)).await {
                if let Err(err) = outcome {
                    tracing::debug!(%err, "releasing a dropped lock group's lock failed");
                }
            }
        });
    }
}

crate::handles::guard::hold_by_inherent_methods!(LockGroup);

/// The face of a group kind (`MultiLock`, `RedLock`) over its [`LockGroup`]: the group's own
/// calls (`locks`, `quorum`, `into_group`) and [`crate::Hold`], each delegated, written once.
macro_rules! group_handle {
    ($handle:ident) => {
        impl $handle {
            /// The group handle, for code that takes either kind.
            pub fn into_group(self) -> $crate::handles::multi::group::LockGroup {
                self.0
            }

            /// Its locks, in the order given.
            pub fn locks(&self) -> &[$crate::handles::lock::Lock] {
                self.0.locks()
            }

            /// How many of its locks must be held.
            pub fn quorum(&self) -> usize {
                self.0.quorum()
            }
        }

        impl $crate::handles::guard::Hold for $handle {
            fn name(&self) -> &str {
                self.0.name()
            }

            fn defaults(&self) -> $crate::settings::options::AcquireOptions {
                self.0.defaults()
            }

            fn with_defaults(
                self,
                defaults: $crate::settings::options::AcquireOptions,
            ) -> $crate::foundation::error::Result<Self> {
                self.0.with_defaults(defaults).map($handle)
            }

            fn acquire(
                &self,
                options: $crate::settings::options::AcquireOptions,
            ) -> impl std::future::Future<Output = $crate::foundation::error::Result<bool>> + Send
            {
                self.0.acquire(options)
            }

            fn release(
                &self,
            ) -> impl std::future::Future<Output = $crate::foundation::error::Result<()>> + Send
            {
                self.0.release()
            }

            fn is_held(&self) -> bool {
                self.0.is_held()
            }

            fn hold_count(&self) -> u32 {
                self.0.hold_count()
            }

            fn is_lost(&self) -> bool {
                self.0.is_lost()
            }

            fn lost_receiver(&self) -> tokio::sync::watch::Receiver<bool> {
                self.0.lost_receiver()
            }

            fn on_lost(&self, callback: impl Fn(&$crate::Error) + Send + Sync + 'static) {
                self.0.on_lost(callback)
            }

            fn not_acquired_error(
                &self,
                wait: std::time::Duration,
            ) -> impl std::future::Future<Output = $crate::Error> + Send {
                $crate::handles::guard::Hold::not_acquired_error(&self.0, wait)
            }
        }
    };
}

pub(crate) use group_handle;
