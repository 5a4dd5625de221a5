//! The live metrics `watch` shows per lock: the cumulative counters in the client records'
//! `metrics` field turned into rates over a window, summed over the clients. A client's window
//! runs from the previous record this watch read of it to the current one (so a record not
//! rewritten since keeps its last window); on first sight, from the client's connection to now
//! (a record is rewritten only every few seconds when its holds do not change).

use std::collections::HashMap;

use serde::Serialize;

use crate::client_records::{ClientRecord, RecordedLock};

/// What the clients' records say about one lock name.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LockRates {
    /// Clients whose record reports the lock.
    pub clients: usize,
    /// The kind the clients use it as (`lock`, `fair_lock`, ...).
    pub kind: String,
    /// Acquires that got the lock, per second over the window.
    pub acquires_per_s: f64,
    /// Acquires that timed out, per second over the window.
    pub timeouts_per_s: f64,
    /// The average wait of the acquires that ended in the window (ms); `None` when none did.
    pub avg_wait_ms: Option<f64>,
    /// Holds now.
    pub holds: i64,
    /// Acquires waiting now.
    pub waiters: i64,
    /// Leases lost (expired, taken, connection) since each client connected.
    pub lost: u64,
}

impl LockRates {
    /// Anything happened in the window, or holds or waits now.
    pub fn is_active(&self) -> bool {
        self.is_active_while_free() || self.holds > 0
    }

    /// [`LockRates::is_active`] for a name Redis reads as free: the holds the records report
    /// are left out, as Redis says nobody holds it. A record reports holds up to a second late
    /// (its debounce), and a killed holder's record lapses up to a third of its lease after its
    /// lock does; neither makes a free lock in use.
    pub fn is_active_while_free(&self) -> bool {
        self.acquires_per_s > 0.0
            || self.timeouts_per_s > 0.0
            || self.avg_wait_ms.is_some()
            || self.waiters > 0
    }
}

/// One client's counters of one lock over its window.
#[derive(Debug, Clone)]
struct Window {
    seconds: f64,
    acquired: u64,
    timed_out: u64,
    wait_count: u64,
    wait_sum_s: f64,
}

impl Window {
    fn between(earlier: Option<&RecordedLock>, now: &RecordedLock, seconds: f64) -> Window {
        let zero = RecordedLock::default();
        let earlier = earlier.unwrap_or(&zero);
        Window {
            seconds,
            acquired: now.acquired.saturating_sub(earlier.acquired),
            timed_out: now.timed_out.saturating_sub(earlier.timed_out),
            wait_count: now.wait_count.saturating_sub(earlier.wait_count),
            wait_sum_s: (now.wait_sum_s - earlier.wait_sum_s).max(0.0),
        }
    }
}

/// The last record read of a client, and its windows.
struct Seen {
    at_ms: i64,
    locks: HashMap<String, RecordedLock>,
    windows: HashMap<String, Window>,
}

/// Remembers each client's last record between refreshes.
#[derive(Default)]
pub struct RateTracker {
    seen: HashMap<String, Seen>,
}

impl RateTracker {
    /// The rates per lock name from this refresh's records, read at `now_ms` (epoch ms).
    /// Clients without a `metrics` field add nothing; a name no client reports has no entry
    /// (shown as `-`).
    pub fn update(
        &mut self,
        records: &HashMap<String, ClientRecord>,
        now_ms: i64,
    ) -> HashMap<String, LockRates> {
        let mut seen_now = HashMap::new();
        for record in records.values() {
            let Some(metrics) = &record.metrics else {
                continue;
            };
            let locks: HashMap<String, RecordedLock> = metrics
                .locks
                .iter()
                .map(|lock| (lock.name.clone(), lock.clone()))
                .collect();
            let windows = match self.seen.remove(&record.client_id) {
                // Not rewritten since the last refresh: the same window still describes it.
                Some(seen) if seen.at_ms == metrics.at_ms => seen.windows,
                Some(seen) if seen.at_ms < metrics.at_ms => {
                    let seconds = (metrics.at_ms - seen.at_ms) as f64 / 1000.0;
                    windows(&locks, |name| seen.locks.get(name), seconds)
                }
                // First sight (or a clock that went back): everything since it connected.
                _ => {
                    let since = record.connected_ms.unwrap_or(metrics.at_ms);
                    let until = metrics.at_ms.max(now_ms);
                    let seconds = ((until - since) as f64 / 1000.0).max(0.001);
                    windows(&locks, |_| None, seconds)
                }
            };
            seen_now.insert(
                record.client_id.clone(),
                Seen {
                    at_ms: metrics.at_ms,
                    locks,
                    windows,
                },
            );
        }
        self.seen = seen_now;
        self.sum()
    }

