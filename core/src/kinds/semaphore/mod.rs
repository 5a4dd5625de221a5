//! The semaphore (Redisson RSemaphore): a STRING at the name holding the available permits;
//! every change that adds permits publishes the count now available on `redisson_sc:{name}`.
//!
//! An acquisition runs on the engine like a lock's (waiting for messages, retries under one
//! request id, undo of an attempt whose reply was lost, give-back when its caller went away),
//! then is handed over to its caller for good: permits belong to nobody, and any caller may
//! release them (`crate::Semaphore::release`). They never expire: a holder that dies keeps
//! them away for ever (the expirable semaphore gives them back).

use std::sync::LazyLock;

use crate::connection::Publish;
use crate::foundation::keys;
use crate::kinds::script::LockScript;
use crate::kinds::{AcquireArgs, LockKind, LockNames, ReleaseArgs, Renewal, ScriptCall, UndoArgs};
use crate::settings::options::ClientOptions;

static ACQUIRE: LazyLock<LockScript> = lock_script!("prelude.lua", "acquire.lua");
static UNDO: LazyLock<LockScript> = lock_script!("prelude.lua", "undo.lua");
static GIVE_BACK: LazyLock<LockScript> = lock_script!("prelude.lua", "give_back.lua");
static HELD: LazyLock<LockScript> = lock_script!("prelude.lua", "held.lua");
pub(crate) static ADD: LazyLock<LockScript> = lock_script!("prelude.lua", "add.lua");
pub(crate) static TRY_SET: LazyLock<LockScript> = lock_script!("prelude.lua", "try_set.lua");
pub(crate) static AVAILABLE: LazyLock<LockScript> = lock_script!("prelude.lua", "available.lua");

/// One acquisition of `permits` permits.
pub(crate) struct SemaphoreAcquisition {
    names: LockNames,
    permits: i64,
}

impl SemaphoreAcquisition {
    pub(crate) fn new(
        name: &str,
        key: &str,
        permits: i64,
        publish: Publish,
    ) -> SemaphoreAcquisition {
        SemaphoreAcquisition {
            names: LockNames::new(
                crate::metrics::kind::SEMAPHORE,
                name,
                key,
                keys::semaphore_channel(key),
                publish,
            ),
            permits,
        }
    }
}

impl LockKind for SemaphoreAcquisition {
    fn names(&self) -> &LockNames {
        &self.names
    }

    fn noun(&self) -> &'static str {
        "semaphore"
    }

    /// The lease is the lifetime of the request's latch (permits do not expire).
    fn acquire(&self, args: &AcquireArgs<'_>, _: &ClientOptions) -> ScriptCall {
        let mut call = ACQUIRE.prepare_invoke(self.names.publish);
        call.key(&self.names.key)
            .key(keys::acquire_latch(&self.names.key, args.request))
            .arg(args.lease_ms)
            .arg(self.permits);
        call
    }

    fn undo_acquire(&self, args: &UndoArgs<'_>, _: &ClientOptions) -> ScriptCall {
        let mut call = UNDO.prepare_invoke(self.names.publish);
        call.key(&self.names.key)
            .key(&self.names.channel)
            .key(keys::acquire_latch(&self.names.key, args.request))
            .arg(args.latch_ms)
            .arg(self.permits);
        call
    }

    /// Gives the permits back (only for an acquisition whose caller went away).
    fn release(&self, args: &ReleaseArgs<'_>) -> ScriptCall {
        let mut call = GIVE_BACK.prepare_invoke(self.names.publish);
        call.key(&self.names.key)
            .key(&self.names.channel)
            .key(keys::unlock_latch(&self.names.key, args.request))
            .key(keys::acquire_latch(&self.names.key, args.acquired_by))
            .arg(self.permits)
            .arg(args.final_latch_ms);
        call
    }

    fn renewal(&self, owner: &str) -> Renewal {
        Renewal::by(&HELD, &self.names.key, owner)
    }
}
