//! The fenced lock (Redisson RFencedLock): the reentrant lock, plus a token counter
//! `redisson_lock_token:{name}` that every acquisition, reentrant ones too, increments in the
//! same script. The acquisition carries its token to the engine, which keeps it in the hold.
//!
//! Only acquiring differs from the reentrant lock: release, undo, force-unlock, renewal and
//! waiting are the reentrant lock's own, by delegation. The counter never expires and nothing
//! deletes it, so tokens stay monotonic across holders, Redisson's and polylock's alike.
//!
//! `fence` holds the writes guarded by those tokens (`Client::fenced_set`, `fenced_delete`).

pub(crate) mod fence;

use std::sync::LazyLock;

use redis::Value;

use crate::connection::Publish;
use crate::foundation::keys;
use crate::kinds::reentrant::Reentrant;
use crate::kinds::script::LockScript;
use crate::kinds::{
    AcquireArgs, Attempt, LeaveArgs, LockKind, LockNames, ReleaseArgs, ScriptCall, UndoArgs,
    WaitPolicy,
};
use crate::settings::options::ClientOptions;

static ACQUIRE: LazyLock<LockScript> = lock_script!(
    "../lock_fields.lua",
    "../lock_hash.lua",
    "../reentrant/waiters.lua",
    "acquire.lua"
);

pub(crate) struct Fenced {
    lock: Reentrant,
    token_counter: String,
}

impl Fenced {
    pub(crate) fn new(name: &str, key: &str, publish: Publish) -> Fenced {
        Fenced {
            lock: Reentrant::of_kind(crate::metrics::kind::FENCED_LOCK, name, key, publish),
            token_counter: keys::fenced_token(key),
        }
    }
}

impl LockKind for Fenced {
    fn names(&self) -> &LockNames {
        self.lock.names()
    }

    /// The reentrant lock's, except that no release grants it directly (as before
    /// `WaitPolicy`, when this kind left `grants_directly` at its default).
    fn wait_policy(&self, options: &ClientOptions) -> WaitPolicy {
        WaitPolicy {
            grants_directly: false,
            ..self.lock.wait_policy(options)
        }
    }

    fn nothing_missed(&self, owner: &str) -> Option<redis::Pipeline> {
        self.lock.nothing_missed(owner)
    }

    fn acquire(&self, args: &AcquireArgs<'_>, options: &ClientOptions) -> ScriptCall {
        let mut call = ACQUIRE.prepare_invoke(self.lock.names.publish);
        call.key(&self.lock.names.key)
            .key(&self.token_counter)
            .key(keys::acquire_latch(&self.lock.names.key, args.request))
            .key(&self.lock.waiters)
            .key(&self.lock.reservation)
            .arg(args.lease_ms)
            .arg(args.owner)
            .arg(self.wait_policy(options).place_ms(args.will_wait, options))
            .arg(args.request);
        call
    }

    /// `{-1, token}` acquired, `{pttl, -1}` busy (a negative PTTL: no expiry), `UNDONE`. The
    /// token (always >= 1) tells the two apart, not the PTTL, which is -1 for a key without
    /// expiry too.
    fn read_acquire(&self, reply: Value) -> Result<Attempt, Value> {
        match reply {
            Value::Array(ref items) => match items.as_slice() {
                [Value::Int(-1), Value::Int(token)] if *token >= 1 => Ok(Attempt::Acquired {
                    token: Some(*token),
                }),
                [Value::Int(pttl), Value::Int(-1)] => Ok(Attempt::busy(*pttl)),
                _ => Err(reply),
            },
            Value::SimpleString(ref status) if status == "UNDONE" => Ok(Attempt::Undone),
            other => Err(other),
        }
    }

    /// The reentrant undo: it takes off a level whose field is in the hash (here, its token).
    fn undo_acquire(&self, args: &UndoArgs<'_>, options: &ClientOptions) -> ScriptCall {
        self.lock.undo_acquire(args, options)
    }

    fn release(&self, args: &ReleaseArgs<'_>) -> ScriptCall {
        self.lock.release(args)
    }

    fn leave_queue(&self, args: &LeaveArgs<'_>) -> Option<ScriptCall> {
        self.lock.leave_queue(args)
    }

    /// Deletes the lock, not the counter (as Redisson's `forceUnlock`): tokens go on growing.
    fn force_unlock(&self) -> Option<ScriptCall> {
        self.lock.force_unlock()
    }
}
