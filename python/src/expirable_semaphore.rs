//! `_native.ExpirableSemaphoreHandle`: one core expirable semaphore handle, with blocking and
//! asyncio methods. Permits belong to no thread or task, so the Python wrappers share one
//! handle.

use polylock::AcquireOptions;
use pyo3::prelude::*;

use crate::acquisition::{undo_by, Acquisition};
use crate::args::{lease_arg, wait_arg};
use crate::asyncio::awaitable;
use crate::permits::permit_class;
use crate::wait::wait_interruptibly;

#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct ExpirableSemaphoreHandle {
    semaphore: polylock::ExpirableSemaphore,
}

impl ExpirableSemaphoreHandle {
    pub(crate) fn new(semaphore: polylock::ExpirableSemaphore) -> Self {
        ExpirableSemaphoreHandle { semaphore }
    }
}

/// The core's options for a permit's `timeout` and `lease` (seconds).
fn permit_options(
    py: Python<'_>,
    timeout: Option<f64>,
    lease: Option<f64>,
) -> PyResult<AcquireOptions> {
    Ok(AcquireOptions {
        wait: wait_arg(py, timeout)?,
        lease: lease_arg(py, lease)?,
    })
}

permit_class!(ExpirableSemaphoreHandle.semaphore {
    /// Blocks (GIL released, Ctrl-C honoured) until a permit is taken (its id) or the timeout
    /// passes (`None`).
    fn acquire(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        lease: Option<f64>,
    ) -> PyResult<Option<String>> {
        let options = permit_options(py, timeout, lease)?;
        wait_interruptibly(py, self.semaphore.acquire(options))
    }

    fn release(&self, py: Python<'_>, permit_id: &str) -> PyResult<()> {
        wait_interruptibly(py, self.semaphore.release(permit_id))
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
        let options = permit_options(py, timeout, lease)?;
        let semaphore = self.semaphore.clone();
        awaitable(py, async move {
            let Some(id) = semaphore.acquire(options).await? else {
                return Ok(Acquisition::new(false, None, None));
            };
            let permit = id.clone();
            let undo = undo_by(async move { semaphore.release(&permit).await });
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

    fn __repr__(&self) -> String {
        format!(
            "<polylock._native.ExpirableSemaphoreHandle name={:?} held={}>",
            self.semaphore.name(),
            self.semaphore.held_permits().len()
        )
    }
});
