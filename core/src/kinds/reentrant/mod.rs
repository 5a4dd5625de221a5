//! The reentrant lock (Redisson RLock): a hash `name` of owner -> reentrancy count, unlock
//! messages on `redisson_lock__channel:{name}`.
//!
//! Among polylock clients a release wakes one waiter, not every process: waiters register in a
//! list (`waiters.lua`), a release tells the earliest one on a channel of its own and keeps the
//! free lock for it for a moment (`RESERVATION_MS` in `waiters.lua`), or, when that waiter registered a grant
//! entry (a watchdog hold), grants it the lock in the same script, for its whole lease: the
//! waiter then holds it from the message on, a round trip sooner. Only when a client other than polylock
//! listens on the shared channel (counted against the listening channel polylock's clients
//! join with it) does the release also publish `00` there, which wakes one Redisson waiter
//! (Redisson reads it as 0); polylock waiters do not look on it, they only note that the line
//! moves. They still listen there for Redisson's releases. The lock is not fair: a Redisson
//! client, or a polylock one whose look finds it free and unreserved, may take it first.

use std::sync::LazyLock;

use redis::Value;

use crate::connection::Publish;
use crate::foundation::keys;
use crate::kinds::script::LockScript;
use crate::kinds::{
    read_queued_acquire, AcquireArgs, Attempt, LeaveArgs, LockKind, LockNames, ReleaseArgs,
    ScriptCall, UndoArgs, WaitPolicy,
};
use crate::settings::options::ClientOptions;

static ACQUIRE: LazyLock<LockScript> = lock_script!(
    "../lock_fields.lua",
    "acquire_uncontended.lua",
    "../lock_hash.lua",
    "waiters.lua",
    "acquire.lua"
);
static RELEASE: LazyLock<LockScript> = lock_script!(
    "../lock_fields.lua",
    "release_uncontended.lua",
    "../lock_hash.lua",
    "waiters.lua",
    "release.lua"
);
static UNDO: LazyLock<LockScript> = lock_script!(
    "../lock_fields.lua",
    "../lock_hash.lua",
    "waiters.lua",
    "undo.lua"
);
static LEAVE: LazyLock<LockScript> = lock_script!(
    "../lock_fields.lua",
    "../lock_hash.lua",
    "waiters.lua",
    "leave.lua"
);
static FORCE_UNLOCK: LazyLock<LockScript> = lock_script!(
    "../lock_fields.lua",
    "../lock_hash.lua",
    "waiters.lua",
    "force_unlock.lua"
);

pub(crate) struct Reentrant {
    pub(super) names: LockNames,
    pub(super) waiters: String,
    pub(super) reservation: String,
}

impl Reentrant {
    pub(crate) fn new(name: &str, key: &str, publish: Publish) -> Reentrant {
        Reentrant::of_kind(crate::metrics::kind::LOCK, name, key, publish)
    }

    /// The reentrant lock's keys and scripts under another kind's name in metrics (the fenced
    /// lock, which is one).
    pub(super) fn of_kind(
        kind: &'static str,
        name: &str,
        key: &str,
        publish: Publish,
    ) -> Reentrant {
        Reentrant {
            names: LockNames::new(kind, name, key, keys::lock_channel(key), publish)
                .telling(keys::lock_told_channel),
            waiters: keys::lock_waiters(key),
            reservation: keys::lock_reservation(key),
        }
    }

    /// A call of `script` with the keys every waking script starts with: the lock, its channel.
    fn waking_call(&self, script: &'static LockScript) -> ScriptCall {
        let mut call = script.prepare_invoke(self.names.publish);
        call.key(&self.names.key).key(&self.names.channel);
        call
    }
}

impl LockKind for Reentrant {
    fn names(&self) -> &LockNames {
        &self.names
    }

