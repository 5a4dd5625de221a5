//! The client's one upkeep task: renews every watchdog-leased hold (up to [`BATCH`] per script
//! call, every third of the lease), reports a fixed lease that ran out while held, and checks
//! every hold at once when asked (after a reconnect). One task per client whatever the number of
//! holds: memory follows the holds of now, never the acquisitions of the past. On a cluster, one
//! script call renews holds of one hash slot only (a script's keys must share a slot).
//!
//! Every hold has a deadline: the send time of the last request whose success Redis confirmed
//! (the acquisition, or a renewal) + the lease, the earliest moment its key can expire. The hold
//! is reported lost at that moment unless a newer confirmation came, even while a renewal is in
//! flight (it may wait on a silent network up to the response timeout, longer than what is left
//! of a lease): after it, another client may hold the lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use tokio::sync::Notify;

use redis::cluster_routing::Slot;

use crate::connection::{Connection, Publish, ReplicaSync};
use crate::foundation::error::Error;
use crate::foundation::maps::{remove_shrinking, Map};
use crate::kinds::script::LockScript;
use crate::kinds::Renewal;
use crate::metrics::{LockStats, LostReason};

/// Holds renewed (or checked) by one script call.
pub(crate) const BATCH: usize = 100;

/// What keeps a hold alive, or tells when it ends.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Upkeep {
    /// Renewed by the watchdog; the key lives until `last_renewed` (the send time of the last
    /// confirmed acquisition or renewal) + the watchdog lease.
    Renew { last_renewed: Instant },
    /// A fixed lease that ends at `at` (reported lost then, if still held).
    Expire { at: Instant, lease: Duration },
}

/// A hold the client tracks (a handle's engine): what the upkeep task renews for it, and whom
/// it tells when the hold is found lost. A trait, so that the task and the client's state sit
/// below the engine that implements it.
pub(crate) trait TrackedHold: Send + Sync {
    /// Identifies the handle in the client's registries.
    fn id(&self) -> u64;
    fn name(&self) -> &str;
    /// How messages name it: its kind's noun and its name (`semaphore 'permits'`), the name as
    /// the user gave it (without the client's key prefix).
    fn described(&self) -> String;
    /// What the watchdog sends to keep this hold alive.
    fn renewal(&self) -> Renewal;
    /// Where its renewals are counted.
    fn stats(&self) -> Arc<LockStats>;
    /// Reports the hold lost (at most once; nothing when it is not held), for `reason`
    /// (`None`: the client was closed).
    fn mark_lost(&self, error: Error, reason: Option<LostReason>);
    /// The kind's name (`lock`, `fair_lock`, ...), as the metrics and the client record call it.
    fn kind_name(&self) -> &'static str;
    /// When the current hold began (wall clock); `None` when nothing is held.
    fn held_since(&self) -> Option<std::time::SystemTime>;
}

struct Entry {
    /// Tells this registration from a later one of the same handle: a reply about an older
    /// one (sent before a release and a new acquisition) must not touch the newer.
    generation: u64,
    renewal: Renewal,
    upkeep: Upkeep,
    /// A release is under way: a "gone" reply may be that release, and nothing is renewed.
    paused: bool,
    lock: Weak<dyn TrackedHold>,
    stats: Arc<LockStats>,
}

/// A hold to renew or check: its id, the generation of its registration, what to send, and
/// where its renewals are counted.
type Due = (u64, u64, Renewal, Arc<LockStats>);

pub(crate) struct Scheduler {
    entries: Mutex<Map<u64, Entry>>,
    /// The watchdog lease.
    lease: Duration,
    wake: Notify,
    /// When the task wakes next unless woken (set under the entries' lock as it goes to
    /// sleep, or, during a renewal round, to the earliest deadline): a change that needs it no
    /// earlier does not wake it, so an acquisition or a release costs the task no wake-up (a
    /// cross-thread one) in the common case.
    wakes_at: Mutex<Option<Instant>>,
    /// A renewal due before the usual period (a hold granted for a short while).
    renew_by: Mutex<Option<Instant>>,
    check_requested: AtomicBool,
    stopped: AtomicBool,
    generations: std::sync::atomic::AtomicU64,
    publish: Publish,
    replica_sync: Option<Arc<ReplicaSync>>,
}

