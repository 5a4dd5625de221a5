//! The napi-rs binding of polylock: the native `Client`, `Lock`, `ReadWriteLock`, `Semaphore`,
//! `ExpirableSemaphore` and `Cancellation` classes.
//!
//! `node/index.js` wraps them to give `using`, `AbortSignal` and `Symbol.asyncDispose`; the
//! JavaScript type checks and the one error mapping live here, and the core checks every value
//! (so a bad value gets the same message in every language). Times are milliseconds.

use polylock::AcquireOptions as CoreAcquireOptions;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt;
use napi::bindgen_prelude::{BufferSlice, Function, Object, ToNapiValue, Unknown};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{Env, JsError, JsValue, ValueType};
use napi_derive::napi;
use polylock::options::{lease_from_millis, option_from_millis, wait_from_millis};
use tokio::sync::watch;

mod group;
pub mod log;

/// The `code` of the JS `Error` for each kind of core error. The one mapping of this binding.
fn error_code(kind: polylock::ErrorKind) -> &'static str {
    use polylock::ErrorKind::*;
    match kind {
        InvalidArgument => "ERR_INVALID_ARGUMENT",
        NotHeld => "ERR_NOT_HELD",
        LockLost => "ERR_LOCK_LOST",
        Connection => "ERR_CONNECTION",
        Timeout => "ERR_TIMEOUT",
        WrongType => "ERR_WRONG_TYPE",
        Redis => "ERR_REDIS",
        StaleToken => "ERR_STALE_TOKEN",
        NotSynced => "ERR_NOT_SYNCED",
    }
}

/// A core error as a napi error whose JS form is an `Error` with `code` set (napi puts the
/// status string into `code`).
fn coded(err: &polylock::Error) -> napi::Error<&'static str> {
    napi::Error::new(error_code(err.kind()), err.to_string())
}

/// A core error as the JS `Error` to throw or reject with, built on the JS thread so that napi
/// throws this very object (with its `code`) rather than a generic one.
fn js_error(env: &Env, err: &polylock::Error) -> napi::Error {
    napi::Error::from(JsError::from(coded(err)).into_unknown(*env))
}

fn invalid(message: String) -> polylock::Error {
    polylock::Error::InvalidArgument(message)
}

/// Runs `work` on the core's runtime and returns a promise settled with its outcome. A panic in
/// `work` rejects the promise instead of crossing into Node.
fn promise<'env, T, F>(env: &'env Env, work: F) -> napi::Result<Object<'env>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = polylock::Result<T>> + Send + 'static,
{
    let (deferred, promise) = env.create_deferred()?;
    polylock::runtime().spawn(async move {
        let outcome = AssertUnwindSafe(work)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                Err(polylock::Error::Redis(
                    "polylock: internal error (panic)".into(),
                ))
            });
        deferred.resolve(move |env| outcome.map_err(|err| js_error(&env, &err)));
    });
    Ok(promise)
}

/// Options of `Client.connect`. Times in milliseconds; an option left out (or `null`) takes the
/// core's default.
#[napi(object)]
#[derive(Default)]
pub struct ConnectOptions {
    /// The lease of locks acquired without `leaseMs`, renewed every third of it. Default 30000.
    pub watchdog_timeout_ms: Option<f64>,
    /// How long connecting may take before `ERR_CONNECTION`. Default 5000.
    pub connect_timeout_ms: Option<f64>,
    /// How long one Redis command may wait for its answer before `ERR_TIMEOUT`. Default 5000.
    pub response_timeout_ms: Option<f64>,
    /// How long a fair-lock waiter that stopped answering (its process died) keeps its place.
    /// Default 10000.
    pub fair_queue_timeout_ms: Option<f64>,
    /// Follow every acquire, renewal and release with `WAIT` for the replicas; an acquisition
    /// no replica acknowledged is undone (`ERR_NOT_SYNCED` once the wait runs out). Default false.
    pub sync_replicas: Option<bool>,
    /// How long `WAIT` waits for the replicas (with `syncReplicas`). Default 1000.
    pub replica_sync_timeout_ms: Option<f64>,
    /// With a `rediss://` URL: the CA certificates to trust instead of the public web roots, a
    /// PEM file path or PEM text.
    pub tls_ca: Option<String>,
    /// With a `rediss://` URL: a client certificate (mutual TLS), a PEM file path or PEM text;
    /// needs `tlsKey`.
    pub tls_cert: Option<String>,
    /// The private key of `tlsCert`, a PEM file path or PEM text.
    pub tls_key: Option<String>,
    /// For development only: do not verify the server's certificate (a warning is logged).
    /// Default false.
    pub tls_insecure: Option<bool>,
}

