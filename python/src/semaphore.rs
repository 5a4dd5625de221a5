//! `_native.SemaphoreHandle`: one core semaphore handle, with blocking and asyncio methods.
//! Permits belong to no thread or task, so the Python wrappers share one handle.

use pyo3::prelude::*;

use crate::acquisition::{undo_by, Acquisition};
use crate::args::wait_arg;
use crate::asyncio::awaitable;
use crate::permits::permit_class;
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

permit_class!(SemaphoreHandle.semaphore {
    /// Blocks (GIL released, Ctrl-C honoured) until `permits` are taken or the timeout passes.
    fn acquire(&self, py: Python<'_>, permits: i64, timeout: Option<f64>) -> PyResult<bool> {
        let wait = wait_arg(py, timeout)?;
        // Dropping the core future (Ctrl-C) takes nothing: the core undoes the attempt.
        wait_interruptibly(py, self.semaphore.acquire(permits, wait))
    }

    fn release(&self, py: Python<'_>, permits: i64) -> PyResult<()> {
        wait_interruptibly(py, self.semaphore.release(permits))
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
            let undo =
                acquired.then(|| undo_by(async move { semaphore.release(permits).await }));
            Ok(Acquisition::new(acquired, None, undo))
        })
    }

    fn release_async<'py>(&self, py: Python<'py>, permits: i64) -> PyResult<Bound<'py, PyAny>> {
        let semaphore = self.semaphore.clone();
        awaitable(py, async move { semaphore.release(permits).await })
    }

    fn __repr__(&self) -> String {
        format!(
            "<polylock._native.SemaphoreHandle name={:?}>",
            self.semaphore.name()
        )
    }
});
