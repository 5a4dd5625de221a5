//! The fair lock (Redisson RFairLock): the reentrant lock's hash, plus a queue of waiting owners
//! and their deadlines; a release wakes only the head, on its own channel.
//!
//! The deadline ZSET follows Redisson's arithmetic, because Redisson clients rewrite it: a new
//! waiter's deadline is the lock's expiry plus one allowance W per place up to its own, and each
//! acquisition from the head (or cancellation) subtracts W from those behind. A live polylock
//! waiter also raises its own deadline to at least now + (position + 1) * W at every look, so no
//! number of acquisitions ahead of it can make it stale; that is why the subtraction, which
//! walks the whole queue, is only done while a Redisson waiter (one without polylock's liveness
//! record) is queued, and a queue of polylock waiters costs O(1) per acquisition. A dead polylock
//! waiter is skipped one queue timeout after its last look, through a "seen" ZSET that only
//! polylock reads.
//!
//! A release passes the lock to the head of the queue: it grants it in the same script to a
//! polylock head held by the watchdog (which registered a grant entry for it, in a grants
//! HASH), for that waiter's whole lease, and tells that waiter so on its channel; the head then
//! holds it without an acquire of its own. Any other head (Redisson's,
//! or a fixed lease) is told the lock is free and comes to take it, as in Redisson.
//!
//! The lock kind is `queued::Queued`, shared with the FIFO lock; this file holds its layout.

use std::time::Duration;

use crate::foundation::keys;
use crate::kinds::queued::{queued_scripts, Layout, Queued, Scripts};

/// The fair lock: a queued lock in Redisson's layout.
pub(crate) type Fair = Queued<RedissonQueue>;

/// Redisson's `fairLockWaitTimeout` (5 min): the allowance each queued waiter adds to
/// the deadlines behind it, and which each acquisition from the head subtracts again.
const WAIT_ALLOWANCE: Duration = Duration::from_secs(300);

static SCRIPTS: Scripts = queued_scripts!();

/// Redisson's queue and deadlines, with polylock's liveness records and grants beside them.
pub(crate) struct RedissonQueue;

impl Layout for RedissonQueue {
    const KIND_NAME: &'static str = crate::metrics::kind::FAIR_LOCK;

    /// A try takes a place, as Redisson's does.
    const TRY_TAKES_A_PLACE: bool = true;

    const ALLOWANCE: Option<Duration> = Some(WAIT_ALLOWANCE);

    /// The channel prefix (`prelude.lua`'s KEYS[4]) is the shared channel already.
    const SHARED_CHANNEL_LAST: bool = false;

    fn scripts() -> &'static Scripts {
        &SCRIPTS
    }

    fn line_keys(key: &str) -> Vec<String> {
        vec![
            keys::fair_queue(key),
            keys::fair_timeouts(key),
            // The channel prefix: each waiter listens on `<prefix>:<owner>`.
            keys::lock_channel(key),
            keys::fair_seen(key),
            keys::fair_grants(key),
            keys::acquire_latch_prefix(key),
        ]
    }

    /// `<channel prefix>:<owner>`, Redisson's.
    fn told_channel(key: &str, owner: &str) -> String {
        keys::fair_waiter_channel(key, owner)
    }

    /// Its deadline, Redisson's record of a queued waiter.
    fn still_in_line(pipe: &mut redis::Pipeline, key: &str, owner: &str) {
        pipe.zscore(keys::fair_timeouts(key), owner);
    }
}
