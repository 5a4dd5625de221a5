//! The native `Lock`: one owner's handle on a lock of any kind (plain, fair, fenced, or a
//! read-write lock's read or write lock).

use std::time::Duration;

use napi::bindgen_prelude::Object;
use napi::Env;
use napi_derive::napi;

use crate::hold::hold_methods;
use crate::options::AcquireOptions;
use crate::promise::promise;

/// One owner's handle on one lock (reentrant). Dropping it while held releases in the background.
#[napi]
pub struct Lock {
    pub(crate) inner: polylock::Lock,
}

hold_methods!(
    Lock,
    [
        #[doc = " Acquires or re-enters. An option left out takes the lock's default. `waitMs`: `Infinity`"]
        #[doc = " = no bound, 0 = one attempt. Resolves `false` when the wait runs out or `cancellation`"]
        #[doc = " fires (then no lock is held; a cancellation fired before the call makes no attempt)."]
        acquire: ResolveFalse,
        #[doc = " The acquire of `using()`: as `acquire`, but a wait that runs out rejects with"]
        #[doc = " `ERR_TIMEOUT` (the core's message, the same in every language). Resolves `true` when"]
        #[doc = " acquired, `false` only when `cancellation` fired."]
        acquire_or_fail: Reject,
    ],
    #[doc = " Releases one level of the hold: `ERR_NOT_HELD` when not held, `ERR_LOCK_LOST` when lost."]
    release,
    #[doc = " Whether this handle holds the lock (no I/O)."]
    is_held,
    #[doc = " How many unreleased acquisitions this handle has (no I/O)."]
    hold_count,
    #[doc = " Whether the current hold's lease was lost (no I/O)."]
    is_lost,
    #[doc = " Calls `callback` with an `ERR_LOCK_LOST` error each time a hold of this handle is lost."]
    #[doc = " The callback never keeps the event loop alive. It must not reference this handle, or the"]
    #[doc = " handle could never be garbage-collected (the core keeps the callback)."]
    on_lost,
);

#[napi]
impl Lock {
    /// The defaults of this handle's acquires (`client.lock(name, defaults)`); a field is absent
    /// when its default is none (no bound, the watchdog lease).
    #[napi(getter)]
    pub fn defaults(&self) -> AcquireOptions {
        AcquireOptions::of_defaults(self.inner.defaults())
    }

    /// The holder's remaining lease in milliseconds (asks Redis): `null` when nobody holds the
    /// lock, `Infinity` when its key has no expiry.
    #[napi(ts_return_type = "Promise<number | null>")]
    pub fn remaining_lease<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let lock = self.inner.clone();
        promise(env, async move {
            let remaining = lock.remaining_lease().await?;
            Ok(remaining.map(|lease| match lease {
                Duration::MAX => f64::INFINITY,
                lease => lease.as_secs_f64() * 1000.0,
            }))
        })
    }

    /// Whether anyone holds the lock.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn is_locked<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let lock = self.inner.clone();
        promise(env, async move { lock.is_locked().await })
    }

    /// Deletes the lock whoever holds it; `true` when there was one.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn force_unlock<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let lock = self.inner.clone();
        promise(env, async move { lock.force_unlock().await })
    }

    /// The fencing token of the current hold (fenced locks); `null` when nothing is held and for
    /// kinds without tokens. Tokens grow by one per acquisition, so they stay safe integers.
    #[napi(getter)]
    pub fn token(&self) -> Option<i64> {
        self.inner.token()
    }

    /// `<client-id>:<holder-id>`, the hash field this handle writes.
    #[napi(getter)]
    pub fn owner(&self) -> String {
        self.inner.owner().to_owned()
    }
}