impl Scheduler {
    /// Starts the upkeep task on the current runtime.
    pub(crate) fn start(
        connection: Connection,
        lease: Duration,
        publish: Publish,
        replica_sync: Option<Arc<ReplicaSync>>,
    ) -> Arc<Scheduler> {
        let scheduler = Arc::new(Scheduler {
            entries: Mutex::new(Map::default()),
            lease,
            wake: Notify::new(),
            wakes_at: Mutex::new(None),
            renew_by: Mutex::new(None),
            check_requested: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            generations: std::sync::atomic::AtomicU64::new(0),
            publish,
            replica_sync,
        });
        tokio::spawn(run(scheduler.clone(), connection));
        scheduler
    }

    fn entries(&self) -> MutexGuard<'_, Map<u64, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts (or replaces) the upkeep of hold `id`.
    pub(crate) fn track(
        &self,
        id: u64,
        renewal: Renewal,
        upkeep: Upkeep,
        lock: Weak<dyn TrackedHold>,
        stats: Arc<LockStats>,
    ) {
        let end = self.end_of(upkeep);
        let entry = Entry {
            generation: self.generations.fetch_add(1, Ordering::Relaxed),
            renewal,
            upkeep,
            paused: false,
            lock,
            stats,
        };
        self.entries().insert(id, entry);
        self.wake_by(end);
    }

    /// Wakes the task unless it wakes by `at` anyway. A watchdog hold's lease ends after the
    /// next periodic renewal, which the task always wakes for: tracking one never wakes it.
    fn wake_by(&self, at: Instant) {
        let wakes_at = *self.wakes_at.lock().unwrap_or_else(|p| p.into_inner());
        if wakes_at.is_none_or(|wakes_at| at < wakes_at) {
            self.wake.notify_one();
        }
    }

    /// Renews the watchdog's holds by `at` at the latest (a hold just granted for less than
    /// the watchdog lease).
    pub(crate) fn renew_by(&self, at: Instant) {
        // Under the entries' lock, as `plan_wake` reads it: see there.
        let entries = self.entries();
        let mut renew_by = self.renew_by.lock().unwrap_or_else(|p| p.into_inner());
        *renew_by = Some(renew_by.map_or(at, |earlier| earlier.min(at)));
        drop(renew_by);
        drop(entries);
        self.wake_by(at);
    }

