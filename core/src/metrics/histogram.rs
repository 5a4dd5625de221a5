//! A fixed-bucket histogram of durations, recorded with atomics (no lock on the hot path).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The upper bounds (inclusive, in seconds) of the buckets every duration histogram uses: from
/// half a millisecond (a hand-off on one host) to five minutes (a long wait or hold).
pub const BUCKET_BOUNDS_SECONDS: [f64; 17] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0,
];

/// A snapshot of a duration histogram.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    /// How many durations were recorded.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum_seconds: f64,
    /// Per bucket of [`BUCKET_BOUNDS_SECONDS`], then one for the larger ones (so one more count
    /// than bounds); not cumulative.
    pub bucket_counts: Vec<u64>,
}

const BUCKETS: usize = BUCKET_BOUNDS_SECONDS.len() + 1;

/// The live histogram behind a [`Histogram`] snapshot.
pub(crate) struct AtomicHistogram {
    count: AtomicU64,
    sum_micros: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

impl Default for AtomicHistogram {
    fn default() -> Self {
        AtomicHistogram {
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl AtomicHistogram {
    pub(crate) fn record(&self, duration: Duration) {
        let seconds = duration.as_secs_f64();
        let bucket = BUCKET_BOUNDS_SECONDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(BUCKETS - 1);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Histogram {
        Histogram {
            count: self.count.load(Ordering::Relaxed),
            sum_seconds: self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6,
            bucket_counts: self
                .buckets
                .iter()
                .map(|bucket| bucket.load(Ordering::Relaxed))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_fall_into_the_bucket_of_their_upper_bound() {
        let histogram = AtomicHistogram::default();
        histogram.record(Duration::from_micros(500)); // on a bound: that bucket
        histogram.record(Duration::from_millis(3));
        histogram.record(Duration::from_secs(600)); // beyond the last bound
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.count, 3);
        assert_eq!(
            snapshot.bucket_counts.len(),
            BUCKET_BOUNDS_SECONDS.len() + 1
        );
        assert_eq!(snapshot.bucket_counts[0], 1);
        assert_eq!(snapshot.bucket_counts[3], 1);
        assert_eq!(snapshot.bucket_counts[BUCKETS - 1], 1);
        assert!((snapshot.sum_seconds - 600.0035).abs() < 1e-9);
    }
}
