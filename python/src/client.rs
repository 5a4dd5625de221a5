//! `_native.Client`: one core client, shared by the sync and asyncio wrappers in Python.

use polylock::options::ClientOptionsInMillis;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::args::{millis, with_defaults};
use crate::asyncio::awaitable;
use crate::errors::{invalid_argument, to_py_err};
use crate::expirable_semaphore::ExpirableSemaphoreHandle;
use crate::job_lock::JobLockHandle;
use crate::latch::CountDownLatchHandle;
use crate::lock::LockHandle;
use crate::metrics;
use crate::semaphore::SemaphoreHandle;
use crate::wait::wait_interruptibly;

#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct Client {
    inner: polylock::Client,
}

/// A client just connected from asyncio, and its loop link: delivered on the loop's thread,
/// which attaches the link there (`asyncio::attach`).
struct Connected {
    client: Client,
    link: Option<polylock::LoopLink>,
}

impl<'py> IntoPyObject<'py> for Connected {
    type Target = Client;
    type Output = Bound<'py, Client>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, Client>> {
        if let Some(link) = self.link {
            // Without it the client's calls take its connection.
            if let Err(err) = crate::asyncio::attach(py, link) {
                err.write_unraisable(py, None);
            }
        }
        Bound::new(py, self.client)
    }
}

/// The core's client options from Python's seconds (`None`: the core's default). Only the unit
/// is converted here: the core checks every value (`ClientOptionsInMillis::into_options`, then
/// `Client::connect_with`), so Python gives the same errors as every other binding. The TLS
/// options pass through as they are.
#[allow(clippy::too_many_arguments)]
fn options(
    watchdog_timeout: Option<f64>,
    connect_timeout: Option<f64>,
    response_timeout: Option<f64>,
    fair_queue_timeout: Option<f64>,
    sync_replicas: bool,
    replica_sync_timeout: Option<f64>,
    min_replicas: Option<f64>,
    tls_ca: Option<String>,
    tls_cert: Option<String>,
    tls_key: Option<String>,
    tls_insecure: bool,
    name: Option<String>,
    metrics: bool,
    metrics_max_lock_names: Option<f64>,
    key_prefix: Option<String>,
    wait_mode: Option<String>,
    poll_min: Option<f64>,
    poll_max: Option<f64>,
) -> polylock::Result<polylock::ClientOptions> {
    ClientOptionsInMillis {
        watchdog_timeout: millis(watchdog_timeout),
        connect_timeout: millis(connect_timeout),
        response_timeout: millis(response_timeout),
        fair_queue_timeout: millis(fair_queue_timeout),
        sync_replicas: Some(sync_replicas),
        replica_sync_timeout: millis(replica_sync_timeout),
        min_replicas,
        tls_ca,
        tls_cert,
        tls_key,
        tls_insecure: Some(tls_insecure),
        name,
        metrics: Some(metrics),
        metrics_max_lock_names,
        key_prefix,
        wait_mode,
        poll_min: millis(poll_min),
        poll_max: millis(poll_max),
    }
    .into_options()
}

/// `client_class!({ methods } option: [type] = default, ...)`: the one `#[pymethods]` block of
/// `Client`: its `methods`, then the two ways to connect (`Client(url, ...)`, blocking, and
/// `Client.connect_async(url, ...)`), which take the keyword options listed once.
macro_rules! client_class {
    ({ $($methods:tt)* } $($option:ident: [$($type:tt)+] = $default:tt),+ $(,)?) => {
        #[pymethods]
        impl Client {
            $($methods)*

            /// Connects, waiting at most `connect_timeout` seconds (GIL released, Ctrl-C
            /// honoured).
            #[new]
            // Python keyword arguments, one per client option.
            #[allow(clippy::too_many_arguments)]
            #[pyo3(signature = (url, *, $($option = $default),+))]
            fn new(py: Python<'_>, url: &str, $($option: $($type)+),+) -> PyResult<Self> {
                let options = options($($option),+).map_err(|err| to_py_err(py, err))?;
                let inner = wait_interruptibly(py, polylock::Client::connect_with(url, options))?;
                Ok(Client { inner })
            }

            /// Connects without blocking the event loop; the awaitable gives a `Client`.
            #[staticmethod]
            #[allow(clippy::too_many_arguments)]
            #[pyo3(signature = (url, *, $($option = $default),+))]
            fn connect_async<'py>(
                py: Python<'py>,
                url: &str,
                $($option: $($type)+),+
            ) -> PyResult<Bound<'py, PyAny>> {
                let options = options($($option),+).map_err(|err| to_py_err(py, err))?;
                let url = url.to_owned();
                awaitable(py, async move {
                    let inner = polylock::Client::connect_with(&url, options).await?;
                    // The hot path's socket on the event loop, where the client has one plain
                    // server (`asyncio.rs`).
                    let link = inner.loop_link().await;
                    Ok(Connected {
                        client: Client { inner },
                        link,
                    })
                })
            }
        }
    };
}

