//! Release: one request id per logical release, retried on a dropped connection (the unlock
//! latch replays the first answer, and outlives every retry). When the retries in the
//! caller's time run out, the hold is given up at once (never renewed again) and the same
//! request is retried in the background until the lease would have ended.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use tracing::Instrument;

use crate::engine::context::ClientInner;
use crate::engine::hold::Reserved;
use crate::engine::{latch_ms, request_id, Backoff, LockCore};
use crate::foundation::error::{Error, ErrorKind, Result};
use crate::foundation::runtime::runtime;
use crate::kinds::{LockKind, ReleaseArgs};
use crate::metrics::{LockStats, LostReason};

/// Added to a release trace's window: the server's clock and the client's may run at slightly
/// different rates, and the trace's TTL starts when the final release ran, after the first send.
const TRACE_GRACE: Duration = Duration::from_secs(1);

/// How long a final release's trace must live so that every answer the caller can still read
/// finds it: its retries are sent within `in_callers_time`, and the last one's reply is awaited
/// for one response timeout more. After that nobody reads an answer (retries left to the
/// background answer nobody), so the trace goes: a new owner per call (`with_lock`, a handle
/// per critical section, a job-lock run) leaves nothing behind beyond this window.
pub fn trace_window(in_callers_time: Duration, options: &crate::ClientOptions) -> Duration {
    in_callers_time + options.response_timeout + TRACE_GRACE
}

/// One logical release of one level.
struct ReleaseRequest {
    /// How long the caller retries (after a final release, its latch need live no longer).
    in_callers_time: Duration,
    client: Arc<ClientInner>,
    kind: Arc<dyn LockKind>,
    owner: String,
    acquired_by: String,
    lease: Duration,
    request: String,
    /// Calls sent after the first.
    retries: AtomicU32,
}

impl ReleaseRequest {
    /// Runs the release script, retrying a dropped connection with the same request id until
    /// `until` (nothing is sent after it, nor once the client is closed). Replies nil (not
    /// held), 0 (still held) or 1 (released).
    async fn run(&self, until: Instant) -> Result<Option<i64>> {
        let mut backoff = Backoff::default();
        let mut first = true;
        loop {
            if Instant::now() >= until {
                return Err(Error::timeout(format!(
                    "release {}: the lease it guarded has ended",
                    self.kind.described()
                )));
            }
            let mut connection = self.client.connection.clone();
            let args = ReleaseArgs {
                owner: &self.owner,
                lease_ms: self.lease.as_millis() as u64,
                request: &self.request,
                acquired_by: &self.acquired_by,
                final_latch_ms: latch_ms(self.in_callers_time),
                trace_ms: trace_window(self.in_callers_time, &self.client.options).as_millis()
                    as u64,
            };
            if !std::mem::take(&mut first) {
                self.retries.fetch_add(1, Ordering::Relaxed);
            }
            tracing::trace!(target: "polylock::handoff", "release sent");
            let reply = self
                .kind
                .release(&args)
                .invoke_async::<Option<i64>>(&mut connection)
                .await
                .map_err(|err| {
                    Error::from_redis(&format!("release {}", self.kind.described()), err)
                });
            tracing::trace!(target: "polylock::handoff", "release reply");
            match reply {
                Err(err) if err.is_transient() && !self.client.is_closed() => {
                    tracing::debug!(%err, "release failed; retrying with the same request id");
                    let left = until.saturating_duration_since(Instant::now());
                    tokio::time::sleep(backoff.next_delay().min(left)).await;
                }
                Ok(answer) => {
                    if let (Some(sync), Some(_)) = (&self.client.replica_sync, answer) {
                        // Boxed: only under `sync_replicas` (see `Interruptions::run` in acquire.rs).
                        Box::pin(sync.confirm(
                            &self.client.connection,
                            self.kind.key(),
                            "a release",
                        ))
                        .await;
                    }
                    return Ok(answer);
                }
                other => return other,
            }
        }
    }

    /// Keeps retrying in the background until `until`, when the lease would have ended anyway.
    fn finish_in_background(self, until: Instant, stats: &LockStats) {
        stats.release_retried();
        runtime().spawn(async move {
            match self.run(until).await {
                Ok(_) => tracing::info!(lock = %self.kind.name(), "background release done"),
                Err(err) => tracing::warn!(lock = %self.kind.name(), error = %err,
                    "background release failed; the lock expires with its lease"),
            }
        });
    }
}

