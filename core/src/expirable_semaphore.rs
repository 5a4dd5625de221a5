//! The expirable semaphore handle (`Client::expirable_semaphore`): permits with an id and a
//! lease (Redisson RPermitExpirableSemaphore layout).

use crate::options::AcquireOptions;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::client::ClientInner;
use crate::engine::LockCore;
use crate::error::{Error, Result};
use crate::kinds::expirable_semaphore::Permit;
use crate::options::validate_permit_id;
use crate::runtime::on_runtime;
use crate::semaphore::{query, Semaphore};

/// A semaphore whose permits each have an id and a lease: a permit whose holder dies comes back
/// when its lease runs out. Without a lease a permit is renewed by the watchdog while its
/// holder's client lives, like a lock (Redisson's permits have a fixed lease or none at all).
/// A permit is released by its id, from this handle or any other client. Cheap to clone:
/// clones share the permits this handle holds; dropping the last clone releases them in the
/// background.
#[derive(Clone)]
pub struct ExpirableSemaphore {
    inner: Arc<Inner>,
}

struct Inner {
    client: Arc<ClientInner>,
    name: String,
    kind: Arc<Permit>,
    /// The counter's operations, shared with the plain semaphore.
    counter: Semaphore,
    /// The permits this handle holds, by id.
    held: Mutex<HashMap<String, Arc<LockCore>>>,
}

impl std::fmt::Debug for ExpirableSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpirableSemaphore")
            .field("name", &self.inner.name)
            .field("held", &self.held_permits())
            .finish()
    }
}

impl ExpirableSemaphore {
    pub(crate) fn new(client: Arc<ClientInner>, name: &str) -> ExpirableSemaphore {
        ExpirableSemaphore {
            inner: Arc::new(Inner {
                counter: Semaphore::new(client.clone(), name),
                kind: Arc::new(Permit::new(name, client.publish)),
                client,
                name: name.to_owned(),
                held: Mutex::new(HashMap::new()),
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<LockCore>>> {
        self.inner.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The ids of the permits this handle holds (lost ones included until released). No I/O.
    pub fn held_permits(&self) -> Vec<String> {
        self.held().keys().cloned().collect()
    }

    /// Sets the number of permits if it was never set (no key); true when set.
    pub async fn try_set_permits(&self, permits: i64) -> Result<bool> {
        self.inner.counter.try_set_permits(permits).await
    }

    /// Adds permits (a negative number takes some away); wakes waiters.
    pub async fn add_permits(&self, permits: i64) -> Result<()> {
        self.inner.counter.add_permits(permits).await
    }

    /// The permits available now, after permits whose lease ran out came back.
    pub async fn available_permits(&self) -> Result<i64> {
        let what = format!("count the permits of semaphore '{}'", self.inner.name);
        query(&self.inner.client, what, self.inner.kind.available()).await
    }

    /// Takes one permit, waiting for it up to `options.wait` (`None`: without bound, zero: one
    /// attempt), and returns its id (32 hex characters), or `None` when the wait ran out.
    /// `options.lease`: `None` renews the permit by the watchdog while this client lives; a
    /// duration is a fixed lease, after which the permit comes back by itself. Dropping the
    /// future, or an attempt whose reply was lost, takes nothing.
    pub async fn acquire(&self, options: AcquireOptions) -> Result<Option<String>> {
        let AcquireOptions { wait, lease } = options;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let kind: Arc<Permit> = self.inner.kind.clone();
        let core = Arc::new(LockCore::with_owner(
            self.inner.client.clone(),
            kind,
            id.clone(),
        ));
        if !core.acquire(wait, lease).await? {
            return Ok(None);
        }
        self.held().insert(id.clone(), core);
        Ok(Some(id))
    }

    /// Releases permit `permit_id`. [`Error::LockLost`] when it was this handle's and its lease
    /// ran out (it is back in the semaphore all the same), [`Error::NotHeld`] when nobody holds
    /// it (released already, expired, or never acquired).
    pub async fn release(&self, permit_id: &str) -> Result<()> {
        validate_permit_id(permit_id)?;
        let this = self.clone();
        let id = permit_id.to_ascii_lowercase();
        let what = format!("release a permit of semaphore '{}'", self.inner.name);
        on_runtime(&what, async move { this.release_on_runtime(id).await }).await
    }

    async fn release_on_runtime(&self, id: String) -> Result<()> {
        let held = self.held().remove(&id);
        if let Some(core) = held {
            let released = core.release().await;
            if let Err(Error::WrongType(_) | Error::Redis(_)) = released {
                // Not released and not lost: the permit is still this handle's.
                self.held().insert(id, core);
            }
            return released;
        }
        let core = Arc::new(LockCore::with_owner(
            self.inner.client.clone(),
            self.inner.kind.clone(),
            id.clone(),
        ));
        match core.release_unheld().await? {
            Some(1) => Ok(()),
            _ => Err(Error::NotHeld(format!(
                "permit '{id}' of semaphore '{}' is not held: it was released already, its \
                 lease ran out, or it was never acquired",
                self.inner.name
            ))),
        }
    }
}
