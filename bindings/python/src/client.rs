//! `_native.Client`: one core client, shared by the sync and asyncio wrappers in Python.

use std::time::Duration;

use pyo3::prelude::*;

use crate::asyncio::awaitable;
use crate::errors::{invalid_argument, to_py_err};
use crate::lock::LockHandle;
use crate::wait::wait_interruptibly;

#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct Client {
    inner: polylock::Client,
}

/// A positive, finite number of seconds.
pub(crate) fn positive_seconds(py: Python<'_>, what: &str, seconds: f64) -> PyResult<Duration> {
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(invalid_argument(
            py,
            format!("{what} must be a positive number of seconds, got {seconds}"),
        ));
    }
    Duration::try_from_secs_f64(seconds)
        .map_err(|err| invalid_argument(py, format!("{what} of {seconds} s: {err}")))
}

fn builder(
    py: Python<'_>,
    url: &str,
    watchdog_timeout: f64,
    connect_timeout: f64,
    response_timeout: f64,
    fair_queue_timeout: f64,
) -> PyResult<polylock::ClientBuilder> {
    Ok(polylock::Client::builder(url)
        .watchdog_timeout(positive_seconds(py, "watchdog_timeout", watchdog_timeout)?)
        .connect_timeout(positive_seconds(py, "connect_timeout", connect_timeout)?)
        .response_timeout(positive_seconds(py, "response_timeout", response_timeout)?)
        .fair_queue_timeout(positive_seconds(
            py,
            "fair_queue_timeout",
            fair_queue_timeout,
        )?))
}

#[pymethods]
impl Client {
    /// Connects, waiting at most `connect_timeout` seconds (GIL released, Ctrl-C honoured).
    #[new]
    #[pyo3(signature = (url, *, watchdog_timeout = 30.0, connect_timeout = 5.0, response_timeout = 5.0, fair_queue_timeout = 10.0))]
    fn new(
        py: Python<'_>,
        url: &str,
        watchdog_timeout: f64,
        connect_timeout: f64,
        response_timeout: f64,
        fair_queue_timeout: f64,
    ) -> PyResult<Self> {
        let builder = builder(
            py,
            url,
            watchdog_timeout,
            connect_timeout,
            response_timeout,
            fair_queue_timeout,
        )?;
        let inner = wait_interruptibly(py, builder.connect())?;
        Ok(Client { inner })
    }

    /// Connects without blocking the event loop; the awaitable gives a `Client`.
    #[staticmethod]
    #[pyo3(signature = (url, *, watchdog_timeout = 30.0, connect_timeout = 5.0, response_timeout = 5.0, fair_queue_timeout = 10.0))]
    fn connect_async<'py>(
        py: Python<'py>,
        url: &str,
        watchdog_timeout: f64,
        connect_timeout: f64,
        response_timeout: f64,
        fair_queue_timeout: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let builder = builder(
            py,
            url,
            watchdog_timeout,
            connect_timeout,
            response_timeout,
            fair_queue_timeout,
        )?;
        awaitable(py, async move {
            builder.connect().await.map(|inner| Client { inner })
        })
    }

    /// A handle on lock `name` for the holder `holder_id` (a thread or task id). No I/O.
    fn lock_handle(&self, py: Python<'_>, name: &str, holder_id: u64) -> PyResult<LockHandle> {
        self.inner
            .lock_with_holder(name, holder_id)
            .map(LockHandle::new)
            .map_err(|err| to_py_err(py, err))
    }

    /// A handle on the fair lock `name` (Redisson RFairLock: waiters served in arrival order)
    /// for the holder `holder_id`. No I/O.
    fn fair_lock_handle(&self, py: Python<'_>, name: &str, holder_id: u64) -> PyResult<LockHandle> {
        self.inner
            .fair_lock_with_holder(name, holder_id)
            .map(LockHandle::new)
            .map_err(|err| to_py_err(py, err))
    }

    /// Stops the watchdog and pub/sub; returns the names of locks still held (they expire with
    /// their lease).
    fn close(&self) -> Vec<String> {
        self.inner.close()
    }

    #[getter]
    fn id(&self) -> &str {
        self.inner.id()
    }

    #[getter]
    fn watchdog_timeout(&self) -> f64 {
        self.inner.watchdog_timeout().as_secs_f64()
    }

    fn __repr__(&self) -> String {
        format!("<polylock._native.Client id={}>", self.inner.id())
    }
}
