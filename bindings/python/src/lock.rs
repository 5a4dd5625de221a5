//! `_native.LockHandle`: one core lock handle (one owner), with blocking and asyncio methods.
//! Which thread or task owns which handle is decided by the Python wrappers.

use polylock::AcquireOptions;
use std::sync::Mutex;
use std::time::Duration;

use polylock::options::{lease_from_millis, wait_from_millis};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::asyncio::awaitable;
use crate::errors::{invalid_argument, to_py_err};
use crate::interpreter;
use crate::wait::wait_interruptibly;

/// The core's wait for the Python argument `timeout` (seconds). What is Python idiom is
/// decided here, as `threading.Lock.acquire` does: `timeout=None` or `-1` waits without bound.
/// Everything else is the core's: seconds become milliseconds and the core checks them
/// (infinity waits without bound there), so the errors are those of every binding.
pub(crate) fn wait_arg(py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Duration>> {
    let timeout = timeout.filter(|&seconds| seconds != -1.0);
    wait_from_millis(timeout.map(|seconds| seconds * 1000.0)).map_err(|err| to_py_err(py, err))
}

/// The core's lease for the Python argument `lease` (seconds; `None`: renewed by the watchdog).
pub(crate) fn lease_arg(py: Python<'_>, lease: Option<f64>) -> PyResult<Option<Duration>> {
    lease_from_millis(lease.map(|seconds| seconds * 1000.0)).map_err(|err| to_py_err(py, err))
}

/// The type of `polylock.DEFAULT`, the value of an `acquire` argument left out: the lock's own
/// default (set by `client.lock(name, timeout=..., lease=...)`) applies.
#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct UseDefault;

#[pymethods]
impl UseDefault {
    fn __repr__(&self) -> &'static str {
        "polylock.DEFAULT"
    }
}

/// An `acquire` argument: left out (`polylock.DEFAULT`) or given (`None` or seconds).
pub(crate) enum Arg {
    Default,
    Given(Option<f64>),
}

impl<'a, 'py> FromPyObject<'a, 'py> for Arg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_instance_of::<UseDefault>() {
            return Ok(Arg::Default);
        }
        obj.extract::<Option<f64>>().map(Arg::Given)
    }
}

/// A lock handle with per-lock defaults given in seconds (`None`: no bound / watchdog lease);
/// the core checks them (`Lock::with_defaults`).
pub(crate) fn with_defaults(
    py: Python<'_>,
    lock: polylock::Result<polylock::Lock>,
    timeout: Option<f64>,
    lease: Option<f64>,
) -> PyResult<LockHandle> {
    let defaults = AcquireOptions {
        wait: wait_arg(py, timeout)?,
        lease: lease_arg(py, lease)?,
    };
    lock.and_then(|lock| lock.with_defaults(defaults))
        .map(LockHandle::new)
        .map_err(|err| to_py_err(py, err))
}

/// The core's acquire options for the Python arguments `blocking`, `timeout` and `lease`
/// (seconds): [`wait_arg`] and [`lease_arg`] for the arguments given, the lock's defaults for
/// those left out, and `blocking=False` makes one attempt and takes no timeout (as
/// `threading.Lock.acquire`).
pub(crate) fn acquire_args(
    py: Python<'_>,
    defaults: AcquireOptions,
    blocking: bool,
    timeout: Arg,
    lease: Arg,
) -> PyResult<AcquireOptions> {
    let wait = match timeout {
        Arg::Given(Some(seconds)) if !blocking && seconds != -1.0 => {
            return Err(invalid_argument(
                py,
                "can't specify a timeout for a non-blocking call".into(),
            ));
        }
        _ if !blocking => Some(Duration::ZERO),
        Arg::Default => defaults.wait,
        Arg::Given(seconds) => wait_arg(py, seconds)?,
    };
    let lease = match lease {
        Arg::Default => defaults.lease,
        Arg::Given(seconds) => lease_arg(py, seconds)?,
    };
    Ok(AcquireOptions { wait, lease })
}

/// A lease in seconds for Python: `inf` when the key has no expiry.
fn seconds(lease: Duration) -> f64 {
    if lease == Duration::MAX {
        f64::INFINITY
    } else {
        lease.as_secs_f64()
    }
}

#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct LockHandle {
    pub(crate) lock: polylock::Lock,
}

impl LockHandle {
    pub(crate) fn new(lock: polylock::Lock) -> Self {
        LockHandle { lock }
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
    /// `timeout` and `lease` left out (`polylock.DEFAULT`) take the lock's defaults.
    #[pyo3(signature = (blocking = true, timeout = Arg::Default, lease = Arg::Default))]
    fn acquire(&self, py: Python<'_>, blocking: bool, timeout: Arg, lease: Arg) -> PyResult<bool> {
        let options = acquire_args(py, self.lock.defaults(), blocking, timeout, lease)?;
        // Dropping the core future (Ctrl-C) leaves no lock held: the core undoes an acquisition
        // whose caller went away before receiving it.
        wait_interruptibly(py, self.lock.acquire(options))
    }

    /// The lock's default timeout in seconds (`None`: no bound).
    #[getter]
    fn default_timeout(&self) -> Option<f64> {
        self.lock.defaults().wait.map(|wait| wait.as_secs_f64())
    }

    /// The lock's default lease in seconds (`None`: the watchdog's).
    #[getter]
    fn default_lease(&self) -> Option<f64> {
        self.lock.defaults().lease.map(|lease| lease.as_secs_f64())
    }

    /// Deletes the lock whoever holds it; true when a lock was deleted.
    fn force_unlock(&self, py: Python<'_>) -> PyResult<bool> {
        wait_interruptibly(py, self.lock.force_unlock())
    }

    /// The holder's remaining lease in seconds (`inf`: no expiry), `None` when free.
    fn remaining_lease(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        Ok(wait_interruptibly(py, self.lock.remaining_lease())?.map(seconds))
    }

    fn force_unlock_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.clone();
        awaitable(py, async move { lock.force_unlock().await })
    }

