//! asyncio support: a core future as a future of the running event loop, run on
//! `polylock::runtime()` and settled on the loop's thread, many at a time.
//!
//! Each loop has one queue of ended work. The first outcome queued since the loop last looked
//! writes one byte to a socket the loop watches (`loop.add_reader`); the loop's callback then
//! settles every future whose work ended meanwhile, in one go. No runtime thread takes the GIL
//! or touches a Python object: pyo3-async-runtimes' bridge took the GIL once per outcome, from
//! a blocking thread, while the loop's thread held it running Python, and 64 concurrent
//! holders made 5,671 cycles/s (issue 44: coalesce the calls of one event-loop tick).
//!
//! A future cancelled in Python (a timeout, `task.cancel()`: `polylock._async._CoreFuture`)
//! drops its core future, which finishes what it started in the background as any dropped
//! core future does.

use std::cell::RefCell;
use std::future::Future;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use pyo3::IntoPyObjectExt;
use tokio::sync::oneshot;

use crate::errors::to_py_err;

/// A core result on its way to Python. It becomes a value or an exception only when it is
/// delivered (on the loop's thread, which holds the GIL anyway).
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

/// An asyncio awaitable (a future of the running loop) for a core future.
pub(crate) fn awaitable<'py, F, T>(py: Python<'py>, work: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = polylock::Result<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static CORE_FUTURE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let event_loop = GET_RUNNING_LOOP
        .import(py, "asyncio", "get_running_loop")?
        .call0()?;
    let (queue, future_options) = LoopQueue::of(&event_loop)?;
    let future = CORE_FUTURE
        .import(py, "polylock._async", "_CoreFuture")?
        .call((), Some(future_options.bind(py)))?;
    let (cancel, cancelled) = oneshot::channel();
    future.setattr(
        pyo3::intern!(py, "_polylock_cancel"),
        CancelCall {
            cancel: Mutex::new(Some(cancel)),
        },
    )?;
    let settled = future.clone().unbind();
    polylock::runtime().spawn(async move {
        let work = AssertUnwindSafe(work).catch_unwind();
        // Only a cancel sent counts: the sender is also dropped once the future is settled.
        let cancelled = async {
            if cancelled.await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let settle: Option<Settle> = tokio::select! {
            biased;
            () = cancelled => None,
            outcome = work => {
                let outcome = outcome.unwrap_or_else(|_| {
                    Err(polylock::Error::redis("polylock: internal error (panic)"))
                });
                Some(Box::new(move |py| Delivered(outcome).into_py_any(py)))
            }
        };
        // A cancelled one goes through the queue too, so that its future is let go on the
        // loop's thread.
        queue.push(settled, settle);
    });
    Ok(future)
}

/// Makes the value or the exception of a future, on the loop's thread.
type Settle = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

/// One loop's ended work, and the socket pair that tells the loop about it.
struct Queue {
    ended: Mutex<Vec<(Py<PyAny>, Option<Settle>)>>,
    /// Read by the loop (`loop.add_reader`).
    bell: UnixStream,
    /// Written by the first outcome queued since the loop last looked.
    ring: UnixStream,
}

/// The loop that last ran a call on a thread, its queue, and the keyword arguments its futures
/// are made with (`loop=`: one dict for all, rather than one per call). Holding the loop keeps
/// its address from being reused by a later loop.
struct LoopState {
    event_loop: Py<PyAny>,
    queue: Arc<Queue>,
    future_options: Py<PyDict>,
}

thread_local! {
    static LOOP_QUEUE: RefCell<Option<LoopState>> = const { RefCell::new(None) };
}

impl Queue {
    fn push(&self, future: Py<PyAny>, settle: Option<Settle>) {
        let first = {
            let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
            ended.push((future, settle));
            ended.len() == 1
        };
        if first {
            // Never blocks: at most a byte or two wait unread. A loop gone leaves it unread.
            let _ = (&self.ring).write(&[1]);
        }
    }
}

