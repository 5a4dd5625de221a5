//! What one refresh of the console reads, and the timeline it keeps: one task reads Redis once
//! a second ([`Refresher`]) and publishes a [`Snapshot`] that the page, the JSON API and every
//! event stream share. It reads only while someone looks: an event stream is open, or a
//! snapshot was asked for within [`IDLE_AFTER`]; otherwise it sleeps until asked.
//!
//! Commands per refresh, whatever the number of locks: with C client records and a budget of
//! B names (`--reads-per-refresh`), at most 2 x 4 SCAN per primary (`key_sweep`: the names,
//! then the records, each a rolling sweep of 4 pages a refresh) + C HMGET (the records, the
//! only place holders are named from) + B EVALSHA (`read_schedule`: the stalest names) + P
//! EVALSHA for the P lock pages open (`lock_page`, at most 20). With K keys on a primary and N names known (at most `--max-locks`), a
//! new lock is shown within 2 x ceil(ceil(K / 500) / 4) + ceil(N / B) refreshes, and each row
//! is at most ceil(N / B) refreshes old (its `seen_ms`). With Redis unreachable, one
//! connection attempt per refresh instead. Beside these, the console's own client keeps its
//! client record as every polylock client does.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use polylock::Client;
use serde::Serialize;
use tokio::sync::{watch, Notify};

use super::clients::{client_views, ClientView};
use super::elections::leader_changes;
use super::key_sweep::{KeySweep, Swept};
use super::lock_page::{LockPage, LockPages, TooManyPages};
use super::primaries::primaries;
use super::rate_history::{RateHistories, RateHistory};
use super::read_schedule::names_to_read;
use crate::client_records::{self, ClientRecord};
use crate::inspect::{Kind, LockState};
use crate::lock_rates::{LockRates, RateTracker};
use crate::lock_scan::{glob_matches, shown_lock, unix_ms};
use polylock_cli_common::error::CliResult;
use polylock_cli_common::raw;

const REFRESH_EVERY: Duration = Duration::from_secs(1);
/// With no event stream open and no snapshot asked for in this long, the refresher sleeps.
const IDLE_AFTER: Duration = Duration::from_secs(10);
/// How long a snapshot request waits for the reading it woke the refresher for.
const WAKE_BOUND: Duration = Duration::from_secs(10);
/// The timeline keeps the newest entries only.
const TIMELINE_LENGTH: usize = 200;
/// A holder gone at a reading whose lease, as last seen, was to run out before that reading
/// ended (give or take this) ran out rather than being released: had it been released, its
/// lease would still have been running.
const LEASE_RAN_OUT_SLACK_MS: i64 = 250;
/// Locks whose sparklines' history a snapshot carries (the busiest, by acquires per second):
/// the others carry their latest rates only, so a snapshot stays about a few hundred KB
/// whatever the number of busy locks.
const HISTORIES_SENT: usize = 100;

/// Everything the page shows, as of one refresh.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// When this snapshot was made (epoch ms, this machine's clock).
    pub unix_ms: i64,
    /// When Redis was last read successfully: the tables are of that reading. `None` before
    /// the first.
    pub read_ms: Option<i64>,
    /// The Redis URL, its password hidden.
    pub redis: String,
    pub pattern: String,
    pub allow_write: bool,
    /// How often it reads while someone looks: a row whose `seen_ms` is older than this was
    /// not read at the last refresh (it waits for its turn in the budget).
    pub refresh_every_ms: u64,
    /// How many readings of Redis succeeded so far.
    pub readings: u64,
    /// Why the last refresh failed (the page's banner); `None` when it worked.
    pub error: Option<String>,
    pub locks: Vec<LockView>,
    /// Names matching the pattern past `--max-locks`, as the last whole sweep found them: not
    /// read.
    pub names_left_out: usize,
    /// One per polylock client record, by name, with what it waits for.
    pub clients: Vec<ClientView>,
    /// Losses, force-unlocks and Redis going away or coming back, oldest first.
    pub timeline: Vec<TimelineEntry>,
}

