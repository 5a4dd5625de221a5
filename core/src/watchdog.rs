//! The watchdog: one scheduler per client that renews every watchdog-leased lock of the client,
//! up to [`BATCH`] locks per script call, every third of the lease.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use tokio::sync::Notify;

use crate::error::Error;
use crate::lock::LockInner;
use crate::script;

/// Locks renewed by one script call.
pub(crate) const BATCH: usize = 100;

struct Entry {
    name: String,
    owner: String,
    /// A release that may delete the key is under way: a "gone" reply is then not a loss.
    releasing: bool,
    last_renewed: Instant,
    lock: Weak<LockInner>,
}

pub(crate) struct Watchdog {
    entries: Mutex<HashMap<u64, Entry>>,
    lease: Duration,
    stop: Notify,
}

impl Watchdog {
    pub(crate) fn start(connection: ConnectionManager, lease: Duration) -> Arc<Watchdog> {
        let watchdog = Arc::new(Watchdog {
            entries: Mutex::new(HashMap::new()),
            lease,
            stop: Notify::new(),
        });
        tokio::spawn(run(Arc::downgrade(&watchdog), connection, lease));
        watchdog
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<u64, Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn lease(&self) -> Duration {
        self.lease
    }

    pub(crate) fn register(&self, id: u64, name: &str, owner: &str, lock: Weak<LockInner>) {
        self.entries().insert(
            id,
            Entry {
                name: name.to_owned(),
                owner: owner.to_owned(),
                releasing: false,
                last_renewed: Instant::now(),
                lock,
            },
        );
    }

    pub(crate) fn unregister(&self, id: u64) {
        self.entries().remove(&id);
    }

    pub(crate) fn set_releasing(&self, id: u64, releasing: bool) {
        if let Some(entry) = self.entries().get_mut(&id) {
            entry.releasing = releasing;
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries().len()
    }

    pub(crate) fn shutdown(&self) {
        self.entries().clear();
        self.stop.notify_one();
    }

    /// Renews every registered lock once. Returns false when Redis could not be reached.
    async fn renew_all(&self, connection: &mut ConnectionManager) -> bool {
        let due: Vec<(u64, String, String)> = self
            .entries()
            .iter()
            .filter(|(_, entry)| !entry.releasing)
            .map(|(id, entry)| (*id, entry.name.clone(), entry.owner.clone()))
            .collect();
        let mut reachable = true;
        for batch in due.chunks(BATCH) {
            let span = tracing::debug_span!("renew", locks = batch.len());
            let _enter = span.enter();
            let mut invocation = script::RENEW.prepare_invoke();
            invocation.arg(self.lease.as_millis() as u64);
            for (_, name, owner) in batch {
                invocation.key(name).arg(owner);
            }
            let sent_at = Instant::now();
            match invocation.invoke_async::<Vec<i64>>(connection).await {
                Ok(renewed) => {
                    for ((id, name, _), flag) in batch.iter().zip(renewed) {
                        if flag == 1 {
                            if let Some(entry) = self.entries().get_mut(id) {
                                entry.last_renewed = sent_at;
                            }
                        } else {
                            self.declare_lost(
                                *id,
                                format!(
                                    "lock '{name}' was lost: the watchdog found it expired, \
                                     deleted or taken by another owner"
                                ),
                            );
                        }
                    }
                }
                Err(err) => {
                    reachable = false;
                    tracing::warn!(error = %err, "watchdog renewal failed; retrying");
                    self.expire_unrenewed();
                }
            }
        }
        reachable
    }

    /// After failed renewals: a lock whose last renewal is a whole lease ago has expired.
    fn expire_unrenewed(&self) {
        let expired: Vec<(u64, String)> = self
            .entries()
            .iter()
            .filter(|(_, entry)| !entry.releasing && entry.last_renewed.elapsed() >= self.lease)
            .map(|(id, entry)| (*id, entry.name.clone()))
            .collect();
        for (id, name) in expired {
            self.declare_lost(
                id,
                format!(
                    "lock '{name}' was lost: Redis could not be reached to renew it before its \
                     lease of {:?} ran out",
                    self.lease
                ),
            );
        }
    }

    fn declare_lost(&self, id: u64, message: String) {
        let lock = {
            let mut entries = self.entries();
            match entries.get(&id) {
                // A concurrent release removed or flagged it: that is not a loss.
                Some(entry) if !entry.releasing => entries.remove(&id).map(|entry| entry.lock),
                _ => None,
            }
        };
        if let Some(lock) = lock.and_then(|weak| weak.upgrade()) {
            lock.mark_lost(Error::LockLost(message));
        }
    }
}

async fn run(watchdog: Weak<Watchdog>, mut connection: ConnectionManager, lease: Duration) {
    let period = lease / 3;
    // After a failed renewal, try again sooner so a short outage costs no lock.
    let retry = (period / 4).max(Duration::from_millis(50));
    let mut next = period;
    loop {
        let Some(stop) = watchdog.upgrade().map(|w| async move {
            tokio::select! {
                _ = w.stop.notified() => true,
                _ = tokio::time::sleep(next) => false,
            }
        }) else {
            return;
        };
        if stop.await {
            return;
        }
        let Some(watchdog) = watchdog.upgrade() else {
            return;
        };
        next = if watchdog.renew_all(&mut connection).await {
            period
        } else {
            retry
        };
    }
}
