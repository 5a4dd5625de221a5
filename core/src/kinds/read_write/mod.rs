//! The read-write lock (Redisson RReadWriteLock): one hash at the name with a `mode` field, a
//! field per reader (owner -> count), the writer's field (`owner:write` -> count), and one key
//! per read level carrying that level's lease. Messages on `redisson_rwlock:{name}`: `0` after a
//! read release frees the lock, `1` after a write release (every waiter looks).
//!
//! polylock adds writer preference among its own clients: a writer that finds the lock busy
//! registers in `polylock_rwlock_writers:{name}` (refreshed while it waits, dropped when it
//! acquires or gives up), and a new polylock reader waits while a registration is live. Redisson
//! readers do not look at it, so they may still overtake a polylock writer.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{Script, ScriptInvocation};

use crate::engine::HASH_RENEWAL;
use crate::keys;
use crate::kinds::{AcquireArgs, LockKind, ReleaseArgs, Renewal, UndoArgs};
use crate::options::ClientOptions;

macro_rules! rw_script {
    ($file:literal) => {
        LazyLock::new(|| Script::new(concat!(include_str!("prelude.lua"), include_str!($file))))
    };
}

static READ_ACQUIRE: LazyLock<Script> = rw_script!("read_acquire.lua");
static READ_RELEASE: LazyLock<Script> = rw_script!("read_release.lua");
static READ_UNDO: LazyLock<Script> = rw_script!("read_undo.lua");
static READ_RENEWAL: LazyLock<Script> = rw_script!("read_renew.lua");
static WRITE_ACQUIRE: LazyLock<Script> = rw_script!("write_acquire.lua");
static WRITE_RELEASE: LazyLock<Script> = rw_script!("write_release.lua");
static WRITE_UNDO: LazyLock<Script> = rw_script!("write_undo.lua");
static WRITE_LEAVE: LazyLock<Script> = rw_script!("write_leave.lua");
static FORCE_UNLOCK: LazyLock<Script> = rw_script!("force_unlock.lua");

/// Keys shared by both sides of one read-write lock.
struct Names {
    name: String,
    channel: String,
    writers: String,
}

impl Names {
    fn new(name: &str) -> Names {
        Names {
            name: name.to_owned(),
            channel: keys::rwlock_channel(name),
            writers: keys::rwlock_writers(name),
        }
    }
}

/// The writer's field of `owner` in the hash.
fn write_field(owner: &str) -> String {
    format!("{owner}:write")
}

/// How long a waiting writer's registration holds: the fair queue's timeout (a writer that
/// died stops holding readers back after it), refreshed every half of it.
fn registration(options: &ClientOptions) -> Duration {
    options.fair_queue_timeout
}

pub(crate) struct ReadLock(Names);

impl ReadLock {
    pub(crate) fn new(name: &str) -> ReadLock {
        ReadLock(Names::new(name))
    }
}

impl LockKind for ReadLock {
    fn name(&self) -> &str {
        &self.0.name
    }

    fn wait_channel(&self, _owner: &str) -> String {
        self.0.channel.clone()
    }