impl LockCore {
    /// Releases one level of the hold.
    pub(crate) async fn release(self: &Arc<Self>) -> Result<()> {
        let (started, since) = (SystemTime::now(), Instant::now());
        let span = tracing::debug_span!(target: "polylock", "polylock.release",
            polylock.lock.name = %self.stats.name(), polylock.lock.kind = self.stats.kind(),
            polylock.release.ok = tracing::field::Empty,
            polylock.release.retries = tracing::field::Empty);
        let (released, retries) = match self.reserve_level() {
            Ok(reserved) => {
                self.release_reserved(reserved)
                    .instrument(span.clone())
                    .await
            }
            // A misuse, not a release that failed.
            Err(err) if err.kind() == ErrorKind::NotHeld => return Err(err),
            Err(lost) => (Err(lost), 0),
        };
        span.record("polylock.release.ok", released.is_ok());
        span.record("polylock.release.retries", retries);
        self.stats
            .release_ended(released.is_ok(), retries, started, since.elapsed());
        released
    }

    pub(super) async fn finish_release(self: &Arc<Self>, reserved: Reserved) -> Result<()> {
        self.release_reserved(reserved).await.0
    }

    /// Releases the level `reserved`; also answers how many calls were sent after the first.
    async fn release_reserved(self: &Arc<Self>, reserved: Reserved) -> (Result<()>, u32) {
        // The owner's releases of this lock run one at a time (`release_gate`): a partial
        // release's retry reads the owner's count and its level's field, which a final release
        // of another level would rename away. The level stays reserved meanwhile: the releases
        // waited for never need it, and each is bounded by its caller's retry window.
        let in_flight = self.client.release_gate.enter(self.kind.key(), &self.owner);
        in_flight.turn().await;
        if self.is_current(&reserved) {
            // An earlier partial release re-registered the upkeep: this release may delete the
            // key, which a renewal must not take for a loss.
            self.client.upkeep.pause(self.id, true);
        }
        if let Err(err) = self.check_usable() {
            let closed = self.client.is_closed();
            self.restore_level(reserved);
            if closed {
                // Closed while this release began: the hold is reported lost like any other.
                self.mark_lost(
                    Error::lock_lost(format!(
                        "{} was lost: the client was closed while it was held",
                        self.described()
                    )),
                    None,
                );
            }
            return (Err(err), 0);
        }
        let lease = self.lease_of(reserved.lease);
        let horizon = self
            .client
            .upkeep
            .horizon(self.id)
            .unwrap_or_else(|| Instant::now() + lease);
        if Instant::now() >= horizon {
            // The lease ended before this release began (counted, as the upkeep counts it, from
            // the last confirmed acquisition or renewal): the hold is lost, exactly as when the
            // upkeep reports it a moment later. Nothing is sent, as after the upkeep's report.
            return (self.lost_before_release(reserved, true), 0);
        }
        let callers_retries = self.client.options.response_timeout * 2;
        let in_callers_time = (Instant::now() + callers_retries).min(horizon);
        let call = ReleaseRequest {
            in_callers_time: callers_retries,
            client: self.client.clone(),
            kind: self.kind.clone(),
            owner: self.owner.clone(),
            acquired_by: reserved.level.request.clone(),
            lease,
            request: request_id(),
            retries: AtomicU32::new(0),
        };
        let sent_at = Instant::now();
        let answer = call.run(in_callers_time).await;
        drop(in_flight);
        let retries = call.retries.load(Ordering::Relaxed);
        let released = match answer {
            Ok(Some(0)) if self.hold_count() > 0 && self.is_current(&reserved) => {
                self.end_level(reserved.level, false);
                self.partially_released(sent_at);
                Ok(())
            }
            Ok(Some(_)) => {
                // Released (or still held only through another handle of the same owner).
                self.forget_hold(&reserved, false);
                self.end_level(reserved.level, false);
                Ok(())
            }
            Ok(None) => self.lost_before_release(reserved, Instant::now() >= horizon),
            Err(err) if err.is_transient() => {
                // Never renew a lock whose release may have happened: give the hold up now.
                if !self.is_current(&reserved) {
                    // A fresh hold began meanwhile: it is not this release's to give up.
                } else if self.hold_count() > 0 {
                    self.mark_lost(
                        Error::lock_lost(format!(
                            "{} was given up: a release could not reach Redis, so it is no \
                             longer renewed and expires with its lease",
                            self.described()
                        )),
                        Some(LostReason::Connection),
                    );
                } else {
                    self.forget_hold(&reserved, false);
                }
                self.end_level(reserved.level, false);
                if self.kind.retries_release_late() {
                    call.finish_in_background(horizon, &self.stats);
                    Err(err
                        .with_note("the release is retried in the background until the lease ends"))
                } else {
                    Err(err.with_note("the lock is no longer renewed and expires with its lease"))
                }
            }
            Err(err) => {
                self.restore_level(reserved);
                Err(err)
            }
        };
        (released, retries)
    }

