//! `ReadWriteLock`: one owner's read lock and write lock, each a `Lock`.

use std::sync::Arc;

use crate::lock::Lock;

/// One owner's handle on a read-write lock: readers share it, a writer excludes readers and
/// writers; both are reentrant, and the writer may take the read lock and keep it after
/// releasing the write lock (a downgrade). The read lock is not upgradable: an owner holding
/// only the read lock that asks for the write lock waits for itself, so bound such a wait.
#[derive(uniffi::Object)]
pub struct ReadWriteLock {
    pub(crate) inner: polylock::ReadWriteLock,
}

#[uniffi::export]
impl ReadWriteLock {
    /// The read lock, with the whole `Lock` API (every call gives a handle on the same owner's
    /// read lock).
    pub fn read_lock(&self) -> Arc<Lock> {
        Arc::new(Lock {
            inner: self.inner.read_lock(),
        })
    }

    /// The write lock, with the whole `Lock` API (every call gives a handle on the same
    /// owner's write lock).
    pub fn write_lock(&self) -> Arc<Lock> {
        Arc::new(Lock {
            inner: self.inner.write_lock(),
        })
    }

    /// The read-write lock's name (its Redis key).
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }
}
