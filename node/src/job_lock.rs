//! The native `JobLock` and `JobHold`: the core's run-once job lock. `run` and
//! `client.runJob` are JavaScript (`node/lib/job_lock.js`, `node/lib/client.js`) over `tryAcquire`
//! and `finish`.

use std::sync::Mutex;

use napi::bindgen_prelude::{Object, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::args::{number, string, Fields};
use crate::promise::promise;

/// A run-once job lock (ShedLock's semantics) on the lock of its name.
#[napi]
pub struct JobLock {
    inner: polylock::JobLock,
}

/// The options of `client.jobLock(name, options)`. Times in milliseconds.
#[napi(object)]
pub struct JobLockOptions {
    /// The lease: the lock is held at most this long (a node that dies holding it blocks the
    /// job no longer). 1 ms to 10 years.
    pub at_most_ms: f64,
    /// The lock stays at least this long from the job's start (a node whose clock or schedule
    /// lags by less skips). 0 (the default) to `atMostMs`.
    pub at_least_ms: Option<f64>,
}

/// The job lock `name` of `client` with `options` (`{ atMostMs, atLeastMs }`, checked by the
/// core; a left-out `atLeastMs` is 0, a left-out `atMostMs` is refused as NaN).
pub(crate) fn job_lock(
    client: &polylock::Client,
    name: Unknown,
    options: Option<Unknown>,
) -> polylock::Result<JobLock> {
    let name = string(name, "job lock name")?;
    let fields = Fields::of(options, "job lock options")?;
    let given = JobLockOptions {
        at_most_ms: fields.get("atMostMs", number)?.unwrap_or(f64::NAN),
        at_least_ms: fields.get("atLeastMs", number)?,
    };
    let options =
        polylock::JobLockOptions::from_millis(given.at_most_ms, given.at_least_ms.unwrap_or(0.0))?;
    let inner = client.job_lock(&name, options.at_most, options.at_least)?;
    Ok(JobLock { inner })
}

/// A held job lock, from `tryAcquire`. One collected unfinished is finished in the background.
#[napi]
pub struct JobHold {
    inner: Mutex<Option<polylock::JobHold>>,
}

#[napi]
impl JobLock {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    #[napi(getter)]
    pub fn at_most_ms(&self) -> f64 {
        self.inner.options().at_most.as_secs_f64() * 1000.0
    }

    #[napi(getter)]
    pub fn at_least_ms(&self) -> f64 {
        self.inner.options().at_least.as_secs_f64() * 1000.0
    }

    /// One look, never waiting: a hold (lease `atMostMs`, never renewed), or `null` when
    /// another node holds the lock.
    #[napi(ts_return_type = "Promise<JobHold | null>")]
    pub fn try_acquire<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let job = self.inner.clone();
        promise(env, async move {
            Ok(job.try_acquire().await?.map(|hold| JobHold {
                inner: Mutex::new(Some(hold)),
            }))
        })
    }
}

#[napi]
impl JobHold {
    /// Whether the hold is within its `atMostMs` lease (no I/O); `false` once finished.
    #[napi(getter)]
    pub fn is_held(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|hold| hold.is_held())
    }

    /// Keeps the lock until `atLeastMs` from the job's start, or releases it. A second finish
    /// does nothing.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn finish<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let hold = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        promise(env, async move {
            match hold {
                Some(hold) => hold.finish().await,
                None => Ok(()),
            }
        })
    }
}