    /// Told directly and kept subscribed. The waiter told may never come (its process paused or
    /// died just then), and then nobody else is told: after half the fair queue timeout without
    /// a release that told someone (a `00` heard, which only comes while Redisson listens too),
    /// waiters look. A single try registers nothing, so it has nothing to leave.
    fn wait_policy(&self, options: &ClientOptions) -> WaitPolicy {
        WaitPolicy {
            busy_try_takes_a_place: false,
            lists_poll_waiters: false,
            longest_silence: Some(options.fair_queue_timeout / 2),
            ..WaitPolicy::told_directly()
        }
    }

    /// Still held (a release in between deleted it, which Redisson's `0` told the lock channel
    /// before it was subscribed), and still listed (a release in between that found this waiter
    /// not yet listening dropped it from the list).
    fn nothing_missed(&self, owner: &str) -> Option<redis::Pipeline> {
        let mut pipe = redis::pipe();
        pipe.exists(&self.names.key).zscore(&self.waiters, owner);
        Some(pipe)
    }

    fn acquire(&self, args: &AcquireArgs<'_>, options: &ClientOptions) -> ScriptCall {
        let mut call = ACQUIRE.prepare_invoke(self.names.publish);
        call.key(&self.names.key)
            .key(keys::acquire_latch(&self.names.key, args.request))
            .key(&self.waiters)
            .key(&self.reservation)
            .arg(args.lease_ms)
            .arg(args.owner)
            .arg(self.wait_policy(options).place_ms(args.will_wait, options))
            .arg(args.grant_entry())
            .arg(args.request);
        call
    }

    fn read_acquire(&self, reply: Value) -> Result<Attempt, Value> {
        read_queued_acquire(reply)
    }

    fn undo_acquire(&self, args: &UndoArgs<'_>, _: &ClientOptions) -> ScriptCall {
        let mut call = self.waking_call(&UNDO);
        call.key(keys::acquire_latch(&self.names.key, args.request))
            .arg(args.owner)
            .arg(args.latch_ms)
            .arg(args.lease_ms)
            .arg(args.request);
        call
    }

    fn release(&self, args: &ReleaseArgs<'_>) -> ScriptCall {
        let mut call = self.waking_call(&RELEASE);
        call.key(keys::release_trace(&self.names.key, args.owner));
        // No kind argument: the reservation's lifetime is the scripts' own (`RESERVATION_MS`).
        args.hash_release(&mut call, None::<u64>);
        call
    }

    fn leave_queue(&self, args: &LeaveArgs<'_>) -> Option<ScriptCall> {
        let mut call = self.waking_call(&LEAVE);
        call.key(keys::acquire_latch(&self.names.key, args.request))
            .arg(args.owner)
            .arg(args.latch_ms)
            .arg(args.request);
        Some(call)
    }

    fn force_unlock(&self) -> Option<ScriptCall> {
        Some(self.waking_call(&FORCE_UNLOCK))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use polylock_testkit::RedisServer;

    /// The scripts derive the waiter list's keys and channels from the lock's key (`line_keys`
    /// in `waiters.lua`): on a real server, they spell them as `foundation/keys.rs` does, for a
    /// plain name, a name under a key prefix and a name that carries its own hash tag.
    #[test]
    fn the_scripts_name_the_waiter_list_as_keys_rs_does() {
        let redis = RedisServer::start();
        let mut connection = redis.connection().unwrap();
        let script = lock_script!(
            "../lock_fields.lua",
            "../lock_hash.lua",
            "waiters.lua",
            "line_keys_probe.lua"
        );
        // A call borrows its script for good, as the kinds' statics are.
        let script: &'static LockScript = Box::leak(Box::new(script));
        for key in [
            "orders:42",
            "app:orders:42",
            "{user:7}:cart",
            "app:{user:7}:cart",
        ] {
            let derived: Vec<String> = script
                .prepare_invoke(Publish::Plain)
                .key(key)
                .invoke(&mut connection)
                .unwrap();
            let named = vec![
                keys::lock_waiters(key),
                keys::lock_reservation(key),
                keys::lock_told_prefix(key),
                keys::lock_listening_channel(key),
                keys::lock_grants(key),
                keys::acquire_latch_prefix(key),
            ];
            assert_eq!(derived, named, "{key}");
        }
    }
}