    /// The renewal asked for by [`Scheduler::renew_by`], if any.
    fn early_renewal(&self) -> Option<Instant> {
        *self.renew_by.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn untrack(&self, id: u64) {
        remove_shrinking(&mut self.entries(), &id);
    }

    /// A paused hold is not renewed (the task may wake for it in vain), but its deadline still
    /// counts; one resumed may be due before the task wakes.
    pub(crate) fn pause(&self, id: u64, paused: bool) {
        let mut entries = self.entries();
        let Some(entry) = entries.get_mut(&id) else {
            return;
        };
        entry.paused = paused;
        let end = self.end_of(entry.upkeep);
        drop(entries);
        if !paused {
            self.wake_by(end);
        }
    }

    /// When hold `id`'s key expires unless renewed.
    pub(crate) fn horizon(&self, id: u64) -> Option<Instant> {
        self.entries().get(&id).map(|entry| match entry.upkeep {
            Upkeep::Renew { last_renewed } => last_renewed + self.lease,
            Upkeep::Expire { at, .. } => at,
        })
    }

    /// Checks every hold now (and renews the watchdog's), e.g. after a reconnect.
    pub(crate) fn check_now(&self) {
        self.check_requested.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Ends the task; nothing is renewed any more.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.entries().clear();
        self.wake.notify_one();
    }

    /// The room the hold table keeps (entries it can hold without growing).
    #[cfg(test)]
    pub(crate) fn table_room(&self) -> usize {
        self.entries().capacity()
    }

    /// Holds the watchdog renews now.
    pub(crate) fn renewed(&self) -> usize {
        self.entries()
            .values()
            .filter(|entry| matches!(entry.upkeep, Upkeep::Renew { .. }) && !entry.paused)
            .count()
    }

    fn end_of(&self, upkeep: Upkeep) -> Instant {
        match upkeep {
            Upkeep::Renew { last_renewed } => last_renewed + self.lease,
            Upkeep::Expire { at, .. } => at,
        }
    }

    /// When the task wakes next: at `next_renewal` (brought forward to an early renewal
    /// asked for), or earlier for a lease that ends before. Planned and recorded under the
    /// entries' lock, so a hold tracked (or an early renewal asked for) after this sees the
    /// time, and one before is counted in it.
    fn plan_wake(&self, next_renewal: &mut Instant) -> Instant {
        let entries = self.entries();
        if let Some(early) = self.early_renewal() {
            *next_renewal = (*next_renewal).min(early);
        }
        let wake_at = self
            .earliest_end(&entries)
            .map_or(*next_renewal, |end| end.min(*next_renewal));
        *self.wakes_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(wake_at);
        wake_at
    }

    /// When the task must wake during a renewal round: at the earliest deadline (none without
    /// holds), recorded as [`Scheduler::plan_wake`] does.
    fn plan_deadline(&self) -> Option<Instant> {
        let entries = self.entries();
        let deadline = self.earliest_end(&entries);
        *self.wakes_at.lock().unwrap_or_else(|p| p.into_inner()) = deadline;
        deadline
    }

    /// The earliest deadline ahead. A paused hold's deadline counts until it passes (then its
    /// release, or the upkeep resumed after it, settles it: no wake-up in a loop meanwhile).
    fn earliest_end(&self, entries: &Map<u64, Entry>) -> Option<Instant> {
        let now = Instant::now();
        entries
            .values()
            .filter_map(|entry| {
                let end = self.end_of(entry.upkeep);
                (!entry.paused || end > now).then_some(end)
            })
            .min()
    }

    /// Runs a renewal round ([`Scheduler::renew`]), reporting every hold whose deadline passes
    /// meanwhile at that deadline, whatever the round waits for. `None` when the task was
    /// stopped.
    async fn round(&self, connection: &mut Connection, check_all: bool) -> Option<bool> {
        let round = self.renew(connection, check_all);
        tokio::pin!(round);
        loop {
            let deadline = self.plan_deadline();
            let passed = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                reachable = &mut round => return Some(reachable),
                _ = passed => self.expire_due(Instant::now()),
                // A hold with an earlier deadline, a check asked for, or the end.
                _ = self.wake.notified() => {
                    if self.stopped.load(Ordering::Acquire) {
                        return None;
                    }
                }
            }
        }
    }

    /// Reports every hold whose lease has ended without renewal.
    fn expire_due(&self, now: Instant) {
        let due: Vec<(u64, u64, bool, String, LostReason)> = self
            .entries()
            .iter()
            .filter(|(_, entry)| self.end_of(entry.upkeep) <= now)
            .map(|(id, entry)| {
                // A fixed lease ran out; a watchdog lease ended because no renewal got through.
                let reason = match entry.upkeep {
                    Upkeep::Expire { .. } => LostReason::Expired,
                    Upkeep::Renew { .. } => LostReason::Connection,
                };
                let cause = match entry.upkeep {
                    Upkeep::Expire { lease, .. } => {
                        format!("its fixed lease of {lease:?} ran out while held")
                    }
                    Upkeep::Renew { .. } => format!(
                        "no renewal was confirmed by Redis within its lease of {:?}, so it may \
                         have expired",
                        self.lease
                    ),
                };
                (*id, entry.generation, entry.paused, cause, reason)
            })
            .collect();
        for (id, generation, paused, cause, reason) in due {
            if paused {
                self.lost_while_releasing(id, generation, &cause, reason);
            } else {
                self.declare_lost(id, generation, &cause, reason);
            }
        }
    }

