//! What `Lock` and `LockGroup` share: the acquires (with cancellation), release, the hold's
//! state and the lost callback. A macro writes them into each class (napi methods cannot come
//! from a trait), over the core's `polylock::Hold`; each class gives its own
//! doc comments, which go into `native.d.ts`.
//!
//! The doc comments are given as `#[doc = "..."]`: napi-derive copies a string's quotes as
//! they are written, and a `///` comment passed through a macro becomes a raw string, whose
//! `r"` would end up in `native.d.ts`.

use napi::bindgen_prelude::{Function, Object, Unknown};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::Env;
use polylock::Hold;

use crate::cancellation::{cancellable, Cancellation};
use crate::error::{coded, OrThrow};
use crate::options::acquire_options;
use crate::promise::promise;

/// What an acquire whose wait runs out does.
#[derive(Clone, Copy)]
pub(crate) enum OnTimeout {
    /// Resolves `false` (`acquire`).
    ResolveFalse,
    /// Rejects with the core's `ERR_TIMEOUT` (`acquireOrFail`, for `using`).
    Reject,
}

/// The promise of an acquire of `handle`: its options (the handle's defaults filling what is
/// left out), then the acquire, which resolves `false` as soon as `cancellation` fires.
pub(crate) fn acquiring<'env>(
    env: &'env Env,
    handle: &impl Hold,
    options: Option<Unknown>,
    cancellation: Option<&Cancellation>,
    on_timeout: OnTimeout,
) -> napi::Result<Object<'env>> {
    let options = acquire_options(handle.defaults(), options).or_throw(env)?;
    let handle = handle.clone();
    let acquired = async move {
        match on_timeout {
            OnTimeout::ResolveFalse => handle.acquire(options).await,
            OnTimeout::Reject => handle.acquire_or_fail(options).await.map(|()| true),
        }
    };
    promise(env, cancellable(cancellation, false, acquired))
}

/// `callback` as the core's lost callback: called with an `ERR_LOCK_LOST` error. It never keeps
/// the event loop alive.
pub(crate) fn lost_callback(
    callback: Function<(), ()>,
) -> napi::Result<impl Fn(&polylock::Error) + Send + Sync + 'static> {
    let notify = callback
        .build_threadsafe_function::<polylock::Error>()
        .weak::<true>()
        .build_callback(|context| Ok(coded(&context.value)))?;
    Ok(move |err: &polylock::Error| {
        // Fails only while Node shuts down, when nobody is left to tell.
        let _ = notify.call(err.clone(), ThreadsafeFunctionCallMode::NonBlocking);
    })
}

/// The napi methods of a handle `$class` whose `inner` is a core `polylock::Hold`, each preceded by its doc comment. The acquires are listed with what a wait
/// that runs out does.
macro_rules! hold_methods {
    (
        $class:ident,
        [$($(#[$acquire_doc:meta])* $acquire:ident: $on_timeout:ident),+ $(,)?],
        $(#[$release:meta])* release,
        $(#[$is_held:meta])* is_held,
        $(#[$hold_count:meta])* hold_count,
        $(#[$is_lost:meta])* is_lost,
        $(#[$on_lost:meta])* on_lost $(,)?
    ) => {
        #[napi_derive::napi]
        impl $class {
            $(
                $(#[$acquire_doc])*
                #[napi(
                    strict,
                    ts_args_type = "options?: AcquireOptions | null, cancellation?: Cancellation | null",
                    ts_return_type = "Promise<boolean>"
                )]
                pub fn $acquire<'env>(
                    &self,
                    env: &'env napi::Env,
                    options: Option<napi::bindgen_prelude::Unknown>,
                    cancellation: Option<&$crate::cancellation::Cancellation>,
                ) -> napi::Result<napi::bindgen_prelude::Object<'env>> {
                    use $crate::hold::{acquiring, OnTimeout};
                    acquiring(env, &self.inner, options, cancellation, OnTimeout::$on_timeout)
                }
            )+

            $(#[$release])*
            #[napi(ts_return_type = "Promise<void>")]
            pub fn release<'env>(
                &self,
                env: &'env napi::Env,
            ) -> napi::Result<napi::bindgen_prelude::Object<'env>> {
                let handle = self.inner.clone();
                $crate::promise::promise(env, async move { polylock::Hold::release(&handle).await })
            }

            $(#[$is_held])*
            #[napi]
            pub fn is_held(&self) -> bool {
                polylock::Hold::is_held(&self.inner)
            }

            $(#[$hold_count])*
            #[napi]
            pub fn hold_count(&self) -> u32 {
                polylock::Hold::hold_count(&self.inner)
            }

            $(#[$is_lost])*
            #[napi]
            pub fn is_lost(&self) -> bool {
                polylock::Hold::is_lost(&self.inner)
            }

            #[napi(getter)]
            pub fn name(&self) -> String {
                polylock::Hold::name(&self.inner).to_owned()
            }

            $(#[$on_lost])*
            #[napi(ts_args_type = "callback: (error: Error) => void")]
            pub fn on_lost(
                &self,
                callback: napi::bindgen_prelude::Function<(), ()>,
            ) -> napi::Result<()> {
                polylock::Hold::on_lost(&self.inner, $crate::hold::lost_callback(callback)?);
                Ok(())
            }
        }
    };
}

pub(crate) use hold_methods;