/// The wait and lease of an acquire, and a lock's defaults (`client.lock(name, defaults)`).
/// Times in milliseconds. A field left out (or `null`) takes the lock's default.
#[napi(object)]
#[derive(Default)]
pub struct AcquireOptions {
    /// Longest wait: `Infinity` = no bound, 0 = one attempt; fractions of a ms are accepted.
    /// Left out: the lock's default wait, which is no bound unless `client.lock` set one.
    pub wait_ms: Option<f64>,
    /// A fixed lease, never renewed (1 ms to 10 years). Left out: the lock's default lease,
    /// which is the watchdog-renewed lease unless `client.lock` set one.
    pub lease_ms: Option<f64>,
}

/// The options of a `Semaphore` acquire. Times in milliseconds.
#[napi(object)]
#[derive(Default)]
pub struct SemaphoreAcquireOptions {
    /// How many permits to take: 1 (the default) to 2147483647. A fraction is truncated.
    pub permits: Option<i64>,
    /// Longest wait: left out or `Infinity` = no bound, 0 = one attempt. Fractions of a ms are
    /// accepted.
    pub wait_ms: Option<f64>,
}

/// A lock's defaults from `client.lock(name, defaults)`, checked by the core.
fn lock_defaults(defaults: Option<AcquireOptions>) -> polylock::Result<CoreAcquireOptions> {
    let defaults = defaults.unwrap_or_default();
    Ok(CoreAcquireOptions {
        wait: wait_from_millis(defaults.wait_ms)?,
        lease: lease_from_millis(defaults.lease_ms)?,
    })
}

/// The options of one acquire: a field left out takes `defaults`' value.
fn acquire_options(
    defaults: CoreAcquireOptions,
    options: Option<AcquireOptions>,
) -> polylock::Result<CoreAcquireOptions> {
    let options = options.unwrap_or_default();
    Ok(CoreAcquireOptions {
        wait: match options.wait_ms {
            None => defaults.wait,
            ms => wait_from_millis(ms)?,
        },
        lease: match options.lease_ms {
            None => defaults.lease,
            ms => lease_from_millis(ms)?,
        },
    })
}

/// A lock's `defaults` and a handle of it: `with_defaults` checks them.
fn with_defaults(lock: polylock::Lock, defaults: Option<AcquireOptions>) -> polylock::Result<Lock> {
    let inner = lock.with_defaults(lock_defaults(defaults)?)?;
    Ok(Lock { inner })
}

/// A connection to one Redis server; make locks from it.
#[napi]
pub struct Client {
    inner: polylock::Client,
}

