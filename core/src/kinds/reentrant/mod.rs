//! The reentrant lock (Redisson RLock): a hash `name` of owner -> reentrancy count, unlock
//! messages on `redisson_lock__channel:{name}`; any waiter may win after a release.

use std::sync::LazyLock;

use redis::ScriptInvocation;

use crate::connection::{LockScript, Publish};
use crate::engine::HASH_RENEWAL;
use crate::keys;
use crate::kinds::{AcquireArgs, LockKind, ReleaseArgs, Renewal, UndoArgs};
use crate::options::ClientOptions;

static ACQUIRE: LazyLock<LockScript> =
    LazyLock::new(|| LockScript::new(include_str!("acquire.lua")));
static RELEASE: LazyLock<LockScript> =
    LazyLock::new(|| LockScript::new(include_str!("release.lua")));
static UNDO: LazyLock<LockScript> = LazyLock::new(|| LockScript::new(include_str!("undo.lua")));
static FORCE_UNLOCK: LazyLock<LockScript> =
    LazyLock::new(|| LockScript::new(include_str!("force_unlock.lua")));

pub(crate) struct Reentrant {
    name: String,
    channel: String,
    pub(super) publish: Publish,
}

impl Reentrant {
    pub(crate) fn new(name: &str, publish: Publish) -> Reentrant {
        Reentrant {
            name: name.to_owned(),
            channel: keys::lock_channel(name),
            publish,
        }
    }
}

impl LockKind for Reentrant {
    fn name(&self) -> &str {
        &self.name
    }

    fn wait_channel(&self, _owner: &str) -> String {
        self.channel.clone()
    }

    fn acquire(&self, args: &AcquireArgs<'_>, _: &ClientOptions) -> ScriptInvocation<'static> {
        let mut call = ACQUIRE.prepare_invoke(self.publish);
        call.key(&self.name)
            .key(keys::acquire_latch(&self.name, args.request))
            .arg(args.lease_ms)
            .arg(args.owner);
        call
    }

    fn undo_acquire(&self, args: &UndoArgs<'_>, _: &ClientOptions) -> ScriptInvocation<'static> {
        let mut call = UNDO.prepare_invoke(self.publish);
        call.key(&self.name)
            .key(&self.channel)
            .key(keys::acquire_latch(&self.name, args.request))
            .arg(args.owner)
            .arg(args.latch_ms)
            .arg(args.lease_ms);
        call
    }

    fn release(&self, args: &ReleaseArgs<'_>) -> ScriptInvocation<'static> {
        let mut call = RELEASE.prepare_invoke(self.publish);
        call.key(&self.name)
            .key(&self.channel)
            .key(keys::unlock_latch(&self.name, args.request))
            .key(keys::acquire_latch(&self.name, args.acquired_by))
            .arg(args.lease_ms)
            .arg(args.owner)
            .arg(args.latch_ms)
            .arg(args.final_latch_ms);
        call
    }

    fn force_unlock(&self) -> Option<ScriptInvocation<'static>> {
        let mut call = FORCE_UNLOCK.prepare_invoke(self.publish);
        call.key(&self.name).key(&self.channel);
        Some(call)
    }

    fn renewal(&self, owner: &str) -> Renewal {
        Renewal {
            script: &HASH_RENEWAL,
            key: self.name.clone(),
            owner: owner.to_owned(),
        }
    }
}