/// One lock as `inspect --json` shows it, with what the page needs beside.
#[derive(Debug, Clone, Serialize)]
pub struct LockView {
    #[serde(flatten)]
    pub state: LockState,
    /// The kind to show: the stored kind, or for a free lock the kind its clients use it as.
    pub label: String,
    pub held: bool,
    /// When it was read (epoch ms, the console's clock).
    pub seen_ms: i64,
    /// The clients' metrics of it (`watch --json`'s); `null` when no record reports it.
    pub metrics: Option<LockRates>,
    /// `metrics` at each of the last readings (the sparklines); `null` when no record
    /// reports it, or it is not among the busiest locks a snapshot carries the history of.
    pub history: Option<RateHistory>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TimelineEntry {
    pub unix_ms: i64,
    /// `lease-ran-out`, `lost`, `new-leader`, `force-unlock`, `failover`, `redis-error` or
    /// `redis-back`.
    pub kind: &'static str,
    pub lock: Option<String>,
    pub text: String,
}

/// The latest snapshot, for the routes, and the timeline they add actions to.
#[derive(Clone)]
pub struct Readings {
    latest: Arc<watch::Sender<Arc<Snapshot>>>,
    timeline: Arc<Mutex<VecDeque<TimelineEntry>>>,
    demand: Arc<Demand>,
    /// The lock pages open, read at every refresh.
    pub pages: LockPages,
}

/// When someone last asked, and the refresher's wake-up call.
#[derive(Default)]
struct Demand {
    asked_ms: AtomicI64,
    wake: Notify,
}

impl Demand {
    fn ask(&self) {
        self.asked_ms.store(unix_ms(), Ordering::Relaxed);
        // Stored as a permit when the refresher is not asleep yet: no wake-up is lost.
        self.wake.notify_one();
    }

    fn idle(&self, streams_open: usize) -> bool {
        let quiet_ms = unix_ms() - self.asked_ms.load(Ordering::Relaxed);
        streams_open == 0 && quiet_ms > IDLE_AFTER.as_millis() as i64
    }
}

impl Readings {
    /// The latest snapshot; when it is stale (the refresher slept), the next one, waited for
    /// up to [`WAKE_BOUND`].
    pub async fn fresh(&self) -> Arc<Snapshot> {
        let mut next = self.latest.subscribe();
        self.demand.ask();
        let current = next.borrow_and_update().clone();
        if unix_ms() - current.unix_ms <= 2 * REFRESH_EVERY.as_millis() as i64 {
            return current;
        }
        match tokio::time::timeout(WAKE_BOUND, next.changed()).await {
            Ok(Ok(())) => next.borrow().clone(),
            _ => current,
        }
    }

    /// The current snapshot at once, then each new one (the refresher reads while it is open).
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        let receiver = self.latest.subscribe();
        self.demand.ask();
        receiver
    }

    /// `name`'s page as read by a refresh after this call, waited for up to [`WAKE_BOUND`]
    /// (`None` if none came); the page is read at every refresh for a while after.
    pub async fn lock_page(&self, name: &str) -> Result<Option<Arc<LockPage>>, TooManyPages> {
        let mut next = self.latest.subscribe();
        next.borrow_and_update();
        self.pages.ask(name)?;
        self.demand.ask();
        let deadline = tokio::time::Instant::now() + WAKE_BOUND;
        loop {
            // A refresh under way when asked may not read it: wait for one that did.
            if let Some(page) = self.pages.page(name) {
                return Ok(Some(page));
            }
            match tokio::time::timeout_at(deadline, next.changed()).await {
                Ok(Ok(())) => {}
                _ => return Ok(self.pages.page(name)),
            }
        }
    }

    /// Adds an entry to the timeline and publishes it at once (not at the next refresh).
    pub fn record(&self, entry: TimelineEntry) {
        let timeline = push(&self.timeline, entry);
        self.latest.send_modify(|snapshot| {
            Arc::make_mut(snapshot).timeline = timeline;
        });
    }
}

/// Appends `entry`, drops the oldest past [`TIMELINE_LENGTH`], returns the entries.
fn push(timeline: &Mutex<VecDeque<TimelineEntry>>, entry: TimelineEntry) -> Vec<TimelineEntry> {
    // A panic elsewhere while holding it leaves a whole deque: keep using it.
    let mut timeline = timeline.lock().unwrap_or_else(PoisonError::into_inner);
    timeline.push_back(entry);
    while timeline.len() > TIMELINE_LENGTH {
        timeline.pop_front();
    }
    timeline.iter().cloned().collect()
}

/// The last reading of a name the console knows.
struct NameRead {
    /// `None`: no name a lock can have (a name only the clients' metrics know).
    state: Option<LockState>,
    read_ms: i64,
}

/// A successful reading of Redis.
struct Reading {
    read_ms: i64,
    locks: Vec<LockView>,
    names_left_out: usize,
    clients: Vec<ClientView>,
}

