//! What a handle holds: one acquire request id per reentrant level, the lease Redis's TTL
//! follows, and whether the hold was lost (with the signal that tells the holder).
//!
//! Every acquisition and every partial release resets the key's TTL to the hold's lease, so the
//! hold's lease is always that of its latest acquisition, and its upkeep (watchdog renewal, or
//! the expiry of a fixed lease) is re-registered after each of them.
//!
//! A kind may issue a token with each acquisition (the fenced lock). The hold keeps the
//! highest one it received: the token of its latest acquisition, which stays through partial
//! releases, so whatever was written with it stays writable while the lock is held.

use std::sync::{Arc, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::engine::renew::Upkeep;
use crate::engine::LockCore;
use crate::foundation::error::{Error, Result};
use crate::metrics::LostReason;

pub(crate) type LostCallback = Arc<dyn Fn(&Error) + Send + Sync>;

/// The lease of a hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Lease {
    /// The client's watchdog lease, renewed while held.
    #[default]
    Watchdog,
    /// A fixed lease, never renewed.
    Fixed(Duration),
}

/// One reentrant level: its acquire request (whose latch its release deletes) and when it was
/// taken (for the hold time, and the `polylock.hold` span that lasts as long as it).
pub(crate) struct Level {
    pub request: String,
    started: SystemTime,
    since: Instant,
    span: tracing::Span,
}

#[derive(Default)]
pub(crate) struct Hold {
    /// Every level held, oldest first.
    levels: Vec<Level>,
    lease: Lease,
    /// The highest token the hold's acquisitions took (kinds that issue tokens).
    token: Option<i64>,
    /// Set when the hold was lost; reported by the next release.
    lost: Option<Error>,
    /// Counts fresh holds, so that a release finishing late never touches a newer hold.
    epoch: u64,
    /// When the hold began (its first level), by the wall clock: the client record shows it.
    since: Option<SystemTime>,
}

/// A level taken off the hold for a release under way.
pub(crate) struct Reserved {
    pub level: Level,
    pub lease: Lease,
    epoch: u64,
}

