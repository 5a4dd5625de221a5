//! [`MultiLock`]: all of several locks or none (Redisson `RedissonMultiLock`).

use std::ops::Deref;

use crate::error::Result;
use crate::lock::Lock;
use crate::multi::group::{GroupKind, LockGroup};

/// All of several locks, possibly made by clients of independent servers, held together or
/// not at all. Lost when any of its locks is lost.
///
/// It protects a set of resources at once (each lock its own resource); it adds no tolerance
/// of a failed server: when one is unreachable, the multi-lock cannot be acquired, and one
/// killed while held makes it lost. Derefs to [`LockGroup`] for the lock API.
#[derive(Clone, Debug)]
pub struct MultiLock(LockGroup);

impl MultiLock {
    /// A multi-lock over `locks` (at least one, no handle twice). No I/O.
    /// [`crate::Error::InvalidArgument`] otherwise.
    pub fn new(locks: Vec<Lock>) -> Result<MultiLock> {
        LockGroup::new(GroupKind::Multi, locks).map(MultiLock)
    }

    /// The group handle, for code that takes either kind.
    pub fn into_group(self) -> LockGroup {
        self.0
    }
}

impl Deref for MultiLock {
    type Target = LockGroup;

    fn deref(&self) -> &LockGroup {
        &self.0
    }
}
