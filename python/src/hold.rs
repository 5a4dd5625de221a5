//! What `LockHandle` and `GroupHandle` share, over the core's `polylock::Hold`: the blocking
//! and asyncio acquires and releases, the hold's state and the lost callback. Written once as
//! generic functions, and put into each class by [`hold_class`] (pyo3 takes one `#[pymethods]`
//! block per class and no generic classes).

use polylock::Hold;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::acquisition::Acquisition;
use crate::args::{acquire_args, Arg};
use crate::asyncio::awaitable;
use crate::errors::to_py_err;
use crate::interpreter;
use crate::wait::wait_interruptibly;

/// Blocks (GIL released, Ctrl-C honoured) until acquired or the timeout passes.
pub(crate) fn acquire(
    py: Python<'_>,
    hold: &impl Hold,
    blocking: bool,
    timeout: Arg,
    lease: Arg,
) -> PyResult<bool> {
    let options = acquire_args(py, hold.defaults(), blocking, timeout, lease)?;
    // Dropping the core future (Ctrl-C) leaves nothing held: the core undoes an acquisition
    // whose caller went away before receiving it.
    wait_interruptibly(py, hold.acquire(options))
}

/// An awaitable giving an `Acquisition`; cancelling it leaves nothing held.
pub(crate) fn acquire_async<'py>(
    py: Python<'py>,
    hold: &impl Hold,
    blocking: bool,
    timeout: Arg,
    lease: Arg,
) -> PyResult<Bound<'py, PyAny>> {
    let options = acquire_args(py, hold.defaults(), blocking, timeout, lease)?;
    let hold = hold.clone();
    awaitable(py, async move {
        let acquired = hold.acquire(options).await?;
        Ok(Acquisition::of_hold(hold, acquired))
    })
}

pub(crate) fn release_async<'py>(py: Python<'py>, hold: &impl Hold) -> PyResult<Bound<'py, PyAny>> {
    let hold = hold.clone();
    awaitable(py, async move { hold.release().await })
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

/// `hold_class!(Class.field { methods })`: the one `#[pymethods]` block of `Class`, whose
/// `field` is a core `Hold`: its own `methods`, then the hold API every hold has and a
/// `__repr__` of `Class::describe`.
macro_rules! hold_class {
    ($class:ident . $field:ident { $($methods:tt)* }) => {
        #[pyo3::pymethods]
        impl $class {
            $($methods)*

            #[getter]
            fn name(&self) -> &str {
                polylock::Hold::name(&self.$field)
            }

            /// The default timeout in seconds (`None`: no bound).
            #[getter]
            fn default_timeout(&self) -> Option<f64> {
                let defaults = polylock::Hold::defaults(&self.$field);
                defaults.wait.map(|wait| wait.as_secs_f64())
            }

            /// Blocks (GIL released, Ctrl-C honoured) until acquired or the timeout passes.
            /// `timeout` and `lease` left out (`polylock.DEFAULT`) take the defaults.
            #[pyo3(signature = (blocking = true, timeout = crate::args::Arg::Default, lease = crate::args::Arg::Default))]
            fn acquire(
                &self,
                py: pyo3::Python<'_>,
                blocking: bool,
                timeout: crate::args::Arg,
                lease: crate::args::Arg,
            ) -> pyo3::PyResult<bool> {
                crate::hold::acquire(py, &self.$field, blocking, timeout, lease)
            }

            /// An awaitable giving an `Acquisition`; cancelling it leaves nothing held.
            #[pyo3(signature = (blocking = true, timeout = crate::args::Arg::Default, lease = crate::args::Arg::Default))]
            fn acquire_async<'py>(
                &self,
                py: pyo3::Python<'py>,
                blocking: bool,
                timeout: crate::args::Arg,
                lease: crate::args::Arg,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                crate::hold::acquire_async(py, &self.$field, blocking, timeout, lease)
            }

            /// Releases one level of the hold.
            fn release(&self, py: pyo3::Python<'_>) -> pyo3::PyResult<()> {
                crate::wait::wait_interruptibly(py, polylock::Hold::release(&self.$field))
            }

            fn release_async<'py>(
                &self,
                py: pyo3::Python<'py>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                crate::hold::release_async(py, &self.$field)
            }

            /// Raises the error of a `with` block whose default timeout (`timeout` seconds) ran
            /// out: the core's, naming who holds it (asks Redis; GIL released).
            fn raise_not_acquired(&self, py: pyo3::Python<'_>, timeout: f64) -> pyo3::PyResult<()> {
                let wait = std::time::Duration::try_from_secs_f64(timeout).unwrap_or_default();
                let hold = self.$field.clone();
                crate::wait::wait_interruptibly(py, async move {
                    Err(polylock::Hold::not_acquired_error(&hold, wait).await)
                })
            }

            /// An awaitable that raises the error of an `async with` block whose default
            /// timeout ran out (as `raise_not_acquired`).
            fn raise_not_acquired_async<'py>(
                &self,
                py: pyo3::Python<'py>,
                timeout: f64,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                let wait = std::time::Duration::try_from_secs_f64(timeout).unwrap_or_default();
                let hold = self.$field.clone();
                crate::asyncio::awaitable(py, async move {
                    Err::<(), _>(polylock::Hold::not_acquired_error(&hold, wait).await)
                })
            }

            /// Whether this handle holds it (no I/O).
            fn is_held(&self) -> bool {
                polylock::Hold::is_held(&self.$field)
            }

            fn hold_count(&self) -> u32 {
                polylock::Hold::hold_count(&self.$field)
            }

            /// Whether the current hold was lost.
            #[getter]
            fn lost(&self) -> bool {
                polylock::Hold::is_lost(&self.$field)
            }

            fn __repr__(&self) -> String {
                format!("<polylock._native.{} {}>", stringify!($class), self.describe())
            }

            /// Calls `callback(error)` from a background thread each time a hold is lost.
            fn on_lost(&self, py: pyo3::Python<'_>, callback: pyo3::Py<pyo3::PyAny>) -> pyo3::PyResult<()> {
                polylock::Hold::on_lost(&self.$field, crate::hold::lost_callback(py, callback)?);
                Ok(())
            }
        }
    };
}

pub(crate) use hold_class;
