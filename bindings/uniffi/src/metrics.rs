//! `Client.metrics()`: the core's metrics snapshot as uniffi records (Kotlin data classes,
//! Swift structs). Only the shape changes: counts stay unsigned, durations are seconds.

use polylock::metrics;

/// A duration histogram: `bucketCounts[i]` counts the durations up to `boundsSeconds[i]`
/// (not cumulative); the last count is for the larger ones.
#[derive(Debug, Clone, uniffi::Record)]
pub struct Histogram {
    pub count: u64,
    pub sum_seconds: f64,
    pub bounds_seconds: Vec<f64>,
    pub bucket_counts: Vec<u64>,
}

/// The counters of one lock name and kind (see `docs/observability.md` for each).
#[derive(Debug, Clone, uniffi::Record)]
pub struct LockMetrics {
    pub name: String,
    pub kind: String,
    pub acquired: u64,
    pub timed_out: u64,
    pub cancelled: u64,
    pub failed: u64,
    pub wait_time: Histogram,
    pub hold_time: Histogram,
    pub holds: i64,
    pub waiters: i64,
    pub handoffs_granted: u64,
    pub handoffs_woken: u64,
    pub wakeups_found_taken: u64,
    pub renewals: u64,
    pub renewal_failures: u64,
    pub lost_expired: u64,
    pub lost_taken: u64,
    pub lost_connection: u64,
    pub release_failures: u64,
    pub release_retries: u64,
}

/// Failed server calls of one error kind.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ServerErrors {
    pub kind: String,
    pub count: u64,
}

/// The counters of a client's connections.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ConnectionMetrics {
    pub server_calls: u64,
    pub server_errors: Vec<ServerErrors>,
    pub subscriptions: i64,
    pub reconnects: u64,
}

/// Everything one client counted since it was made.
#[derive(Debug, Clone, uniffi::Record)]
pub struct MetricsSnapshot {
    pub client_name: String,
    pub locks: Vec<LockMetrics>,
    pub connection: ConnectionMetrics,
    pub events_dropped: u64,
}

impl From<metrics::Histogram> for Histogram {
    fn from(histogram: metrics::Histogram) -> Self {
        Histogram {
            count: histogram.count,
            sum_seconds: histogram.sum_seconds,
            bounds_seconds: metrics::BUCKET_BOUNDS_SECONDS.to_vec(),
            bucket_counts: histogram.bucket_counts,
        }
    }
}

impl From<metrics::LockMetrics> for LockMetrics {
    fn from(lock: metrics::LockMetrics) -> Self {
        LockMetrics {
            name: lock.name,
            kind: lock.kind,
            acquired: lock.acquired,
            timed_out: lock.timed_out,
            cancelled: lock.cancelled,
            failed: lock.failed,
            wait_time: lock.wait_time.into(),
            hold_time: lock.hold_time.into(),
            holds: lock.holds,
            waiters: lock.waiters,
            handoffs_granted: lock.handoffs_granted,
            handoffs_woken: lock.handoffs_woken,
            wakeups_found_taken: lock.wakeups_found_taken,
            renewals: lock.renewals,
            renewal_failures: lock.renewal_failures,
            lost_expired: lock.lost_expired,
            lost_taken: lock.lost_taken,
            lost_connection: lock.lost_connection,
            release_failures: lock.release_failures,
            release_retries: lock.release_retries,
        }
    }
}

impl From<metrics::MetricsSnapshot> for MetricsSnapshot {
    fn from(snapshot: metrics::MetricsSnapshot) -> Self {
        let connection = snapshot.connection;
        MetricsSnapshot {
            client_name: snapshot.client_name,
            locks: snapshot.locks.into_iter().map(Into::into).collect(),
            connection: ConnectionMetrics {
                server_calls: connection.server_calls,
                server_errors: connection
                    .server_errors
                    .into_iter()
                    .map(|(kind, count)| ServerErrors { kind, count })
                    .collect(),
                subscriptions: connection.subscriptions,
                reconnects: connection.reconnects,
            },
            events_dropped: snapshot.events_dropped,
        }
    }
}
