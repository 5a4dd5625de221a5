//! The state a client shares with every handle made through it and with the engine: its id,
//! its connections (commands, pub/sub hub, sentinel), the upkeep task, the options, and the
//! registry of the holds made through it. Below the engine and the handles, which all hold an
//! `Arc<ClientInner>`; `Client` (the public type) wraps it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::{watch, Notify};

use crate::connection::sentinel::Sentinel;
use crate::connection::{Connection, Publish, ReplicaSync};
use crate::engine::release_gate::ReleaseGate;
use crate::engine::renew::{Scheduler, TrackedHold, Upkeep};
use crate::foundation::error::{Error, Result};
use crate::foundation::maps::{remove_shrinking, Map};
use crate::foundation::runtime::{current_pid, on_runtime};
use crate::kinds::messages::LockHub;
use crate::metrics::Metrics;
use crate::settings::options::ClientOptions;

/// The holds made through a client, and whether it was closed (under one lock, so that
/// nothing registers after `close`).
#[derive(Default)]
pub(crate) struct Registry {
    closed: bool,
    pub(crate) holds: Map<u64, Weak<dyn TrackedHold>>,
}

pub(crate) struct ClientInner {
    pub(crate) id: String,
    /// The process that made it, named in the error a forked child gets.
    pid: u32,
    /// The fork generation (`ids::generation`) it was made in: a forked child sees another,
    /// told by an atomic load instead of a `getpid` per call.
    generation: u64,
    pub(crate) connection: Connection,
    /// How this deployment's lock scripts publish (PUBLISH, or SPUBLISH on a cluster).
    pub(crate) publish: Publish,
    /// `WAIT` for the replicas after writes (`sync_replicas`), when on.
    pub(crate) replica_sync: Option<Arc<ReplicaSync>>,
    sentinel: Option<Arc<Sentinel>>,
    /// `None` for a client that polls ([`crate::options::WaitMode::Poll`]): it never subscribes.
    pub(crate) hub: Option<Arc<LockHub>>,
    pub(crate) upkeep: Arc<Scheduler>,
    pub(crate) options: ClientOptions,
    registry: Mutex<Registry>,
    closed: watch::Sender<bool>,
    next_handle: AtomicU64,
    /// What the locks of this client do (`Client::metrics()`); its connections count into it too.
    pub(crate) metrics: Arc<Metrics>,
    /// Set when a hold begins or ends, until the client record has looked (`client_record`).
    holds_changed: AtomicBool,
    /// Wakes the client record's task for a change of holds (once per look, not per change).
    pub(crate) holds_wake: Arc<Notify>,
    /// Holds an owner's acquire of a lock while its release of it awaits an answer.
    pub(crate) release_gate: Arc<ReleaseGate>,
    /// True while the client record's task runs (`client_record`): after `close`, until the
    /// record's `DEL` has been answered.
    pub(crate) record_kept: Arc<watch::Sender<bool>>,
}

/// A hold as the client record lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct HoldSummary {
    pub(crate) lock: String,
    pub(crate) kind: &'static str,
    /// When it began (unix ms).
    pub(crate) since_ms: u64,
}

/// The parts of a client that `Client` makes (its connections, its deployment's ways, its
/// options and metrics), which `ClientInner::new` joins to the client's own state.
pub(crate) struct ClientParts {
    pub(crate) connection: Connection,
    pub(crate) publish: Publish,
    pub(crate) replica_sync: Option<Arc<ReplicaSync>>,
    pub(crate) sentinel: Option<Arc<Sentinel>>,
    pub(crate) hub: Option<Arc<LockHub>>,
    pub(crate) upkeep: Arc<Scheduler>,
    pub(crate) options: ClientOptions,
    pub(crate) metrics: Arc<Metrics>,
}

impl ClientInner {
    pub(crate) fn new(parts: ClientParts) -> ClientInner {
        ClientInner {
            id: crate::foundation::ids::client_id(),
            pid: current_pid(),
            generation: crate::foundation::ids::generation(),
            connection: parts.connection,
            publish: parts.publish,
            replica_sync: parts.replica_sync,
            sentinel: parts.sentinel,
            hub: parts.hub,
            upkeep: parts.upkeep,
            options: parts.options,
            metrics: parts.metrics,
            registry: Mutex::new(Registry::default()),
            closed: watch::Sender::new(false),
            next_handle: AtomicU64::new(1),
            holds_changed: AtomicBool::new(false),
            holds_wake: Arc::new(Notify::new()),
            release_gate: Arc::default(),
            record_kept: Arc::new(watch::Sender::new(false)),
        }
    }

    /// The process id of the process that made the client.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Tells the client record that the holds changed: one wake-up until it looks again, so a
    /// busy client costs it nothing per acquisition.
    fn note_holds_changed(&self) {
        if !self.holds_changed.swap(true, Ordering::AcqRel) {
            self.holds_wake.notify_one();
        }
    }

