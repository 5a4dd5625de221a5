//! The expirable semaphore (Redisson RPermitExpirableSemaphore): the semaphore's permit counter
//! and channel, plus a ZSET `{name}:timeout` of acquired permits (16-byte ids) scored by their
//! expiry. A permit whose lease runs out comes back at the next look by anyone.
//!
//! Each permit runs on the engine as a hold whose owner is the permit id: a fixed lease, or the
//! watchdog's lease renewed while its holder lives (Redisson has only fixed or endless ones).

use std::sync::LazyLock;

use crate::connection::Publish;
use crate::foundation::keys;
use crate::kinds::script::LockScript;
use crate::kinds::{AcquireArgs, LockKind, LockNames, ReleaseArgs, Renewal, ScriptCall, UndoArgs};
use crate::settings::options::ClientOptions;

static ACQUIRE: LazyLock<LockScript> =
    lock_script!("../semaphore/prelude.lua", "prelude.lua", "acquire.lua");
static RELEASE: LazyLock<LockScript> =
    lock_script!("../semaphore/prelude.lua", "prelude.lua", "release.lua");
static UNDO: LazyLock<LockScript> =
    lock_script!("../semaphore/prelude.lua", "prelude.lua", "undo.lua");
static RENEWAL: LazyLock<LockScript> = lock_script!(
    "../semaphore/prelude.lua",
    "prelude.lua",
    "../renew_each.lua",
    "renew.lua"
);
pub(crate) static AVAILABLE: LazyLock<LockScript> =
    lock_script!("../semaphore/prelude.lua", "prelude.lua", "available.lua");

/// The permits of one expirable semaphore; the owner of each hold is its permit id.
pub(crate) struct Permit {
    names: LockNames,
    timeouts: String,
}

impl Permit {
    pub(crate) fn new(name: &str, key: &str, publish: Publish) -> Permit {
        Permit {
            names: LockNames::new(
                crate::metrics::kind::EXPIRABLE_SEMAPHORE,
                name,
                key,
                keys::semaphore_channel(key),
                publish,
            ),
            timeouts: keys::permit_timeouts(key),
        }
    }

    /// The permits available now (expired ones come back first).
    pub(crate) fn available(&self) -> ScriptCall {
        let mut call = AVAILABLE.prepare_invoke(self.names.publish);
        call.key(&self.names.key)
            .key(&self.timeouts)
            .key(&self.names.channel);
        call
    }
}

impl LockKind for Permit {
    fn names(&self) -> &LockNames {
        &self.names
    }

    fn noun(&self) -> &'static str {
        "expirable semaphore"
    }

    fn acquire(&self, args: &AcquireArgs<'_>, _: &ClientOptions) -> ScriptCall {
        let mut call = ACQUIRE.prepare_invoke(self.names.publish);
        call.key(&self.names.key)
            .key(&self.timeouts)
            .key(&self.names.channel)
            .key(keys::acquire_latch(&self.names.key, args.request))
            .arg(args.lease_ms)
            .arg(args.owner);
        call
    }

    fn undo_acquire(&self, args: &UndoArgs<'_>, _: &ClientOptions) -> ScriptCall {
        let mut call = UNDO.prepare_invoke(self.names.publish);
        call.key(&self.names.key)
            .key(&self.timeouts)
            .key(&self.names.channel)
            .key(keys::acquire_latch(&self.names.key, args.request))
            .arg(args.owner)
            .arg(args.latch_ms);
        call
    }

    fn release(&self, args: &ReleaseArgs<'_>) -> ScriptCall {
        let mut call = RELEASE.prepare_invoke(self.names.publish);
        call.key(&self.names.key)
            .key(&self.timeouts)
            .key(&self.names.channel)
            .key(keys::unlock_latch(&self.names.key, args.request))
            .key(keys::acquire_latch(&self.names.key, args.acquired_by))
            .arg(args.owner)
            .arg(0)
            .arg(args.final_latch_ms);
        call
    }

    fn renewal(&self, owner: &str) -> Renewal {
        Renewal::by(&RENEWAL, &self.timeouts, owner)
    }
}
