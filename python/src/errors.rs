//! The exception classes and the one function that maps core errors onto them.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

/// The exception classes, made once per process at import.
pub(crate) struct Exceptions {
    lock_error: Py<PyType>,
    not_held: Py<PyType>,
    lock_lost: Py<PyType>,
    invalid_argument: Py<PyType>,
    wrong_type: Py<PyType>,
    connection: Py<PyType>,
    timeout: Py<PyType>,
    redis: Py<PyType>,
    stale_token: Py<PyType>,
    not_synced: Py<PyType>,
    permission: Py<PyType>,
}

static EXCEPTIONS: PyOnceLock<Exceptions> = PyOnceLock::new();

/// A class `name(*bases)` in module `polylock`. Made with `type()` because several of them also
/// derive from a builtin (`ValueError`, `ConnectionError`, ...), which `create_exception!` cannot do.
fn new_class<'py>(
    py: Python<'py>,
    name: &str,
    bases: &[&Bound<'py, PyType>],
    doc: &str,
) -> PyResult<Py<PyType>> {
    let namespace = PyDict::new(py);
    namespace.set_item("__module__", "polylock")?;
    namespace.set_item("__doc__", doc)?;
    let class = py
        .get_type::<PyType>()
        .call1((name, PyTuple::new(py, bases)?, namespace))?;
    Ok(class.cast_into::<PyType>()?.unbind())
}

fn make(py: Python<'_>) -> PyResult<Exceptions> {
    use pyo3::exceptions::{
        PyConnectionError, PyException, PyPermissionError, PyRuntimeError, PyTimeoutError,
        PyValueError,
    };
    let lock_error = new_class(
        py,
        "LockError",
        &[&py.get_type::<PyException>()],
        "Base class of every polylock error.",
    )?;
    let base = lock_error.bind(py).clone();
    let with = |name: &str, builtin: Option<Bound<'_, PyType>>, doc: &str| match builtin {
        Some(builtin) => new_class(py, name, &[&base, &builtin], doc),
        None => new_class(py, name, &[&base], doc),
    };
    Ok(Exceptions {
        not_held: with(
            "NotHeldError",
            Some(py.get_type::<PyRuntimeError>()),
            "Released a lock the caller does not hold.",
        )?,
        lock_lost: with(
            "LockLostError",
            None,
            "The lease ran out, or the key was deleted or taken, while the lock was held.",
        )?,
        invalid_argument: with(
            "InvalidArgumentError",
            Some(py.get_type::<PyValueError>()),
            "A bad argument, rejected before any I/O.",
        )?,
        wrong_type: with(
            "WrongTypeError",
            None,
            "The lock's name holds a Redis key that is not a lock.",
        )?,
        connection: with(
            "ConnectionError",
            Some(py.get_type::<PyConnectionError>()),
            "Redis could not be reached, the connection broke, or the client is closed or was made before a fork.",
        )?,
        timeout: with(
            "TimeoutError",
            Some(py.get_type::<PyTimeoutError>()),
            "Redis did not answer within the response timeout.",
        )?,
        redis: with(
            "RedisError",
            None,
            "Redis answered with an unexpected error.",
        )?,
        stale_token: with(
            "StaleTokenError",
            None,
            "A fenced write was refused: its token is lower than one already applied to the key.",
        )?,
        not_synced: with(
            "NotSyncedError",
            None,
            "With sync_replicas: no replica acknowledged an acquisition within the timeout (it was undone).",
        )?,
        permission: with(
            "PermissionError",
            Some(py.get_type::<PyPermissionError>()),
            "The Redis user may not run a command polylock needs, or use a key or channel of the lock (ACL).",
        )?,
        lock_error,
    })
}

/// Adds the exception classes to the module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    let exceptions = EXCEPTIONS.get_or_try_init(py, || make(py))?;
    for class in [
        &exceptions.lock_error,
        &exceptions.not_held,
        &exceptions.lock_lost,
        &exceptions.invalid_argument,
        &exceptions.wrong_type,
        &exceptions.connection,
        &exceptions.timeout,
        &exceptions.redis,
        &exceptions.stale_token,
        &exceptions.not_synced,
        &exceptions.permission,
    ] {
        let class = class.bind(py);
        module.add(class.name()?, class)?;
    }
    Ok(())
}

/// The one mapping from core errors to Python exceptions.
pub(crate) fn to_py_err(py: Python<'_>, err: polylock::Error) -> PyErr {
    let exceptions = match EXCEPTIONS.get_or_try_init(py, || make(py)) {
        Ok(exceptions) => exceptions,
        Err(failure) => return failure,
    };
    let class = match err.kind() {
        polylock::ErrorKind::InvalidArgument => &exceptions.invalid_argument,
        polylock::ErrorKind::NotHeld => &exceptions.not_held,
        polylock::ErrorKind::LockLost => &exceptions.lock_lost,
        polylock::ErrorKind::Connection => &exceptions.connection,
        polylock::ErrorKind::Timeout => &exceptions.timeout,
        polylock::ErrorKind::WrongType => &exceptions.wrong_type,
        polylock::ErrorKind::Redis => &exceptions.redis,
        polylock::ErrorKind::StaleToken => &exceptions.stale_token,
        polylock::ErrorKind::NotSynced => &exceptions.not_synced,
        polylock::ErrorKind::Permission => &exceptions.permission,
        // A kind newer than this mapping: raised as an unexpected Redis error is.
        _ => &exceptions.redis,
    };
    PyErr::from_type(class.bind(py).clone(), err.to_string())
}

/// A bad argument caught by the binding itself, reported like the core's.
pub(crate) fn invalid_argument(py: Python<'_>, message: String) -> PyErr {
    to_py_err(py, polylock::Error::invalid_argument(message))
}
