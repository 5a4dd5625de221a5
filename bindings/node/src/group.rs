//! The native `LockGroup`: a core `MultiLock` or `RedLock` over native `Lock` handles.
//! `node/index.js` wraps it as `MultiLock` and `RedLock`.

use napi::bindgen_prelude::{ClassInstance, Function, Object};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::Env;
use napi_derive::napi;

use super::{
    acquire_options, cancellable, coded, js_error, lock_defaults, promise, AcquireOptions,
    Cancellation, Lock,
};

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
        defaults: Option<AcquireOptions>,
    ) -> napi::Result<Self> {
        let locks: Vec<polylock::Lock> = locks.iter().map(|lock| lock.inner.clone()).collect();
        let group = match kind.as_str() {
            "multi" => polylock::MultiLock::new(locks).map(polylock::MultiLock::into_group),
            "red" => polylock::RedLock::new(locks).map(polylock::RedLock::into_group),
            other => Err(polylock::Error::InvalidArgument(format!(
                "a lock group is 'multi' or 'red', got '{other}'"
            ))),
        };
        let group = group
            .and_then(|group| group.with_defaults(lock_defaults(defaults)?))
            .map_err(|err| js_error(&env, &err))?;
        Ok(LockGroup { inner: group })
    }

    fn acquiring<'env, Run, Acquired>(
        &self,
        env: &'env Env,
        options: Option<AcquireOptions>,
        cancellation: Option<&Cancellation>,
        run: Run,
    ) -> napi::Result<Object<'env>>
    where
        Run: FnOnce(polylock::LockGroup, polylock::AcquireOptions) -> Acquired,
        Acquired: std::future::Future<Output = polylock::Result<bool>> + Send + 'static,
    {
        let options =
            acquire_options(self.inner.defaults(), options).map_err(|err| js_error(env, &err))?;
        let cancelled = cancellation.map(|cancellation| cancellation.sender.subscribe());
        promise(
            env,
            cancellable(cancelled, false, run(self.inner.clone(), options)),
        )
    }

    /// Acquires (one more level of) the group; `false` when the wait runs out or
    /// `cancellation` fires (then nothing is held).
    #[napi(
        strict,
        ts_args_type = "options?: AcquireOptions | null, cancellation?: Cancellation | null",
        ts_return_type = "Promise<boolean>"
    )]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        options: Option<AcquireOptions>,
        cancellation: Option<&Cancellation>,
    ) -> napi::Result<Object<'env>> {
        self.acquiring(env, options, cancellation, |group, options| async move {
            group.acquire(options).await
        })
    }

    /// As `acquire`, but a wait that runs out rejects with `ERR_TIMEOUT`.
    #[napi(
        strict,
        ts_args_type = "options?: AcquireOptions | null, cancellation?: Cancellation | null",
        ts_return_type = "Promise<boolean>"
    )]
    pub fn acquire_or_fail<'env>(
        &self,
        env: &'env Env,
        options: Option<AcquireOptions>,
        cancellation: Option<&Cancellation>,
    ) -> napi::Result<Object<'env>> {
        self.acquiring(env, options, cancellation, |group, options| async move {
            group.acquire_or_fail(options).await.map(|()| true)
        })
    }

    /// Releases one level, on every server.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn release<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let group = self.inner.clone();
        promise(env, async move { group.release().await })
    }

    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// How many of its locks must be held.
    #[napi(getter)]
    pub fn quorum(&self) -> u32 {
        self.inner.quorum() as u32
    }

    #[napi]
    pub fn is_held(&self) -> bool {
        self.inner.is_held()
    }

    #[napi]
    pub fn hold_count(&self) -> u32 {
        self.inner.hold_count()
    }

    #[napi]
    pub fn is_lost(&self) -> bool {
        self.inner.is_lost()
    }

    /// Calls `callback` with an `ERR_LOCK_LOST` error each time a hold of the group is lost.
    #[napi(ts_args_type = "callback: (error: Error) => void")]
    pub fn on_lost(&self, callback: Function<(), ()>) -> napi::Result<()> {
        let notify = callback
            .build_threadsafe_function::<polylock::Error>()
            .weak::<true>()
            .build_callback(|context| Ok(coded(&context.value)))?;
        self.inner.on_lost(move |err| {
            let _ = notify.call(err.clone(), ThreadsafeFunctionCallMode::NonBlocking);
        });
        Ok(())
    }
}
