//! `_native.SemaphoreHandle` and `_native.ExpirableSemaphoreHandle`: one core semaphore handle
//! each, with blocking and asyncio methods. Permits belong to no thread or task, so the Python
//! wrappers share one handle.

use polylock::AcquireOptions;
use pyo3::prelude::*;

use crate::asyncio::awaitable;
use crate::lock::{lease_arg, wait_arg, Acquisition, Undo};
use crate::wait::wait_interruptibly;

#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct SemaphoreHandle {
    semaphore: polylock::Semaphore,
}

impl SemaphoreHandle {
    pub(crate) fn new(semaphore: polylock::Semaphore) -> Self {
        SemaphoreHandle { semaphore }
    }
}

#[pymethods]
impl SemaphoreHandle {
    #[getter]
    fn name(&self) -> &str {
        self.semaphore.name()
    }

    /// Blocks (GIL released, Ctrl-C honoured) until `permits` are taken or the timeout passes.
    fn acquire(&self, py: Python<'_>, permits: i64, timeout: Option<f64>) -> PyResult<bool> {
        let wait = wait_arg(py, timeout)?;
        // Dropping the core future (Ctrl-C) takes nothing: the core undoes the attempt.
        wait_interruptibly(py, self.semaphore.acquire(permits, wait))
    }

    fn release(&self, py: Python<'_>, permits: i64) -> PyResult<()> {
        wait_interruptibly(py, self.semaphore.release(permits))
    }

    fn try_set_permits(&self, py: Python<'_>, permits: i64) -> PyResult<bool> {
        wait_interruptibly(py, self.semaphore.try_set_permits(permits))
    }

    fn add_permits(&self, py: Python<'_>, permits: i64) -> PyResult<()> {
        wait_interruptibly(py, self.semaphore.add_permits(permits))
    }

    fn available_permits(&self, py: Python<'_>) -> PyResult<i64> {
        wait_interruptibly(py, self.semaphore.available_permits())
    }

    /// An awaitable giving an `Acquisition`; cancelling it takes no permits.
    fn acquire_async<'py>(
        &self,
        py: Python<'py>,
        permits: i64,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let wait = wait_arg(py, timeout)?;
        let semaphore = self.semaphore.clone();
        awaitable(py, async move {
            let acquired = semaphore.acquire(permits, wait).await?;
            let undo = acquired.then(|| -> Undo {
                Box::new(move || {
                    polylock::runtime().spawn(async move {
                        // Nobody is left to tell about a failure.
                        let _ = semaphore.release(permits).await;
                    });
                })
            });
            Ok(Acquisition::new(acquired, None, undo))
        })
    }

    fn release_async<'py>(&self, py: Python<'py>, permits: i64) -> PyResult<Bound<'py, PyAny>> {
        let semaphore = self.semaphore.clone();
        awaitable(py, async move { semaphore.release(permits).await })
    }

    fn try_set_permits_async<'py>(
        &self,
        py: Python<'py>,
        permits: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let semaphore = self.semaphore.clone();
        awaitable(py, async move { semaphore.try_set_permits(permits).await })
    }

    fn add_permits_async<'py>(&self, py: Python<'py>, permits: i64) -> PyResult<Bound<'py, PyAny>> {
        let semaphore = self.semaphore.clone();
        awaitable(py, async move { semaphore.add_permits(permits).await })
    }

    fn available_permits_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let semaphore = self.semaphore.clone();
        awaitable(py, async move { semaphore.available_permits().await })
    }

    fn __repr__(&self) -> String {
        format!(
            "<polylock._native.SemaphoreHandle name={:?}>",
            self.semaphore.name()
        )
    }
}

#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct ExpirableSemaphoreHandle {
    semaphore: polylock::ExpirableSemaphore,
}

impl ExpirableSemaphoreHandle {
    pub(crate) fn new(semaphore: polylock::ExpirableSemaphore) -> Self {
        ExpirableSemaphoreHandle { semaphore }
    }
}

#[pymethods]
impl ExpirableSemaphoreHandle {
    #[getter]
    fn name(&self) -> &str {
        self.semaphore.name()
    }

    /// Blocks (GIL released, Ctrl-C honoured) until a permit is taken (its id) or the timeout
    /// passes (`None`).
    fn acquire(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        lease: Option<f64>,
    ) -> PyResult<Option<String>> {
        let wait = wait_arg(py, timeout)?;
        let lease = lease_arg(py, lease)?;
        wait_interruptibly(py, self.semaphore.acquire(AcquireOptions { wait, lease }))
    }

    fn release(&self, py: Python<'_>, permit_id: &str) -> PyResult<()> {
        wait_interruptibly(py, self.semaphore.release(permit_id))
    }

    fn try_set_permits(&self, py: Python<'_>, permits: i64) -> PyResult<bool> {
        wait_interruptibly(py, self.semaphore.try_set_permits(permits))
    }

    fn add_permits(&self, py: Python<'_>, permits: i64) -> PyResult<()> {
        wait_interruptibly(py, self.semaphore.add_permits(permits))
    }

    fn available_permits(&self, py: Python<'_>) -> PyResult<i64> {
        wait_interruptibly(py, self.semaphore.available_permits())
    }

    /// The ids of the permits this handle holds (no I/O).
    fn held_permits(&self) -> Vec<String> {
        self.semaphore.held_permits()
    }

    /// An awaitable giving an `Acquisition` (its `permit_id`); cancelling it takes no permit.
    fn acquire_async<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
        lease: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let wait = wait_arg(py, timeout)?;
        let lease = lease_arg(py, lease)?;
        let semaphore = self.semaphore.clone();
        awaitable(py, async move {
            let Some(id) = semaphore.acquire(AcquireOptions { wait, lease }).await? else {
                return Ok(Acquisition::new(false, None, None));
            };
            let permit = id.clone();
            let undo: Undo = Box::new(move || {
                polylock::runtime().spawn(async move {
                    // Nobody is left to tell about a failure; a fixed lease then runs out.
                    let _ = semaphore.release(&permit).await;
                });
            });
            Ok(Acquisition::new(true, Some(id), Some(undo)))
        })
    }

    fn release_async<'py>(
        &self,
        py: Python<'py>,
        permit_id: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let semaphore = self.semaphore.clone();
        awaitable(py, async move { semaphore.release(&permit_id).await })
    }

    fn try_set_permits_async<'py>(
        &self,
        py: Python<'py>,
        permits: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let semaphore = self.semaphore.clone();
        awaitable(py, async move { semaphore.try_set_permits(permits).await })
    }

    fn add_permits_async<'py>(&self, py: Python<'py>, permits: i64) -> PyResult<Bound<'py, PyAny>> {
        let semaphore = self.semaphore.clone();
        awaitable(py, async move { semaphore.add_permits(permits).await })
    }

    fn available_permits_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let semaphore = self.semaphore.clone();
        awaitable(py, async move { semaphore.available_permits().await })
    }

    fn __repr__(&self) -> String {
        format!(
            "<polylock._native.ExpirableSemaphoreHandle name={:?} held={}>",
            self.semaphore.name(),
            self.semaphore.held_permits().len()
        )
    }
}
