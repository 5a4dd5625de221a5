//! `JobLock` and `JobHold`: the core's run-once job lock (ShedLock's semantics). Kotlin's and
//! Swift's `runJob { }` (Idioms.kt, Polylock+Idioms.swift) are written over `tryAcquire` and
//! `finish`.

use std::sync::{Arc, Mutex};

use crate::arguments::{millis, wait_for};
use crate::error::LockError;

/// A run-once job lock on the lock of its name: `client.jobLock(name, atMostMs, atLeastMs)`.
#[derive(uniffi::Object)]
pub struct JobLock {
    inner: polylock::JobLock,
}

impl JobLock {
    /// The job lock `name` of `client` (the core checks the times).
    pub(crate) fn new(
        client: &polylock::Client,
        name: &str,
        at_most_ms: i64,
        at_least_ms: i64,
    ) -> Result<Arc<JobLock>, LockError> {
        let options = polylock::JobLockOptions::from_millis(at_most_ms as f64, at_least_ms as f64)?;
        let inner = client.job_lock(name, options.at_most, options.at_least)?;
        Ok(Arc::new(JobLock { inner }))
    }
}

/// A held job lock, from `tryAcquire`: call `finish` after the job. One dropped unfinished is
/// finished in the background.
#[derive(uniffi::Object)]
pub struct JobHold {
    inner: Mutex<Option<polylock::JobHold>>,
}

impl JobHold {
    fn new(hold: polylock::JobHold) -> Arc<JobHold> {
        Arc::new(JobHold {
            inner: Mutex::new(Some(hold)),
        })
    }

    fn take(&self) -> Option<polylock::JobHold> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

#[uniffi::export]
impl JobLock {
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    pub fn at_most_ms(&self) -> i64 {
        millis(self.inner.options().at_most)
    }

    pub fn at_least_ms(&self) -> i64 {
        millis(self.inner.options().at_least)
    }

    /// One look, never waiting: a hold (lease `atMostMs`, never renewed), or `null` when
    /// another node holds the lock.
    pub async fn try_acquire(&self) -> Result<Option<Arc<JobHold>>, LockError> {
        Ok(self.inner.try_acquire().await?.map(JobHold::new))
    }

    /// `tryAcquire` for plain threads: blocks the calling thread.
    pub fn try_acquire_blocking(&self) -> Result<Option<Arc<JobHold>>, LockError> {
        Ok(wait_for(self.inner.try_acquire())?.map(JobHold::new))
    }
}

#[uniffi::export]
impl JobHold {
    /// Whether the hold is within its `atMostMs` lease (no I/O); `false` once finished.
    pub fn is_held(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|hold| hold.is_held())
    }

    /// Keeps the lock until `atLeastMs` from the job's start, or releases it; a job that
    /// outlived `atMostMs` finds its lock lapsed (a warning is logged, nothing is written). A
    /// second finish does nothing.
    pub async fn finish(&self) -> Result<(), LockError> {
        match self.take() {
            Some(hold) => Ok(hold.finish().await?),
            None => Ok(()),
        }
    }

    /// `finish` for plain threads: blocks the calling thread.
    pub fn finish_blocking(&self) -> Result<(), LockError> {
        match self.take() {
            Some(hold) => wait_for(hold.finish()),
            None => Ok(()),
        }
    }
}
