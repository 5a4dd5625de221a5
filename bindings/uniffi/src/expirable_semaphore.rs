//! `ExpirableSemaphore`: a semaphore whose permits have ids and leases.

use crate::arguments::{acquire_args, wait_for};
use crate::error::LockError;
use crate::permits::permit_count_api;

/// A semaphore whose permits each have an id and a lease: a permit whose holder dies comes back
/// when its lease runs out. Closing the handle releases the permits it still holds, in the
/// background.
#[derive(uniffi::Object)]
pub struct ExpirableSemaphore {
    pub(crate) inner: polylock::ExpirableSemaphore,
}

permit_count_api!(
    ExpirableSemaphore,
    /// The permits available now, after permits whose lease ran out came back.
);

#[uniffi::export]
impl ExpirableSemaphore {
    /// Takes one permit and returns its id (32 hex characters), or `null` when `waitMs` ran
    /// out. `waitMs`: `null` waits without bound, `0` makes one attempt. `leaseMs`: `null` renews the permit by the watchdog
    /// while this client lives; otherwise a fixed lease, after which the permit comes back.
    ///
    /// Cancelling the caller (Kotlin coroutine) takes nothing.
    #[uniffi::method(default(wait_ms = None, lease_ms = None))]
    pub async fn acquire(
        &self,
        wait_ms: Option<i64>,
        lease_ms: Option<i64>,
    ) -> Result<Option<String>, LockError> {
        Ok(self.inner.acquire(acquire_args(wait_ms, lease_ms)?).await?)
    }

    /// Releases the permit `permitId`, from this handle or any other. `NotHeld` when nobody
    /// holds it (released already, expired, never acquired), `LockLost` when it was this
    /// handle's and was lost (its lease ran out, or another client released it): once, for the
    /// handle's latest 1024 lost permits.
    pub async fn release(&self, permit_id: String) -> Result<(), LockError> {
        Ok(self.inner.release(&permit_id).await?)
    }

    /// `acquire` for plain threads: blocks the calling thread.
    #[uniffi::method(default(wait_ms = None, lease_ms = None))]
    pub fn acquire_blocking(
        &self,
        wait_ms: Option<i64>,
        lease_ms: Option<i64>,
    ) -> Result<Option<String>, LockError> {
        wait_for(self.inner.acquire(acquire_args(wait_ms, lease_ms)?))
    }

    /// `release` for plain threads: blocks the calling thread.
    pub fn release_blocking(&self, permit_id: String) -> Result<(), LockError> {
        wait_for(self.inner.release(&permit_id))
    }

    /// The ids of the permits this handle holds. A permit leaves when released, or as soon as
    /// its lease runs out (by this client's clock) or the watchdog finds it gone. No I/O.
    pub fn held_permits(&self) -> Vec<String> {
        self.inner.held_permits()
    }
}
