//! The keys a console knows of, found by a rolling sweep of the keyspace: at most
//! [`PAGES_PER_REFRESH`] `SCAN` pages per refresh (one call per primary each:
//! `Client::scan_names_page`), the cursor kept between refreshes, rather than a whole sweep at
//! each. A key found stays known until a whole sweep ends without finding it (`SCAN` returns
//! every key that is there throughout a sweep), or until the caller forgets it (read, and
//! gone).

use std::collections::{BTreeMap, HashSet};

use polylock::{Client, ScanSweep};

/// `SCAN` calls (`COUNT 500`) per refresh and per primary, for each sweep: a sweep of K keys
/// takes about ceil(K / 500 / 4) refreshes.
pub const PAGES_PER_REFRESH: usize = 4;

/// What is swept.
pub enum Swept {
    /// The names matching a pattern.
    Names { pattern: String },
    /// The ids of the client records.
    ClientIds,
}

/// One rolling sweep and the keys it knows.
pub struct KeySweep {
    swept: Swept,
    sweep: ScanSweep,
    /// Each key known, with the number of the sweep that last found it.
    found_in: BTreeMap<String, u64>,
    sweep_number: u64,
    /// The most keys known; those found past it are counted, not kept.
    limit: usize,
    left_out_now: HashSet<String>,
    /// Keys the last whole sweep found past `limit`.
    left_out: usize,
}

impl KeySweep {
    pub fn new(swept: Swept, limit: usize) -> KeySweep {
        KeySweep {
            swept,
            sweep: ScanSweep::default(),
            found_in: BTreeMap::new(),
            sweep_number: 0,
            limit,
            left_out_now: HashSet::new(),
            left_out: 0,
        }
    }

    /// Sweeps on by up to [`PAGES_PER_REFRESH`] pages (fewer when the sweep ends first).
    pub async fn advance(&mut self, client: &Client) -> polylock::Result<()> {
        for _ in 0..PAGES_PER_REFRESH {
            let page = match &self.swept {
                Swept::Names { pattern } => client.scan_names_page(pattern, &mut self.sweep).await,
                Swept::ClientIds => client.scan_client_ids_page(&mut self.sweep).await,
            };
            let page = match page {
                Ok(page) => page,
                Err(err) => {
                    // Start again at the next refresh: a cursor may be of a node gone.
                    self.sweep = ScanSweep::default();
                    return Err(err);
                }
            };
            self.found(page);
            if self.sweep.is_through() {
                self.end_sweep();
                break;
            }
        }
        Ok(())
    }

    fn found(&mut self, page: Vec<String>) {
        for key in page {
            if let Some(sweep) = self.found_in.get_mut(&key) {
                *sweep = self.sweep_number;
            } else if self.found_in.len() < self.limit {
                self.found_in.insert(key, self.sweep_number);
            } else {
                self.left_out_now.insert(key);
            }
        }
    }

    /// A whole sweep ended: the keys it did not find are gone.
    fn end_sweep(&mut self) {
        let this_sweep = self.sweep_number;
        self.found_in.retain(|_, sweep| *sweep == this_sweep);
        self.left_out = std::mem::take(&mut self.left_out_now).len();
        self.sweep_number += 1;
    }

    /// The keys known, in order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.found_in.keys()
    }

    pub fn knows(&self, key: &str) -> bool {
        self.found_in.contains_key(key)
    }

    /// Forgets `key` (read and found gone); a sweep that finds it again brings it back.
    pub fn forget(&mut self, key: &str) {
        self.found_in.remove(key);
    }

    /// Keys the last whole sweep found past the limit.
    pub fn left_out(&self) -> usize {
        self.left_out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_a_whole_sweep_misses_is_dropped_and_those_past_the_limit_counted() {
        let mut sweep = KeySweep::new(Swept::ClientIds, 2);
        sweep.found(vec!["a".into(), "b".into()]);
        sweep.found(vec!["c".into(), "a".into()]);
        sweep.end_sweep();
        assert_eq!(sweep.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(sweep.left_out(), 1, "c, past the limit");
        // The next sweep finds b only: a goes when it ends, not before.
        sweep.found(vec!["b".into()]);
        assert!(sweep.knows("a"));
        sweep.end_sweep();
        assert_eq!(sweep.keys().collect::<Vec<_>>(), ["b"]);
        assert_eq!(sweep.left_out(), 0);
        sweep.forget("b");
        assert!(!sweep.knows("b"));
    }
}
