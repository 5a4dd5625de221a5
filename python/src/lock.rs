//! `_native.LockHandle`: one core lock handle (one owner), with blocking and asyncio methods.
//! Which thread or task owns which handle is decided by the Python wrappers; the hold API is
//! [`crate::hold`]'s.

use std::time::Duration;

use pyo3::prelude::*;

use crate::asyncio::awaitable;
use crate::hold::hold_class;
use crate::wait::wait_interruptibly;

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
    fn describe(&self) -> String {
        let lock = &self.lock;
        let (name, owner) = (lock.name(), lock.owner());
        format!(
            "name={name:?} owner={owner} hold_count={}",
            lock.hold_count()
        )
    }
}

hold_class!(LockHandle.lock {
    /// `<client-id>:<holder-id>`, the hash field this handle writes.
    #[getter]
    fn owner(&self) -> &str {
        self.lock.owner()
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

    /// Whether anyone holds the lock (asks Redis).
    fn locked(&self, py: Python<'_>) -> PyResult<bool> {
        wait_interruptibly(py, self.lock.is_locked())
    }

    fn locked_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.clone();
        awaitable(py, async move { lock.is_locked().await })
    }

    /// The fencing token of the current hold (fenced locks only; no I/O).
    #[getter]
    fn token(&self) -> Option<i64> {
        self.lock.token()
    }
});
