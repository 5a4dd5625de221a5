//! `CountDownLatch`: a count set once, counted down by any client, awaited to reach zero.

use crate::arguments::wait_for;
use crate::error::LockError;

/// A count-down latch (Redisson's RCountDownLatch layout). At zero the latch is open (its key
/// is gone) and can be set again.
#[derive(uniffi::Object)]
pub struct CountDownLatch {
    pub(crate) inner: polylock::CountDownLatch,
}

/// The core's timeout for `timeoutMs` (the core checks it).
fn timeout(timeout_ms: i64) -> Result<std::time::Duration, LockError> {
    Ok(polylock::latch_timeout_from_millis(timeout_ms as f64)?)
}

#[uniffi::export]
impl CountDownLatch {
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// Sets the count (1 to 2^53 - 1) when none is set; `true` when set.
    pub async fn try_set_count(&self, count: i64) -> Result<bool, LockError> {
        Ok(self.inner.try_set_count(count).await?)
    }

    /// Takes one from the count; the one that reaches zero wakes every waiter.
    pub async fn count_down(&self) -> Result<(), LockError> {
        Ok(self.inner.count_down().await?)
    }

    /// The count now: 0 when open (never set, or counted down to zero).
    pub async fn count(&self) -> Result<i64, LockError> {
        // At most 2^53 - 1 when set by polylock, and never above i64::MAX.
        Ok(self.inner.count().await? as i64)
    }

    /// Waits until the count is zero, at most `timeoutMs` (0: one look); `true` when it is.
    /// Woken by the zero message, and looks again after any wake-up and every few seconds.
    /// Named `awaitZero` in every language: `await` is a keyword in Swift, and `wait` is
    /// `java.lang.Object.wait` in Kotlin.
    pub async fn await_zero(&self, timeout_ms: i64) -> Result<bool, LockError> {
        let timeout = timeout(timeout_ms)?;
        Ok(self.inner.await_zero(timeout).await?)
    }

    /// Deletes the latch whatever its count (it is open then); `true` when there was one.
    pub async fn delete(&self) -> Result<bool, LockError> {
        Ok(self.inner.delete().await?)
    }

    /// `trySetCount` for plain threads: blocks the calling thread.
    pub fn try_set_count_blocking(&self, count: i64) -> Result<bool, LockError> {
        wait_for(self.inner.try_set_count(count))
    }

    /// `countDown` for plain threads: blocks the calling thread.
    pub fn count_down_blocking(&self) -> Result<(), LockError> {
        wait_for(self.inner.count_down())
    }

    /// `awaitZero` for plain threads: blocks the calling thread.
    pub fn await_zero_blocking(&self, timeout_ms: i64) -> Result<bool, LockError> {
        let timeout = timeout(timeout_ms)?;
        wait_for(self.inner.await_zero(timeout))
    }
}
