//! The read-write lock (Redisson RReadWriteLock): one hash at the name with a `mode` field, a
//! field per reader (owner -> count), the writer's field (`owner:write` -> count), and one key
//! per read level carrying that level's lease. Messages on `redisson_rwlock:{name}`: `0` after a
//! read release frees the lock, `1` after a write release (every waiter looks).
//!
//! polylock adds phase fairness among its own clients: a reader or writer that finds the lock
//! busy registers as waiting (`polylock_rwlock_readers:{name}` / `polylock_rwlock_writers:{name}`,
//! refreshed while it waits, dropped when it acquires or gives up) and notes when it began to
//! wait (`polylock_rwlock_since:{name}`). A new reader waits for live writers that began to wait
//! before it; a writer finding the lock free waits for live readers that began before it. So a
//! stream of readers cannot starve a writer, nor writers readers. Redisson clients do not look
//! at these keys, so they may still overtake polylock waiters.

use std::sync::LazyLock;
use std::time::Duration;

use crate::connection::Publish;
use crate::foundation::keys;
use crate::kinds::script::LockScript;
use crate::kinds::{
    AcquireArgs, LeaveArgs, LockKind, LockNames, ReleaseArgs, Renewal, ScriptCall, UndoArgs,
    WaitPolicy,
};
use crate::settings::options::ClientOptions;

static READ_ACQUIRE: LazyLock<LockScript> = lock_script!("prelude.lua", "read_acquire.lua");
static READ_RELEASE: LazyLock<LockScript> = lock_script!("prelude.lua", "read_release.lua");
static READ_UNDO: LazyLock<LockScript> = lock_script!("prelude.lua", "read_undo.lua");
static READ_RENEWAL: LazyLock<LockScript> =
    lock_script!("prelude.lua", "../renew_each.lua", "read_renew.lua");
static WRITE_ACQUIRE: LazyLock<LockScript> = lock_script!("prelude.lua", "write_acquire.lua");
static WRITE_RELEASE: LazyLock<LockScript> = lock_script!("prelude.lua", "write_release.lua");
static WRITE_UNDO: LazyLock<LockScript> = lock_script!("prelude.lua", "write_undo.lua");
static LEAVE: LazyLock<LockScript> = lock_script!("prelude.lua", "leave.lua");
static FORCE_UNLOCK: LazyLock<LockScript> = lock_script!("prelude.lua", "force_unlock.lua");

/// The writer's field of `owner` in the hash.
fn write_field(owner: &str) -> String {
    format!("{owner}:write")
}

/// How long a waiter's registration holds: the fair queue's timeout (a waiter that died stops
/// holding the other side back after it), refreshed every half of it.
fn registration(options: &ClientOptions) -> Duration {
    options.fair_queue_timeout
}

/// Which side of the lock a handle takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Read,
    Write,
}

/// One side of a read-write lock: what both sides share is written once here, and the methods
/// whose keys and scripts differ say so per side.
pub(crate) struct ReadWriteSide {
    names: LockNames,
    /// The ZSETs of waiting writers and readers, and when each waiter began to wait.
    writers: String,
    readers: String,
    since: String,
    side: Side,
}

impl ReadWriteSide {
    /// The read side: a hold is a count in the owner's field plus one key per read level.
    pub(crate) fn read(name: &str, key: &str, publish: Publish) -> ReadWriteSide {
        ReadWriteSide::new(name, key, publish, Side::Read)
    }

    /// The write side: a hold is a count in the owner's writer field (`owner:write`).
    pub(crate) fn write(name: &str, key: &str, publish: Publish) -> ReadWriteSide {
        ReadWriteSide::new(name, key, publish, Side::Write)
    }

    fn new(name: &str, key: &str, publish: Publish, side: Side) -> ReadWriteSide {
        ReadWriteSide {
            names: LockNames::new(
                crate::metrics::kind::READ_WRITE_LOCK,
                name,
                key,
                keys::rwlock_channel(key),
                publish,
            ),
            writers: keys::rwlock_writers(key),
            readers: keys::rwlock_readers(key),
            since: keys::rwlock_since(key),
            side,
        }
    }

    /// A waiter that gives up leaves `side` (its ZSET of waiters), under `member`.
    fn leave(&self, side: &str, member: String) -> ScriptCall {
        let mut call = LEAVE.prepare_invoke(self.names.publish);
        call.key(side)
            .key(&self.since)
            .key(&self.names.channel)
            .arg(member);
        call
    }
}

impl LockKind for ReadWriteSide {
    fn names(&self) -> &LockNames {
        &self.names
    }