    fn sum(&self) -> HashMap<String, LockRates> {
        struct Sums {
            rates: LockRates,
            wait_count: u64,
            wait_sum_s: f64,
        }
        let mut sums: HashMap<String, Sums> = HashMap::new();
        for seen in self.seen.values() {
            for (name, lock) in &seen.locks {
                let sum = sums.entry(name.clone()).or_insert_with(|| Sums {
                    rates: LockRates {
                        kind: lock.kind.clone(),
                        ..LockRates::default()
                    },
                    wait_count: 0,
                    wait_sum_s: 0.0,
                });
                sum.rates.clients += 1;
                sum.rates.holds += lock.holds;
                sum.rates.waiters += lock.waiters;
                sum.rates.lost += lock.lost;
                if let Some(window) = seen.windows.get(name) {
                    sum.rates.acquires_per_s += window.acquired as f64 / window.seconds;
                    sum.rates.timeouts_per_s += window.timed_out as f64 / window.seconds;
                    sum.wait_count += window.wait_count;
                    sum.wait_sum_s += window.wait_sum_s;
                }
            }
        }
        sums.into_iter()
            .map(|(name, mut sum)| {
                sum.rates.avg_wait_ms =
                    (sum.wait_count > 0).then(|| sum.wait_sum_s * 1000.0 / sum.wait_count as f64);
                (name, sum.rates)
            })
            .collect()
    }
}

fn windows<'a>(
    locks: &HashMap<String, RecordedLock>,
    earlier: impl Fn(&str) -> Option<&'a RecordedLock>,
    seconds: f64,
) -> HashMap<String, Window> {
    locks
        .iter()
        .map(|(name, now)| (name.clone(), Window::between(earlier(name), now, seconds)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client_records::RecordedMetrics;

    fn record(id: &str, at_ms: i64, locks: Vec<RecordedLock>) -> (String, ClientRecord) {
        let record = ClientRecord {
            client_id: id.to_owned(),
            connected_ms: Some(0),
            metrics: Some(RecordedMetrics { at_ms, locks }),
            ..ClientRecord::default()
        };
        (id.to_owned(), record)
    }

    fn counters(acquired: u64, wait_count: u64, wait_sum_s: f64) -> RecordedLock {
        RecordedLock {
            name: "a".into(),
            kind: "lock".into(),
            acquired,
            wait_count,
            wait_sum_s,
            holds: 1,
            ..RecordedLock::default()
        }
    }

    #[test]
    fn rates_are_deltas_over_each_clients_window_summed() {
        let mut tracker = RateTracker::default();
        // First sight: since each client connected (at 0).
        let first = tracker.update(
            &HashMap::from([
                record("x", 10_000, vec![counters(100, 100, 10.0)]),
                record("y", 8_000, vec![counters(40, 40, 4.0)]),
            ]),
            10_000,
        );
        // y's record is 2 s old: its 40 acquires are over the 10 s since it connected.
        assert_eq!(first["a"].acquires_per_s, 10.0 + 4.0);
        assert_eq!(first["a"].avg_wait_ms, Some(100.0));
        assert_eq!(first["a"].clients, 2);
        assert_eq!(first["a"].holds, 2);
        // x rewrote its record 2 s later; y did not: y keeps its window.
        let second = tracker.update(
            &HashMap::from([
                record("x", 12_000, vec![counters(120, 110, 13.0)]),
                record("y", 8_000, vec![counters(40, 40, 4.0)]),
            ]),
            12_000,
        );
        assert_eq!(second["a"].acquires_per_s, 10.0 + 4.0);
        // (3 s + 4 s) / (10 + 40) waits.
        assert!((second["a"].avg_wait_ms.unwrap() - 7000.0 / 50.0).abs() < 1e-9);
        // A client gone: its share gone.
        let third = tracker.update(
            &HashMap::from([record("x", 14_000, vec![counters(120, 110, 13.0)])]),
            14_000,
        );
        assert_eq!(third["a"].acquires_per_s, 0.0);
        assert_eq!(third["a"].avg_wait_ms, None);
        assert!(third["a"].is_active(), "it is held");
        // Redis reads it free: the holds x's record reports do not make it in use; a wait or
        // an acquire in the window does.
        assert!(!third["a"].is_active_while_free());
        let waiting = LockRates {
            waiters: 1,
            ..third["a"].clone()
        };
        assert!(waiting.is_active_while_free());
        assert!(second["a"].is_active_while_free(), "acquired in its window");
    }
}
