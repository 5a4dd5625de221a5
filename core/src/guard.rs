//! The RAII face of a hold: [`LockGuard`], as `lock.lock().await?` returns it.

use std::ops::Deref;

use crate::error::Result;
use crate::lock::Lock;
use crate::runtime::runtime;

/// One level of a hold on a [`Lock`]. Dropping it releases that level in the background
/// (errors are logged, the lease still bounds the hold); [`LockGuard::release`] releases it
/// and reports the outcome. Derefs to the lock, for its token, lost signal and the rest.
#[must_use = "dropping the guard releases the lock at once"]
#[derive(Debug)]
pub struct LockGuard {
    /// `None` once released.
    lock: Option<Lock>,
}

impl LockGuard {
    pub(crate) fn new(lock: Lock) -> LockGuard {
        LockGuard { lock: Some(lock) }
    }

    /// Releases this level of the hold: [`crate::Error::LockLost`] when the lease was lost
    /// while held, as [`Lock::release`].
    pub async fn release(mut self) -> Result<()> {
        match self.lock.take() {
            Some(lock) => lock.release().await,
            None => Ok(()),
        }
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &Lock {
        self.lock
            .as_ref()
            .expect("a guard holds its lock until released")
    }
}

impl Deref for LockGuard {
    type Target = Lock;

    fn deref(&self) -> &Lock {
        self.lock()
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(lock) = self.lock.take() else { return };
        // Drop cannot await: the release runs on the core's runtime, whatever thread drops.
        runtime().spawn(async move {
            if let Err(err) = lock.release().await {
                tracing::warn!(lock = %lock.name(), %err, "releasing a dropped lock guard failed");
            }
        });
    }
}
