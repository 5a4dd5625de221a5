//! A lock's page (`#/lock/<name>` in the browser, `GET /api/lock?name=` and
//! `GET /api/lock/events?name=`): while someone has it open, every refresh reads that name,
//! whatever the pattern and `--max-locks`, and keeps what the page shows beside the lock's
//! state: the holds seen while open with their durations, the queue at each of its last
//! orders (so a reader sees waiters move up), an election's terms, and the wait histogram the
//! clients' records give for the name.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use polylock::metrics::BUCKET_BOUNDS_SECONDS;
use polylock::Client;
use serde::Serialize;

use crate::client_records::ClientRecord;
use crate::inspect::{LockState, OwnerClient};
use crate::lock_scan::unix_ms;

/// The most pages read at each refresh: each costs one inspection per refresh.
pub const MAX_OPEN_PAGES: usize = 20;
/// A page asked for by `GET /api/lock` (no stream open) is read for this long after.
const READ_AFTER_ASKED: Duration = Duration::from_secs(10);
/// Holds kept per page, the newest (those still held are never dropped).
const HOLDS_KEPT: usize = 50;
/// Orders of the queue kept per page, the newest.
const QUEUE_ORDERS_KEPT: usize = 10;
/// Terms kept per election's page, the newest.
const TERMS_KEPT: usize = 50;

/// What a lock's page shows, as of the refresh that read it last.
#[derive(Debug, Clone, Serialize)]
pub struct LockPage {
    pub name: String,
    /// When the name was last read (epoch ms, the console's clock); `None` before.
    pub read_ms: Option<i64>,
    /// Why the last reading of the name failed; `None` when it worked.
    pub error: Option<String>,
    /// False when nothing is kept at the name: no lock, nothing waiting, no count, no election.
    pub found: bool,
    /// The name as `inspect --json` shows it.
    pub state: Option<LockState>,
    /// The holds seen while the page was open, oldest first.
    pub holds: Vec<HoldSeen>,
    /// The queue (a fair queue, a FIFO line, a read-write lock's waiting writers) at each of
    /// its last orders, oldest first: a new entry each time the order changed.
    pub queue_orders: Vec<QueueOrder>,
    /// The clients' waits for the name, summed from their records; `None` when no record
    /// reports it.
    pub wait_histogram: Option<WaitHistogram>,
    /// An election's leaders seen while the page was open, oldest first: one per term.
    pub terms: Vec<TermSeen>,
}

/// A hold seen while the page was open.
#[derive(Debug, Clone, Serialize)]
pub struct HoldSeen {
    pub owner: String,
    /// A read-write lock's side (`read` or `write`).
    pub mode: Option<&'static str>,
    #[serde(flatten)]
    pub client: OwnerClient,
    /// When it began (epoch ms): from the holder's client record when it names the hold, else
    /// the first reading that saw it.
    pub start_ms: i64,
    /// The first reading that saw it gone; `None` while held.
    pub end_ms: Option<i64>,
    /// How long it was held (while held: until the last reading).
    pub duration_ms: i64,
}

/// The queue in one order, from the first to the last reading that saw it so.
#[derive(Debug, Clone, Serialize)]
pub struct QueueOrder {
    pub since_ms: i64,
    pub until_ms: i64,
    /// Head first.
    pub waiters: Vec<QueuedParty>,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueuedParty {
    pub owner: String,
    #[serde(flatten)]
    pub client: OwnerClient,
}

/// The clients' wait histogram of one name: per bucket of the core's bounds, then the longer
/// waits; counted since each client connected.
#[derive(Debug, Clone, Serialize)]
pub struct WaitHistogram {
    /// The upper bound of each bucket (ms, inclusive); one count more than bounds.
    pub bounds_ms: Vec<f64>,
    pub counts: Vec<u64>,
    /// Waits counted, and their sum (ms).
    pub count: u64,
    pub sum_ms: f64,
    /// Clients whose records report the name.
    pub clients: usize,
}

/// An election's leader in one term.
#[derive(Debug, Clone, Serialize)]
pub struct TermSeen {
    pub term: i64,
    /// The first reading that saw it.
    pub seen_ms: i64,
    pub owner: String,
    pub value: String,
    #[serde(flatten)]
    pub client: OwnerClient,
}

/// The pages open, shared by the routes (which open them) and the refresher (which reads them).
#[derive(Clone, Default)]
pub struct LockPages {
    open: Arc<Mutex<HashMap<String, OpenPage>>>,
}

#[derive(Default)]
struct OpenPage {
    /// Event streams of this page open now.
    viewers: usize,
    /// When `GET /api/lock` last asked for it (epoch ms).
    asked_ms: i64,
    page: Option<Arc<LockPage>>,
    holds: VecDeque<HoldSeen>,
    queue_orders: VecDeque<QueueOrder>,
    terms: VecDeque<TermSeen>,
}

/// An event stream's hold on a page: read at every refresh until dropped.
pub struct Viewer {
    pages: LockPages,
    name: String,
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let mut open = self.pages.lock();
        if let Some(page) = open.get_mut(&self.name) {
            page.viewers = page.viewers.saturating_sub(1);
        }
    }
}

