//! What the locks of one client are doing, counted in the core once for every binding: acquires
//! by result, waits, holds, hand-offs, renewals, losses, releases, server calls.
//!
//! Two ways out, both free of any dependency:
//! - [`MetricsSnapshot`] (`Client::metrics()`): cumulative counters, current gauges and
//!   histograms, per lock name and kind. Names beyond `ClientOptions::metrics_max_lock_names`
//!   fold into [`OTHER_LOCKS`], so a program that makes a name per request cannot grow it
//!   without bound.
//! - [`MetricEvent`]s (`Client::drain_metric_events()`), buffered only while an exporter asked
//!   for them (`Client::record_metric_events(true)`): one per finished acquire, hold, release,
//!   renewal and lost lease, with its start and duration, so that an exporter can feed
//!   OpenTelemetry histograms and spans when its reader collects (observable callbacks run
//!   before the synchronous instruments are read, in every OpenTelemetry SDK we export to).
//!
//! Instrument names and units: `docs/observability.md`.

mod histogram;
mod record;
mod store;

pub use histogram::{Histogram, BUCKET_BOUNDS_SECONDS};
pub(crate) use record::{AcquireRecord, Progress};
pub(crate) use store::{LockStats, Metrics};

use std::time::{Duration, SystemTime};

/// The kind names of [`LockMetrics::kind`], one per handle type.
pub(crate) mod kind {
    pub(crate) const LOCK: &str = "lock";
    pub(crate) const FAIR_LOCK: &str = "fair_lock";
    pub(crate) const FIFO_LOCK: &str = "fifo_lock";
    pub(crate) const FENCED_LOCK: &str = "fenced_lock";
    pub(crate) const READ_WRITE_LOCK: &str = "read_write_lock";
    pub(crate) const SEMAPHORE: &str = "semaphore";
    pub(crate) const EXPIRABLE_SEMAPHORE: &str = "expirable_semaphore";
    pub(crate) const MULTI_LOCK: &str = "multi_lock";
    pub(crate) const RED_LOCK: &str = "red_lock";
}

/// The lock name under which names beyond the cardinality limit are counted.
pub const OTHER_LOCKS: &str = "_other";

/// How many events the buffer keeps between two drains; more are counted as dropped.
pub const EVENT_BUFFER_CAPACITY: usize = 65_536;

/// Everything one client counted since it was made.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricsSnapshot {
    /// `ClientOptions::name` (default `host:pid`).
    pub client_name: String,
    /// One entry per lock name and kind used through this client (at most the cardinality
    /// limit, plus [`OTHER_LOCKS`] per kind), in the order they were first used.
    pub locks: Vec<LockMetrics>,
    /// Server calls, errors, subscriptions and reconnects of the whole client.
    pub connection: ConnectionMetrics,
    /// Events that did not fit the buffer between two drains.
    pub events_dropped: u64,
}

/// The counters of one lock name and kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LockMetrics {
    /// The lock name, or [`OTHER_LOCKS`].
    pub name: String,
    /// `lock`, `fair_lock`, `fifo_lock`, `fenced_lock`, `read_write_lock`, `semaphore`,
    /// `expirable_semaphore`, `multi_lock` or `red_lock`.
    pub kind: String,
    /// Acquires that ended holding the lock.
    pub acquired: u64,
    /// Acquires whose wait ran out.
    pub timed_out: u64,
    /// Acquires the caller cancelled (dropped future, cancelled promise or task).
    pub cancelled: u64,
    /// Acquires that ended with an error.
    pub failed: u64,
    /// Time from an acquire's call to its end, every result.
    pub wait_time: Histogram,
    /// Time from an acquire to the release or loss of that hold.
    pub hold_time: Histogram,
    /// Holds current now.
    pub holds: i64,
    /// Acquires waiting now.
    pub waiters: i64,
    /// Acquires that got the lock handed to them by the releaser (a direct hand-off).
    pub handoffs_granted: u64,
    /// Acquires woken by a release message, then taking the lock themselves.
    pub handoffs_woken: u64,
    /// Wake-ups (a message or a poll) that found the lock taken again.
    pub wakeups_found_taken: u64,
    /// Lease renewals that succeeded.
    pub renewals: u64,
    /// Lease renewals that failed (the hold may still be kept: a later one can succeed).
    pub renewal_failures: u64,
    /// Holds lost because their lease ran out.
    pub lost_expired: u64,
    /// Holds lost because another owner had the lock (or it was deleted).
    pub lost_taken: u64,
    /// Holds lost because the server could not be reached in time.
    pub lost_connection: u64,
    /// Releases that ended with an error.
    pub release_failures: u64,
    /// Releases retried in the background after the caller's call returned.
    pub release_retries: u64,
}

/// The counters of a client's connections.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConnectionMetrics {
    /// Commands and scripts sent (a script counts once).
    pub server_calls: u64,
    /// Failed server calls by error kind (`ErrorKind`'s snake_case name), sorted by kind.
    pub server_errors: Vec<(String, u64)>,
    /// Pub/sub channels subscribed now.
    pub subscriptions: i64,
    /// Reconnects of the command or pub/sub connections.
    pub reconnects: u64,
}

/// One finished operation, for exporters (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct MetricEvent {
    /// The lock name as counted (so possibly [`OTHER_LOCKS`]).
    pub lock_name: String,
    /// As [`LockMetrics::kind`].
    pub lock_kind: String,
    /// When the operation started (wall clock, for span start times).
    pub started: SystemTime,
    /// How long it took.
    pub duration: Duration,
    pub detail: EventDetail,
}

/// What a [`MetricEvent`] records.
#[derive(Clone, Debug, PartialEq)]
pub enum EventDetail {
    /// An acquire ended: its result, how many times it asked the server, and for an acquire
    /// that got the lock after waiting, how it was woken.
    Acquire {
        result: AcquireResult,
        attempts: u32,
        woken_by: Option<WokenBy>,
    },
    /// A hold ended, released or lost.
    Hold { lost: bool },
    /// A release ended (`retries`: calls after the first).
    Release { ok: bool, retries: u32 },
    /// One renewal of one hold's lease.
    Renewal { ok: bool },
    /// A hold was found lost.
    Lost { reason: LostReason },
}

/// How an acquire ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AcquireResult {
    Acquired,
    TimedOut,
    Cancelled,
    Failed,
}

/// How a waiting acquire came to hold the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WokenBy {
    /// The releaser handed it over (direct hand-off).
    Grant,
    /// A release message woke it and it took the lock.
    Message,
    /// It looked again on its own (lease end, poll, fair-queue upkeep).
    Poll,
}

/// Why a hold was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LostReason {
    Expired,
    Taken,
    Connection,
}

impl AcquireResult {
    /// The value of the `polylock.acquire.result` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            AcquireResult::Acquired => "acquired",
            AcquireResult::TimedOut => "timed_out",
            AcquireResult::Cancelled => "cancelled",
            AcquireResult::Failed => "failed",
        }
    }
}

impl WokenBy {
    /// The value of the `polylock.acquire.woken_by` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            WokenBy::Grant => "grant",
            WokenBy::Message => "message",
            WokenBy::Poll => "poll",
        }
    }
}

impl LostReason {
    /// The value of the `polylock.lost.reason` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            LostReason::Expired => "expired",
            LostReason::Taken => "taken",
            LostReason::Connection => "connection",
        }
    }
}
