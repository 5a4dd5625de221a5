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

use redis::ScriptInvocation;

use crate::connection::Publish;
use crate::foundation::keys;
use crate::kinds::script::LockScript;
use crate::kinds::{AcquireArgs, LockKind, ReleaseArgs, Renewal, UndoArgs, WaitPolicy};
use crate::settings::options::ClientOptions;

static READ_ACQUIRE: LazyLock<LockScript> = lock_script!("prelude.lua", "read_acquire.lua");
static READ_RELEASE: LazyLock<LockScript> = lock_script!("prelude.lua", "read_release.lua");
static READ_UNDO: LazyLock<LockScript> = lock_script!("prelude.lua", "read_undo.lua");
static READ_RENEWAL: LazyLock<LockScript> = lock_script!("prelude.lua", "read_renew.lua");
static WRITE_ACQUIRE: LazyLock<LockScript> = lock_script!("prelude.lua", "write_acquire.lua");
static WRITE_RELEASE: LazyLock<LockScript> = lock_script!("prelude.lua", "write_release.lua");
static WRITE_UNDO: LazyLock<LockScript> = lock_script!("prelude.lua", "write_undo.lua");
static LEAVE: LazyLock<LockScript> = lock_script!("prelude.lua", "leave.lua");
static FORCE_UNLOCK: LazyLock<LockScript> = lock_script!("prelude.lua", "force_unlock.lua");

/// Keys shared by both sides of one read-write lock.
struct Names {
    /// The name as the user gave it (errors, metrics).
    name: String,
    /// The name under the client's key prefix, from which every key and channel derives.
    key: String,
    channel: String,
    writers: String,
    readers: String,
    since: String,
    publish: Publish,
}

impl Names {
    fn new(name: &str, key: &str, publish: Publish) -> Names {
        Names {
            publish,
            name: name.to_owned(),
            key: key.to_owned(),
            channel: keys::rwlock_channel(key),
            writers: keys::rwlock_writers(key),
            readers: keys::rwlock_readers(key),
            since: keys::rwlock_since(key),
        }
    }

    /// A waiter that gives up leaves `side` (its ZSET of waiters), under `member`.
    fn leave(&self, side: &str, member: String) -> ScriptInvocation<'static> {
        let mut call = LEAVE.prepare_invoke(self.publish);
        call.key(side)
            .key(&self.since)
            .key(&self.channel)
            .arg(member);
        call
    }
}

/// The writer's field of `owner` in the hash.
fn write_field(owner: &str) -> String {
    format!("{owner}:write")
}

/// How long a waiter's registration holds: the fair queue's timeout (a waiter that died stops
/// holding the other side back after it), refreshed every half of it.
fn registration(options: &ClientOptions) -> Duration {
    options.fair_queue_timeout
}

pub(crate) struct ReadLock(Names);

impl ReadLock {
    pub(crate) fn new(name: &str, key: &str, publish: Publish) -> ReadLock {
        ReadLock(Names::new(name, key, publish))
    }
}

impl LockKind for ReadLock {
    fn kind_name(&self) -> &'static str {
        crate::metrics::kind::READ_WRITE_LOCK
    }

    fn name(&self) -> &str {
        &self.0.name
    }

    fn key(&self) -> &str {
        &self.0.key
    }

    fn wait_channel(&self, _owner: &str) -> String {
        self.0.channel.clone()
    }

    /// A waiting reader looks again before its registration runs out.
    fn wait_policy(&self, options: &ClientOptions) -> WaitPolicy {
        WaitPolicy {
            longest_wait: Some(registration(options) / 2),
            ..WaitPolicy::default()
        }
    }

    fn acquire(
        &self,
        args: &AcquireArgs<'_>,
        options: &ClientOptions,
    ) -> ScriptInvocation<'static> {
        let mut call = READ_ACQUIRE.prepare_invoke(self.0.publish);
        call.key(&self.0.key)
            .key(keys::rwlock_timeout_prefix(&self.0.key, args.owner))
            .key(keys::acquire_latch(&self.0.key, args.request))
            .key(&self.0.writers)
            .key(&self.0.readers)
            .key(&self.0.since)
            .arg(args.lease_ms)
            .arg(args.owner)
            .arg(write_field(args.owner))
            .arg(registration(options).as_millis() as u64);
        call
    }

    fn leave_queue(
        &self,
        owner: &str,
        _: &str,
        _: u64,
        _: &ClientOptions,
    ) -> Option<ScriptInvocation<'static>> {
        Some(self.0.leave(&self.0.readers, owner.to_owned()))
    }

    fn undo_acquire(&self, args: &UndoArgs<'_>, _: &ClientOptions) -> ScriptInvocation<'static> {
        let mut call = READ_UNDO.prepare_invoke(self.0.publish);
        call.key(&self.0.key)
            .key(&self.0.channel)
            .key(keys::rwlock_timeout_prefix(&self.0.key, args.owner))
            .key(keys::acquire_latch(&self.0.key, args.request))
            .key(&self.0.writers)
            .key(&self.0.readers)
            .key(&self.0.since)
            .arg(args.owner)
            .arg(args.latch_ms);
        call
    }

    fn release(&self, args: &ReleaseArgs<'_>) -> ScriptInvocation<'static> {
        let mut call = READ_RELEASE.prepare_invoke(self.0.publish);
        call.key(&self.0.key)
            .key(&self.0.channel)
            .key(keys::rwlock_timeout_prefix(&self.0.key, args.owner))
            .key(keys::unlock_latch(&self.0.key, args.request))
            .key(keys::acquire_latch(&self.0.key, args.acquired_by))
            .key(&self.0.writers)
            .arg(args.lease_ms)
            .arg(args.owner)
            // The latch lives only the caller's window, whatever the answer (a late copy reads
            // only the owner's count, so no retry comes after it: `retries_release_late`).
            .arg(args.trace_ms);
        call
    }

    fn retries_release_late(&self) -> bool {
        false
    }

    /// Deletes the lock when readers hold it (as Redisson's read lock's `forceUnlock`).
    fn force_unlock(&self) -> Option<ScriptInvocation<'static>> {
        let mut call = FORCE_UNLOCK.prepare_invoke(self.0.publish);
        call.key(&self.0.key)
            .key(&self.0.channel)
            .arg("read")
            .arg(0);
        Some(call)
    }

    fn renewal(&self, owner: &str) -> Renewal {
        Renewal {
            script: &READ_RENEWAL,
            key: self.0.key.clone(),
            owner: owner.to_owned(),
        }
    }
}

