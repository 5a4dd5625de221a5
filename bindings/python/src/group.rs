//! `_native.GroupHandle`: one core `MultiLock` or `RedLock` over lock handles (those of one
//! thread or task, picked by the Python wrappers), with blocking and asyncio methods.

use polylock::{AcquireOptions, LockGroup, MultiLock, RedLock};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::asyncio::awaitable;
use crate::errors::to_py_err;
use crate::lock::{
    acquire_args, lease_arg, lost_callback, wait_arg, Acquisition, Arg, LockHandle, Undo,
};
use crate::wait::wait_interruptibly;

#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct GroupHandle {
    group: LockGroup,
}

fn acquisition(group: LockGroup, acquired: bool) -> Acquisition {
    let undo: Option<Undo> = acquired.then(|| -> Undo {
        Box::new(move || {
            polylock::runtime().spawn(async move {
                // Nobody is left to tell about a failure; the leases then expire by themselves.
                let _ = group.release().await;
            });
        })
    });
    Acquisition::new(acquired, None, undo)
}

#[pymethods]
impl GroupHandle {
    /// `kind` is "multi" or "red"; `timeout` and `lease` (seconds) are the group's defaults.
    #[new]
    #[pyo3(signature = (kind, handles, timeout = None, lease = None))]
    fn new(
        py: Python<'_>,
        kind: &str,
        handles: Vec<PyRef<'_, LockHandle>>,
        timeout: Option<f64>,
        lease: Option<f64>,
    ) -> PyResult<Self> {
        let locks = handles.iter().map(|handle| handle.lock.clone()).collect();
        let group = match kind {
            "multi" => MultiLock::new(locks).map(MultiLock::into_group),
            "red" => RedLock::new(locks).map(RedLock::into_group),
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown group kind {other:?}"
                )))
            }
        };
        let defaults = AcquireOptions {
            wait: wait_arg(py, timeout)?,
            lease: lease_arg(py, lease)?,
        };
        group
            .and_then(|group| group.with_defaults(defaults))
            .map(|group| GroupHandle { group })
            .map_err(|err| to_py_err(py, err))
    }

    #[getter]
    fn name(&self) -> &str {
        self.group.name()
    }

    /// How many of its locks must be held.
    #[getter]
    fn quorum(&self) -> usize {
        self.group.quorum()
    }

    #[getter]
    fn default_timeout(&self) -> Option<f64> {
        self.group.defaults().wait.map(|wait| wait.as_secs_f64())
    }

    #[pyo3(signature = (blocking = true, timeout = Arg::Default, lease = Arg::Default))]
    fn acquire(&self, py: Python<'_>, blocking: bool, timeout: Arg, lease: Arg) -> PyResult<bool> {
        let options = acquire_args(py, self.group.defaults(), blocking, timeout, lease)?;
        wait_interruptibly(py, self.group.acquire(options))
    }

    fn release(&self, py: Python<'_>) -> PyResult<()> {
        wait_interruptibly(py, self.group.release())
    }

    #[pyo3(signature = (blocking = true, timeout = Arg::Default, lease = Arg::Default))]
    fn acquire_async<'py>(
        &self,
        py: Python<'py>,
        blocking: bool,
        timeout: Arg,
        lease: Arg,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = acquire_args(py, self.group.defaults(), blocking, timeout, lease)?;
        let group = self.group.clone();
        awaitable(py, async move {
            let acquired = group.acquire(options).await?;
            Ok(acquisition(group, acquired))
        })
    }

    fn release_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let group = self.group.clone();
        awaitable(py, async move { group.release().await })
    }

    fn is_held(&self) -> bool {
        self.group.is_held()
    }

    fn hold_count(&self) -> u32 {
        self.group.hold_count()
    }

    #[getter]
    fn lost(&self) -> bool {
        self.group.is_lost()
    }

    fn on_lost(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<()> {
        self.group.on_lost(lost_callback(py, callback)?);
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!(
            "<polylock._native.GroupHandle {} name={:?} hold_count={}>",
            self.group.kind_label(),
            self.group.name(),
            self.group.hold_count()
        )
    }
}