#[napi]
impl Client {
    /// Connects; rejects with `ERR_CONNECTION` when the server cannot be reached in time.
    #[napi(
        strict,
        ts_args_type = "url: string, options?: ConnectOptions | null",
        ts_return_type = "Promise<Client>"
    )]
    pub fn connect<'env>(
        env: &'env Env,
        url: Unknown,
        options: Option<ConnectOptions>,
    ) -> napi::Result<Object<'env>> {
        let (url, options) = connect_options(url, options).map_err(|err| js_error(env, &err))?;
        promise(env, async move {
            let inner = polylock::Client::connect_with(&url, options).await?;
            Ok(Client { inner })
        })
    }

    /// This client's id, the first half of every owner string it writes.
    #[napi(getter)]
    pub fn id(&self) -> String {
        self.inner.id().to_owned()
    }

    /// The lease of watchdog-renewed locks, in milliseconds.
    #[napi(getter)]
    pub fn watchdog_timeout_ms(&self) -> f64 {
        self.inner.watchdog_timeout().as_secs_f64() * 1000.0
    }

    /// A new handle (a new owner) on the lock `name`, with per-lock `defaults` for its acquires
    /// (checked now). No I/O.
    #[napi(
        strict,
        ts_args_type = "name: string, defaults?: AcquireOptions | null"
    )]
    pub fn lock(
        &self,
        env: &Env,
        name: Unknown,
        defaults: Option<AcquireOptions>,
    ) -> napi::Result<Lock> {
        string(name, "lock name")
            .and_then(|name| self.inner.lock(&name))
            .and_then(|lock| with_defaults(lock, defaults))
            .map_err(|err| js_error(env, &err))
    }

    /// A new handle (a new owner) on the fair lock `name`: FIFO, a release wakes only the next
    /// waiter. No I/O.
    #[napi(
        strict,
        ts_args_type = "name: string, defaults?: AcquireOptions | null"
    )]
    pub fn fair_lock(
        &self,
        env: &Env,
        name: Unknown,
        defaults: Option<AcquireOptions>,
    ) -> napi::Result<Lock> {
        string(name, "lock name")
            .and_then(|name| self.inner.fair_lock(&name))
            .and_then(|lock| with_defaults(lock, defaults))
            .map_err(|err| js_error(env, &err))
    }

    /// A new handle (a new owner) on the fenced lock `name`: the lock API plus a token per
    /// acquisition (`token`). No I/O.
    #[napi(
        strict,
        ts_args_type = "name: string, defaults?: AcquireOptions | null"
    )]
    pub fn fenced_lock(
        &self,
        env: &Env,
        name: Unknown,
        defaults: Option<AcquireOptions>,
    ) -> napi::Result<Lock> {
        string(name, "lock name")
            .and_then(|name| self.inner.fenced_lock(&name))
            .and_then(|lock| with_defaults(lock, defaults))
            .map_err(|err| js_error(env, &err))
    }

    /// A new owner's handle on the read-write lock `name`. No I/O.
    /// `defaults` are those of both its locks.
    #[napi(
        strict,
        ts_args_type = "name: string, defaults?: AcquireOptions | null"
    )]
    pub fn read_write_lock(
        &self,
        env: &Env,
        name: Unknown,
        defaults: Option<AcquireOptions>,
    ) -> napi::Result<ReadWriteLock> {
        let made = string(name, "lock name").and_then(|name| {
            let inner = self.inner.read_write_lock(&name)?;
            let defaults = lock_defaults(defaults)?;
            // The core checks them (the same messages as an acquire's).
            inner.read_lock().with_defaults(defaults)?;
            Ok(ReadWriteLock { inner, defaults })
        });
        made.map_err(|err| js_error(env, &err))
    }

    /// A handle on the semaphore `name`. No I/O.
    #[napi(ts_args_type = "name: string")]
    pub fn semaphore(&self, env: &Env, name: Unknown) -> napi::Result<Semaphore> {
        let made = string(name, "semaphore name").and_then(|name| self.inner.semaphore(&name));
        made.map(|inner| Semaphore { inner })
            .map_err(|err| js_error(env, &err))
    }

    /// A handle on the expirable semaphore `name` (permits with ids and leases). No I/O.
    #[napi(ts_args_type = "name: string")]
    pub fn expirable_semaphore(
        &self,
        env: &Env,
        name: Unknown,
    ) -> napi::Result<ExpirableSemaphore> {
        let made =
            string(name, "semaphore name").and_then(|name| self.inner.expirable_semaphore(&name));
        made.map(|inner| ExpirableSemaphore { inner })
            .map_err(|err| js_error(env, &err))
    }

    /// Sets `key` to `value` only if `token` is at least the highest token applied to `key`,
    /// else rejects with `ERR_STALE_TOKEN` and writes nothing.
    #[napi(
        ts_args_type = "key: string, value: string | Buffer, token: number",
        ts_return_type = "Promise<void>"
    )]
    pub fn fenced_set<'env>(
        &self,
        env: &'env Env,
        key: Unknown,
        value: Unknown,
        token: Unknown,
    ) -> napi::Result<Object<'env>> {
        let args = (|| Ok((string(key, "fenced key")?, bytes(value)?, token_of(token)?)))();
        let (key, value, token) = args.map_err(|err| js_error(env, &err))?;
        let client = self.inner.clone();
        promise(
            env,
            async move { client.fenced_set(&key, value, token).await },
        )
    }

    /// Deletes `key` under the rule of `fencedSet`; `true` when a key was deleted.
    #[napi(
        ts_args_type = "key: string, token: number",
        ts_return_type = "Promise<boolean>"
    )]
    pub fn fenced_delete<'env>(
        &self,
        env: &'env Env,
        key: Unknown,
        token: Unknown,
    ) -> napi::Result<Object<'env>> {
        let args = (|| Ok((string(key, "fenced key")?, token_of(token)?)))();
        let (key, token) = args.map_err(|err| js_error(env, &err))?;
        let client = self.inner.clone();
        promise(env, async move { client.fenced_delete(&key, token).await })
    }

    /// Stops the watchdog and pub/sub; returns the names of locks still held (they expire).
    #[napi]
    pub fn close(&self) -> Vec<String> {
        self.inner.close()
    }
}

