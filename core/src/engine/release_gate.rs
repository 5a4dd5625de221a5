//! The release gate: while a release by an owner of a lock awaits its answer, that owner's next
//! acquire of the lock waits. A final release leaves one trace per lock and owner
//! (`keys::release_trace`), which a retry of that release reads; were the owner's next cycle
//! (another task on the same handle, or another handle with the same holder id) to run between
//! the release and its retry, its own final release would replace the trace and the retry would
//! answer "not held" for a release that went through. Only the caller's part of a release
//! closes the gate: once the caller has its answer or its error, retries left to the
//! background answer nobody.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

/// The releases in flight of one client, counted per (lock key, owner).
#[derive(Default)]
pub(crate) struct ReleaseGate {
    in_flight: Mutex<HashMap<(String, String), usize>>,
    /// Woken whenever a count drops to zero; waiters look at their own count again.
    cleared: Notify,
}

/// A release in flight: the gate of its lock and owner stays closed until this is dropped.
pub(crate) struct ReleaseInFlight {
    gate: Arc<ReleaseGate>,
    key: (String, String),
}

impl ReleaseGate {
    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), usize>> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes the gate of `owner` on `lock` until the returned value is dropped.
    pub(crate) fn enter(self: &Arc<Self>, lock: &str, owner: &str) -> ReleaseInFlight {
        let key = (lock.to_owned(), owner.to_owned());
        *self.counts().entry(key.clone()).or_insert(0) += 1;
        ReleaseInFlight {
            gate: self.clone(),
            key,
        }
    }

    /// Returns once no release of `owner` on `lock` is in flight.
    pub(crate) async fn cleared(&self, lock: &str, owner: &str) {
        loop {
            // Registered before the look, so a release ending after it still wakes us.
            let notified = self.cleared.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let counts = self.counts();
                // No release in flight at all (the usual case): no key to build.
                if counts.is_empty() || !counts.contains_key(&(lock.to_owned(), owner.to_owned())) {
                    return;
                }
            }
            notified.await;
        }
    }
}

impl Drop for ReleaseInFlight {
    fn drop(&mut self) {
        let mut counts = self.gate.counts();
        if let Some(count) = counts.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.key);
                drop(counts);
                self.gate.cleared.notify_waiters();
            }
        }
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
        tokio::time::timeout(Duration::from_secs(5), gate.cleared("lock", "other"))
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), gate.cleared("other", "owner"))
            .await
            .unwrap();
        let waiting = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.cleared("lock", "owner").await })
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
        assert!(gate.counts().is_empty());
    }
}
