//! The napi-rs binding of polylock: the native `Client`, `Lock` and `Cancellation` classes.
//!
//! `node/index.js` wraps them to give `using`, `AbortSignal` and `Symbol.asyncDispose`; the
//! JavaScript type checks and the one error mapping live here, and the core checks every value
//! (so a bad value gets the same message in every language). Times are milliseconds.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt;
use napi::bindgen_prelude::{Function, JsObjectValue, Object, ToNapiValue, Unknown};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{Env, JsError, JsValue, ValueType};
use napi_derive::napi;
use polylock::options::{lease_from_millis, option_from_millis, wait_from_millis};
use tokio::sync::watch;

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

/// `undefined`/`null` -> `None`; a number -> itself, milliseconds for the core to check (the
/// core's `options` functions). Only the type is checked here: anything but a number is an
/// error of this binding, since the core never sees JavaScript values.
fn millis(value: Option<Unknown>, what: &str) -> polylock::Result<Option<f64>> {
    let Some(value) = value else {
        return Ok(None);
    };
    match value.get_type() {
        Ok(ValueType::Undefined | ValueType::Null) => return Ok(None),
        Ok(ValueType::Number) => {}
        _ => return Err(invalid(format!("{what} must be a number of milliseconds"))),
    }
    // SAFETY: the value was checked to be a number just above.
    unsafe { value.cast::<f64>() }
        .map(Some)
        .map_err(|_| invalid(format!("{what} must be a number of milliseconds")))
}

/// The options object (or `undefined`/`null`) of a call, as an object to read fields from.
fn options_object<'env>(
    value: Option<Unknown<'env>>,
    what: &str,
) -> polylock::Result<Option<Object<'env>>> {
    let Some(value) = value else {
        return Ok(None);
    };
    match value.get_type() {
        Ok(ValueType::Undefined | ValueType::Null) => Ok(None),
        // SAFETY: the value was checked to be an object.
        Ok(ValueType::Object) => unsafe { value.cast::<Object>() }
            .map(Some)
            .map_err(|_| invalid(format!("{what} must be an object"))),
        _ => Err(invalid(format!("{what} must be an object"))),
    }
}

fn field<'env>(object: &Option<Object<'env>>, name: &str) -> Option<Unknown<'env>> {
    object
        .as_ref()
        .and_then(|object| object.get_named_property::<Unknown>(name).ok())
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
        ts_args_type = "url: string, options?: { watchdogTimeoutMs?: number; connectTimeoutMs?: number; responseTimeoutMs?: number; fairQueueTimeoutMs?: number } | null",
        ts_return_type = "Promise<Client>"
    )]
    pub fn connect<'env>(
        env: &'env Env,
        url: Unknown,
        options: Option<Unknown>,
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

    /// A new handle (a new owner) on the lock `name`. No I/O.
    #[napi(ts_args_type = "name: string")]
    pub fn lock(&self, env: &Env, name: Unknown) -> napi::Result<Lock> {
        let made = string(name, "lock name").and_then(|name| self.inner.lock(&name));
        made.map(|inner| Lock { inner })
            .map_err(|err| js_error(env, &err))
    }

    /// A new handle (a new owner) on the fair lock `name`: FIFO, a release wakes only the next
    /// waiter. No I/O.
    #[napi(ts_args_type = "name: string")]
    pub fn fair_lock(&self, env: &Env, name: Unknown) -> napi::Result<Lock> {
        let made = string(name, "lock name").and_then(|name| self.inner.fair_lock(&name));
        made.map(|inner| Lock { inner })
            .map_err(|err| js_error(env, &err))
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

/// The URL and the core's client options from `Client.connect`'s arguments; an option left out
/// takes the core's default. `Client::connect_with` checks the values.
fn connect_options(
    url: Unknown,
    options: Option<Unknown>,
) -> polylock::Result<(String, polylock::ClientOptions)> {
    let url = string(url, "Redis URL")?;
    let options = options_object(options, "connect options")?;
    let defaults = polylock::ClientOptions::default();
    // The core's name of each option goes into its messages, the same in every language.
    let option = |js_name: &str, name: &str, default: Duration| {
        let ms = millis(field(&options, js_name), js_name)?;
        ms.map_or(Ok(default), |ms| option_from_millis(name, ms))
    };
    let options = polylock::ClientOptions {
        watchdog_timeout: option(
            "watchdogTimeoutMs",
            "watchdog_timeout",
            defaults.watchdog_timeout,
        )?,
        connect_timeout: option(
            "connectTimeoutMs",
            "connect_timeout",
            defaults.connect_timeout,
        )?,
        response_timeout: option(
            "responseTimeoutMs",
            "response_timeout",
            defaults.response_timeout,
        )?,
        fair_queue_timeout: option(
            "fairQueueTimeoutMs",
            "fair_queue_timeout",
            defaults.fair_queue_timeout,
        )?,
    };
    Ok((url, options))
}

/// One owner's handle on one lock (reentrant). Dropping it while held releases in the background.
#[napi]
pub struct Lock {
    inner: polylock::Lock,
}

#[napi]
impl Lock {
    /// Acquires or re-enters. `waitMs`: none or `Infinity` = no bound, 0 = one attempt.
    /// `leaseMs`: none = watchdog-renewed. Resolves `false` when the wait runs out or
    /// `cancellation` fires (then no lock is held; a cancellation fired before the call makes no
    /// attempt at all).
    #[napi(
        ts_args_type = "options?: { waitMs?: number; leaseMs?: number; signal?: AbortSignal } | null, cancellation?: Cancellation | null",
        ts_return_type = "Promise<boolean>"
    )]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown>,
        cancellation: Option<&Cancellation>,
    ) -> napi::Result<Object<'env>> {
        let (wait, lease) = acquire_options(env, options).map_err(|err| js_error(env, &err))?;
        let cancelled = cancellation.map(|cancellation| cancellation.sender.subscribe());
        let lock = self.inner.clone();
        promise(env, async move {
            let Some(mut cancelled) = cancelled else {
                return lock.acquire(wait, lease).await;
            };
            tokio::select! {
                biased;
                // Dropping the acquire future leaves no lock held (the core guarantees it).
                Ok(_) = cancelled.wait_for(|cancelled| *cancelled) => Ok(false),
                acquired = lock.acquire(wait, lease) => acquired,
            }
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

    /// Whether the current hold's lease was lost.
    #[napi(getter)]
    pub fn lost(&self) -> bool {
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

/// Reads `waitMs` and `leaseMs`, and checks `signal` is an `AbortSignal`.
fn acquire_options(
    env: &Env,
    options: Option<Unknown>,
) -> polylock::Result<(Option<Duration>, Option<Duration>)> {
    let options = options_object(options, "acquire options")?;
    let wait = wait_from_millis(millis(field(&options, "waitMs"), "waitMs")?)?;
    let lease = lease_from_millis(millis(field(&options, "leaseMs"), "leaseMs")?)?;
    if let Some(signal) = field(&options, "signal") {
        if !matches!(signal.get_type(), Ok(ValueType::Undefined)) && !is_abort_signal(env, &signal)
        {
            return Err(invalid("signal must be an AbortSignal".into()));
        }
    }
    Ok((wait, lease))
}

fn is_abort_signal(env: &Env, value: &Unknown) -> bool {
    let Ok(global) = env.get_global() else {
        return false;
    };
    let Ok(class) = global.get_named_property::<Function<Unknown, Unknown>>("AbortSignal") else {
        return false;
    };
    value.instanceof(class).unwrap_or(false)
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