fn string(value: Unknown, what: &str) -> polylock::Result<String> {
    match value.get_type() {
        // SAFETY: the value was checked to be a string.
        Ok(ValueType::String) => unsafe { value.cast::<String>() }
            .map_err(|_| invalid(format!("{what} must be a string"))),
        _ => Err(invalid(format!("{what} must be a string"))),
    }
}

/// A JS number as an integer for the core to check, converted as napi converts numbers to
/// i64 (a fraction is truncated, `NaN` and infinities become 0). Anything but a number is an
/// error of this binding.
fn integer(value: Unknown, what: &str) -> polylock::Result<i64> {
    match value.get_type() {
        // SAFETY: the value was checked to be a number.
        Ok(ValueType::Number) => {
            unsafe { value.cast::<i64>() }.map_err(|_| invalid(format!("{what} must be a number")))
        }
        _ => Err(invalid(format!("{what} must be a number"))),
    }
}

/// A fencing token (a number, as `lock.token` gives it).
fn token_of(value: Unknown) -> polylock::Result<i64> {
    integer(value, "token")
}

/// A permit count; `undefined`/`null` is the default, one permit.
fn permits_or_one(value: Option<Unknown>) -> polylock::Result<i64> {
    match value {
        Some(value) if !matches!(value.get_type(), Ok(ValueType::Undefined | ValueType::Null)) => {
            integer(value, "permits")
        }
        _ => Ok(1),
    }
}

/// The bytes of a fenced write's value: a string (UTF-8) or a Buffer/Uint8Array.
fn bytes(value: Unknown) -> polylock::Result<Vec<u8>> {
    let wrong = || invalid("value must be a string or a Buffer".into());
    match value.get_type() {
        Ok(ValueType::String) => string(value, "value").map(String::into_bytes),
        Ok(ValueType::Object) if value.is_buffer().unwrap_or(false) => {
            // SAFETY: the value was checked to be a Buffer (or Uint8Array).
            unsafe { value.cast::<BufferSlice>() }
                .map(|slice| slice.to_vec())
                .map_err(|_| wrong())
        }
        _ => Err(wrong()),
    }
}

/// The URL and the core's client options from `Client.connect`'s arguments; an option left out
/// takes the core's default. `Client::connect_with` checks the values.
fn connect_options(
    url: Unknown,
    options: Option<ConnectOptions>,
) -> polylock::Result<(String, polylock::ClientOptions)> {
    let url = string(url, "Redis URL")?;
    let options = options.unwrap_or_default();
    let defaults = polylock::ClientOptions::default();
    // The core's name of each option goes into its messages, the same in every language.
    let option = |ms: Option<f64>, name: &str, default: Duration| {
        ms.map_or(Ok(default), |ms| option_from_millis(name, ms))
    };
    let options = polylock::ClientOptions {
        watchdog_timeout: option(
            options.watchdog_timeout_ms,
            "watchdog_timeout",
            defaults.watchdog_timeout,
        )?,
        connect_timeout: option(
            options.connect_timeout_ms,
            "connect_timeout",
            defaults.connect_timeout,
        )?,
        response_timeout: option(
            options.response_timeout_ms,
            "response_timeout",
            defaults.response_timeout,
        )?,
        fair_queue_timeout: option(
            options.fair_queue_timeout_ms,
            "fair_queue_timeout",
            defaults.fair_queue_timeout,
        )?,
        sync_replicas: options.sync_replicas.unwrap_or(defaults.sync_replicas),
        replica_sync_timeout: option(
            options.replica_sync_timeout_ms,
            "replica_sync_timeout",
            defaults.replica_sync_timeout,
        )?,
        tls_ca: options.tls_ca,
        tls_cert: options.tls_cert,
        tls_key: options.tls_key,
        tls_insecure: options.tls_insecure.unwrap_or(defaults.tls_insecure),
    };
    Ok((url, options))
}