/// Reads Redis once a second, reconnecting after any failure, and notes what changed between
/// two readings on the timeline.
pub struct Refresher {
    redis: String,
    key_prefix: Option<String>,
    pattern: String,
    allow_write: bool,
    max_locks: usize,
    reads_per_refresh: usize,
    names: KeySweep,
    client_ids: KeySweep,
    /// The last reading of each name known, the rows are made of.
    reads: BTreeMap<String, NameRead>,
    readings: u64,
    client: Option<Client>,
    tracker: RateTracker,
    histories: RateHistories,
    last: Option<Reading>,
    error: Option<String>,
    timeline: Arc<Mutex<VecDeque<TimelineEntry>>>,
    /// Woken after sleeping: the last reading is too old to tell what happened since.
    resumed: bool,
    /// The deployment's primaries as last told (Cluster, Sentinel): a change is a failover.
    primaries: Option<BTreeSet<String>>,
    pages: LockPages,
}

impl Refresher {
    pub fn new(
        redis: &str,
        key_prefix: Option<String>,
        pattern: &str,
        allow_write: bool,
        max_locks: usize,
        reads_per_refresh: usize,
    ) -> Refresher {
        let pattern = pattern.to_owned();
        Refresher {
            redis: redis.to_owned(),
            key_prefix,
            names: KeySweep::new(
                Swept::Names {
                    pattern: pattern.clone(),
                },
                max_locks,
            ),
            client_ids: KeySweep::new(Swept::ClientIds, usize::MAX),
            pattern,
            allow_write,
            max_locks,
            reads_per_refresh,
            reads: BTreeMap::new(),
            readings: 0,
            client: None,
            tracker: RateTracker::default(),
            histories: RateHistories::default(),
            last: None,
            error: None,
            timeline: Arc::default(),
            resumed: false,
            primaries: None,
            pages: LockPages::default(),
        }
    }

