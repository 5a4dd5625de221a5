//! The native `CountDownLatch` (Redisson RCountDownLatch layout).

use napi::bindgen_prelude::{Object, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::args::{integer, number};
use crate::error::OrThrow;
use crate::promise::promise;

/// A count-down latch: a count set once, counted down by anyone, awaited to reach zero.
#[napi]
pub struct CountDownLatch {
    pub(crate) inner: polylock::CountDownLatch,
}

#[napi]
impl CountDownLatch {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// Sets the count (1 to 2**53 - 1) when none is set; resolves `true` when set.
    #[napi(ts_args_type = "count: number", ts_return_type = "Promise<boolean>")]
    pub fn try_set_count<'env>(
        &self,
        env: &'env Env,
        count: Unknown,
    ) -> napi::Result<Object<'env>> {
        let count = integer(count, "count").or_throw(env)?;
        let latch = self.inner.clone();
        promise(env, async move { latch.try_set_count(count).await })
    }

    /// Takes one from the count; the one that reaches zero wakes every waiter.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn count_down<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let latch = self.inner.clone();
        promise(env, async move { latch.count_down().await })
    }

    /// The count now (0 when open).
    #[napi(ts_return_type = "Promise<number>")]
    pub fn count<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let latch = self.inner.clone();
        // Counts are at most 2**53 - 1 when set by polylock: a JS number holds them exactly.
        promise(
            env,
            async move { latch.count().await.map(|count| count as f64) },
        )
    }

    /// Waits until the count is zero, at most `timeoutMs`; resolves `true` when it is.
    #[napi(
        ts_args_type = "timeoutMs: number",
        ts_return_type = "Promise<boolean>"
    )]
    pub fn await_zero<'env>(
        &self,
        env: &'env Env,
        timeout_ms: Unknown,
    ) -> napi::Result<Object<'env>> {
        let timeout = number(timeout_ms, "timeoutMs")
            .and_then(polylock::latch_timeout_from_millis)
            .or_throw(env)?;
        let latch = self.inner.clone();
        promise(env, async move { latch.await_zero(timeout).await })
    }

    /// Deletes the latch whatever its count; resolves `true` when there was one.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn delete<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let latch = self.inner.clone();
        promise(env, async move { latch.delete().await })
    }
}
