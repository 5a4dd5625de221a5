//! `_native.LockHandle`: one core lock handle (one owner), with blocking and asyncio methods.
//! Which thread or task owns which handle is decided by the Python wrappers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::asyncio::awaitable;
use crate::client::positive_seconds;
use crate::errors::{invalid_argument, to_py_err};
use crate::wait::wait_interruptibly;

/// The core's wait for the Python arguments `blocking` and `timeout` (as `threading.Lock`):
/// `None`, `-1` or infinity wait without bound.
fn wait_arg(py: Python<'_>, blocking: bool, timeout: Option<f64>) -> PyResult<Option<Duration>> {
    let unbounded = |t: f64| t == -1.0 || t == f64::INFINITY;
    if !blocking {
        return match timeout {
            Some(t) if !unbounded(t) => Err(invalid_argument(
                py,
                "can't specify a timeout for a non-blocking call".into(),
            )),
            _ => Ok(Some(Duration::ZERO)),
        };
    }
    match timeout {
        None => Ok(None),
        Some(t) if unbounded(t) => Ok(None),
        Some(t) if t.is_nan() || t < 0.0 => Err(invalid_argument(
            py,
            format!("timeout must be a number of seconds >= 0, or None or -1 to wait without bound; got {t}"),
        )),
        Some(t) => Duration::try_from_secs_f64(t)
            .map(Some)
            .map_err(|err| invalid_argument(py, format!("timeout of {t} s: {err}"))),
    }
}

/// `None` is the watchdog-renewed lease; a number is a fixed lease in seconds.
fn lease_arg(py: Python<'_>, lease: Option<f64>) -> PyResult<Option<Duration>> {
    lease
        .map(|seconds| positive_seconds(py, "lease", seconds))
        .transpose()
}

#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct LockHandle {
    lock: polylock::Lock,
    /// Counts acquire and release calls, so an [`AbandonWatch`] knows when its owner moved on.
    calls: Arc<AtomicU64>,
}

impl LockHandle {
    pub(crate) fn new(lock: polylock::Lock) -> Self {
        LockHandle {
            lock,
            calls: Arc::new(AtomicU64::new(0)),
        }
    }

    fn begin_call(&self) -> u64 {
        self.calls.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The core's acquire, guarded by an [`AbandonWatch`].
    fn guarded_acquire(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> impl std::future::Future<Output = polylock::Result<bool>> + Send + 'static {
        let watch = AbandonWatch {
            lock: Some(self.lock.clone()),
            holds_before: self.lock.hold_count(),
            call: self.begin_call(),
            calls: self.calls.clone(),
        };
        let lock = self.lock.clone();
        async move {
            let result = lock.acquire(wait, lease).await;
            watch.disarm();
            result
        }
    }
}

/// How long an [`AbandonWatch`] looks for a late acquisition.
const ABANDON_WATCH_TIME: Duration = Duration::from_secs(5);

/// Works around a gap in the core: when an acquire future is dropped (Ctrl-C, a cancelled
/// task) in the instant after its task decided the caller is still there, the task still
/// records the acquisition, and nobody owns it. Armed while a core acquire is in flight; if
/// the future is dropped before it completes, it watches the handle for a while and releases
/// one level if its hold count rises while its owner has made no other call.
struct AbandonWatch {
    lock: Option<polylock::Lock>,
    holds_before: u32,
    call: u64,
    calls: Arc<AtomicU64>,
}

impl AbandonWatch {
    fn disarm(mut self) {
        self.lock = None;
    }
}

impl Drop for AbandonWatch {
    fn drop(&mut self) {
        let Some(lock) = self.lock.take() else {
            return;
        };
        let (holds_before, call, calls) = (self.holds_before, self.call, self.calls.clone());
        polylock::runtime().spawn(async move {
            let started = std::time::Instant::now();
            let mut pause = Duration::from_millis(1);
            while started.elapsed() < ABANDON_WATCH_TIME {
                if calls.load(Ordering::SeqCst) != call {
                    return; // the owner acts on the handle again; its count is its own now
                }
                if lock.hold_count() > holds_before {
                    let _ = lock.release().await;
                    return;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(250));
            }
        });
    }
}

#[pymethods]
impl LockHandle {
    #[getter]
    fn name(&self) -> &str {
        self.lock.name()
    }