    /// Reads once (so the first page has data), then keeps reading in a task of its own.
    pub async fn start(mut self) -> Readings {
        let first = self.refresh().await;
        let (latest, _) = watch::channel(Arc::new(first));
        let readings = Readings {
            latest: Arc::new(latest),
            timeline: self.timeline.clone(),
            demand: Arc::default(),
            pages: self.pages.clone(),
        };
        readings.demand.ask(); // the first page is about to be opened
        let publish = readings.latest.clone();
        let demand = readings.demand.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(REFRESH_EVERY);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await; // the first tick is now: that reading is made
            loop {
                ticks.tick().await;
                if demand.idle(publish.receiver_count()) {
                    demand.wake.notified().await;
                    self.resumed = true;
                }
                let snapshot = self.refresh().await;
                publish.send_replace(Arc::new(snapshot));
            }
        });
        readings
    }

    async fn refresh(&mut self) -> Snapshot {
        self.note_failover().await;
        match self.read().await {
            Ok(reading) => {
                if self.error.take().is_some() {
                    self.note("redis-back", None, "Redis answers again".to_owned());
                }
                match &self.last {
                    Some(last) if !self.resumed => {
                        for (kind, lock, text) in changes(last, &reading) {
                            self.note(kind, Some(lock), text);
                        }
                    }
                    _ => {}
                }
                self.resumed = false;
                self.readings += 1;
                self.last = Some(reading);
            }
            Err(err) => {
                // Reconnect next time: the connection may be to a server that is gone.
                if let Some(client) = self.client.take() {
                    client.close();
                }
                let text = hide_password(&err.to_string(), &self.redis);
                if self.error.is_none() {
                    self.note("redis-error", None, text.clone());
                }
                self.error = Some(text);
            }
        }
        let timeline = self.timeline.lock().unwrap_or_else(PoisonError::into_inner);
        let last = self.last.as_ref();
        Snapshot {
            unix_ms: unix_ms(),
            read_ms: last.map(|reading| reading.read_ms),
            redis: raw::redact(&self.redis),
            pattern: self.pattern.clone(),
            allow_write: self.allow_write,
            refresh_every_ms: REFRESH_EVERY.as_millis() as u64,
            readings: self.readings,
            error: self.error.clone(),
            locks: last
                .map(|reading| reading.locks.clone())
                .unwrap_or_default(),
            names_left_out: last.map_or(0, |reading| reading.names_left_out),
            clients: last
                .map(|reading| reading.clients.clone())
                .unwrap_or_default(),
            timeline: timeline.iter().cloned().collect(),
        }
    }

    async fn read(&mut self) -> CliResult<Reading> {
        if self.resumed {
            self.histories.clear();
        }
        let client = match &self.client {
            Some(client) => client.clone(),
            None => self
                .client
                .insert(raw::client(&self.redis, self.key_prefix.as_deref()).await?)
                .clone(),
        };
        let records = self.read_records(&client).await;
        self.pages.read(&client, &records).await;
        let mut rates = self.tracker.update(&records, unix_ms());
        self.names.advance(&client).await?;
        let (candidates, active_left_out) = self.candidates(&rates);
        self.reads.retain(|name, _| candidates.contains(name));
        let to_read = names_to_read(
            candidates.iter().map(|name| {
                let read_ms = self.reads.get(name).map(|read| read.read_ms);
                (name.as_str(), read_ms)
            }),
            self.reads_per_refresh,
        );
        for name in to_read {
            let read_ms = unix_ms();
            let state = match client.inspect_without_records(&name).await {
                Ok(info) => Some(LockState::from(info)),
                // A name only the metrics know (e.g. `_other`, the fold of names past the
                // limit) may be no valid lock name.
                Err(_) if !self.names.knows(&name) => None,
                Err(err) => return Err(err.into()),
            };
            if state.as_ref().is_some_and(|state| state.kind == Kind::None) {
                self.names.forget(&name); // gone: a sweep that finds it again brings it back
            }
            self.reads.insert(name, NameRead { state, read_ms });
        }
        let read_ms = unix_ms();
        let mut shown: Vec<_> = self
            .reads
            .iter()
            .filter_map(|(name, read)| {
                let mut state = read.state.clone()?;
                // Named from this refresh's records, whenever the script read it.
                state.attach_records(&records);
                shown_lock(state, rates.remove(name), read.read_ms)
            })
            .collect();
        let mut histories = self.histories.add(
            read_ms,
            shown
                .iter()
                .filter_map(|lock| Some((lock.state.name.as_str(), lock.rates.as_ref()?))),
        );
        keep_the_busiest(&mut histories, &shown);
        let locks: Vec<LockView> = shown
            .drain(..)
            .map(|lock| LockView {
                history: histories.remove(&lock.state.name),
                state: lock.state,
                label: lock.kind,
                held: lock.held,
                seen_ms: lock.read_ms,
                metrics: lock.rates,
            })
            .collect();
        let mut records: Vec<ClientRecord> = records.into_values().collect();
        records.sort_by(|a, b| (&a.name, &a.client_id).cmp(&(&b.name, &b.client_id)));
        let clients = client_views(records, &locks);
        Ok(Reading {
            read_ms,
            locks,
            names_left_out: self.names.left_out() + active_left_out,
            clients,
        })
    }

    /// The client records of the ids the records' sweep knows (one HMGET each), or none (said
    /// once on stderr) when they cannot be read.
    async fn read_records(&mut self, client: &Client) -> HashMap<String, ClientRecord> {
        if let Err(err) = self.client_ids.advance(client).await {
            client_records::warn_unreadable(&err);
        }
        // This console's own client has a record too; it is not one of the clients looked at.
        self.client_ids.forget(client.id());
        let ids: Vec<&str> = self.client_ids.keys().map(String::as_str).collect();
        let records = client_records::read_or_warn(client, Some(ids)).await;
        let gone: Vec<String> = self
            .client_ids
            .keys()
            .filter(|id| !records.contains_key(*id))
            .cloned()
            .collect();
        for id in gone {
            self.client_ids.forget(&id); // closed since the sweep found it
        }
        records
    }

    /// The names the rows are made of: those the sweep knows, then the names only the clients'
    /// metrics know (free locks in use) up to `--max-locks`; with how many of the metrics'
    /// names were left out.
    fn candidates(&self, rates: &HashMap<String, LockRates>) -> (BTreeSet<String>, usize) {
        let mut candidates: BTreeSet<String> = self.names.keys().cloned().collect();
        let mut active: Vec<&String> = rates
            .iter()
            .filter(|(name, rates)| rates.is_active() && glob_matches(&self.pattern, name))
            .map(|(name, _)| name)
            .filter(|name| !candidates.contains(*name))
            .collect();
        active.sort();
        let room = self.max_locks.saturating_sub(candidates.len());
        let left_out = active.len().saturating_sub(room);
        candidates.extend(active.into_iter().take(room).cloned());
        (candidates, left_out)
    }

    /// A `failover` on the timeline when the deployment names other primaries than it did.
    async fn note_failover(&mut self) {
        let Some(now) = primaries(&self.redis).await else {
            return; // a one-server URL, or nobody answered: nothing to compare
        };
        if let Some(before) = self.primaries.as_ref().filter(|before| **before != now) {
            let list = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(", ");
            let text = format!(
                "the deployment's primaries changed: now {}, before {} (a failover, or nodes \
                 added or removed)",
                list(&now),
                list(before)
            );
            self.note("failover", None, text);
        }
        self.primaries = Some(now);
    }

    fn note(&self, kind: &'static str, lock: Option<String>, text: String) {
        push(
            &self.timeline,
            TimelineEntry {
                unix_ms: unix_ms(),
                kind,
                lock,
                text,
            },
        );
    }
}

