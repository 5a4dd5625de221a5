//! `_native.GroupHandle`: one core `MultiLock` or `RedLock` over lock handles (those of one
//! thread or task, picked by the Python wrappers), with blocking and asyncio methods; the hold
//! API is [`crate::hold`]'s.

use polylock::{LockGroup, MultiLock, RedLock};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::args::with_defaults;
use crate::hold::hold_class;
use crate::lock::LockHandle;

#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct GroupHandle {
    group: LockGroup,
}

impl GroupHandle {
    fn describe(&self) -> String {
        let group = &self.group;
        let (kind, name) = (group.kind_label(), group.name());
        format!("{kind} name={name:?} hold_count={}", group.hold_count())
    }
}

hold_class!(GroupHandle.group {
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
        let group = with_defaults(py, group, timeout, lease)?;
        Ok(GroupHandle { group })
    }

    /// How many of its locks must be held.
    #[getter]
    fn quorum(&self) -> usize {
        self.group.quorum()
    }
});
