//! The release gate: while a release by an owner of a lock awaits its answer, that owner's next
//! acquire of the lock waits, and so does its next release of the lock. A final release leaves
//! one trace per lock and owner (`keys::release_trace`), which a retry of that release reads; a
//! partial release's retry reads the owner's count and the level's field in the lock hash.
//! Were the owner's next cycle (another task on the same handle, or another handle with the same
//! holder id) to run between a release and its retry, its own final release would replace the
//! trace; were a release of another level to run there and be final, it would rename the hash
//! away from under a partial release. Either way the retry would answer "not held" for a
//! release that went through. So the releases of one lock by one owner run one at a time, in
//! the order they began, and an acquire waits until none is left. Only the caller's part of a
//! release holds the gate: once the caller has its answer or its error, retries left to the
//! background answer nobody. That part is bounded (the caller's retry window), so every wait
//! here is too, and a release waits only for releases that began before it: no cycle.
//!
//! The gate also holds the undos in flight of kinds that serve waiters in order (one place in
//! line per owner): the background undo of a request whose outcome is unknown. Were the
//! owner's next look to run before that undo, it would take over the place the undo is for,
//! ahead of waiters that queued in between. Such a look waits for the undo instead (bounded:
//! the undo gives up with its retry window).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use crate::foundation::maps::Map;

/// The releases of one lock by one owner not yet answered, by ticket: the first is the one
/// running, the others wait their turn.
#[derive(Default)]
struct Releases {
    next_ticket: u64,
    pending: BTreeSet<u64>,
}

/// The releases in flight of one client, per (lock key, owner).
#[derive(Default)]
pub(crate) struct ReleaseGate {
    in_flight: Mutex<Map<(String, String), Releases>>,
    /// The undos in flight, by (lock key, owner): how many.
    undos: Mutex<Map<(String, String), usize>>,
    /// Woken whenever a release ends; waiters look at their own entry again.
    changed: Notify,
}

/// A release in flight: the gate of its lock and owner stays closed until this is dropped
/// (also when the release is abandoned while it waits its turn).
pub(crate) struct ReleaseInFlight {
    gate: Arc<ReleaseGate>,
    key: (String, String),
    ticket: u64,
}

/// An undo in flight: the owner's looks at its lock wait until this is dropped.
pub(crate) struct UndoInFlight {
    gate: Arc<ReleaseGate>,
    key: (String, String),
}

impl ReleaseGate {
    fn undos(&self) -> std::sync::MutexGuard<'_, Map<(String, String), usize>> {
        self.undos.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Holds back `owner`'s looks at `lock` until the returned value is dropped.
    pub(crate) fn begin_undo(self: &Arc<Self>, lock: &str, owner: &str) -> UndoInFlight {
        let key = (lock.to_owned(), owner.to_owned());
        *self.undos().entry(key.clone()).or_default() += 1;
        UndoInFlight {
            gate: self.clone(),
            key,
        }
    }

    /// Whether no undo of `owner` on `lock` is in flight.
    pub(crate) fn no_undo(&self, lock: &str, owner: &str) -> bool {
        let undos = self.undos();
        undos.is_empty() || !undos.contains_key(&(lock.to_owned(), owner.to_owned()))
    }

    fn releases(&self) -> std::sync::MutexGuard<'_, Map<(String, String), Releases>> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes the gate of `owner` on `lock` until the returned value is dropped; the release
    /// runs after [`ReleaseInFlight::turn`].
    pub(crate) fn enter(self: &Arc<Self>, lock: &str, owner: &str) -> ReleaseInFlight {
        let key = (lock.to_owned(), owner.to_owned());
        let ticket = {
            let mut releases = self.releases();
            let entry = releases.entry(key.clone()).or_default();
            let ticket = entry.next_ticket;
            entry.next_ticket += 1;
            entry.pending.insert(ticket);
            ticket
        };
        ReleaseInFlight {
            gate: self.clone(),
            key,
            ticket,
        }
    }

    /// Whether no release of `owner` on `lock` is in flight.
    pub(crate) fn is_clear(&self, lock: &str, owner: &str) -> bool {
        let releases = self.releases();
        // No release in flight at all (the usual case): no key to build.
        releases.is_empty() || !releases.contains_key(&(lock.to_owned(), owner.to_owned()))
    }