    /// The hold of `reserved` was lost before its release: its lease had `expired`, or another
    /// client took or deleted the lock. Counted once (not again when the upkeep found it lost
    /// during this release).
    fn lost_before_release(&self, reserved: Reserved, expired: bool) -> Result<()> {
        if !self.is_lost() {
            self.lost_for(Some(if expired {
                LostReason::Expired
            } else {
                LostReason::Taken
            }));
        }
        self.forget_hold(&reserved, true);
        self.end_level(reserved.level, true);
        Err(Error::lock_lost(format!(
            "{} was lost before release: its lease ran out or another client took or deleted it",
            self.described()
        )))
    }

    /// Runs the kind's release for this owner although this handle holds nothing (an
    /// expirable semaphore's permit acquired by another handle, client or Redisson): one
    /// request, retried on a dropped connection in the caller's time. Replies as the script.
    pub(crate) async fn release_unheld(self: &Arc<Self>) -> Result<Option<i64>> {
        self.check_usable()?;
        let in_callers_time = self.client.options.response_timeout * 2;
        let request = request_id();
        let call = ReleaseRequest {
            in_callers_time,
            client: self.client.clone(),
            kind: self.kind.clone(),
            owner: self.owner.clone(),
            acquired_by: request.clone(),
            lease: self.lease_of(super::Lease::Watchdog),
            request,
            retries: AtomicU32::new(0),
        };
        call.run(Instant::now() + in_callers_time).await
    }

    /// A handle dropped while held: release every level in the background (Drop never blocks).
    pub(super) fn release_on_drop(&self) {
        // A handle inherited through fork: the hold is the parent's (its watchdog renews it),
        // and so are the tables below, whose locks a thread of the parent may have held at the
        // fork. Nothing to do here.
        if self.client.forked() {
            return;
        }
        // When the key expires unless renewed: the background release stops trying then.
        let horizon = self.client.upkeep.horizon(self.id);
        let Some((levels, lease)) = self.take_hold() else {
            self.client.untrack_hold(self.id);
            return;
        };
        self.client.untrack_hold(self.id);
        tracing::warn!(lock = %self.name(), holds = levels.len(), "lock handle dropped while held; releasing in the background");
        let requests: Vec<String> = levels
            .into_iter()
            .map(|level| {
                let request = level.request.clone();
                self.end_level(level, false);
                request
            })
            .collect();
        if self.check_usable().is_err() {
            return;
        }
        let lease = self.lease_of(lease);
        let until = horizon.unwrap_or_else(|| Instant::now() + lease);
        let in_callers_time = self.client.options.response_timeout * 2;
        let client = self.client.clone();
        let kind = self.kind.clone();
        let owner = self.owner.clone();
        let gate = self.client.release_gate.clone();
        runtime().spawn(async move {
            for acquired_by in requests.into_iter().rev() {
                // In turn with the owner's other releases of the lock (another handle with the
                // same holder id), as a caller's release: the gate for the caller's window only.
                let in_flight = gate.enter(kind.key(), &owner);
                in_flight.turn().await;
                let in_turn = (Instant::now() + in_callers_time).min(until);
                let call = ReleaseRequest {
                    in_callers_time,
                    client: client.clone(),
                    kind: kind.clone(),
                    owner: owner.clone(),
                    acquired_by,
                    lease,
                    request: request_id(),
                    retries: AtomicU32::new(0),
                };
                let mut answer = call.run(in_turn).await;
                drop(in_flight);
                if matches!(&answer, Err(err) if err.is_transient())
                    && Instant::now() < until
                    && kind.retries_release_late()
                {
                    answer = call.run(until).await;
                }
                match answer {
                    Ok(Some(0)) => continue,
                    Ok(_) => break,
                    Err(err) => {
                        tracing::warn!(lock = %kind.name(), error = %err, "background release failed; the lock expires with its lease");
                        break;
                    }
                }
            }
        });
    }
}