/// One owner's handle on one lock (reentrant). Dropping it while held releases in the background.
#[napi]
pub struct Lock {
    inner: polylock::Lock,
}

impl Lock {
    /// The promise of an acquire: its options (the lock's defaults filling what is left out),
    /// then `run`, which resolves `false` as soon as `cancellation` fires.
    fn acquiring<'env, Run, Acquired>(
        &self,
        env: &'env Env,
        options: Option<AcquireOptions>,
        cancellation: Option<&Cancellation>,
        run: Run,
    ) -> napi::Result<Object<'env>>
    where
        Run: FnOnce(polylock::Lock, CoreAcquireOptions) -> Acquired,
        Acquired: Future<Output = polylock::Result<bool>> + Send + 'static,
    {
        let options =
            acquire_options(self.inner.defaults(), options).map_err(|err| js_error(env, &err))?;
        let cancelled = cancellation.map(|cancellation| cancellation.sender.subscribe());
        let acquired = run(self.inner.clone(), options);
        promise(env, cancellable(cancelled, false, acquired))
    }
}

#[napi]
impl Lock {
    /// Acquires or re-enters. An option left out takes the lock's default. `waitMs`: `Infinity`
    /// = no bound, 0 = one attempt. Resolves `false` when the wait runs out or `cancellation`
    /// fires (then no lock is held; a cancellation fired before the call makes no attempt).
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
        self.acquiring(env, options, cancellation, |lock, options| async move {
            lock.acquire(options).await
        })
    }

    /// The acquire of `using()`: as `acquire`, but a wait that runs out rejects with
    /// `ERR_TIMEOUT` (the core's message, the same in every language). Resolves `true` when
    /// acquired, `false` only when `cancellation` fired.
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
        self.acquiring(env, options, cancellation, |lock, options| async move {
            lock.acquire_or_fail(options).await.map(|()| true)
        })
    }

    /// The defaults of this handle's acquires (`client.lock(name, defaults)`); a field is absent
    /// when its default is none (no bound, the watchdog lease).
    #[napi(getter)]
    pub fn defaults(&self) -> AcquireOptions {
        let defaults = self.inner.defaults();
        AcquireOptions {
            wait_ms: defaults.wait.map(|wait| wait.as_secs_f64() * 1000.0),
            lease_ms: defaults.lease.map(|lease| lease.as_secs_f64() * 1000.0),
        }
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

    /// Releases one level of the hold: `ERR_NOT_HELD` when not held, `ERR_LOCK_LOST` when lost.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn release<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let lock = self.inner.clone();
        promise(env, async move { lock.release().await })
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

    /// Whether this handle holds the lock (no I/O).
    #[napi]
    pub fn is_held(&self) -> bool {
        self.inner.is_held()
    }

    /// How many unreleased acquisitions this handle has (no I/O).
    #[napi]
    pub fn hold_count(&self) -> u32 {
        self.inner.hold_count()
    }

    /// The fencing token of the current hold (fenced locks); `null` when nothing is held and for
    /// kinds without tokens. Tokens grow by one per acquisition, so they stay safe integers.
    #[napi(getter)]
    pub fn token(&self) -> Option<i64> {
        self.inner.token()
    }

    /// Whether the current hold's lease was lost (no I/O).
    #[napi]
    pub fn is_lost(&self) -> bool {
        self.inner.is_lost()
    }

    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// `<client-id>:<holder-id>`, the hash field this handle writes.
    #[napi(getter)]
    pub fn owner(&self) -> String {
        self.inner.owner().to_owned()
    }

    /// Calls `callback` with an `ERR_LOCK_LOST` error each time a hold of this handle is lost.
    /// The callback never keeps the event loop alive. It must not reference this handle, or the
    /// handle could never be garbage-collected (the core keeps the callback).
    #[napi(ts_args_type = "callback: (error: Error) => void")]
    pub fn on_lost(&self, callback: Function<(), ()>) -> napi::Result<()> {
        let notify = callback
            .build_threadsafe_function::<polylock::Error>()
            .weak::<true>()
            .build_callback(|context| Ok(coded(&context.value)))?;
        self.inner.on_lost(move |err| {
            // Fails only while Node shuts down, when nobody is left to tell.
            let _ = notify.call(err.clone(), ThreadsafeFunctionCallMode::NonBlocking);
        });
        Ok(())
    }
}