pub(crate) struct WriteLock(Names);

impl WriteLock {
    pub(crate) fn new(name: &str, key: &str, publish: Publish) -> WriteLock {
        WriteLock(Names::new(name, key, publish))
    }
}

impl LockKind for WriteLock {
    fn kind_name(&self) -> &'static str {
        crate::metrics::kind::READ_WRITE_LOCK
    }

    fn name(&self) -> &str {
        &self.0.name
    }

    fn key(&self) -> &str {
        &self.0.key
    }

    fn wait_channel(&self, _owner: &str) -> String {
        self.0.channel.clone()
    }

    /// A waiting writer looks again before its registration runs out.
    fn wait_policy(&self, options: &ClientOptions) -> WaitPolicy {
        WaitPolicy {
            longest_wait: Some(registration(options) / 2),
            ..WaitPolicy::default()
        }
    }

    fn acquire(
        &self,
        args: &AcquireArgs<'_>,
        options: &ClientOptions,
    ) -> ScriptInvocation<'static> {
        let mut call = WRITE_ACQUIRE.prepare_invoke(self.0.publish);
        call.key(&self.0.key)
            .key(keys::acquire_latch(&self.0.key, args.request))
            .key(&self.0.writers)
            .key(&self.0.readers)
            .key(&self.0.since)
            .arg(args.lease_ms)
            .arg(write_field(args.owner))
            .arg(registration(options).as_millis() as u64);
        call
    }

    fn undo_acquire(&self, args: &UndoArgs<'_>, _: &ClientOptions) -> ScriptInvocation<'static> {
        let mut call = WRITE_UNDO.prepare_invoke(self.0.publish);
        call.key(&self.0.key)
            .key(&self.0.channel)
            .key(keys::acquire_latch(&self.0.key, args.request))
            .key(&self.0.writers)
            .key(&self.0.since)
            .arg(write_field(args.owner))
            .arg(args.latch_ms)
            .arg(args.lease_ms);
        call
    }

    fn release(&self, args: &ReleaseArgs<'_>) -> ScriptInvocation<'static> {
        let mut call = WRITE_RELEASE.prepare_invoke(self.0.publish);
        call.key(&self.0.key)
            .key(&self.0.channel)
            .key(keys::unlock_latch(&self.0.key, args.request))
            .key(keys::acquire_latch(&self.0.key, args.acquired_by))
            .arg(args.lease_ms)
            .arg(write_field(args.owner))
            // As the read side's.
            .arg(args.trace_ms);
        call
    }

    fn retries_release_late(&self) -> bool {
        false
    }

    fn leave_queue(
        &self,
        owner: &str,
        _: &str,
        _: u64,
        _: &ClientOptions,
    ) -> Option<ScriptInvocation<'static>> {
        Some(self.0.leave(&self.0.writers, write_field(owner)))
    }

    /// Deletes the lock when a writer holds it (as Redisson's write lock's `forceUnlock`).
    fn force_unlock(&self) -> Option<ScriptInvocation<'static>> {
        let mut call = FORCE_UNLOCK.prepare_invoke(self.0.publish);
        call.key(&self.0.key)
            .key(&self.0.channel)
            .arg("write")
            .arg(1);
        Some(call)
    }

    fn renewal(&self, owner: &str) -> Renewal {
        Renewal::of_hash(&self.0.key, write_field(owner))
    }
}