    /// The deadline of a hold passed while one of its levels is being released: the levels
    /// left (if any) are lost now. The entry stays for the release to settle: a failed one
    /// gives its level back and resumes the upkeep, which then reports it.
    fn lost_while_releasing(&self, id: u64, generation: u64, cause: &str, reason: LostReason) {
        let lock = self
            .entries()
            .get(&id)
            .filter(|entry| entry.generation == generation)
            .and_then(|entry| entry.lock.upgrade());
        if let Some(lock) = lock {
            lock.mark_lost(lost(&*lock, cause), Some(reason));
        }
    }

    fn declare_lost(&self, id: u64, generation: u64, cause: &str, reason: LostReason) {
        let lock = {
            let mut entries = self.entries();
            match entries.get(&id) {
                // A release under way: its own answer tells whether the hold was lost.
                Some(entry) if !entry.paused && entry.generation == generation => {
                    remove_shrinking(&mut entries, &id).map(|entry| entry.lock)
                }
                _ => None,
            }
        };
        if let Some(lock) = lock.and_then(|weak| weak.upgrade()) {
            lock.mark_lost(lost(&*lock, cause), Some(reason));
        }
    }

    /// Renews the watchdog's holds, and with `check_all` checks the fixed ones too. False when
    /// Redis could not be reached.
    async fn renew(&self, connection: &mut Connection, check_all: bool) -> bool {
        // (script, renew?, slot) -> holds; a check sends lease 0 (the script then only looks).
        let mut groups: HashMap<(usize, bool, Slot), Vec<Due>> = HashMap::new();
        for (id, entry) in self.entries().iter() {
            if entry.paused {
                continue;
            }
            let renew = matches!(entry.upkeep, Upkeep::Renew { .. });
            if renew || check_all {
                let script = entry.renewal.script as *const LockScript as usize;
                let slot = connection.slot_of(&entry.renewal.key);
                groups.entry((script, renew, slot)).or_default().push((
                    *id,
                    entry.generation,
                    entry.renewal.clone(),
                    entry.stats.clone(),
                ));
            }
        }
        let mut reachable = true;
        for ((_, renew, _), holds) in groups {
            let lease_ms = if renew {
                self.lease.as_millis() as u64
            } else {
                0
            };
            for batch in holds.chunks(BATCH) {
                // A hold reported lost (or released, or acquired afresh) while an earlier batch
                // was in flight is no longer renewed in its name.
                let batch: Vec<&Due> = {
                    let entries = self.entries();
                    batch
                        .iter()
                        .filter(|(id, generation, _, _)| {
                            entries.get(id).is_some_and(|entry| {
                                entry.generation == *generation && !entry.paused
                            })
                        })
                        .collect()
                };
                if batch.is_empty() {
                    continue;
                }
                let mut call = batch[0].2.script.prepare_invoke(self.publish);
                call.arg(lease_ms);
                for (_, _, renewal, _) in &batch {
                    call.key(&renewal.key).arg(&renewal.owner);
                }
                let sent_at = Instant::now();
                let started = SystemTime::now();
                // One span per hold renewed (a check of fixed leases renews nothing), made only
                // for a subscriber that wants them: a batch is up to `BATCH` holds.
                let traced = renew && tracing::enabled!(target: "polylock", tracing::Level::TRACE);
                let spans: Vec<tracing::Span> = batch
                    .iter()
                    .filter(|_| traced)
                    .map(|(_, _, _, stats)| {
                        tracing::trace_span!(target: "polylock", parent: None, "polylock.renewal",
                            polylock.lock.name = %stats.name(), polylock.lock.kind = stats.kind(),
                            polylock.renewal.result = tracing::field::Empty)
                    })
                    .collect();
                let replies = call.invoke_async::<Vec<i64>>(connection).await;
                if renew {
                    for (index, (_, _, _, stats)) in batch.iter().enumerate() {
                        let ok = matches!(&replies, Ok(held) if held.get(index) == Some(&1));
                        if let Some(span) = spans.get(index) {
                            span.record(
                                "polylock.renewal.result",
                                if ok { "ok" } else { "failed" },
                            );
                        }
                        stats.renewal(ok, started, sent_at.elapsed());
                    }
                }
                drop(spans);
                match replies {
                    Ok(held) => {
                        for ((id, generation, _, _), flag) in batch.iter().zip(held) {
                            if flag == 1 {
                                self.renewed_at(*id, *generation, sent_at);
                            } else {
                                self.declare_lost(
                                    *id,
                                    *generation,
                                    "the watchdog found it expired, deleted or taken by \
                                     another owner",
                                    LostReason::Taken,
                                );
                            }
                        }
                        // Only then wait for the replicas: a renewal they miss still holds on the
                        // primary, and the hold's deadline must not run out while `WAIT` waits
                        // (with `min_replicas` above what a promoted primary has, each renewal's
                        // `WAIT` waits its whole timeout).
                        if let (true, Some(sync)) = (renew, &self.replica_sync) {
                            sync.confirm(connection, &batch[0].2.key, "a watchdog renewal")
                                .await;
                        }
                    }
                    Err(err) => {
                        reachable = false;
                        tracing::warn!(error = %err, "renewal failed; retrying soon");
                    }
                }
            }
        }
        reachable
    }