/// Too many pages open at once (each is read every refresh).
#[derive(Debug)]
pub struct TooManyPages;

impl LockPages {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, OpenPage>> {
        // A panic elsewhere while holding it leaves a whole map: keep using it.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens `name`'s page for an event stream, until the [`Viewer`] is dropped.
    pub fn view(&self, name: &str) -> Result<Viewer, TooManyPages> {
        let mut open = self.lock();
        forget_unwatched(&mut open);
        if !open.contains_key(name) && open.len() >= MAX_OPEN_PAGES {
            return Err(TooManyPages);
        }
        open.entry(name.to_owned()).or_default().viewers += 1;
        Ok(Viewer {
            pages: self.clone(),
            name: name.to_owned(),
        })
    }

    /// Marks `name`'s page asked for (`GET /api/lock`): read for [`READ_AFTER_ASKED`].
    pub fn ask(&self, name: &str) -> Result<(), TooManyPages> {
        let mut open = self.lock();
        forget_unwatched(&mut open);
        if !open.contains_key(name) && open.len() >= MAX_OPEN_PAGES {
            return Err(TooManyPages);
        }
        open.entry(name.to_owned()).or_default().asked_ms = unix_ms();
        Ok(())
    }

    /// `name`'s page as last read; `None` before its first reading.
    pub fn page(&self, name: &str) -> Option<Arc<LockPage>> {
        self.lock().get(name)?.page.clone()
    }

    /// Reads every open page's name (one inspection each), its holders and waiters named from
    /// `records`, the records the refresh read.
    pub async fn read(&self, client: &Client, records: &HashMap<String, ClientRecord>) {
        let names: Vec<String> = {
            let mut open = self.lock();
            forget_unwatched(&mut open);
            open.keys().cloned().collect()
        };
        for name in names {
            let read_ms = unix_ms();
            // Named from the refresh's records: no record read of its own.
            let reading = client.inspect_without_records(&name).await.map(|info| {
                let mut state = LockState::from(info);
                state.attach_records(records);
                state
            });
            let mut open = self.lock();
            let Some(page) = open.get_mut(&name) else {
                continue; // closed meanwhile
            };
            page.update(
                &name,
                read_ms,
                reading.map_err(|err| err.to_string()),
                records,
            );
        }
    }
}

/// Drops the pages no stream shows and nobody asked for lately.
fn forget_unwatched(open: &mut HashMap<String, OpenPage>) {
    let now = unix_ms();
    open.retain(|_, page| {
        page.viewers > 0 || now - page.asked_ms <= READ_AFTER_ASKED.as_millis() as i64
    });
}

impl OpenPage {
    fn update(
        &mut self,
        name: &str,
        read_ms: i64,
        reading: Result<LockState, String>,
        records: &HashMap<String, ClientRecord>,
    ) {
        let state = match reading {
            Ok(state) => state,
            Err(error) => {
                let mut page = self.page.as_deref().cloned().unwrap_or_else(|| empty(name));
                page.error = Some(error);
                self.page = Some(Arc::new(page));
                return;
            }
        };
        self.note_holds(&state, read_ms);
        self.note_queue(&state, read_ms);
        self.note_term(&state, read_ms);
        let found = state.kind != crate::inspect::Kind::None || !state.queue.is_empty();
        self.page = Some(Arc::new(LockPage {
            name: name.to_owned(),
            read_ms: Some(read_ms),
            error: None,
            found,
            holds: self.holds.iter().cloned().collect(),
            queue_orders: self.queue_orders.iter().cloned().collect(),
            wait_histogram: wait_histogram(name, records),
            terms: self.terms.iter().cloned().collect(),
            state: Some(state),
        }));
    }

    /// Ends the holds gone, grows the ones still held, starts the new ones.
    fn note_holds(&mut self, state: &LockState, read_ms: i64) {
        let same = |seen: &HoldSeen, owner: &str, mode: Option<&str>| {
            seen.end_ms.is_none() && seen.owner == owner && seen.mode == mode
        };
        for seen in self.holds.iter_mut().filter(|seen| seen.end_ms.is_none()) {
            let still = state
                .holders
                .iter()
                .any(|holder| holder.owner == seen.owner && holder.mode == seen.mode);
            if !still {
                seen.end_ms = Some(read_ms);
                seen.duration_ms = read_ms - seen.start_ms;
            }
        }
        for holder in &state.holders {
            // The record's start, once it lists the hold (about a second after it began).
            let recorded_start = holder.held_for_ms.map(|held| read_ms - held as i64);
            match self
                .holds
                .iter_mut()
                .find(|seen| same(seen, &holder.owner, holder.mode))
            {
                Some(seen) => {
                    if let Some(start) = recorded_start {
                        seen.start_ms = seen.start_ms.min(start);
                    }
                    seen.client = holder.client.clone();
                    seen.duration_ms = read_ms - seen.start_ms;
                }
                None => {
                    let start_ms = recorded_start.unwrap_or(read_ms);
                    self.holds.push_back(HoldSeen {
                        owner: holder.owner.clone(),
                        mode: holder.mode,
                        client: holder.client.clone(),
                        start_ms,
                        end_ms: None,
                        duration_ms: read_ms - start_ms,
                    });
                }
            }
        }
        while self.holds.len() > HOLDS_KEPT {
            match self.holds.iter().position(|seen| seen.end_ms.is_some()) {
                Some(oldest_ended) => {
                    self.holds.remove(oldest_ended);
                }
                None => break,
            }
        }
    }