impl LockCore {
    pub(super) fn hold(&self) -> MutexGuard<'_, Hold> {
        self.hold.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lease in whole milliseconds, as Redis keeps it (so the local count never runs
    /// longer than the key).
    pub(crate) fn lease_of(&self, lease: Lease) -> Duration {
        let lease = match lease {
            Lease::Watchdog => self.client.options.watchdog_timeout,
            Lease::Fixed(lease) => lease,
        };
        Duration::from_millis(lease.as_millis() as u64)
    }

    fn upkeep(&self, lease: Lease, sent_at: Instant) -> Upkeep {
        match lease {
            Lease::Watchdog => Upkeep::Renew {
                last_renewed: sent_at,
            },
            // The script ran after it was sent: the key lives at least this long.
            Lease::Fixed(lease) => Upkeep::Expire {
                at: sent_at + lease,
                lease,
            },
        }
    }

    /// Records an acquisition Redis confirmed for the request sent at `sent_at`, with the
    /// token it took (if the kind issues one): the key's TTL is now `lease`, counted from
    /// `sent_at` (the upkeep reports the hold lost at `sent_at` + `lease` unless a renewal is
    /// confirmed before). True when it was confirmed too late, and so reported lost at once.
    /// Fails, recording nothing, when the client was closed.
    pub(super) fn record_acquired(
        self: &Arc<Self>,
        request: String,
        token: Option<i64>,
        lease: Lease,
        sent_at: Instant,
    ) -> Result<bool> {
        let mut hold = self.hold();
        let fresh = hold.levels.is_empty() || hold.lost.is_some();
        self.client.track_hold(self, self.upkeep(lease, sent_at))?;
        if fresh {
            hold.levels.clear();
            hold.lost = None;
            hold.epoch += 1;
            hold.token = None;
            hold.since = Some(SystemTime::now());
            self.lost.send_replace(false);
        }
        // Two acquisitions of one handle may be recorded in another order than they ran.
        hold.token = hold.token.max(token);
        hold.levels.push(self.start_level(request));
        hold.lease = lease;
        Ok(self.lost_if_ended(hold, sent_at, "its acquisition"))
    }

    /// A level taken now by `request`: a hold starts (one per level, as each release ends one).
    fn start_level(&self, request: String) -> Level {
        let span = if self.counts_holds {
            self.stats.hold_started();
            tracing::debug_span!(target: "polylock", parent: None, "polylock.hold",
                polylock.lock.name = %self.stats.name(), polylock.lock.kind = self.stats.kind(),
                polylock.hold.lost = tracing::field::Empty)
        } else {
            tracing::Span::none()
        };
        Level {
            request,
            started: SystemTime::now(),
            since: Instant::now(),
            span,
        }
    }

    /// The hold of `level` ended: released (`lost` false) or lost.
    pub(super) fn end_level(&self, level: Level, lost: bool) {
        if self.counts_holds {
            level.span.record("polylock.hold.lost", lost);
            self.stats
                .hold_ended(level.started, level.since.elapsed(), lost);
        }
    }

    /// Reports the hold lost at once when the request that started its lease at `sent_at` was
    /// confirmed only after that lease could have ended: another client may hold it by now.
    /// True when it did.
    fn lost_if_ended(&self, hold: MutexGuard<'_, Hold>, sent_at: Instant, what: &str) -> bool {
        let lease = self.lease_of(hold.lease);
        let ended = Instant::now() >= sent_at + lease;
        if ended {
            let error = Error::lock_lost(format!(
                "{} was lost: Redis confirmed {what} only after its lease of {lease:?} had \
                 run out",
                self.described()
            ));
            self.mark_lost_in(hold, error, Some(LostReason::Expired));
        }
        ended
    }

    /// Takes one level off before its release script runs, so a concurrent release or
    /// `is_held` sees it gone at once (never two releases of one level). Pauses the upkeep: a
    /// "gone" renewal may now be this release deleting the key.
    pub(super) fn reserve_level(&self) -> Result<Reserved> {
        let mut hold = self.hold();
        if let Some(lost) = hold.lost.take() {
            // Their holds ended when they were found lost.
            hold.levels.clear();
            drop(hold);
            self.client.untrack_hold(self.id);
            return Err(lost);
        }
        let Some(level) = hold.levels.pop() else {
            return Err(Error::not_held(format!(
                "{} is not held by this owner ({}): release without acquire, or released twice",
                self.described(),
                self.owner
            )));
        };
        let (lease, epoch) = (hold.lease, hold.epoch);
        drop(hold);
        self.client.upkeep.pause(self.id, true);
        Ok(Reserved {
            level,
            lease,
            epoch,
        })
    }

    /// Whether `reserved` belongs to the hold of now (no fresh hold began since).
    pub(super) fn is_current(&self, reserved: &Reserved) -> bool {
        self.hold().epoch == reserved.epoch
    }

    /// Gives a reserved level back after a release that did not happen.
    pub(super) fn restore_level(&self, reserved: Reserved) {
        {
            let mut hold = self.hold();
            if hold.epoch != reserved.epoch {
                return;
            }
            hold.levels.push(reserved.level);
        }
        self.client.upkeep.pause(self.id, false);
    }

    /// Levels remain after a release that Redis confirmed at `sent_at`: the release reset the
    /// TTL to the hold's lease, and the upkeep follows.
    pub(super) fn partially_released(self: &Arc<Self>, sent_at: Instant) {
        let hold = self.hold();
        if hold.levels.is_empty() || hold.lost.is_some() {
            return;
        }
        let upkeep = self.upkeep(hold.lease, sent_at);
        // Fails only when the client was closed meanwhile, which marked this hold lost.
        let _ = self.client.track_hold(self, upkeep);
        // Lost or not, the levels it kept are the handle's to release.
        let _ = self.lost_if_ended(hold, sent_at, "the partial release that reset it");
    }

    /// The hold of `reserved` is over (released, or given up): no upkeep, no entry in the
    /// client's registry. A newer hold is left alone. Levels still held end with it, `lost`
    /// or not (those already reported lost ended then).
    pub(super) fn forget_hold(&self, reserved: &Reserved, lost: bool) {
        let mut hold = self.hold();
        if hold.epoch != reserved.epoch {
            return;
        }
        let levels = std::mem::take(&mut hold.levels);
        let already_lost = hold.lost.take().is_some();
        hold.token = None;
        drop(hold);
        self.client.untrack_hold(self.id);
        if !already_lost {
            for level in levels {
                self.end_level(level, lost);
            }
        }
    }

    /// The levels and lease of the hold, emptied (for a release of everything).
    pub(super) fn take_hold(&self) -> Option<(Vec<Level>, Lease)> {
        let mut hold = self.hold();
        if hold.levels.is_empty() || hold.lost.is_some() {
            return None;
        }
        Some((std::mem::take(&mut hold.levels), hold.lease))
    }

    /// Hands the hold over to the caller for good, without releasing it (a semaphore's permits
    /// belong to nobody once acquired): nothing renews, expires or releases it any more.
    /// Returns the acquire request of each level, whose latches the caller may delete.
    pub(crate) fn detach(&self) -> Vec<String> {
        let levels = {
            let mut hold = self.hold();
            hold.lost = None;
            hold.token = None;
            std::mem::take(&mut hold.levels)
        };
        self.client.untrack_hold(self.id);
        levels.into_iter().map(|level| level.request).collect()
    }

    /// Lets go of the hold without releasing it (its key lives out its TTL): no upkeep, no
    /// entry in the client's registry. Returns the levels whose holds end now (none when the
    /// hold was already found lost: those ended then).
    pub(super) fn let_go(&self) -> Vec<Level> {
        let (levels, already_lost) = {
            let mut hold = self.hold();
            hold.token = None;
            (std::mem::take(&mut hold.levels), hold.lost.take().is_some())
        };
        self.client.untrack_hold(self.id);
        if already_lost {
            Vec::new()
        } else {
            levels
        }
    }

    pub(crate) fn is_held(&self) -> bool {
        let hold = self.hold();
        !hold.levels.is_empty() && hold.lost.is_none()
    }

    /// The TTL a hold of this handle keeps, in ms (0 when it holds nothing).
    pub(super) fn current_lease_ms(&self) -> u64 {
        let hold = self.hold();
        if hold.levels.is_empty() || hold.lost.is_some() {
            return 0;
        }
        self.lease_of(hold.lease).as_millis() as u64
    }

    /// The token of the hold's latest acquisition; `None` when nothing is held (or lost), or
    /// the kind issues no tokens.
    pub(crate) fn token(&self) -> Option<i64> {
        let hold = self.hold();
        if hold.levels.is_empty() || hold.lost.is_some() {
            return None;
        }
        hold.token
    }

    /// When the current hold began; `None` when nothing is held (or it was lost).
    pub(crate) fn held_since(&self) -> Option<SystemTime> {
        let hold = self.hold();
        if hold.levels.is_empty() || hold.lost.is_some() {
            return None;
        }
        hold.since
    }

    pub(crate) fn hold_count(&self) -> u32 {
        self.hold().levels.len() as u32
    }

    pub(crate) fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    /// Counts a hold found lost for `reason`, and remembers why.
    pub(super) fn lost_for(&self, reason: Option<LostReason>) {
        *self
            .last_lost_reason
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = reason;
        if let Some(reason) = reason {
            self.stats.lost(reason);
        }
    }

    /// Records that the current hold was lost and tells everyone listening (once per hold).
    /// `reason`: why, as counted (`None`: the client was closed, which is no loss of the
    /// server's).
    pub(crate) fn mark_lost(&self, error: Error, reason: Option<LostReason>) {
        self.mark_lost_in(self.hold(), error, reason);
    }

    /// [`LockCore::mark_lost`], deciding under the hold's lock already taken: no fresh hold
    /// begins in between.
    fn mark_lost_in(
        &self,
        mut hold: MutexGuard<'_, Hold>,
        error: Error,
        reason: Option<LostReason>,
    ) {
        if hold.levels.is_empty() || hold.lost.is_some() {
            return;
        }
        hold.lost = Some(error.clone());
        // The levels stay (a release reports the loss), but their holds end now.
        let ended: Vec<(SystemTime, Duration)> = hold
            .levels
            .iter_mut()
            .map(|level| {
                // The span ends here, with the hold.
                let span = std::mem::replace(&mut level.span, tracing::Span::none());
                span.record("polylock.hold.lost", true);
                (level.started, level.since.elapsed())
            })
            .collect();
        drop(hold);
        self.lost_for(reason);
        if self.counts_holds {
            for (started, held) in ended {
                self.stats.hold_ended(started, held, true);
            }
        }
        self.client.untrack_hold(self.id);
        tracing::warn!(lock = %self.name(), owner = %self.owner, %error, "lock lost");
        self.lost.send_replace(true);
        if let Some(hook) = self.lost_hook.get() {
            hook(&error);
        }
        let callbacks: Vec<LostCallback> = self
            .callbacks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if !callbacks.is_empty() {
            // Never on the caller's thread nor a runtime worker: callbacks may block.
            crate::foundation::runtime::runtime().spawn_blocking(move || {
                for callback in callbacks {
                    callback(&error);
                }
            });
        }
    }
}