impl Drop for Queue {
    /// Work that ended after its loop went away: its outcome is dropped (an unclaimed
    /// acquisition gives its lock back), its future leaked, since this may run on a runtime
    /// thread, without the GIL, even while the interpreter finalizes (`interpreter.rs`).
    fn drop(&mut self) {
        let ended = std::mem::take(self.ended.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (future, settle) in ended {
            drop(settle);
            std::mem::forget(future);
        }
    }
}

/// The callable the loop calls when the bell rings: settles every future queued, through
/// `asyncio.Future`'s own `set_result` and `set_exception`, called unbound (no bound method
/// made per future).
#[pyclass(frozen)]
struct LoopQueue {
    queue: Arc<Queue>,
    set_result: Py<PyAny>,
    set_exception: Py<PyAny>,
}

impl LoopQueue {
    /// `event_loop`'s queue, made (and watched by the loop) at its first call, and the keyword
    /// arguments of its futures.
    fn of(event_loop: &Bound<'_, PyAny>) -> PyResult<(Arc<Queue>, Py<PyDict>)> {
        LOOP_QUEUE.with(|cached| {
            if let Some(state) = cached.borrow().as_ref() {
                if state.event_loop.is(event_loop) {
                    return Ok((
                        Arc::clone(&state.queue),
                        state.future_options.clone_ref(event_loop.py()),
                    ));
                }
            }
            let (bell, ring) = UnixStream::pair()?;
            bell.set_nonblocking(true)?;
            ring.set_nonblocking(true)?;
            let queue = Arc::new(Queue {
                ended: Mutex::new(Vec::new()),
                bell,
                ring,
            });
            let future = event_loop.py().import("asyncio")?.getattr("Future")?;
            let callback = Bound::new(
                event_loop.py(),
                LoopQueue {
                    queue: Arc::clone(&queue),
                    set_result: future.getattr("set_result")?.unbind(),
                    set_exception: future.getattr("set_exception")?.unbind(),
                },
            )?;
            event_loop.call_method1("add_reader", (queue.bell.as_raw_fd(), callback))?;
            let future_options = PyDict::new(event_loop.py());
            future_options.set_item(pyo3::intern!(event_loop.py(), "loop"), event_loop)?;
            let future_options = future_options.unbind();
            *cached.borrow_mut() = Some(LoopState {
                event_loop: event_loop.clone().unbind(),
                queue: Arc::clone(&queue),
                future_options: future_options.clone_ref(event_loop.py()),
            });
            Ok((queue, future_options))
        })
    }
}

#[pymethods]
impl LoopQueue {
    fn __call__(&self, py: Python<'_>) {
        // One read: a ring left unread (more than 64) calls this again, as the loop watches
        // the bell level-triggered; reading until it would block cost a syscall per wake.
        let mut rung = [0u8; 64];
        let _ = (&self.queue.bell).read(&mut rung);
        let ended =
            std::mem::take(&mut *self.queue.ended.lock().unwrap_or_else(|p| p.into_inner()));
        let (set_result, set_exception) = (self.set_result.bind(py), self.set_exception.bind(py));
        for (future, settle) in ended {
            let future = future.bind(py);
            let Some(settle) = settle else {
                continue;
            };
            let set = match settle(py) {
                Ok(value) => set_result.call1((future, value)),
                Err(err) => set_exception.call1((future, err.into_value(py))),
            };
            // A future cancelled meanwhile refuses a result: nothing to set (an acquisition
            // made for it is given back as it is dropped).
            if let Err(err) = set {
                if !future
                    .call_method0("cancelled")
                    .and_then(|c| c.is_truthy())
                    .unwrap_or(false)
                {
                    err.write_unraisable(py, Some(future));
                }
            }
        }
    }
}

/// A future's `_polylock_cancel` (`polylock._async._CoreFuture.cancel` calls it): cancels its
/// core future.
#[pyclass(frozen)]
struct CancelCall {
    cancel: Mutex<Option<oneshot::Sender<()>>>,
}

#[pymethods]
impl CancelCall {
    fn __call__(&self) {
        if let Some(cancel) = self.cancel.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = cancel.send(());
        }
    }
}
