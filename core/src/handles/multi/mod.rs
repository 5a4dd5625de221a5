//! Locks made of several locks, possibly on independent servers: [`MultiLock`] (all of them)
//! and [`RedLock`] (a quorum of them). Both are a [`LockGroup`]: one routine acquires the set
//! with a limit on how many may fail, one hold records which were taken, one lost signal.
//!
//! A group acquires its components in parallel, each waiting at most a per-lock bound. A round
//! that takes fewer than the group requires gives back what it took and, while the wait lasts,
//! starts over (as Redisson's `RedissonMultiLock` does, which avoids two groups each holding
//! part of the other's set for ever). Everything else (watchdog renewal, undoing an attempt
//! whose reply was lost, waking on unlock messages) is each component's own.

mod group;
mod multi_lock;
mod red_lock;

pub use group::LockGroup;
pub use multi_lock::MultiLock;
pub use red_lock::RedLock;