/// Runs `acquire` until it settles or `cancellation` fires (then resolves to `cancelled`; the
/// core guarantees that dropping an acquire future leaves nothing taken).
async fn cancellable<T>(
    cancelled: Option<watch::Receiver<bool>>,
    on_cancel: T,
    acquire: impl Future<Output = polylock::Result<T>>,
) -> polylock::Result<T> {
    let Some(mut cancelled) = cancelled else {
        return acquire.await;
    };
    tokio::select! {
        biased;
        Ok(_) = cancelled.wait_for(|cancelled| *cancelled) => Ok(on_cancel),
        acquired = acquire => acquired,
    }
}

/// One owner's read-write lock: `readLock()` and `writeLock()` are `Lock`s of that owner.
#[napi]
pub struct ReadWriteLock {
    inner: polylock::ReadWriteLock,
    defaults: CoreAcquireOptions,
}

#[napi]
impl ReadWriteLock {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// The read lock (readers share it), a handle of this owner. No I/O.
    #[napi]
    pub fn read_lock(&self, env: &Env) -> napi::Result<Lock> {
        let made = self.inner.read_lock().with_defaults(self.defaults);
        made.map(|inner| Lock { inner })
            .map_err(|err| js_error(env, &err))
    }

    /// The write lock (excludes readers and writers), a handle of this owner. No I/O.
    #[napi]
    pub fn write_lock(&self, env: &Env) -> napi::Result<Lock> {
        let made = self.inner.write_lock().with_defaults(self.defaults);
        made.map(|inner| Lock { inner })
            .map_err(|err| js_error(env, &err))
    }
}

/// A counting semaphore (Redisson RSemaphore layout): permits belong to nobody and never expire.
#[napi]
pub struct Semaphore {
    inner: polylock::Semaphore,
}

#[napi]
impl Semaphore {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// Sets the number of permits if it was never set; `true` when set.
    #[napi(ts_args_type = "permits: number", ts_return_type = "Promise<boolean>")]
    pub fn try_set_permits<'env>(
        &self,
        env: &'env Env,
        permits: Unknown,
    ) -> napi::Result<Object<'env>> {
        let permits = integer(permits, "permits").map_err(|err| js_error(env, &err))?;
        let semaphore = self.inner.clone();
        promise(env, async move { semaphore.try_set_permits(permits).await })
    }

    /// Adds permits (a negative number takes some away).
    #[napi(ts_args_type = "permits: number", ts_return_type = "Promise<void>")]
    pub fn add_permits<'env>(
        &self,
        env: &'env Env,
        permits: Unknown,
    ) -> napi::Result<Object<'env>> {
        let permits = integer(permits, "permits").map_err(|err| js_error(env, &err))?;
        let semaphore = self.inner.clone();
        promise(env, async move { semaphore.add_permits(permits).await })
    }

    /// Takes `permits` (default 1), waiting up to `waitMs` (none or `Infinity` = no bound, 0 =
    /// one attempt). Resolves `false` when the wait runs out or `cancellation` fires (then
    /// nothing is taken).
    #[napi(
        strict,
        ts_args_type = "options?: SemaphoreAcquireOptions | null, cancellation?: Cancellation | null",
        ts_return_type = "Promise<boolean>"
    )]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        options: Option<SemaphoreAcquireOptions>,
        cancellation: Option<&Cancellation>,
    ) -> napi::Result<Object<'env>> {
        let options = options.unwrap_or_default();
        let wait = wait_from_millis(options.wait_ms).map_err(|err| js_error(env, &err))?;
        let permits = options.permits.unwrap_or(1);
        let cancelled = cancellation.map(|cancellation| cancellation.sender.subscribe());
        let semaphore = self.inner.clone();
        promise(env, async move {
            cancellable(cancelled, false, semaphore.acquire(permits, wait)).await
        })
    }

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
        let permits = permits_or_one(permits).map_err(|err| js_error(env, &err))?;
        let semaphore = self.inner.clone();
        promise(env, async move { semaphore.release(permits).await })
    }

    /// The permits available now (0 when never set).
    #[napi(ts_return_type = "Promise<number>")]
    pub fn available_permits<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let semaphore = self.inner.clone();
        promise(env, async move { semaphore.available_permits().await })
    }
}

