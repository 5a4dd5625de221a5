//! `_native.JobLockHandle` and `_native.JobHoldHandle`: the core's run-once job lock, with
//! blocking and asyncio methods. `run` and the decorators are Python (`polylock/_sync.py`,
//! `_async.py`) over `try_acquire` and `finish`.

use std::sync::Mutex;

use pyo3::prelude::*;

use crate::asyncio::awaitable;
use crate::errors::to_py_err;
use crate::wait::wait_interruptibly;

#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct JobLockHandle {
    job: polylock::JobLock,
}

impl JobLockHandle {
    /// The job lock `name` of `client`, at most `at_most` and at least `at_least` seconds
    /// (checked by the core: `JobLockOptions::from_millis`).
    pub(crate) fn new(
        py: Python<'_>,
        client: &polylock::Client,
        name: &str,
        at_most: f64,
        at_least: f64,
    ) -> PyResult<Self> {
        polylock::JobLockOptions::from_millis(at_most * 1000.0, at_least * 1000.0)
            .and_then(|options| client.job_lock(name, options.at_most, options.at_least))
            .map(|job| JobLockHandle { job })
            .map_err(|err| to_py_err(py, err))
    }
}

/// A held job lock; a hold collected unfinished is finished in the background (the core's
/// `JobHold` drop).
#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct JobHoldHandle {
    hold: Mutex<Option<polylock::JobHold>>,
}

impl JobHoldHandle {
    fn new(hold: polylock::JobHold) -> Self {
        JobHoldHandle {
            hold: Mutex::new(Some(hold)),
        }
    }

    fn take(&self) -> Option<polylock::JobHold> {
        self.hold.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

#[pymethods]
impl JobLockHandle {
    #[getter]
    fn name(&self) -> &str {
        self.job.name()
    }

    /// Seconds.
    #[getter]
    fn at_most(&self) -> f64 {
        self.job.options().at_most.as_secs_f64()
    }

    /// Seconds.
    #[getter]
    fn at_least(&self) -> f64 {
        self.job.options().at_least.as_secs_f64()
    }

    /// One look (GIL released): a hold, or None when another node holds the lock.
    fn try_acquire(&self, py: Python<'_>) -> PyResult<Option<JobHoldHandle>> {
        let hold = wait_interruptibly(py, self.job.try_acquire())?;
        Ok(hold.map(JobHoldHandle::new))
    }

    fn try_acquire_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let job = self.job.clone();
        awaitable(py, async move {
            Ok(job.try_acquire().await?.map(JobHoldHandle::new))
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<polylock._native.JobLockHandle name={:?}>",
            self.job.name()
        )
    }
}

#[pymethods]
impl JobHoldHandle {
    /// Whether the hold is within its at_most lease (no I/O); False once finished.
    #[getter]
    fn is_held(&self) -> bool {
        self.hold
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|hold| hold.is_held())
    }

    /// Keeps the lock until at_least from the start, or releases it (GIL released). A second
    /// finish does nothing.
    fn finish(&self, py: Python<'_>) -> PyResult<()> {
        match self.take() {
            Some(hold) => wait_interruptibly(py, hold.finish()),
            None => Ok(()),
        }
    }

    fn finish_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let hold = self.take();
        awaitable(py, async move {
            match hold {
                Some(hold) => hold.finish().await,
                None => Ok(()),
            }
        })
    }
}