client_class!({
    /// A handle of `kind` (`lock`, `fair`, `fifo`, `fenced`, `read`, `write`: the read or write
    /// lock of a read-write lock) on `name` for the holder `holder_id` (a thread or task id), with
    /// per-lock defaults `timeout` and `lease` (seconds; `None`: no bound / the watchdog
    /// lease), waiting in `wait_mode` (`"pubsub"` or `"poll"` with its bounds `poll_min` and
    /// `poll_max` in seconds; `None`: the client's). No I/O.
    #[pyo3(signature = (kind, name, holder_id, timeout = None, lease = None, wait_mode = None, poll_min = None, poll_max = None))]
    #[allow(clippy::too_many_arguments)]
    fn lock_handle(
        &self,
        py: Python<'_>,
        kind: &str,
        name: &str,
        holder_id: u64,
        timeout: Option<f64>,
        lease: Option<f64>,
        wait_mode: Option<&str>,
        poll_min: Option<f64>,
        poll_max: Option<f64>,
    ) -> PyResult<LockHandle> {
        let client = &self.inner;
        let lock = match kind {
            "lock" => client.lock_with_holder(name, holder_id),
            "fair" => client.fair_lock_with_holder(name, holder_id),
            "fifo" => client.fifo_lock_with_holder(name, holder_id),
            "fenced" => client.fenced_lock_with_holder(name, holder_id),
            "read" => client
                .read_write_lock_with_holder(name, holder_id)
                .map(|rw| rw.read_lock()),
            "write" => client
                .read_write_lock_with_holder(name, holder_id)
                .map(|rw| rw.write_lock()),
            other => return Err(invalid_argument(py, format!("unknown lock kind '{other}'"))),
        };
        let lock = lock
            .and_then(|lock| lock.with_wait_mode_from_millis(wait_mode, millis(poll_min), millis(poll_max)));
        with_defaults(py, lock, timeout, lease).map(|lock| LockHandle { lock })
    }

    /// A handle on the semaphore `name`. No I/O.
    fn semaphore(&self, py: Python<'_>, name: &str) -> PyResult<SemaphoreHandle> {
        self.inner
            .semaphore(name)
            .map(SemaphoreHandle::new)
            .map_err(|err| to_py_err(py, err))
    }

    /// A handle on the expirable semaphore `name`. No I/O.
    fn expirable_semaphore(
        &self,
        py: Python<'_>,
        name: &str,
    ) -> PyResult<ExpirableSemaphoreHandle> {
        self.inner
            .expirable_semaphore(name)
            .map(ExpirableSemaphoreHandle::new)
            .map_err(|err| to_py_err(py, err))
    }

    /// The core's `fenced_set`, blocking (GIL released, Ctrl-C honoured).
    fn fenced_set(&self, py: Python<'_>, key: &str, value: &[u8], token: i64) -> PyResult<()> {
        wait_interruptibly(py, self.inner.fenced_set(key, value, token))
    }

    /// The core's `fenced_delete`, blocking (GIL released, Ctrl-C honoured).
    fn fenced_delete(&self, py: Python<'_>, key: &str, token: i64) -> PyResult<bool> {
        wait_interruptibly(py, self.inner.fenced_delete(key, token))
    }

    /// The core's `fenced_set`, as an awaitable.
    fn fenced_set_async<'py>(
        &self,
        py: Python<'py>,
        key: String,
        value: &[u8],
        token: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let client = self.inner.clone();
        let value = value.to_vec();
        awaitable(
            py,
            async move { client.fenced_set(&key, value, token).await },
        )
    }

    /// The core's `fenced_delete`, as an awaitable.
    fn fenced_delete_async<'py>(
        &self,
        py: Python<'py>,
        key: String,
        token: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let client = self.inner.clone();
        awaitable(py, async move { client.fenced_delete(&key, token).await })
    }

    /// Stops the watchdog and pub/sub, then waits without the GIL (at most the response
    /// timeout) until the client's record is deleted; returns the names of locks still held
    /// (they expire with their lease).
    fn close(&self, py: Python<'_>) -> Vec<String> {
        let client = &self.inner;
        py.detach(|| client.close())
    }

    /// `close` as an awaitable: the loop runs on while the record's deletion is awaited.
    fn shutdown_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let client = self.inner.clone();
        awaitable(py, async move { Ok(client.shutdown().await) })
    }

    #[getter]
    fn id(&self) -> &str {
        self.inner.id()
    }

    /// The client's name (the `name` option, default `host:pid`), recorded beside its locks.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    #[getter]
    fn watchdog_timeout(&self) -> f64 {
        self.inner.watchdog_timeout().as_secs_f64()
    }

    /// The core's `metrics()` as plain dicts and lists, turned into `polylock.metrics`'s
    /// dataclasses by the Python side.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        metrics::snapshot_to_py(py, &self.inner.metrics())
    }

    /// Starts or stops buffering metric events (for `polylock.otel`).
    fn record_metric_events(&self, on: bool) {
        self.inner.record_metric_events(on);
    }

    /// The events buffered since the last call, oldest first, as tuples (`metrics.rs`).
    fn drain_metric_events<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        metrics::events_to_py(py, self.inner.drain_metric_events())
    }

    fn __repr__(&self) -> String {
        format!("<polylock._native.Client id={}>", self.inner.id())
    }

    /// The run-once job lock `name`: held at most `at_most`, at least `at_least` seconds from
    /// the job's start. No I/O.
    fn job_lock(
        &self,
        py: Python<'_>,
        name: &str,
        at_most: f64,
        at_least: f64,
    ) -> PyResult<JobLockHandle> {
        JobLockHandle::new(py, &self.inner, name, at_most, at_least)
    }

    /// A handle on the count-down latch `name`. No I/O.
    fn count_down_latch(&self, py: Python<'_>, name: &str) -> PyResult<CountDownLatchHandle> {
        self.inner
            .count_down_latch(name)
            .map(CountDownLatchHandle::new)
            .map_err(|err| to_py_err(py, err))
    }

    /// The leader election `name`. No I/O.
    fn election(&self, py: Python<'_>, name: &str) -> PyResult<crate::election::ElectionHandle> {
        self.inner
            .election(name)
            .map(crate::election::ElectionHandle::new)
            .map_err(|err| to_py_err(py, err))
    }
}
    watchdog_timeout: [Option<f64>] = None,
    connect_timeout: [Option<f64>] = None,
    response_timeout: [Option<f64>] = None,
    fair_queue_timeout: [Option<f64>] = None,
    sync_replicas: [bool] = false,
    replica_sync_timeout: [Option<f64>] = None,
    min_replicas: [Option<f64>] = None,
    tls_ca: [Option<String>] = None,
    tls_cert: [Option<String>] = None,
    tls_key: [Option<String>] = None,
    tls_insecure: [bool] = false,
    name: [Option<String>] = None,
    metrics: [bool] = true,
    metrics_max_lock_names: [Option<f64>] = None,
    key_prefix: [Option<String>] = None,
    wait_mode: [Option<String>] = None,
    poll_min: [Option<f64>] = None,
    poll_max: [Option<f64>] = None,
);
