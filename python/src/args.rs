//! Python's acquire arguments as the core's options: seconds to the core's durations (the core
//! checks them, so the errors are those of every binding), `polylock.DEFAULT` for an argument
//! left out, and `blocking` as `threading.Lock.acquire` has it.

use std::time::Duration;

use polylock::options::{lease_from_millis, wait_from_millis};
use polylock::{AcquireOptions, Hold};
use pyo3::prelude::*;

use crate::errors::{invalid_argument, to_py_err};

/// Python seconds as the core's milliseconds (the core checks the value).
pub(crate) fn millis(seconds: Option<f64>) -> Option<f64> {
    seconds.map(|seconds| seconds * 1000.0)
}

/// The core's wait for the Python argument `timeout` (seconds). What is Python idiom is
/// decided here, as `threading.Lock.acquire` does: `timeout=None` or `-1` waits without bound.
/// Everything else is the core's: seconds become milliseconds and the core checks them
/// (infinity waits without bound there), so the errors are those of every binding.
pub(crate) fn wait_arg(py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Duration>> {
    let timeout = timeout.filter(|&seconds| seconds != -1.0);
    wait_from_millis(millis(timeout)).map_err(|err| to_py_err(py, err))
}

/// The core's lease for the Python argument `lease` (seconds; `None`: renewed by the watchdog).
pub(crate) fn lease_arg(py: Python<'_>, lease: Option<f64>) -> PyResult<Option<Duration>> {
    lease_from_millis(millis(lease)).map_err(|err| to_py_err(py, err))
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

/// A hold with defaults given in seconds (`None`: no bound / watchdog lease); the core checks
/// them (`Hold::with_defaults`).
pub(crate) fn with_defaults<H: Hold>(
    py: Python<'_>,
    hold: polylock::Result<H>,
    timeout: Option<f64>,
    lease: Option<f64>,
) -> PyResult<H> {
    let defaults = AcquireOptions {
        wait: wait_arg(py, timeout)?,
        lease: lease_arg(py, lease)?,
    };
    hold.and_then(|hold| hold.with_defaults(defaults))
        .map_err(|err| to_py_err(py, err))
}

/// The core's acquire options for the Python arguments `blocking`, `timeout` and `lease`
/// (seconds): [`wait_arg`] and [`lease_arg`] for the arguments given, the hold's defaults for
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