    /// Returns once no release and no undo of `owner` on `lock` is in flight.
    pub(crate) async fn open(&self, lock: &str, owner: &str) {
        self.until(|| self.is_clear(lock, owner) && self.no_undo(lock, owner))
            .await
    }

    /// Returns once `ready` holds, looking again whenever a release or an undo ends.
    async fn until(&self, ready: impl Fn() -> bool) {
        loop {
            // Registered before the look, so a release ending after it still wakes us.
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if ready() {
                return;
            }
            notified.await;
        }
    }
}

impl ReleaseInFlight {
    /// Returns once every release of this lock by this owner that began before this one has
    /// ended (had its answer or its error in its caller's time).
    pub(crate) async fn turn(&self) {
        if self.is_first() {
            return;
        }
        tracing::trace!(target: "polylock::handoff", "release waits its turn");
        self.gate.until(|| self.is_first()).await
    }

    fn is_first(&self) -> bool {
        self.gate
            .releases()
            .get(&self.key)
            .and_then(|releases| releases.pending.first().copied())
            == Some(self.ticket)
    }
}

impl Drop for ReleaseInFlight {
    fn drop(&mut self) {
        let mut releases = self.gate.releases();
        if let Some(entry) = releases.get_mut(&self.key) {
            entry.pending.remove(&self.ticket);
            if entry.pending.is_empty() {
                releases.remove(&self.key);
            }
        }
        drop(releases);
        // The next release in line, or an acquire waiting for none to be left.
        self.gate.changed.notify_waiters();
    }
}

impl Drop for UndoInFlight {
    fn drop(&mut self) {
        let mut undos = self.gate.undos();
        if let Some(count) = undos.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                undos.remove(&self.key);
            }
        }
        drop(undos);
        self.gate.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn an_acquire_waits_for_its_owners_release_of_that_lock_only() {
        let gate = Arc::new(ReleaseGate::default());
        let first = gate.enter("lock", "owner");
        let second = gate.enter("lock", "owner");
        // Another owner, or another lock, passes at once.
        tokio::time::timeout(Duration::from_secs(5), gate.open("lock", "other"))
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), gate.open("other", "owner"))
            .await
            .unwrap();
        let waiting = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.open("lock", "owner").await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "passed with two releases in flight");
        drop(first);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "passed with one release in flight");
        drop(second);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken when the last release ended")
            .unwrap();
        assert!(gate.releases().is_empty());
    }

    #[tokio::test]
    async fn releases_of_one_lock_by_one_owner_take_turns_in_the_order_they_began() {
        let gate = Arc::new(ReleaseGate::default());
        let first = gate.enter("lock", "owner");
        let second = gate.enter("lock", "owner");
        let third = gate.enter("lock", "owner");
        // Another owner's release, or one of another lock, runs at once.
        let other = gate.enter("lock", "other");
        tokio::time::timeout(Duration::from_secs(5), other.turn())
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), first.turn())
            .await
            .unwrap();
        let waiting = tokio::spawn(async move {
            third.turn().await;
            third
        });
        // The second, waiting, is abandoned (its future dropped): it leaves the line.
        let abandoned = tokio::spawn(async move { second.turn().await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "ran before the first ended");
        abandoned.abort();
        let _ = abandoned.await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "ran before the first ended");
        drop(first);
        let third = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("its turn came when the first ended")
            .unwrap();
        assert!(!gate.is_clear("lock", "owner"));
        drop(third);
        drop(other);
        assert!(gate.releases().is_empty());
    }

    #[tokio::test]
    async fn a_look_waits_for_its_owners_undos_of_that_lock_only() {
        let gate = Arc::new(ReleaseGate::default());
        let first = gate.begin_undo("lock", "owner");
        let second = gate.begin_undo("lock", "owner");
        assert!(gate.no_undo("lock", "other") && gate.no_undo("other", "owner"));
        // An undo is not a release: the owner's releases pass.
        assert!(gate.is_clear("lock", "owner"));
        let waiting = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.open("lock", "owner").await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "passed with two undos in flight");
        drop(first);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "passed with one undo in flight");
        drop(second);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken when the last undo ended")
            .unwrap();
        assert!(gate.undos().is_empty());
    }
}
