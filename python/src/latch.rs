//! `_native.CountDownLatchHandle`: one core count-down latch, with blocking and asyncio
//! methods. A latch belongs to no thread or task, so the Python wrappers share one handle.

use pyo3::prelude::*;

use crate::asyncio::awaitable;
use crate::errors::to_py_err;
use crate::wait::wait_interruptibly;

#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct CountDownLatchHandle {
    latch: polylock::CountDownLatch,
}

impl CountDownLatchHandle {
    pub(crate) fn new(latch: polylock::CountDownLatch) -> Self {
        CountDownLatchHandle { latch }
    }
}

/// The core's timeout for the Python argument `timeout` (seconds): the core checks it.
fn timeout_arg(py: Python<'_>, timeout: f64) -> PyResult<std::time::Duration> {
    polylock::latch_timeout_from_millis(timeout * 1000.0).map_err(|err| to_py_err(py, err))
}

#[pymethods]
impl CountDownLatchHandle {
    #[getter]
    fn name(&self) -> &str {
        self.latch.name()
    }

    /// Blocking calls (GIL released, Ctrl-C honoured).
    fn try_set_count(&self, py: Python<'_>, count: i64) -> PyResult<bool> {
        wait_interruptibly(py, self.latch.try_set_count(count))
    }

    fn count_down(&self, py: Python<'_>) -> PyResult<()> {
        wait_interruptibly(py, self.latch.count_down())
    }

    fn count(&self, py: Python<'_>) -> PyResult<u64> {
        wait_interruptibly(py, self.latch.count())
    }

    fn await_zero(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let timeout = timeout_arg(py, timeout)?;
        wait_interruptibly(py, self.latch.await_zero(timeout))
    }

    fn delete(&self, py: Python<'_>) -> PyResult<bool> {
        wait_interruptibly(py, self.latch.delete())
    }

    fn try_set_count_async<'py>(&self, py: Python<'py>, count: i64) -> PyResult<Bound<'py, PyAny>> {
        let latch = self.latch.clone();
        awaitable(py, async move { latch.try_set_count(count).await })
    }

    fn count_down_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let latch = self.latch.clone();
        awaitable(py, async move { latch.count_down().await })
    }

    fn count_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let latch = self.latch.clone();
        awaitable(py, async move { latch.count().await })
    }

    /// Cancelling it only stops the wait (a wait changes nothing in Redis).
    fn await_zero_async<'py>(&self, py: Python<'py>, timeout: f64) -> PyResult<Bound<'py, PyAny>> {
        let timeout = timeout_arg(py, timeout)?;
        let latch = self.latch.clone();
        awaitable(py, async move { latch.await_zero(timeout).await })
    }

    fn delete_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let latch = self.latch.clone();
        awaitable(py, async move { latch.delete().await })
    }

    fn __repr__(&self) -> String {
        format!(
            "<polylock._native.CountDownLatchHandle name={:?}>",
            self.latch.name()
        )
    }
}
