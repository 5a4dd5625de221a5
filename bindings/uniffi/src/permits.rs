//! The permit-count API that `Semaphore` and `ExpirableSemaphore` share.

/// Exports the calls on the permit count of `$object`, whose `inner` is a core `Semaphore` or
/// `ExpirableSemaphore` (the two offer the same calls), written once; the doc comment of
/// `availablePermits`, which differs, comes with the object.
macro_rules! permit_count_api {
    ($object:ident, $(#[$available_permits_doc:meta])*) => {
        #[uniffi::export]
        impl $object {
            /// Sets the number of permits if it was never set; `true` when set.
            pub async fn try_set_permits(
                &self,
                permits: i32,
            ) -> Result<bool, $crate::error::LockError> {
                Ok(self.inner.try_set_permits(permits.into()).await?)
            }

            /// Adds permits (a negative number takes some away) and wakes waiters.
            pub async fn add_permits(&self, permits: i32) -> Result<(), $crate::error::LockError> {
                Ok(self.inner.add_permits(permits.into()).await?)
            }

            $(#[$available_permits_doc])*
            pub async fn available_permits(&self) -> Result<i64, $crate::error::LockError> {
                Ok(self.inner.available_permits().await?)
            }

            /// The semaphore's name (its Redis key).
            pub fn name(&self) -> String {
                self.inner.name().to_owned()
            }
        }
    };
}

pub(crate) use permit_count_api;
