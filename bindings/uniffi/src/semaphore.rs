//! `Semaphore`: a counting semaphore whose permits belong to nobody.

use crate::arguments::{ms, wait_for};
use crate::error::LockError;
use crate::permits::permit_count_api;
use polylock::options::wait_from_millis;

/// A counting semaphore: permits belong to nobody and never expire, so permits taken by a
/// process that dies are gone until someone adds them back (see `ExpirableSemaphore`).
#[derive(uniffi::Object)]
pub struct Semaphore {
    pub(crate) inner: polylock::Semaphore,
}

permit_count_api!(
    Semaphore,
    /// The permits available now (0 when never set; negative after taking more away than there
    /// were).
);

#[uniffi::export]
impl Semaphore {
    /// Takes `permits` permits. `waitMs`: `null` waits without bound, `0` makes one attempt,
    /// otherwise waits that long and returns `false`. Waiters are woken by releases.
    ///
    /// Cancelling the caller (Kotlin coroutine) takes nothing.
    #[uniffi::method(default(wait_ms = None))]
    pub async fn acquire(&self, permits: i32, wait_ms: Option<i64>) -> Result<bool, LockError> {
        let wait = wait_from_millis(ms(wait_ms))?;
        Ok(self.inner.acquire(permits.into(), wait).await?)
    }

    /// Gives `permits` permits back (whoever took them) and wakes waiters.
    pub async fn release(&self, permits: i32) -> Result<(), LockError> {
        Ok(self.inner.release(permits.into()).await?)
    }

    /// `acquire` for plain threads: blocks the calling thread.
    #[uniffi::method(default(wait_ms = None))]
    pub fn acquire_blocking(&self, permits: i32, wait_ms: Option<i64>) -> Result<bool, LockError> {
        let wait = wait_from_millis(ms(wait_ms))?;
        wait_for(self.inner.acquire(permits.into(), wait))
    }

    /// `release` for plain threads: blocks the calling thread.
    pub fn release_blocking(&self, permits: i32) -> Result<(), LockError> {
        wait_for(self.inner.release(permits.into()))
    }
}
