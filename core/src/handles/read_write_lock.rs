//! The read-write lock handle (`Client::read_write_lock`): a read lock and a write lock on one
//! name, each with the whole [`Lock`] API, for one owner.

use crate::handles::lock::Lock;

/// A read-write lock (Redisson RReadWriteLock layout) for one owner: readers share it, a writer
/// excludes readers and writers. The writer may also take the read lock (and keep it after
/// releasing the write lock: a downgrade); both are reentrant. The read lock cannot be
/// upgraded: an owner holding only the read lock that asks for the write lock waits for itself
/// (as in Redisson), so give such a wait a bound.
///
/// Writers go first among polylock clients: while a polylock writer waits, new polylock readers
/// wait too (readers re-entering, and the writer's own reads, do not), so a steady stream of
/// readers cannot starve a writer. Redisson readers on the same name do not know of waiting
/// writers and may still overtake them.
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock,
    write: Lock,
}

impl ReadWriteLock {
    pub(crate) fn new(read: Lock, write: Lock) -> ReadWriteLock {
        ReadWriteLock { read, write }
    }

    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// The read lock (every call returns the same handle).
    pub fn read_lock(&self) -> Lock {
        self.read.clone()
    }

    /// The write lock (every call returns the same handle).
    pub fn write_lock(&self) -> Lock {
        self.write.clone()
    }
}