    /// The holds of now, sorted, and clears the change flag (a change after this call wakes
    /// the record again).
    pub(crate) fn hold_summaries(&self) -> Vec<HoldSummary> {
        self.holds_changed.store(false, Ordering::Release);
        let holds: Vec<Arc<dyn TrackedHold>> = self
            .registry()
            .holds
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        let mut summaries: Vec<HoldSummary> = holds
            .iter()
            .filter_map(|hold| {
                let since = hold.held_since()?;
                let since_ms = since
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |since| since.as_millis() as u64);
                Some(HoldSummary {
                    lock: hold.name().to_owned(),
                    kind: hold.kind_name(),
                    since_ms,
                })
            })
            .collect();
        summaries.sort();
        summaries
    }

    pub(crate) fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The error of a call on `what` (e.g. `lock 'orders:42'`, `LockCore::described`) once
    /// the client is closed.
    pub(crate) fn closed_error(&self, what: &str) -> Error {
        Error::connection(format!("{what}: the client is closed"))
    }

    pub(crate) fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// Turns `true` when the client is closed.
    pub(crate) fn closed_receiver(&self) -> watch::Receiver<bool> {
        self.closed.subscribe()
    }

    /// Fails when the client was closed, or was made by the parent of this forked process;
    /// the error names what `described` makes (`LockCore::described`).
    pub(crate) fn check_usable(&self, described: impl FnOnce() -> String) -> Result<()> {
        // Every acquire and release asks: the error's text is made only when there is one.
        if !self.forked() && !self.is_closed() {
            return Ok(());
        }
        self.check_usable_for(&described())
    }

    /// [`ClientInner::check_usable`] for `what` (e.g. `lock 'orders:42'`, `key 'stock:7'`).
    pub(crate) fn check_usable_for(&self, what: &str) -> Result<()> {
        if self.forked() {
            return Err(Error::connection(format!(
                "{what}: this client was created in process {} before a fork; \
                 create a new client in the child process",
                self.pid
            )));
        }
        if self.is_closed() {
            return Err(self.closed_error(what));
        }
        Ok(())
    }

    /// Whether this is a forked child of the process that made the client: its connections,
    /// upkeep task and pub/sub hub are the parent's, and run only there.
    pub(crate) fn forked(&self) -> bool {
        self.generation != crate::foundation::ids::generation()
    }

    pub(crate) fn next_handle_id(&self) -> u64 {
        self.next_handle.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers a hold (or updates its upkeep). Refused once the client is closed.
    pub(crate) fn track_hold<H: TrackedHold + 'static>(
        &self,
        lock: &Arc<H>,
        upkeep: Upkeep,
    ) -> Result<()> {
        let mut registry = self.registry();
        if registry.closed {
            return Err(self.closed_error(&lock.described()));
        }
        let weak: Weak<dyn TrackedHold> = Arc::downgrade(lock) as Weak<dyn TrackedHold>;
        let fresh = registry.holds.insert(lock.id(), weak.clone()).is_none();
        self.upkeep
            .track(lock.id(), lock.renewal(), upkeep, weak, lock.stats());
        drop(registry);
        if fresh {
            self.note_holds_changed();
        }
        Ok(())
    }

    /// Holds in the registry now.
    #[cfg(test)]
    pub(crate) fn tracked_holds(&self) -> usize {
        self.registry().holds.len()
    }

    pub(crate) fn untrack_hold(&self, id: u64) {
        let removed = remove_shrinking(&mut self.registry().holds, &id).is_some();
        self.upkeep.untrack(id);
        if removed {
            self.note_holds_changed();
        }
    }

    /// Closes the client (see `Client::close`): returns the names of the holds it had, each
    /// marked lost.
    pub(crate) fn close(&self) -> Vec<String> {
        let holds: Vec<Arc<dyn TrackedHold>> = {
            let mut registry = self.registry();
            registry.closed = true;
            registry
                .holds
                .drain()
                .filter_map(|(_, lock)| lock.upgrade())
                .collect()
        };
        self.shutdown();
        let mut names = Vec::with_capacity(holds.len());
        for lock in holds {
            names.push(lock.name().to_owned());
            lock.mark_lost(
                Error::lock_lost(format!(
                    "{} was lost: the client was closed while it was held; nothing renews or \
                     releases it any more, and it expires with its lease",
                    lock.described()
                )),
                None,
            );
        }
        names
    }

    /// Waits until the client record's task has ended, which after `close` is once its `DEL`
    /// was answered; at most the response timeout, past which the record expires with its
    /// lease. At once in a forked child, whose record is its parent's.
    pub(crate) async fn record_task_ended(&self) {
        if self.forked() {
            return;
        }
        let mut kept = self.record_kept.subscribe();
        let _ =
            tokio::time::timeout(self.options.response_timeout, kept.wait_for(|kept| !*kept)).await;
    }

    fn shutdown(&self) {
        self.closed.send_replace(true);
        self.upkeep.stop();
        self.connection.close();
        if let Some(hub) = &self.hub {
            hub.shutdown();
        }
        if let Some(sentinel) = &self.sentinel {
            sentinel.shutdown();
        }
    }

    /// The name polylock works with for the user's `name`: the key prefix, then the name
    /// (`ClientOptions::key_prefix`). Every key and channel derives from it.
    pub(crate) fn key_of(&self, name: &str) -> String {
        crate::foundation::key_prefix::apply(self.options.key_prefix.as_deref(), name)
    }
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        // In a forked child there is nothing of ours to stop (the tasks run in the parent), and
        // stopping would take locks that a thread of the parent may have held at the fork.
        if !self.forked() {
            self.shutdown();
        }
    }
}

/// Runs `call` once on the core's runtime.
pub(crate) async fn query<T: redis::FromRedisValue + Send + 'static>(
    client: &Arc<ClientInner>,
    what: String,
    call: crate::connection::ScriptCall,
) -> Result<T> {
    let client = client.clone();
    on_runtime(&what.clone(), async move {
        client.check_usable_for(&what)?;
        let mut connection = client.connection.clone();
        call.invoke_async::<T>(&mut connection)
            .await
            .map_err(|err| Error::from_redis(&what, err))
    })
    .await
}