/// A semaphore of permits with ids and leases (Redisson RPermitExpirableSemaphore layout).
#[napi]
pub struct ExpirableSemaphore {
    inner: polylock::ExpirableSemaphore,
}

#[napi]
impl ExpirableSemaphore {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// Sets the number of permits if it was never set; `true` when set.
    #[napi(ts_args_type = "permits: number", ts_return_type = "Promise<boolean>")]
    pub fn try_set_permits<'env>(
        &self,
        env: &'env Env,
        permits: Unknown,
    ) -> napi::Result<Object<'env>> {
        let permits = integer(permits, "permits").map_err(|err| js_error(env, &err))?;
        let semaphore = self.inner.clone();
        promise(env, async move { semaphore.try_set_permits(permits).await })
    }

    /// Adds permits (a negative number takes some away).
    #[napi(ts_args_type = "permits: number", ts_return_type = "Promise<void>")]
    pub fn add_permits<'env>(
        &self,
        env: &'env Env,
        permits: Unknown,
    ) -> napi::Result<Object<'env>> {
        let permits = integer(permits, "permits").map_err(|err| js_error(env, &err))?;
        let semaphore = self.inner.clone();
        promise(env, async move { semaphore.add_permits(permits).await })
    }

    /// Takes one permit, waiting up to `waitMs`; resolves to its id, or `null` when the wait
    /// runs out or `cancellation` fires (then nothing is taken). `leaseMs`: none = renewed by
    /// the watchdog while the client lives.
    #[napi(
        strict,
        ts_args_type = "options?: AcquireOptions | null, cancellation?: Cancellation | null",
        ts_return_type = "Promise<string | null>"
    )]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        options: Option<AcquireOptions>,
        cancellation: Option<&Cancellation>,
    ) -> napi::Result<Object<'env>> {
        let options = acquire_options(CoreAcquireOptions::new(), options)
            .map_err(|err| js_error(env, &err))?;
        let cancelled = cancellation.map(|cancellation| cancellation.sender.subscribe());
        let semaphore = self.inner.clone();
        promise(env, async move {
            cancellable(cancelled, None, semaphore.acquire(options)).await
        })
    }

    /// Releases the permit `permitId`: `ERR_NOT_HELD` when nobody holds it, `ERR_LOCK_LOST`
    /// when it was this handle's and was lost (its lease ran out, or another client released
    /// it): once, for the handle's latest 1024 lost permits.
    #[napi(ts_args_type = "permitId: string", ts_return_type = "Promise<void>")]
    pub fn release<'env>(&self, env: &'env Env, permit_id: Unknown) -> napi::Result<Object<'env>> {
        let permit_id = string(permit_id, "permit id").map_err(|err| js_error(env, &err))?;
        let semaphore = self.inner.clone();
        promise(env, async move { semaphore.release(&permit_id).await })
    }

    /// The permits available now, after permits whose lease ran out came back.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn available_permits<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let semaphore = self.inner.clone();
        promise(env, async move { semaphore.available_permits().await })
    }

    /// The ids of the permits this handle holds (no I/O). A permit leaves when released, or as
    /// soon as its lease runs out (by this client's clock) or the watchdog finds it gone.
    #[napi]
    pub fn held_permits(&self) -> Vec<String> {
        self.inner.held_permits()
    }
}

/// Cancels the `acquire` calls it was given to (the JS layer fires it from an AbortSignal).
#[napi]
pub struct Cancellation {
    sender: watch::Sender<bool>,
}

impl Default for Cancellation {
    fn default() -> Self {
        Cancellation {
            sender: watch::Sender::new(false),
        }
    }
}

#[napi]
impl Cancellation {
    #[napi(constructor)]
    pub fn new() -> Self {
        Cancellation::default()
    }

    #[napi]
    pub fn cancel(&self) {
        self.sender.send_replace(true);
    }
}
