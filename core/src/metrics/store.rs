//! The per-client store behind [`MetricsSnapshot`]: one [`LockStats`] per lock name and kind
//! (handles keep an `Arc` to theirs, so recording is atomics only), the connection counters,
//! and the event buffer exporters drain.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use super::histogram::AtomicHistogram;
use super::{
    AcquireResult, ConnectionMetrics, EventDetail, LockMetrics, LostReason, MetricEvent,
    MetricsSnapshot, WokenBy, EVENT_BUFFER_CAPACITY, OTHER_LOCKS,
};

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The events waiting for an exporter, shared by every [`LockStats`] of a client.
#[derive(Default)]
struct Events {
    recording: AtomicBool,
    buffer: Mutex<VecDeque<MetricEvent>>,
    dropped: AtomicU64,
}

impl Events {
    fn push(&self, event: impl FnOnce() -> MetricEvent) {
        if !self.recording.load(Ordering::Relaxed) {
            return;
        }
        let mut buffer = locked(&self.buffer);
        if buffer.len() >= EVENT_BUFFER_CAPACITY {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        buffer.push_back(event());
    }
}

/// The counters of one lock name and kind (see [`LockMetrics`] for each).
pub(crate) struct LockStats {
    name: String,
    kind: &'static str,
    /// False when the client was made with metrics off: every record returns at once.
    enabled: bool,
    events: Arc<Events>,
    acquired: AtomicU64,
    timed_out: AtomicU64,
    cancelled: AtomicU64,
    failed: AtomicU64,
    wait_time: AtomicHistogram,
    hold_time: AtomicHistogram,
    holds: AtomicI64,
    waiters: AtomicI64,
    handoffs_granted: AtomicU64,
    handoffs_woken: AtomicU64,
    wakeups_found_taken: AtomicU64,
    renewals: AtomicU64,
    renewal_failures: AtomicU64,
    lost_expired: AtomicU64,
    lost_taken: AtomicU64,
    lost_connection: AtomicU64,
    release_failures: AtomicU64,
    release_retries: AtomicU64,
}

impl LockStats {
    fn new(name: String, kind: &'static str, enabled: bool, events: Arc<Events>) -> LockStats {
        LockStats {
            name,
            kind,
            enabled,
            events,
            acquired: AtomicU64::new(0),
            timed_out: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            wait_time: AtomicHistogram::default(),
            hold_time: AtomicHistogram::default(),
            holds: AtomicI64::new(0),
            waiters: AtomicI64::new(0),
            handoffs_granted: AtomicU64::new(0),
            handoffs_woken: AtomicU64::new(0),
            wakeups_found_taken: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
            renewal_failures: AtomicU64::new(0),
            lost_expired: AtomicU64::new(0),
            lost_taken: AtomicU64::new(0),
            lost_connection: AtomicU64::new(0),
            release_failures: AtomicU64::new(0),
            release_retries: AtomicU64::new(0),
        }
    }

    /// The lock name as counted (possibly [`OTHER_LOCKS`]).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn kind(&self) -> &'static str {
        self.kind
    }

    fn event(&self, started: SystemTime, duration: Duration, detail: EventDetail) {
        self.events.push(|| MetricEvent {
            lock_name: self.name.clone(),
            lock_kind: self.kind.to_owned(),
            started,
            duration,
            detail,
        });
    }

