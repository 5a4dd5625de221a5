//! `client.metrics()` and the metric events of `@polylock/polylock/otel`: the core's snapshot
//! and events as plain JavaScript objects (camelCase fields, counts as numbers, times in
//! seconds as the OpenTelemetry instruments have them).

use std::time::UNIX_EPOCH;

use napi_derive::napi;
use polylock::metrics::{self as core, EventDetail, BUCKET_BOUNDS_SECONDS};

/// Everything one client counted since it connected (`client.metrics()`).
#[napi(object)]
pub struct MetricsSnapshot {
    /// The client's name (the `name` option, default `host:pid`).
    pub client_name: String,
    /// One entry per lock name and kind used through this client, in the order of first use;
    /// names beyond `metricsMaxLockNames` are counted together as `_other`.
    pub locks: Vec<LockMetrics>,
    /// Server calls, errors, subscriptions and reconnects of the whole client.
    pub connection: ConnectionMetrics,
    /// Metric events that did not fit the buffer between two drains of an exporter.
    pub events_dropped: f64,
}

/// The counters of one lock name and kind. Counts are cumulative; `holds` and `waiters` are now.
#[napi(object)]
pub struct LockMetrics {
    /// The lock name, or `_other`.
    pub name: String,
    /// `lock`, `fair_lock`, `fifo_lock`, `fenced_lock`, `read_write_lock`, `semaphore`,
    /// `expirable_semaphore`, `multi_lock` or `red_lock`.
    pub kind: String,
    /// Acquires that ended holding the lock.
    pub acquired: f64,
    /// Acquires whose wait ran out.
    pub timed_out: f64,
    /// Acquires cancelled by the caller (an aborted signal).
    pub cancelled: f64,
    /// Acquires that ended with an error.
    pub failed: f64,
    /// Time from an acquire's call to its end, every result.
    pub wait_time: Histogram,
    /// Time from an acquire to the release or loss of that hold.
    pub hold_time: Histogram,
    /// Holds current now.
    pub holds: f64,
    /// Acquires waiting now.
    pub waiters: f64,
    /// Acquires handed the lock by its releaser.
    pub handoffs_granted: f64,
    /// Acquires woken by a release message that then took the lock.
    pub handoffs_woken: f64,
    /// Wake-ups that found the lock taken again.
    pub wakeups_found_taken: f64,
    /// Lease renewals that succeeded.
    pub renewals: f64,
    /// Lease renewals that failed.
    pub renewal_failures: f64,
    /// Holds lost because their lease ran out.
    pub lost_expired: f64,
    /// Holds lost because another owner had the lock (or it was deleted).
    pub lost_taken: f64,
    /// Holds lost because the server could not be reached in time.
    pub lost_connection: f64,
    /// Releases that ended with an error.
    pub release_failures: f64,
    /// Releases retried in the background after the call returned.
    pub release_retries: f64,
}

/// A histogram of durations in seconds.
#[napi(object)]
pub struct Histogram {
    /// How many durations were recorded.
    pub count: f64,
    /// Their sum, in seconds.
    pub sum_seconds: f64,
    /// Per bucket (not cumulative): one per bound of `bounds`, then one for larger durations.
    pub bucket_counts: Vec<f64>,
    /// The buckets' inclusive upper bounds, in seconds (the same for every histogram).
    pub bounds: Vec<f64>,
}

/// The counters of a client's connections.
#[napi(object)]
pub struct ConnectionMetrics {
    /// Commands and scripts sent (a script counts once).
    pub server_calls: f64,
    /// Failed server calls by error kind (`connection`, `timeout`, ...), sorted by kind.
    pub server_errors: Vec<ServerErrors>,
    /// Pub/sub channels subscribed now.
    pub subscriptions: f64,
    /// Reconnects of the command or pub/sub connections.
    pub reconnects: f64,
}

/// How many server calls failed with one kind of error.
#[napi(object)]
pub struct ServerErrors {
    pub kind: String,
    pub count: f64,
}

