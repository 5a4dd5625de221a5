//! Core futures as JavaScript promises.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;
use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::Env;

use crate::error::js_error;

/// Runs `work` on the core's runtime and returns a promise settled with its outcome. A panic in
/// `work` rejects the promise instead of crossing into Node.
pub(crate) fn promise<'env, T, F>(env: &'env Env, work: F) -> napi::Result<Object<'env>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = polylock::Result<T>> + Send + 'static,
{
    let (deferred, promise) = env.create_deferred()?;
    polylock::runtime().spawn(async move {
        let outcome = AssertUnwindSafe(work)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err(polylock::Error::redis("polylock: internal error (panic)")));
        deferred.resolve(move |env| outcome.map_err(|err| js_error(&env, &err)));
    });
    Ok(promise)
}