    /// An acquire starts waiting (call [`LockStats::acquire_ended`] exactly once after).
    pub(crate) fn acquire_started(&self) {
        if self.enabled {
            self.waiters.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// An acquire ended, `waited` after its call, with `attempts` server calls. The hold it
    /// took is told apart ([`LockStats::hold_started`]): the engine records a hold when it
    /// takes it, even one whose caller went away before receiving it (then undone at once).
    pub(crate) fn acquire_ended(
        &self,
        result: AcquireResult,
        started: SystemTime,
        waited: Duration,
        attempts: u32,
        woken_by: Option<WokenBy>,
    ) {
        if !self.enabled {
            return;
        }
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        let counter = match result {
            AcquireResult::Acquired => {
                match woken_by {
                    Some(WokenBy::Grant) => self.handoffs_granted.fetch_add(1, Ordering::Relaxed),
                    Some(WokenBy::Message) => self.handoffs_woken.fetch_add(1, Ordering::Relaxed),
                    _ => 0,
                };
                &self.acquired
            }
            AcquireResult::TimedOut => &self.timed_out,
            AcquireResult::Cancelled => &self.cancelled,
            AcquireResult::Failed => &self.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.wait_time.record(waited);
        self.event(
            started,
            waited,
            EventDetail::Acquire {
                result,
                attempts,
                woken_by,
            },
        );
    }

    /// A wake-up (message or poll) found the lock taken again.
    pub(crate) fn wakeup_found_taken(&self) {
        if self.enabled {
            self.wakeups_found_taken.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A hold starts (call [`LockStats::hold_ended`] exactly once after).
    pub(crate) fn hold_started(&self) {
        if self.enabled {
            self.holds.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A hold that started at `started` (held for `held`) ended, released or lost.
    pub(crate) fn hold_ended(&self, started: SystemTime, held: Duration, lost: bool) {
        if !self.enabled {
            return;
        }
        self.holds.fetch_sub(1, Ordering::Relaxed);
        self.hold_time.record(held);
        self.event(started, held, EventDetail::Hold { lost });
    }

    /// One renewal of one hold's lease.
    pub(crate) fn renewal(&self, ok: bool, started: SystemTime, took: Duration) {
        if !self.enabled {
            return;
        }
        let counter = if ok {
            &self.renewals
        } else {
            &self.renewal_failures
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.event(started, took, EventDetail::Renewal { ok });
    }

    /// A hold was found lost (its end is told by [`LockStats::hold_ended`]).
    pub(crate) fn lost(&self, reason: LostReason) {
        if !self.enabled {
            return;
        }
        let counter = match reason {
            LostReason::Expired => &self.lost_expired,
            LostReason::Taken => &self.lost_taken,
            LostReason::Connection => &self.lost_connection,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.event(
            SystemTime::now(),
            Duration::ZERO,
            EventDetail::Lost { reason },
        );
    }

    /// A release ended after `retries` calls beyond the first.
    pub(crate) fn release_ended(
        &self,
        ok: bool,
        retries: u32,
        started: SystemTime,
        took: Duration,
    ) {
        if !self.enabled {
            return;
        }
        if !ok {
            self.release_failures.fetch_add(1, Ordering::Relaxed);
        }
        self.event(started, took, EventDetail::Release { ok, retries });
    }

    /// A release goes on in the background after the caller's call returned.
    pub(crate) fn release_retried(&self) {
        if self.enabled {
            self.release_retries.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn snapshot(&self) -> LockMetrics {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        LockMetrics {
            name: self.name.clone(),
            kind: self.kind.to_owned(),
            acquired: load(&self.acquired),
            timed_out: load(&self.timed_out),
            cancelled: load(&self.cancelled),
            failed: load(&self.failed),
            wait_time: self.wait_time.snapshot(),
            hold_time: self.hold_time.snapshot(),
            holds: self.holds.load(Ordering::Relaxed),
            waiters: self.waiters.load(Ordering::Relaxed),
            handoffs_granted: load(&self.handoffs_granted),
            handoffs_woken: load(&self.handoffs_woken),
            wakeups_found_taken: load(&self.wakeups_found_taken),
            renewals: load(&self.renewals),
            renewal_failures: load(&self.renewal_failures),
            lost_expired: load(&self.lost_expired),
            lost_taken: load(&self.lost_taken),
            lost_connection: load(&self.lost_connection),
            release_failures: load(&self.release_failures),
            release_retries: load(&self.release_retries),
        }
    }
}

/// The counters per (name, kind), and the same in first-use order (the snapshot's order).
type LockTable = (
    HashMap<(String, &'static str), Arc<LockStats>>,
    Vec<Arc<LockStats>>,
);

/// Everything one client counts.
pub(crate) struct Metrics {
    client_name: String,
    enabled: bool,
    max_lock_names: usize,
    /// Per (name, kind), in first-use order; names beyond the limit share [`OTHER_LOCKS`].
    locks: Mutex<LockTable>,
    events: Arc<Events>,
    server_calls: AtomicU64,
    server_errors: Mutex<BTreeMap<&'static str, u64>>,
    subscriptions: AtomicI64,
    reconnects: AtomicU64,
}

impl Metrics {
    pub(crate) fn new(client_name: String, enabled: bool, max_lock_names: usize) -> Metrics {
        Metrics {
            client_name,
            enabled,
            max_lock_names,
            locks: Mutex::default(),
            events: Arc::default(),
            server_calls: AtomicU64::new(0),
            server_errors: Mutex::default(),
            subscriptions: AtomicI64::new(0),
            reconnects: AtomicU64::new(0),
        }
    }

    pub(crate) fn client_name(&self) -> &str {
        &self.client_name
    }

    /// The counters of `name` as a `kind` (a kind name of [`LockMetrics::kind`]); past the
    /// cardinality limit, the shared [`OTHER_LOCKS`] counters of that kind.
    pub(crate) fn lock(&self, name: &str, kind: &'static str) -> Arc<LockStats> {
        let mut locks = locked(&self.locks);
        let (by_name, in_order) = &mut *locks;
        if let Some(stats) = by_name.get(&(name.to_owned(), kind)) {
            return stats.clone();
        }
        let counted = by_name
            .keys()
            .filter(|(counted, _)| counted != OTHER_LOCKS)
            .count();
        let name = if counted < self.max_lock_names {
            name
        } else {
            OTHER_LOCKS
        };
        by_name
            .entry((name.to_owned(), kind))
            .or_insert_with(|| {
                let stats = Arc::new(LockStats::new(
                    name.to_owned(),
                    kind,
                    self.enabled,
                    self.events.clone(),
                ));
                in_order.push(stats.clone());
                stats
            })
            .clone()
    }

    /// A command or script was sent.
    pub(crate) fn server_call(&self) {
        if self.enabled {
            self.server_calls.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A server call failed with an error of `kind` (an `ErrorKind`'s snake_case name).
    pub(crate) fn server_error(&self, kind: &'static str) {
        if self.enabled {
            *locked(&self.server_errors).entry(kind).or_default() += 1;
        }
    }

    /// `delta` channels were subscribed (positive) or unsubscribed (negative).
    pub(crate) fn subscriptions_changed(&self, delta: i64) {
        if self.enabled {
            self.subscriptions.fetch_add(delta, Ordering::Relaxed);
        }
    }

    /// A command or pub/sub connection was made again.
    pub(crate) fn reconnected(&self) {
        if self.enabled {
            self.reconnects.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Starts (or stops, dropping what waits) buffering [`MetricEvent`]s.
    pub(crate) fn record_events(&self, on: bool) {
        self.events.recording.store(on, Ordering::Relaxed);
        if !on {
            locked(&self.events.buffer).clear();
        }
    }

    /// The buffered events, oldest first; the buffer is then empty.
    pub(crate) fn drain_events(&self) -> Vec<MetricEvent> {
        locked(&self.events.buffer).drain(..).collect()
    }

    pub(crate) fn snapshot(&self) -> MetricsSnapshot {
        let locks = locked(&self.locks)
            .1
            .iter()
            .map(|stats| stats.snapshot())
            .collect();
        MetricsSnapshot {
            client_name: self.client_name.clone(),
            locks,
            connection: ConnectionMetrics {
                server_calls: self.server_calls.load(Ordering::Relaxed),
                server_errors: locked(&self.server_errors)
                    .iter()
                    .map(|(kind, count)| ((*kind).to_owned(), *count))
                    .collect(),
                subscriptions: self.subscriptions.load(Ordering::Relaxed),
                reconnects: self.reconnects.load(Ordering::Relaxed),
            },
            events_dropped: self.events.dropped.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_beyond_the_limit_fold_into_one_entry_per_kind() {
        let metrics = Metrics::new("test".into(), true, 2);
        let a = metrics.lock("a", "lock");
        metrics.lock("b", "lock");
        let c = metrics.lock("c", "lock");
        let d = metrics.lock("d", "fair_lock");
        assert_eq!(c.name, OTHER_LOCKS);
        assert_eq!(d.name, OTHER_LOCKS);
        assert!(Arc::ptr_eq(&metrics.lock("a", "lock"), &a));
        assert!(Arc::ptr_eq(&metrics.lock("e", "lock"), &c));
        let names: Vec<_> = metrics
            .snapshot()
            .locks
            .into_iter()
            .map(|lock| (lock.name, lock.kind))
            .collect();
        assert_eq!(
            names,
            [
                ("a".into(), "lock".into()),
                ("b".into(), "lock".into()),
                (OTHER_LOCKS.into(), "lock".into()),
                (OTHER_LOCKS.into(), "fair_lock".into()),
            ]
        );
    }

    #[test]
    fn events_are_buffered_only_while_asked_for() {
        let metrics = Metrics::new("test".into(), true, 10);
        let stats = metrics.lock("a", "lock");
        stats.renewal(true, SystemTime::now(), Duration::from_millis(1));
        assert!(metrics.drain_events().is_empty());
        metrics.record_events(true);
        stats.renewal(false, SystemTime::now(), Duration::from_millis(1));
        let events = metrics.drain_events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].detail, EventDetail::Renewal { ok: false });
        assert!(metrics.drain_events().is_empty());
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot.locks[0].renewals, 1);
        assert_eq!(snapshot.locks[0].renewal_failures, 1);
    }

    #[test]
    fn a_client_with_metrics_off_counts_nothing() {
        let metrics = Metrics::new("test".into(), false, 10);
        let stats = metrics.lock("a", "lock");
        stats.acquire_started();
        stats.acquire_ended(
            AcquireResult::Acquired,
            SystemTime::now(),
            Duration::ZERO,
            1,
            None,
        );
        metrics.server_call();
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot.locks[0].acquired, 0);
        assert_eq!(snapshot.connection.server_calls, 0);
    }
}
