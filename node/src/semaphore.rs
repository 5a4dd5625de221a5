//! The native `Semaphore`: counted permits that belong to nobody.

use std::time::Duration;

use napi::bindgen_prelude::{Object, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::args::{integer, optional};
use crate::error::OrThrow;
use crate::options::semaphore_acquire_options;
use crate::permits::{permit_methods, Permits};
use crate::promise::promise;

/// A counting semaphore (Redisson RSemaphore layout): permits belong to nobody and never expire.
#[napi]
pub struct Semaphore {
    pub(crate) inner: polylock::Semaphore,
}

impl Permits for polylock::Semaphore {
    /// How many permits, and the wait.
    type Options = (i64, Option<Duration>);
    type Acquired = bool;
    const NOTHING: bool = false;

    fn options(options: Option<Unknown>) -> polylock::Result<Self::Options> {
        semaphore_acquire_options(options)
    }

    async fn acquire_with(self, (permits, wait): Self::Options) -> polylock::Result<bool> {
        self.acquire(permits, wait).await
    }
}

permit_methods!(
    Semaphore,
    #[doc = " Takes `permits` (default 1), waiting up to `waitMs` (none or `Infinity` = no bound, 0 ="]
    #[doc = " one attempt). Resolves `false` when the wait runs out or `cancellation` fires (then"]
    #[doc = " nothing is taken)."]
    acquire(
        "options?: SemaphoreAcquireOptions | null, cancellation?: Cancellation | null",
        "Promise<boolean>"
    ),
    #[doc = " The permits available now (0 when never set)."]
    available_permits,
);

#[napi]
impl Semaphore {
    /// Gives `permits` (default 1) back, whoever took them, and wakes waiters.
    #[napi(
        ts_args_type = "permits?: number | null",
        ts_return_type = "Promise<void>"
    )]
    pub fn release<'env>(
        &self,
        env: &'env Env,
        permits: Option<Unknown>,
    ) -> napi::Result<Object<'env>> {
        let permits = optional(permits, |permits| integer(permits, "permits")).or_throw(env)?;
        let semaphore = self.inner.clone();
        promise(
            env,
            async move { semaphore.release(permits.unwrap_or(1)).await },
        )
    }
}
