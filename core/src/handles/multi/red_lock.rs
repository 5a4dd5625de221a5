//! [`RedLock`]: a quorum of independent masters (the Redlock algorithm of the Redis docs,
//! Redisson `RedissonRedLock`).

use crate::foundation::error::Result;
use crate::handles::lock::Lock;
use crate::handles::multi::group::{group_handle, GroupKind, LockGroup};

/// One lock on each of N independent Redis masters, held when a majority (`N / 2 + 1`) of
/// them is: it stays available while a minority of the servers is down, and a hold survives
/// the loss of a minority. Lost when fewer than the quorum remain held.
///
/// With a fixed lease, an acquisition counts only if the lease minus the time the acquisition
/// took minus the clock drift allowance (1 % of the lease + 2 ms) is still positive; the hold
/// is reported lost when the lease runs out. Without a lease each lock's watchdog renews it.
/// The safety of Redlock rests on timing assumptions (bounded pauses, network delays and clock
/// drift): see docs/deployments.md (Locks over several servers), and use a fenced lock where correctness matters.
/// The lock API is [`crate::Hold`]'s.
#[derive(Clone, Debug)]
pub struct RedLock(LockGroup);

impl RedLock {
    /// A red-lock over `locks`, one per independent server (at least one, no handle twice;
    /// with fewer than 3 the quorum is all of them, so no failure is tolerated). No I/O.
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) otherwise.
    pub fn new(locks: Vec<Lock>) -> Result<RedLock> {
        LockGroup::new(GroupKind::Red, locks).map(RedLock)
    }
}

group_handle!(RedLock);
