//! The core's metrics snapshot and metric events as plain Python values: `python/polylock/metrics.py`
//! makes the public dataclasses of the snapshot, `python/polylock/otel.py` reads the events.

use std::time::UNIX_EPOCH;

use polylock::metrics::{EventDetail, Histogram, MetricEvent, MetricsSnapshot};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::IntoPyObjectExt;

/// The snapshot as a dict with the Rust field names (`histogram`s and `connection` as dicts,
/// `locks` a list of dicts, `server_errors` a list of `(kind, count)` tuples).
pub(crate) fn snapshot_to_py<'py>(
    py: Python<'py>,
    snapshot: &MetricsSnapshot,
) -> PyResult<Bound<'py, PyDict>> {
    let locks = PyList::empty(py);
    for lock in &snapshot.locks {
        let entry = PyDict::new(py);
        entry.set_item("name", &lock.name)?;
        entry.set_item("kind", &lock.kind)?;
        entry.set_item("acquired", lock.acquired)?;
        entry.set_item("timed_out", lock.timed_out)?;
        entry.set_item("cancelled", lock.cancelled)?;
        entry.set_item("failed", lock.failed)?;
        entry.set_item("wait_time", histogram_to_py(py, &lock.wait_time)?)?;
        entry.set_item("hold_time", histogram_to_py(py, &lock.hold_time)?)?;
        entry.set_item("holds", lock.holds)?;
        entry.set_item("waiters", lock.waiters)?;
        entry.set_item("handoffs_granted", lock.handoffs_granted)?;
        entry.set_item("handoffs_woken", lock.handoffs_woken)?;
        entry.set_item("wakeups_found_taken", lock.wakeups_found_taken)?;
        entry.set_item("renewals", lock.renewals)?;
        entry.set_item("renewal_failures", lock.renewal_failures)?;
        entry.set_item("lost_expired", lock.lost_expired)?;
        entry.set_item("lost_taken", lock.lost_taken)?;
        entry.set_item("lost_connection", lock.lost_connection)?;
        entry.set_item("release_failures", lock.release_failures)?;
        entry.set_item("release_retries", lock.release_retries)?;
        locks.append(entry)?;
    }
    let connection = PyDict::new(py);
    connection.set_item("server_calls", snapshot.connection.server_calls)?;
    connection.set_item("server_errors", snapshot.connection.server_errors.clone())?;
    connection.set_item("subscriptions", snapshot.connection.subscriptions)?;
    connection.set_item("reconnects", snapshot.connection.reconnects)?;
    let out = PyDict::new(py);
    out.set_item("client_name", &snapshot.client_name)?;
    out.set_item("locks", locks)?;
    out.set_item("connection", connection)?;
    out.set_item("events_dropped", snapshot.events_dropped)?;
    Ok(out)
}

fn histogram_to_py<'py>(py: Python<'py>, histogram: &Histogram) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("count", histogram.count)?;
    out.set_item("sum_seconds", histogram.sum_seconds)?;
    out.set_item("bucket_counts", histogram.bucket_counts.clone())?;
    Ok(out)
}

/// Each event as `(event, lock_name, lock_kind, start_unix_nanos, duration_nanos, a, b, c)`:
/// - `("acquire", ..., result, attempts, woken_by or None)`
/// - `("hold", ..., lost, None, None)`
/// - `("release", ..., ok, retries, None)`
/// - `("renewal", ..., ok, None, None)`
/// - `("lost", ..., reason, None, None)`
pub(crate) fn events_to_py(
    py: Python<'_>,
    events: Vec<MetricEvent>,
) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for event in events {
        let none = || py.None();
        let (kind, a, b, c): (&str, Py<PyAny>, Py<PyAny>, Py<PyAny>) = match event.detail {
            EventDetail::Acquire {
                result,
                attempts,
                woken_by,
            } => (
                "acquire",
                result.as_str().into_py_any(py)?,
                attempts.into_py_any(py)?,
                woken_by.map(|woken| woken.as_str()).into_py_any(py)?,
            ),
            EventDetail::Hold { lost } => ("hold", lost.into_py_any(py)?, none(), none()),
            EventDetail::Release { ok, retries } => (
                "release",
                ok.into_py_any(py)?,
                retries.into_py_any(py)?,
                none(),
            ),
            EventDetail::Renewal { ok } => ("renewal", ok.into_py_any(py)?, none(), none()),
            EventDetail::Lost { reason } => {
                ("lost", reason.as_str().into_py_any(py)?, none(), none())
            }
        };
        let started = event
            .started
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let duration = event.duration.as_nanos();
        let fields: [Py<PyAny>; 8] = [
            kind.into_py_any(py)?,
            event.lock_name.into_py_any(py)?,
            event.lock_kind.into_py_any(py)?,
            u64::try_from(started).unwrap_or(u64::MAX).into_py_any(py)?,
            u64::try_from(duration)
                .unwrap_or(u64::MAX)
                .into_py_any(py)?,
            a,
            b,
            c,
        ];
        list.append(PyTuple::new(py, fields)?)?;
    }
    Ok(list)
}