    fn noun(&self) -> &'static str {
        match self.side {
            Side::Read => "read lock",
            Side::Write => "write lock",
        }
    }

    /// A waiting reader or writer looks again before its registration runs out.
    fn wait_policy(&self, options: &ClientOptions) -> WaitPolicy {
        WaitPolicy {
            longest_wait: Some(registration(options) / 2),
            ..WaitPolicy::default()
        }
    }

    fn acquire(&self, args: &AcquireArgs<'_>, options: &ClientOptions) -> ScriptCall {
        let lock = &self.names;
        let mut call;
        match self.side {
            Side::Read => {
                call = READ_ACQUIRE.prepare_invoke(lock.publish);
                call.key(&lock.key)
                    .key(keys::rwlock_timeout_prefix(&lock.key, args.owner));
            }
            Side::Write => {
                call = WRITE_ACQUIRE.prepare_invoke(lock.publish);
                call.key(&lock.key);
            }
        }
        call.key(keys::acquire_latch(&lock.key, args.request))
            .key(&self.writers)
            .key(&self.readers)
            .key(&self.since)
            .arg(args.lease_ms);
        if self.side == Side::Read {
            call.arg(args.owner);
        }
        call.arg(write_field(args.owner))
            .arg(registration(options).as_millis() as u64);
        call
    }

    fn leave_queue(&self, args: &LeaveArgs<'_>) -> Option<ScriptCall> {
        Some(match self.side {
            Side::Read => self.leave(&self.readers, args.owner.to_owned()),
            Side::Write => self.leave(&self.writers, write_field(args.owner)),
        })
    }

    fn undo_acquire(&self, args: &UndoArgs<'_>, _: &ClientOptions) -> ScriptCall {
        let lock = &self.names;
        match self.side {
            Side::Read => {
                let mut call = READ_UNDO.prepare_invoke(lock.publish);
                call.key(&lock.key)
                    .key(&lock.channel)
                    .key(keys::rwlock_timeout_prefix(&lock.key, args.owner))
                    .key(keys::acquire_latch(&lock.key, args.request))
                    .key(&self.writers)
                    .key(&self.readers)
                    .key(&self.since)
                    .arg(args.owner)
                    .arg(args.latch_ms);
                call
            }
            Side::Write => {
                let mut call = WRITE_UNDO.prepare_invoke(lock.publish);
                call.key(&lock.key)
                    .key(&lock.channel)
                    .key(keys::acquire_latch(&lock.key, args.request))
                    .key(&self.writers)
                    .key(&self.since)
                    .arg(write_field(args.owner))
                    .arg(args.latch_ms)
                    .arg(args.lease_ms);
                call
            }
        }
    }

    fn release(&self, args: &ReleaseArgs<'_>) -> ScriptCall {
        let lock = &self.names;
        let mut call;
        match self.side {
            Side::Read => {
                call = READ_RELEASE.prepare_invoke(lock.publish);
                call.key(&lock.key)
                    .key(&lock.channel)
                    .key(keys::rwlock_timeout_prefix(&lock.key, args.owner))
                    .key(keys::unlock_latch(&lock.key, args.request))
                    .key(keys::acquire_latch(&lock.key, args.acquired_by))
                    .key(&self.writers)
                    .arg(args.lease_ms)
                    .arg(args.owner);
            }
            Side::Write => {
                call = WRITE_RELEASE.prepare_invoke(lock.publish);
                call.key(&lock.key)
                    .key(&lock.channel)
                    .key(keys::unlock_latch(&lock.key, args.request))
                    .key(keys::acquire_latch(&lock.key, args.acquired_by))
                    .arg(args.lease_ms)
                    .arg(write_field(args.owner));
            }
        }
        // The latch lives only the caller's window, whatever the answer (a late copy reads only
        // the owner's count, so no retry comes after it: `retries_release_late`).
        call.arg(args.trace_ms);
        call
    }

    fn retries_release_late(&self) -> bool {
        false
    }

    /// Deletes the lock when this side holds it (as Redisson's read and write locks'
    /// `forceUnlock`): the mode it must be in, and the message that wakes the waiters.
    fn force_unlock(&self) -> Option<ScriptCall> {
        let (mode, message) = match self.side {
            Side::Read => ("read", 0),
            Side::Write => ("write", 1),
        };
        let mut call = FORCE_UNLOCK.prepare_invoke(self.names.publish);
        call.key(&self.names.key)
            .key(&self.names.channel)
            .arg(mode)
            .arg(message);
        Some(call)
    }

    fn renewal(&self, owner: &str) -> Renewal {
        match self.side {
            Side::Read => Renewal::by(&READ_RENEWAL, &self.names.key, owner),
            Side::Write => Renewal::of_hash(&self.names.key, write_field(owner)),
        }
    }
}
