//! The native `LockGroup`: a core `MultiLock` or `RedLock` over native `Lock` handles.
//! `node/lib/group.js` wraps it as `MultiLock` and `RedLock`.

use napi::bindgen_prelude::{ClassInstance, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::error::OrThrow;
use crate::hold::hold_methods;
use crate::lock::Lock;
use crate::options::lock_defaults;

/// All (`kind` "multi") or a majority (`kind` "red") of several locks, held together.
#[napi]
pub struct LockGroup {
    inner: polylock::LockGroup,
}

#[napi]
impl LockGroup {
    /// `kind`: "multi" or "red"; `defaults` as `client.lock(name, defaults)`. The core checks
    /// the locks (at least one, none twice) and the defaults.
    #[napi(
        constructor,
        ts_args_type = "kind: 'multi' | 'red', locks: Lock[], defaults?: AcquireOptions | null"
    )]
    pub fn new(
        env: Env,
        kind: String,
        locks: Vec<ClassInstance<'_, Lock>>,
        defaults: Option<Unknown>,
    ) -> napi::Result<Self> {
        let locks: Vec<polylock::Lock> = locks.iter().map(|lock| lock.inner.clone()).collect();
        let group = match kind.as_str() {
            "multi" => polylock::MultiLock::new(locks).map(polylock::MultiLock::into_group),
            "red" => polylock::RedLock::new(locks).map(polylock::RedLock::into_group),
            other => Err(polylock::Error::invalid_argument(format!(
                "a lock group is 'multi' or 'red', got '{other}'"
            ))),
        };
        let group = group
            .and_then(|group| group.with_defaults(lock_defaults(defaults)?))
            .or_throw(&env)?;
        Ok(LockGroup { inner: group })
    }

    /// How many of its locks must be held.
    #[napi(getter)]
    pub fn quorum(&self) -> u32 {
        self.inner.quorum() as u32
    }
}

hold_methods!(
    LockGroup,
    [
        #[doc = " Acquires (one more level of) the group; `false` when the wait runs out or"]
        #[doc = " `cancellation` fires (then nothing is held)."]
        acquire: ResolveFalse,
        #[doc = " As `acquire`, but a wait that runs out rejects with `ERR_TIMEOUT`."]
        acquire_or_fail: Reject,
    ],
    #[doc = " Releases one level, on every server."]
    release,
    is_held,
    hold_count,
    is_lost,
    #[doc = " Calls `callback` with an `ERR_LOCK_LOST` error each time a hold of the group is lost."]
    on_lost,
);