    fn remaining_lease_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.clone();
        awaitable(
            py,
            async move { Ok(lock.remaining_lease().await?.map(seconds)) },
        )
    }

    /// Releases one level of the hold.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        wait_interruptibly(py, self.lock.release())
    }

    /// Whether anyone holds the lock (asks Redis).
    fn locked(&self, py: Python<'_>) -> PyResult<bool> {
        wait_interruptibly(py, self.lock.is_locked())
    }

    /// An awaitable giving an `Acquisition`; cancelling it leaves no lock held.
    #[pyo3(signature = (blocking = true, timeout = Arg::Default, lease = Arg::Default))]
    fn acquire_async<'py>(
        &self,
        py: Python<'py>,
        blocking: bool,
        timeout: Arg,
        lease: Arg,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = acquire_args(py, self.lock.defaults(), blocking, timeout, lease)?;
        let lock = self.lock.clone();
        awaitable(py, async move {
            let acquired = lock.acquire(options).await?;
            Ok(Acquisition::of_lock(lock, acquired))
        })
    }

    fn release_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
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

    /// The fencing token of the current hold (fenced locks only; no I/O).
    #[getter]
    fn token(&self) -> Option<i64> {
        self.lock.token()
    }

    /// Whether the current hold's lease was lost.
    #[getter]
    fn lost(&self) -> bool {
        self.lock.is_lost()
    }

    /// Calls `callback(error)` from a background thread each time a hold of this handle is lost.
    fn on_lost(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<()> {
        self.lock.on_lost(lost_callback(py, callback)?);
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

/// A Python `callback(error)` as a core lost callback (called on a runtime thread).
pub(crate) fn lost_callback(
    py: Python<'_>,
    callback: Py<PyAny>,
) -> PyResult<impl Fn(&polylock::Error) + Send + Sync + 'static> {
    if !callback.bind(py).is_callable() {
        return Err(PyTypeError::new_err("on_lost expects a callable"));
    }
    Ok(move |err: &polylock::Error| {
        // Once Python is exiting there is nobody left to tell, and attaching then would crash
        // the process (see interpreter.rs).
        interpreter::unless_exiting(|| {
            Python::try_attach(|py| {
                let error = to_py_err(py, err.clone()).into_value(py);
                if let Err(raised) = callback.call1(py, (error,)) {
                    raised.write_unraisable(py, Some(callback.bind(py)));
                }
            })
        });
    })
}

/// What gives an unclaimed acquisition back (in the background).
pub(crate) type Undo = Box<dyn FnOnce() + Send>;

/// The outcome of an asyncio acquire (a lock, semaphore permits, an expirable permit),
/// claimed by the awaiting task.
///
/// The core undoes an acquisition whose future is dropped before it returns, but once the
/// core future has returned the acquisition is ours, and the asyncio side can still lose
/// it: pyo3-async-runtimes drops the result when the Python future was cancelled in the
/// meantime, and the task can be cancelled after the result was set but before it resumed.
/// Whatever nobody claims is given back (in the background) when dropped or abandoned, so a
/// cancelled acquire never leaves a lock or a permit held.
#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct Acquisition {
    acquired: bool,
    permit_id: Option<String>,
    unclaimed: Mutex<Option<Undo>>,
}

impl Acquisition {
    /// `undo` is run when the acquisition is abandoned; `None` when nothing was acquired.
    pub(crate) fn new(acquired: bool, permit_id: Option<String>, undo: Option<Undo>) -> Self {
        Acquisition {
            acquired,
            permit_id,
            unclaimed: Mutex::new(undo),
        }
    }

    fn of_lock(lock: polylock::Lock, acquired: bool) -> Self {
        let undo: Option<Undo> = acquired.then(|| -> Undo {
            Box::new(move || {
                polylock::runtime().spawn(async move {
                    // Nobody is left to tell about a failure; the lease then expires by itself.
                    let _ = lock.release().await;
                });
            })
        });
        Acquisition::new(acquired, None, undo)
    }

    fn take(&self) -> Option<Undo> {
        self.unclaimed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

#[pymethods]
impl Acquisition {
    /// Takes the acquisition over; true when something was acquired.
    fn claim(&self) -> bool {
        self.take();
        self.acquired
    }

    /// The id of the permit acquired (expirable semaphores only).
    #[getter]
    fn permit_id(&self) -> Option<String> {
        self.permit_id.clone()
    }

    /// Gives an unclaimed acquisition back now (in the background).
    fn abandon(&self) {
        if let Some(undo) = self.take() {
            undo();
        }
    }
}

impl Drop for Acquisition {
    fn drop(&mut self) {
        self.abandon();
    }
}