    fn acquire(&self, args: &AcquireArgs<'_>, _: &ClientOptions) -> ScriptInvocation<'static> {
        let mut call = READ_ACQUIRE.prepare_invoke();
        call.key(&self.0.name)
            .key(keys::rwlock_timeout_prefix(&self.0.name, args.owner))
            .key(keys::acquire_latch(&self.0.name, args.request))
            .key(&self.0.writers)
            .arg(args.lease_ms)
            .arg(args.owner)
            .arg(write_field(args.owner));
        call
    }

    fn undo_acquire(&self, args: &UndoArgs<'_>, _: &ClientOptions) -> ScriptInvocation<'static> {
        let mut call = READ_UNDO.prepare_invoke();
        call.key(&self.0.name)
            .key(&self.0.channel)
            .key(keys::rwlock_timeout_prefix(&self.0.name, args.owner))
            .key(keys::acquire_latch(&self.0.name, args.request))
            .key(&self.0.writers)
            .arg(args.owner)
            .arg(args.latch_ms);
        call
    }

    fn release(&self, args: &ReleaseArgs<'_>) -> ScriptInvocation<'static> {
        let mut call = READ_RELEASE.prepare_invoke();
        call.key(&self.0.name)
            .key(&self.0.channel)
            .key(keys::rwlock_timeout_prefix(&self.0.name, args.owner))
            .key(keys::unlock_latch(&self.0.name, args.request))
            .key(keys::acquire_latch(&self.0.name, args.acquired_by))
            .key(&self.0.writers)
            .arg(args.lease_ms)
            .arg(args.owner)
            .arg(args.latch_ms)
            .arg(args.final_latch_ms);
        call
    }

    /// Deletes the lock when readers hold it (as Redisson's read lock's `forceUnlock`).
    fn force_unlock(&self) -> Option<ScriptInvocation<'static>> {
        let mut call = FORCE_UNLOCK.prepare_invoke();
        call.key(&self.0.name)
            .key(&self.0.channel)
            .arg("read")
            .arg(0);
        Some(call)
    }

    fn renewal(&self, owner: &str) -> Renewal {
        Renewal {
            script: &READ_RENEWAL,
            key: self.0.name.clone(),
            owner: owner.to_owned(),
        }
    }
}

pub(crate) struct WriteLock(Names);

impl WriteLock {
    pub(crate) fn new(name: &str) -> WriteLock {
        WriteLock(Names::new(name))
    }
}

impl LockKind for WriteLock {
    fn name(&self) -> &str {
        &self.0.name
    }

    fn wait_channel(&self, _owner: &str) -> String {
        self.0.channel.clone()
    }

    /// A waiting writer looks again before its registration runs out.
    fn longest_wait(&self, options: &ClientOptions) -> Option<Duration> {
        Some(registration(options) / 2)
    }

    fn acquire(
        &self,
        args: &AcquireArgs<'_>,
        options: &ClientOptions,
    ) -> ScriptInvocation<'static> {
        let mut call = WRITE_ACQUIRE.prepare_invoke();
        call.key(&self.0.name)
            .key(keys::acquire_latch(&self.0.name, args.request))
            .key(&self.0.writers)
            .arg(args.lease_ms)
            .arg(write_field(args.owner))
            .arg(registration(options).as_millis() as u64);
        call
    }

    fn undo_acquire(&self, args: &UndoArgs<'_>, _: &ClientOptions) -> ScriptInvocation<'static> {
        let mut call = WRITE_UNDO.prepare_invoke();
        call.key(&self.0.name)
            .key(&self.0.channel)
            .key(keys::acquire_latch(&self.0.name, args.request))
            .key(&self.0.writers)
            .arg(write_field(args.owner))
            .arg(args.latch_ms)
            .arg(args.lease_ms);
        call
    }

    fn release(&self, args: &ReleaseArgs<'_>) -> ScriptInvocation<'static> {
        let mut call = WRITE_RELEASE.prepare_invoke();
        call.key(&self.0.name)
            .key(&self.0.channel)
            .key(keys::unlock_latch(&self.0.name, args.request))
            .key(keys::acquire_latch(&self.0.name, args.acquired_by))
            .arg(args.lease_ms)
            .arg(write_field(args.owner))
            .arg(args.latch_ms)
            .arg(args.final_latch_ms);
        call
    }

    fn leave_queue(&self, owner: &str, _: &ClientOptions) -> Option<ScriptInvocation<'static>> {
        let mut call = WRITE_LEAVE.prepare_invoke();
        call.key(&self.0.writers)
            .key(&self.0.channel)
            .arg(write_field(owner));
        Some(call)
    }

    /// Deletes the lock when a writer holds it (as Redisson's write lock's `forceUnlock`).
    fn force_unlock(&self) -> Option<ScriptInvocation<'static>> {
        let mut call = FORCE_UNLOCK.prepare_invoke();
        call.key(&self.0.name)
            .key(&self.0.channel)
            .arg("write")
            .arg(1);
        Some(call)
    }

    fn renewal(&self, owner: &str) -> Renewal {
        Renewal {
            script: &HASH_RENEWAL,
            key: self.0.name.clone(),
            owner: write_field(owner),
        }
    }
}
