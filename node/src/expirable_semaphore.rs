//! The native `ExpirableSemaphore`: permits with ids and leases.

use napi::bindgen_prelude::{Object, Unknown};
use napi::Env;
use napi_derive::napi;
use polylock::AcquireOptions as CoreAcquireOptions;

use crate::args::string;
use crate::error::OrThrow;
use crate::options::acquire_options;
use crate::permits::{permit_methods, Permits};
use crate::promise::promise;

/// A semaphore of permits with ids and leases (Redisson RPermitExpirableSemaphore layout).
#[napi]
pub struct ExpirableSemaphore {
    pub(crate) inner: polylock::ExpirableSemaphore,
}

impl Permits for polylock::ExpirableSemaphore {
    type Options = CoreAcquireOptions;
    /// The permit's id.
    type Acquired = Option<String>;
    const NOTHING: Option<String> = None;

    fn options(options: Option<Unknown>) -> polylock::Result<CoreAcquireOptions> {
        acquire_options(CoreAcquireOptions::new(), options)
    }

    async fn acquire_with(self, options: CoreAcquireOptions) -> polylock::Result<Option<String>> {
        self.acquire(options).await
    }
}

permit_methods!(
    ExpirableSemaphore,
    #[doc = " Takes one permit, waiting up to `waitMs`; resolves to its id, or `null` when the wait"]
    #[doc = " runs out or `cancellation` fires (then nothing is taken). `leaseMs`: none = renewed by"]
    #[doc = " the watchdog while the client lives."]
    acquire(
        "options?: AcquireOptions | null, cancellation?: Cancellation | null",
        "Promise<string | null>"
    ),
    #[doc = " The permits available now, after permits whose lease ran out came back."]
    available_permits,
);

#[napi]
impl ExpirableSemaphore {
    /// Releases the permit `permitId`: `ERR_NOT_HELD` when nobody holds it, `ERR_LOCK_LOST`
    /// when it was this handle's and was lost (its lease ran out, or another client released
    /// it): once, for the handle's latest 1024 lost permits.
    #[napi(ts_args_type = "permitId: string", ts_return_type = "Promise<void>")]
    pub fn release<'env>(&self, env: &'env Env, permit_id: Unknown) -> napi::Result<Object<'env>> {
        let permit_id = string(permit_id, "permit id").or_throw(env)?;
        let semaphore = self.inner.clone();
        promise(env, async move { semaphore.release(&permit_id).await })
    }

    /// The ids of the permits this handle holds (no I/O). A permit leaves when released, or as
    /// soon as its lease runs out (by this client's clock) or the watchdog finds it gone.
    #[napi]
    pub fn held_permits(&self) -> Vec<String> {
        self.inner.held_permits()
    }
}
