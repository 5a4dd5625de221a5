//! What `Semaphore` and `ExpirableSemaphore` share: the acquire (with cancellation), their
//! name and the permit count's set-up and reading. A macro writes them into each class, over
//! the core type's methods of the same names; each class gives the doc comments and the
//! TypeScript types of its acquire and the doc comment of `availablePermits` (as
//! `#[doc = "..."]`, for the reason given in [`crate::hold`]).

use std::future::Future;

use napi::bindgen_prelude::{Object, ToNapiValue, Unknown};
use napi::Env;

use crate::cancellation::{cancellable, Cancellation};
use crate::error::OrThrow;
use crate::promise::promise;

/// A core semaphore, as its `acquire` takes options and gives what it took.
pub(crate) trait Permits: Clone + Send + Sync + 'static {
    /// The acquire's options, converted from its JavaScript options.
    type Options;
    /// What an acquire resolves to.
    type Acquired: ToNapiValue + Send + 'static;
    /// What it resolves to when nothing was taken (the wait ran out or it was cancelled).
    const NOTHING: Self::Acquired;

    fn options(options: Option<Unknown>) -> polylock::Result<Self::Options>;

    fn acquire_with(
        self,
        options: Self::Options,
    ) -> impl Future<Output = polylock::Result<Self::Acquired>> + Send + 'static;
}

/// The promise of an acquire of `semaphore`, which resolves to nothing taken as soon as
/// `cancellation` fires.
pub(crate) fn acquiring<'env, S: Permits>(
    env: &'env Env,
    semaphore: &S,
    options: Option<Unknown>,
    cancellation: Option<&Cancellation>,
) -> napi::Result<Object<'env>> {
    let options = S::options(options).or_throw(env)?;
    let acquired = semaphore.clone().acquire_with(options);
    promise(env, cancellable(cancellation, S::NOTHING, acquired))
}

/// The napi methods of a semaphore class `$class` whose `inner` is a core semaphore.
macro_rules! permit_methods {
    (
        $class:ident,
        $(#[$acquire_doc:meta])* acquire($acquire_args:literal, $acquire_returns:literal),
        $(#[$available_doc:meta])* available_permits $(,)?
    ) => {
        $crate::permits::permit_methods!(
            @impl $class,
            [$(#[$acquire_doc])*] $acquire_args $acquire_returns,
            [$(#[$available_doc])*],
            [
                #[doc = " Sets the number of permits if it was never set; `true` when set."]
                try_set_permits: "Promise<boolean>",
                #[doc = " Adds permits (a negative number takes some away)."]
                add_permits: "Promise<void>",
            ]
        );
    };
    (
        @impl $class:ident,
        [$(#[$acquire_doc:meta])*] $acquire_args:literal $acquire_returns:literal,
        [$(#[$available_doc:meta])*],
        [$($(#[$count_doc:meta])* $count:ident: $count_returns:literal),+ $(,)?]
    ) => {
        #[napi_derive::napi]
        impl $class {
            #[napi(getter)]
            pub fn name(&self) -> String {
                self.inner.name().to_owned()
            }

            $(#[$acquire_doc])*
            #[napi(strict, ts_args_type = $acquire_args, ts_return_type = $acquire_returns)]
            pub fn acquire<'env>(
                &self,
                env: &'env napi::Env,
                options: Option<napi::bindgen_prelude::Unknown>,
                cancellation: Option<&$crate::cancellation::Cancellation>,
            ) -> napi::Result<napi::bindgen_prelude::Object<'env>> {
                $crate::permits::acquiring(env, &self.inner, options, cancellation)
            }

            $(
                $(#[$count_doc])*
                #[napi(ts_args_type = "permits: number", ts_return_type = $count_returns)]
                pub fn $count<'env>(
                    &self,
                    env: &'env napi::Env,
                    permits: napi::bindgen_prelude::Unknown,
                ) -> napi::Result<napi::bindgen_prelude::Object<'env>> {
                    use $crate::error::OrThrow;
                    let permits = $crate::args::integer(permits, "permits").or_throw(env)?;
                    let semaphore = self.inner.clone();
                    $crate::promise::promise(env, async move { semaphore.$count(permits).await })
                }
            )+

            $(#[$available_doc])*
            #[napi(ts_return_type = "Promise<number>")]
            pub fn available_permits<'env>(
                &self,
                env: &'env napi::Env,
            ) -> napi::Result<napi::bindgen_prelude::Object<'env>> {
                let semaphore = self.inner.clone();
                $crate::promise::promise(env, async move { semaphore.available_permits().await })
            }
        }
    };
}

pub(crate) use permit_methods;