    /// `<client-id>:<holder-id>`, the hash field this handle writes.
    #[getter]
    fn owner(&self) -> &str {
        self.lock.owner()
    }

    /// Blocks (GIL released, Ctrl-C honoured) until acquired or the timeout passes.
    #[pyo3(signature = (blocking = true, timeout = None, lease = None))]
    fn acquire(
        &self,
        py: Python<'_>,
        blocking: bool,
        timeout: Option<f64>,
        lease: Option<f64>,
    ) -> PyResult<bool> {
        let wait = wait_arg(py, blocking, timeout)?;
        let lease = lease_arg(py, lease)?;
        wait_interruptibly(py, self.guarded_acquire(wait, lease))
    }

    /// Releases one level of the hold.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        self.begin_call();
        wait_interruptibly(py, self.lock.release())
    }

    /// Whether anyone holds the lock (asks Redis).
    fn locked(&self, py: Python<'_>) -> PyResult<bool> {
        wait_interruptibly(py, self.lock.is_locked())
    }

    /// An awaitable giving an `Acquisition`; cancelling it leaves no lock held.
    #[pyo3(signature = (blocking = true, timeout = None, lease = None))]
    fn acquire_async<'py>(
        &self,
        py: Python<'py>,
        blocking: bool,
        timeout: Option<f64>,
        lease: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let wait = wait_arg(py, blocking, timeout)?;
        let lease = lease_arg(py, lease)?;
        let lock = self.lock.clone();
        let acquire = self.guarded_acquire(wait, lease);
        awaitable(py, async move {
            let acquired = acquire.await?;
            Ok(Acquisition::new(lock, acquired))
        })
    }

    fn release_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.begin_call();
        let lock = self.lock.clone();
        awaitable(py, async move { lock.release().await })
    }

    fn locked_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.clone();
        awaitable(py, async move { lock.is_locked().await })
    }

    /// Whether this handle holds the lock (no I/O).
    fn is_held(&self) -> bool {
        self.lock.is_held()
    }

    fn hold_count(&self) -> u32 {
        self.lock.hold_count()
    }

    /// Whether the current hold's lease was lost.
    #[getter]
    fn lost(&self) -> bool {
        self.lock.is_lost()
    }

    /// Calls `callback(error)` from a background thread each time a hold of this handle is lost.
    fn on_lost(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<()> {
        if !callback.bind(py).is_callable() {
            return Err(PyTypeError::new_err("on_lost expects a callable"));
        }
        self.lock.on_lost(move |err| {
            // During interpreter shutdown there is nobody left to tell.
            Python::try_attach(|py| {
                let error = to_py_err(py, err.clone()).into_value(py);
                if let Err(raised) = callback.call1(py, (error,)) {
                    raised.write_unraisable(py, Some(callback.bind(py)));
                }
            });
        });
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!(
            "<polylock._native.LockHandle name={:?} owner={} hold_count={}>",
            self.lock.name(),
            self.lock.owner(),
            self.lock.hold_count()
        )
    }
}

/// The outcome of an asyncio acquire. The acquisition belongs to whoever claims it; if nobody
/// does (the awaiting task was cancelled just as the lock was taken), dropping it releases
/// that one level in the background, so a cancelled acquire never leaves a lock held.
#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct Acquisition {
    acquired: bool,
    unclaimed: Mutex<Option<polylock::Lock>>,
}

impl Acquisition {
    fn new(lock: polylock::Lock, acquired: bool) -> Self {
        Acquisition {
            acquired,
            unclaimed: Mutex::new(acquired.then_some(lock)),
        }
    }

    fn take(&self) -> Option<polylock::Lock> {
        self.unclaimed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

#[pymethods]
impl Acquisition {
    /// Takes the acquisition over; true when the lock was acquired.
    fn claim(&self) -> bool {
        self.take();
        self.acquired
    }

    /// Gives an unclaimed acquisition back now (release in the background).
    fn abandon(&self) {
        if let Some(lock) = self.take() {
            release_in_background(lock);
        }
    }
}

impl Drop for Acquisition {
    fn drop(&mut self) {
        self.abandon();
    }
}

fn release_in_background(lock: polylock::Lock) {
    polylock::runtime().spawn(async move {
        // Nobody is left to tell about a failure; the lease then expires by itself.
        let _ = lock.release().await;
    });
}