/// One finished operation, for `@polylock/polylock/otel` (not part of the public API).
#[napi(object)]
pub struct MetricEvent {
    pub lock_name: String,
    pub lock_kind: String,
    /// `acquire`, `hold`, `release`, `renewal` or `lost`.
    pub operation: String,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_ms: f64,
    pub duration_seconds: f64,
    /// Of an acquire: `acquired`, `timed_out`, `cancelled` or `failed`.
    pub result: Option<String>,
    /// Of an acquire: how many times it asked the server.
    pub attempts: Option<u32>,
    /// Of an acquire that waited: `grant`, `message` or `poll`.
    pub woken_by: Option<String>,
    /// Of a hold: whether it ended lost.
    pub lost: Option<bool>,
    /// Of a release or renewal: whether it succeeded.
    pub ok: Option<bool>,
    /// Of a release: calls after the first.
    pub retries: Option<u32>,
    /// Of a lost lease: `expired`, `taken` or `connection`.
    pub reason: Option<String>,
}

fn histogram(histogram: core::Histogram) -> Histogram {
    Histogram {
        count: histogram.count as f64,
        sum_seconds: histogram.sum_seconds,
        bucket_counts: histogram
            .bucket_counts
            .into_iter()
            .map(|count| count as f64)
            .collect(),
        bounds: BUCKET_BOUNDS_SECONDS.to_vec(),
    }
}

fn lock_metrics(lock: core::LockMetrics) -> LockMetrics {
    LockMetrics {
        name: lock.name,
        kind: lock.kind,
        acquired: lock.acquired as f64,
        timed_out: lock.timed_out as f64,
        cancelled: lock.cancelled as f64,
        failed: lock.failed as f64,
        wait_time: histogram(lock.wait_time),
        hold_time: histogram(lock.hold_time),
        holds: lock.holds as f64,
        waiters: lock.waiters as f64,
        handoffs_granted: lock.handoffs_granted as f64,
        handoffs_woken: lock.handoffs_woken as f64,
        wakeups_found_taken: lock.wakeups_found_taken as f64,
        renewals: lock.renewals as f64,
        renewal_failures: lock.renewal_failures as f64,
        lost_expired: lock.lost_expired as f64,
        lost_taken: lock.lost_taken as f64,
        lost_connection: lock.lost_connection as f64,
        release_failures: lock.release_failures as f64,
        release_retries: lock.release_retries as f64,
    }
}

impl From<core::MetricsSnapshot> for MetricsSnapshot {
    fn from(snapshot: core::MetricsSnapshot) -> Self {
        let connection = snapshot.connection;
        MetricsSnapshot {
            client_name: snapshot.client_name,
            locks: snapshot.locks.into_iter().map(lock_metrics).collect(),
            connection: ConnectionMetrics {
                server_calls: connection.server_calls as f64,
                server_errors: connection
                    .server_errors
                    .into_iter()
                    .map(|(kind, count)| ServerErrors {
                        kind,
                        count: count as f64,
                    })
                    .collect(),
                subscriptions: connection.subscriptions as f64,
                reconnects: connection.reconnects as f64,
            },
            events_dropped: snapshot.events_dropped as f64,
        }
    }
}

impl From<core::MetricEvent> for MetricEvent {
    fn from(event: core::MetricEvent) -> Self {
        // A clock set before 1970 gives 0: a span start that far off is wrong either way.
        let started_ms = event
            .started
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64() * 1000.0);
        let mut out = MetricEvent {
            lock_name: event.lock_name,
            lock_kind: event.lock_kind,
            operation: String::new(),
            started_ms,
            duration_seconds: event.duration.as_secs_f64(),
            result: None,
            attempts: None,
            woken_by: None,
            lost: None,
            ok: None,
            retries: None,
            reason: None,
        };
        match event.detail {
            EventDetail::Acquire {
                result,
                attempts,
                woken_by,
            } => {
                out.operation = "acquire".into();
                out.result = Some(result.as_str().into());
                out.attempts = Some(attempts);
                out.woken_by = woken_by.map(|woken_by| woken_by.as_str().into());
            }
            EventDetail::Hold { lost } => {
                out.operation = "hold".into();
                out.lost = Some(lost);
            }
            EventDetail::Release { ok, retries } => {
                out.operation = "release".into();
                out.ok = Some(ok);
                out.retries = Some(retries);
            }
            EventDetail::Renewal { ok } => {
                out.operation = "renewal".into();
                out.ok = Some(ok);
            }
            EventDetail::Lost { reason } => {
                out.operation = "lost".into();
                out.reason = Some(reason.as_str().into());
            }
        }
        out
    }
}

/// For `@polylock/polylock/otel`: the inclusive upper bounds, in seconds, of every duration
/// histogram's buckets (the explicit bucket boundaries of its histograms).
#[napi]
pub fn metrics_bucket_bounds_seconds() -> Vec<f64> {
    BUCKET_BOUNDS_SECONDS.to_vec()
}