/// Keeps the histories of the [`HISTORIES_SENT`] busiest locks of `shown` (by acquires per
/// second, then name), so the snapshot sent to each page stays bounded.
fn keep_the_busiest(
    histories: &mut HashMap<String, RateHistory>,
    shown: &[crate::lock_scan::ScannedLock],
) {
    if histories.len() <= HISTORIES_SENT {
        return;
    }
    let mut busiest: Vec<(&str, f64)> = shown
        .iter()
        .filter_map(|lock| {
            Some((
                lock.state.name.as_str(),
                lock.rates.as_ref()?.acquires_per_s,
            ))
        })
        .collect();
    busiest.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let kept: HashSet<&str> = busiest
        .into_iter()
        .take(HISTORIES_SENT)
        .map(|(name, _)| name)
        .collect();
    histories.retain(|name, _| kept.contains(name.as_str()));
}

/// The timeline entries between two readings: a holder gone while its lease was to run out by
/// then (it stopped renewing and the lease ran out: a crash, a pause, a cut connection), and
/// leases the clients' own metrics count as lost.
fn changes(before: &Reading, now: &Reading) -> Vec<(&'static str, String, String)> {
    let now_by_name: HashMap<&str, &LockView> = now
        .locks
        .iter()
        .map(|lock| (lock.state.name.as_str(), lock))
        .collect();
    let mut found = Vec::new();
    for lock in before.locks.iter().filter(|lock| lock.held) {
        let name = &lock.state.name;
        let still: HashSet<&str> = now_by_name
            .get(name.as_str())
            .map(|now| now.state.holders.iter().map(|h| h.owner.as_str()).collect())
            .unwrap_or_default();
        let Some(left) = lock.state.remaining_lease_ms else {
            continue; // no expiry: it cannot run out
        };
        let elapsed = now.read_ms - lock.seen_ms;
        if left as i64 > elapsed + LEASE_RAN_OUT_SLACK_MS {
            continue; // gone with time to spare: released (or force-unlocked)
        }
        for holder in &lock.state.holders {
            if still.contains(holder.owner.as_str()) {
                continue;
            }
            let who = holder.client.text.as_deref().unwrap_or(&holder.owner);
            found.push((
                "lease-ran-out",
                name.clone(),
                format!(
                    "the lease of '{name}' held by {who} ran out without a release \
                     ({left} ms left {elapsed} ms earlier): its holder stopped renewing"
                ),
            ));
        }
    }
    found.extend(leader_changes(&before.locks, &now.locks));
    let lost_before: HashMap<&str, u64> = before
        .locks
        .iter()
        .filter_map(|lock| Some((lock.state.name.as_str(), lock.metrics.as_ref()?.lost)))
        .collect();
    for lock in &now.locks {
        let name = &lock.state.name;
        let (Some(metrics), Some(&lost)) = (&lock.metrics, lost_before.get(name.as_str())) else {
            continue;
        };
        if metrics.lost > lost {
            found.push((
                "lost",
                name.clone(),
                format!(
                    "the clients of '{name}' report {} more lease(s) lost (expired, taken or \
                     connection gone)",
                    metrics.lost - lost
                ),
            ));
        }
    }
    found
}

/// `text` without the URL's password, should a message quote the URL.
pub fn hide_password(text: &str, url: &str) -> String {
    let authority = url.split_once("://").map_or("", |(_, rest)| rest);
    let password = authority
        .rsplit_once('@')
        .and_then(|(user_info, _)| user_info.split_once(':'))
        .map(|(_, password)| password);
    match password {
        Some(password) if !password.is_empty() => text.replace(password, "***"),
        _ => text.to_owned(),
    }
}