    /// A new order when the queue's differs from the last one, else the last one lasts.
    fn note_queue(&mut self, state: &LockState, read_ms: i64) {
        let line = if state.queue.is_empty() {
            &state.waiting_writers
        } else {
            &state.queue
        };
        let waiters: Vec<QueuedParty> = line
            .iter()
            .map(|waiter| QueuedParty {
                owner: waiter.owner.clone(),
                client: waiter.client.clone(),
            })
            .collect();
        let owners = |waiters: &[QueuedParty]| -> Vec<String> {
            waiters.iter().map(|party| party.owner.clone()).collect()
        };
        match self.queue_orders.back_mut() {
            Some(last) if owners(&last.waiters) == owners(&waiters) => {
                last.until_ms = read_ms;
                last.waiters = waiters; // the same order, its names as recorded now
            }
            // An empty queue from the start is no order worth a line.
            None if waiters.is_empty() => {}
            _ => self.queue_orders.push_back(QueueOrder {
                since_ms: read_ms,
                until_ms: read_ms,
                waiters,
            }),
        }
        while self.queue_orders.len() > QUEUE_ORDERS_KEPT {
            self.queue_orders.pop_front();
        }
    }

    /// An election's new term, when the leader is one not seen before.
    fn note_term(&mut self, state: &LockState, read_ms: i64) {
        let Some(leader) = &state.leader else {
            return;
        };
        match self.terms.back_mut() {
            Some(last) if last.term == leader.term && last.owner == leader.owner => {
                last.value = leader.value.clone(); // proclaimed anew
                last.client = leader.client.clone();
            }
            _ => self.terms.push_back(TermSeen {
                term: leader.term,
                seen_ms: read_ms,
                owner: leader.owner.clone(),
                value: leader.value.clone(),
                client: leader.client.clone(),
            }),
        }
        while self.terms.len() > TERMS_KEPT {
            self.terms.pop_front();
        }
    }
}

/// A page before any reading of its name.
fn empty(name: &str) -> LockPage {
    LockPage {
        name: name.to_owned(),
        read_ms: None,
        error: None,
        found: false,
        state: None,
        holds: Vec::new(),
        queue_orders: Vec::new(),
        wait_histogram: None,
        terms: Vec::new(),
    }
}

/// The wait histograms the clients' records report for `name`, summed (a record in another
/// bucket layout, from another version, is left out).
fn wait_histogram(name: &str, records: &HashMap<String, ClientRecord>) -> Option<WaitHistogram> {
    let buckets = BUCKET_BOUNDS_SECONDS.len() + 1;
    let mut histogram = WaitHistogram {
        bounds_ms: BUCKET_BOUNDS_SECONDS.iter().map(|s| s * 1000.0).collect(),
        counts: vec![0; buckets],
        count: 0,
        sum_ms: 0.0,
        clients: 0,
    };
    let reported = records
        .values()
        .filter_map(|record| record.metrics.as_ref())
        .flat_map(|metrics| &metrics.locks)
        .filter(|lock| lock.name == name && lock.wait_buckets.len() == buckets);
    for lock in reported {
        for (sum, count) in histogram.counts.iter_mut().zip(&lock.wait_buckets) {
            *sum += count;
        }
        histogram.count += lock.wait_count;
        histogram.sum_ms += lock.wait_sum_s * 1000.0;
        histogram.clients += 1;
    }
    (histogram.clients > 0).then_some(histogram)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client_records::{RecordedLock, RecordedMetrics};

    #[test]
    fn the_clients_wait_histograms_are_summed() {
        let buckets = BUCKET_BOUNDS_SECONDS.len() + 1;
        let record = |id: &str, first: u64| ClientRecord {
            client_id: id.into(),
            metrics: Some(RecordedMetrics {
                at_ms: 0,
                locks: vec![RecordedLock {
                    name: "a".into(),
                    wait_count: first + 1,
                    wait_sum_s: 0.5,
                    wait_buckets: {
                        let mut counts = vec![0; buckets];
                        counts[0] = first;
                        counts[buckets - 1] = 1;
                        counts
                    },
                    ..RecordedLock::default()
                }],
            }),
            ..ClientRecord::default()
        };
        let records = HashMap::from([("x".into(), record("x", 2)), ("y".into(), record("y", 3))]);
        let histogram = wait_histogram("a", &records).unwrap();
        assert_eq!(histogram.counts[0], 5);
        assert_eq!(histogram.counts[buckets - 1], 2);
        assert_eq!((histogram.count, histogram.clients), (7, 2));
        assert_eq!(histogram.sum_ms, 1000.0);
        assert!(wait_histogram("b", &records).is_none());
    }
}