    /// A renewal sent at `sent_at` was confirmed. A hold already reported lost has no entry (or
    /// a newer generation): the reply does not bring it back. Nor does a confirmation that came
    /// after the deadline: the hold counts as lost from then, and is reported so at once.
    fn renewed_at(&self, id: u64, generation: u64, sent_at: Instant) {
        let now = Instant::now();
        let mut entries = self.entries();
        let Some(entry) = entries
            .get_mut(&id)
            .filter(|entry| entry.generation == generation)
        else {
            return;
        };
        let end = self.end_of(entry.upkeep);
        if let Upkeep::Renew { last_renewed } = &mut entry.upkeep {
            if now < end {
                *last_renewed = (*last_renewed).max(sent_at);
            }
        }
    }
}

async fn run(scheduler: Arc<Scheduler>, mut connection: Connection) {
    let period = scheduler.lease / 3;
    // After a failed renewal or check, try again soon (the command connection reconnects on
    // the failed attempt), so a short outage costs no lock and a restart is noticed at once.
    let retry = (period / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    let mut next_renewal = Instant::now() + period;
    // After an outage, fixed leases are checked too: the server may have restarted.
    let mut suspect = false;
    loop {
        let wake_at = scheduler.plan_wake(&mut next_renewal);
        // A check asked for during a round woke that round's wait, not this one.
        if !scheduler.check_requested.load(Ordering::Acquire) {
            tokio::select! {
                _ = tokio::time::sleep_until(wake_at) => {}
                _ = scheduler.wake.notified() => {}
            }
        }
        if scheduler.stopped.load(Ordering::Acquire) {
            return;
        }
        let now = Instant::now();
        let check = scheduler.check_requested.swap(false, Ordering::AcqRel);
        if now >= next_renewal || check {
            *scheduler.renew_by.lock().unwrap_or_else(|p| p.into_inner()) = None;
            let Some(reachable) = scheduler.round(&mut connection, check || suspect).await else {
                return;
            };
            if scheduler.stopped.load(Ordering::Acquire) {
                return;
            }
            suspect = !reachable;
            next_renewal = Instant::now() + if reachable { period } else { retry };
        }
        scheduler.expire_due(Instant::now());
    }
}

/// The error of `lock` lost because of `cause` (`semaphore 'permits' was lost: <cause>`).
fn lost(lock: &dyn TrackedHold, cause: &str) -> Error {
    Error::lock_lost(format!("{} was lost: {cause}", lock.described()))
}
