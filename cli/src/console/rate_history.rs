//! Each lock's recent rates, for the page's sparklines: at every reading, the rates the clients'
//! records give (`lock_rates`, as `watch` shows them) are appended to the lock's history, the
//! last [`HISTORY_LENGTH`] readings kept. A lock no reading shows any more loses its history;
//! after the refresher slept, every history starts again (a gap is not drawn as a line).

use std::collections::{HashMap, VecDeque};

use serde::Serialize;

use crate::lock_rates::LockRates;

/// Readings kept per lock: a minute at one reading a second.
pub const HISTORY_LENGTH: usize = 60;

/// One lock's last readings, oldest first, one array per measure (compact in the JSON the page
/// receives every second).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RateHistory {
    /// When each reading was made (epoch ms, the console's clock).
    pub unix_ms: VecDeque<i64>,
    pub acquires_per_s: VecDeque<f64>,
    /// The average wait of the acquires that ended in the window; `null` when none did.
    pub avg_wait_ms: VecDeque<Option<f64>>,
    pub timeouts_per_s: VecDeque<f64>,
    /// Leases the clients report lost since the reading before (0 at the first).
    pub lost: VecDeque<u64>,
}

impl RateHistory {
    fn push(&mut self, at_ms: i64, rates: &LockRates, lost_since: u64) {
        self.unix_ms.push_back(at_ms);
        self.acquires_per_s.push_back(rates.acquires_per_s);
        self.avg_wait_ms.push_back(rates.avg_wait_ms);
        self.timeouts_per_s.push_back(rates.timeouts_per_s);
        self.lost.push_back(lost_since);
        if self.unix_ms.len() > HISTORY_LENGTH {
            self.unix_ms.pop_front();
            self.acquires_per_s.pop_front();
            self.avg_wait_ms.pop_front();
            self.timeouts_per_s.pop_front();
            self.lost.pop_front();
        }
    }
}

/// The histories by lock name, and the loss counts of the reading before (the records count
/// losses since each client connected; the history shows the new ones).
#[derive(Default)]
pub struct RateHistories {
    by_name: HashMap<String, (RateHistory, u64)>,
}

impl RateHistories {
    /// Appends one reading, made at `at_ms`, of the locks in `rates` (name, the clients'
    /// rates of it), and returns each one's history. Names not given are forgotten.
    pub fn add<'a>(
        &mut self,
        at_ms: i64,
        rates: impl IntoIterator<Item = (&'a str, &'a LockRates)>,
    ) -> HashMap<String, RateHistory> {
        let mut before = std::mem::take(&mut self.by_name);
        let mut histories = HashMap::new();
        for (name, rates) in rates {
            let (mut history, lost_before) = before
                .remove(name)
                .unwrap_or((RateHistory::default(), rates.lost));
            // A client gone takes its count with it: that is no loss, and no negative one.
            history.push(at_ms, rates, rates.lost.saturating_sub(lost_before));
            histories.insert(name.to_owned(), history.clone());
            self.by_name.insert(name.to_owned(), (history, rates.lost));
        }
        histories
    }

    /// Forgets every history (the readings before a pause are too far apart to join).
    pub fn clear(&mut self) {
        self.by_name.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(acquires_per_s: f64, lost: u64) -> LockRates {
        LockRates {
            acquires_per_s,
            lost,
            ..LockRates::default()
        }
    }

    #[test]
    fn keeps_the_last_readings_and_counts_new_losses() {
        let mut histories = RateHistories::default();
        let mut last = HashMap::new();
        for reading in 0..HISTORY_LENGTH as u64 + 5 {
            let a = rates(reading as f64, reading / 10);
            last = histories.add(reading as i64 * 1000, [("a", &a)]);
        }
        let a = &last["a"];
        assert_eq!(a.acquires_per_s.len(), HISTORY_LENGTH);
        assert_eq!(a.unix_ms.len(), HISTORY_LENGTH);
        assert_eq!(a.acquires_per_s.front(), Some(&5.0), "the oldest dropped");
        assert_eq!(
            a.acquires_per_s.back(),
            Some(&(HISTORY_LENGTH as f64 + 4.0))
        );
        // Losses went up by one at each tenth reading, and only then.
        assert_eq!(a.lost.iter().sum::<u64>(), 6);
        // A name missing from a reading is forgotten; it starts again from one reading.
        histories.add(100_000, []);
        let again = histories.add(101_000, [("a", &rates(1.0, 9))]);
        assert_eq!(again["a"].acquires_per_s.len(), 1);
        assert_eq!(again["a"].lost, [0], "the count before is unknown: no loss");
        // Fewer losses (a client gone): none, not negative.
        let fewer = histories.add(102_000, [("a", &rates(1.0, 3))]);
        assert_eq!(fewer["a"].lost, [0, 0]);
    }
}
