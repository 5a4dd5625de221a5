//! asyncio support: pyo3-async-runtimes' generic bridge, running on `polylock::runtime()`.
//!
//! pyo3-async-runtimes' own tokio module keeps a runtime of its own, which is dead in a forked
//! child; `polylock::runtime()` is rebuilt after a fork, so every spawn goes there instead.
//! Its completions pass the gate of `interpreter.rs`, so none runs while Python exits.

use std::future::Future;
use std::pin::Pin;

use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use pyo3_async_runtimes::generic::{self, ContextExt, Runtime};
use pyo3_async_runtimes::TaskLocals;

use crate::errors::to_py_err;
use crate::interpreter;

pub(crate) struct CoreRuntime;

pub(crate) struct JoinFailed(tokio::task::JoinError);

impl generic::JoinError for JoinFailed {
    fn is_panic(&self) -> bool {
        self.0.is_panic()
    }

    fn into_panic(self) -> Box<dyn std::any::Any + Send + 'static> {
        self.0.into_panic()
    }
}

type Joined = Pin<Box<dyn Future<Output = Result<(), JoinFailed>> + Send>>;

impl Runtime for CoreRuntime {
    type JoinError = JoinFailed;
    type JoinHandle = Joined;

    fn spawn<F>(future: F) -> Joined
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let task = polylock::runtime().spawn(future);
        Box::pin(async move { task.await.map_err(JoinFailed) })
    }

    fn spawn_blocking<F>(function: F) -> Joined
    where
        F: FnOnce() + Send + 'static,
    {
        // pyo3-async-runtimes passes only its completions here (`future_into_py_with_locals`:
        // `Python::attach` to hand the result to the asyncio future); they must not run once
        // the interpreter is exiting.
        let task = polylock::runtime().spawn_blocking(|| {
            interpreter::unless_exiting(function);
        });
        Box::pin(async move { task.await.map_err(JoinFailed) })
    }
}

tokio::task_local! {
    static TASK_LOCALS: TaskLocals;
}

impl ContextExt for CoreRuntime {
    fn scope<F, R>(locals: TaskLocals, future: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        Box::pin(TASK_LOCALS.scope(locals, future))
    }

    fn get_task_locals() -> Option<TaskLocals> {
        TASK_LOCALS.try_with(|locals| locals.clone()).ok()
    }
}

/// A core result on its way to Python. It becomes a value or an exception only when it is
/// delivered (on a thread that holds the GIL anyway), so no runtime thread waits for the GIL.
pub(crate) struct Delivered<T>(pub(crate) polylock::Result<T>);

impl<'py, T> IntoPyObject<'py> for Delivered<T>
where
    T: IntoPyObject<'py>,
{
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.0 {
            Ok(value) => value.into_bound_py_any(py),
            Err(err) => Err(to_py_err(py, err)),
        }
    }
}

/// An asyncio awaitable for a core future.
pub(crate) fn awaitable<'py, F, T>(py: Python<'py>, future: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = polylock::Result<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    generic::future_into_py::<CoreRuntime, _, _>(py, async move { Ok(Delivered(future.await)) })
}
