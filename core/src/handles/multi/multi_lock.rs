//! [`MultiLock`]: all of several locks or none (Redisson `RedissonMultiLock`).

use crate::foundation::error::Result;
use crate::handles::lock::Lock;
use crate::handles::multi::group::{group_handle, GroupKind, LockGroup};

/// All of several locks, possibly made by clients of independent servers, held together or
/// not at all. Lost when any of its locks is lost.
///
/// It protects a set of resources at once (each lock its own resource); it adds no tolerance
/// of a failed server: when one is unreachable, the multi-lock cannot be acquired, and one
/// killed while held makes it lost. The lock API is [`crate::Hold`]'s.
#[derive(Clone, Debug)]
pub struct MultiLock(LockGroup);

impl MultiLock {
    /// A multi-lock over `locks` (at least one, no handle twice). No I/O.
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) otherwise.
    pub fn new(locks: Vec<Lock>) -> Result<MultiLock> {
        LockGroup::new(GroupKind::Multi, locks).map(MultiLock)
    }
}

group_handle!(MultiLock);
