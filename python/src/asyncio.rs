//! asyncio support: a core future as a future of the running event loop, settled on the loop's
//! thread, many at a time. Two ways, by client:
//!
//! - *On the loop* (a client of one plain TCP server, issue 44: M Python): `connect_async` opens a
//!   loop link (`polylock::LoopLink`), a command connection whose socket the loop watches
//!   (`loop.add_reader`). From then on every call made on that loop is its engine future polled
//!   on the loop's thread (`polylock::LoopTasks`): first in the call itself, so the command is
//!   written before the call returns, then when its reply is read in the reader callback, or
//!   when another thread wakes it (a timer, pub/sub) through the bell below. No runtime thread
//!   sits between a call and its reply. The link's writes are deferred (`defer_writes`): while
//!   calls wait for replies, concurrent calls' commands go out a few in one write, and the rest
//!   at the end of the loop's turn (`call_soon`). A blocking call made on the loop's thread bypasses the
//!   links (`wait.rs`): nothing reads them while it blocks.
//! - *On polylock's runtime* (any other client, or before a link is attached): each loop has one
//!   queue of ended work. The first outcome queued since the loop last looked writes one byte
//!   to a socket the loop watches (the bell); the loop's callback then settles every future
//!   whose work ended meanwhile, in one go. pyo3-async-runtimes' bridge took the GIL once per
//!   outcome, from a blocking thread, while the loop's thread held it running Python, and 64
//!   concurrent holders made 5,671 cycles/s (issue 44: coalesce the calls of one event-loop
//!   tick).
//!
//! No runtime thread takes the GIL or touches a Python object.
//!
//! A future cancelled in Python (a timeout, `task.cancel()`: `polylock._async._CoreFuture`)
//! drops its core future, which finishes what it started in the background as any dropped
//! core future does.
//!
//! A link that dies is let go: the calls take the client's connection until a new one, opened
//! in the background (`LoopLink::reopen_later`), is attached by the bell's callback.
//!
//! A link belongs to the loop it was attached on: when another loop runs calls on the thread,
//! the links are closed (that client's calls then take its connection) and the tasks still
//! pending go on on polylock's runtime, their outcomes dropped.

use std::cell::RefCell;
use std::future::Future;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use polylock::{LoopLink, LoopTasks};
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
    let (queue, future_options, on_loop) = LoopQueue::of(&event_loop)?;
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
    let run = async move {
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
        settle
    };
    match on_loop {
        Some((tasks, settler)) => {
            let carried = Carried(Some(future.clone().unbind()));
            tasks.spawn(async move { (carried, run.await) }, &mut |ended| {
                settler.get().settle_carried(py, ended)
            });
            watch_writable(py);
        }
        None => {
            let settled = future.clone().unbind();
            polylock::runtime().spawn(async move {
                // A cancelled one goes through the queue too, so that its future is let go on
                // the loop's thread.
                queue.push(settled, run.await);
            });
        }
    }
    Ok(future)
}

/// A Python future carried through a loop task, taken on the loop's thread when the task ends.
/// A task dropped elsewhere (handed over to the runtime) leaks it: that may be a runtime thread,
/// without the GIL, even while the interpreter finalizes (`interpreter.rs`).
struct Carried(Option<Py<PyAny>>);

impl Drop for Carried {
    fn drop(&mut self) {
        if let Some(future) = self.0.take() {
            std::mem::forget(future);
        }
    }
}

/// What a loop task ends with: its future, and how to settle it (`None`: it was cancelled).
type Ended = (Carried, Option<Settle>);

/// Makes the value or the exception of a future, on the loop's thread.
type Settle = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

/// One loop's ended work, and the socket pair that tells the loop about it.
struct Queue {
    ended: Mutex<Vec<(Py<PyAny>, Option<Settle>)>>,
    /// Read by the loop (`loop.add_reader`).
    bell: UnixStream,
    /// Written by the first outcome queued (or loop task woken) since the loop last looked.
    ring: UnixStream,
    rung: AtomicBool,
    /// Links opened again after one died (`LoopLink::reopen_later`), to attach on the loop.
    reopened: Mutex<Vec<LoopLink>>,
}

/// The loop that last ran a call on a thread, its queue, and the keyword arguments its futures
/// are made with (`loop=`: one dict for all, rather than one per call). Holding the loop keeps
/// its address from being reused by a later loop.
struct LoopState {
    event_loop: Py<PyAny>,
    queue: Arc<Queue>,
    future_options: Py<PyDict>,
    /// The bell's callback, which also settles the loop tasks' futures.
    settler: Py<LoopQueue>,
    /// The calls polled on this loop, once a link is attached.
    on_loop: OnLoop,
    /// The process that made it: a forked child shares the loop's selector (epoll) with it.
    pid: u32,
}

/// A loop's links and the tasks polled on it. Dropped (a thread that ends, another loop), it
/// closes the links and hands the tasks over to the runtime; it touches no Python object.
#[derive(Default)]
struct OnLoop {
    tasks: Option<LoopTasks<Ended>>,
    links: Vec<Watched>,
}

/// A link the loop watches, for readability always, for writability while `writable`; its
/// commands are written by a flush the loop calls soon (`flush_scheduled`).
struct Watched {
    link: LoopLink,
    writable: bool,
    flush_scheduled: bool,
}

impl Drop for OnLoop {
    fn drop(&mut self) {
        if let Some(tasks) = &self.tasks {
            tasks.hand_over();
        }
    }
}

thread_local! {
    static LOOP_QUEUE: RefCell<Option<LoopState>> = const { RefCell::new(None) };
}

impl Queue {
    fn push(&self, future: Py<PyAny>, settle: Option<Settle>) {
        self.ended
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((future, settle));
        self.ring();
    }

    /// Makes the loop call the bell's callback soon: one byte per look, at most.
    fn ring(&self) {
        if !self.rung.swap(true, Ordering::SeqCst) {
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

/// What `awaitable` needs of the running loop: its queue, its futures' keyword arguments and,
/// once a link is attached there, its tasks and the callable that settles them.
type OfLoop = (
    Arc<Queue>,
    Py<PyDict>,
    Option<(LoopTasks<Ended>, Py<LoopQueue>)>,
);

impl LoopQueue {
    /// `event_loop`'s queue, made (and watched by the loop) at its first call, and the keyword
    /// arguments of its futures.
    fn of(event_loop: &Bound<'_, PyAny>) -> PyResult<OfLoop> {
        let py = event_loop.py();
        let (of_loop, replaced) = LOOP_QUEUE.with(|cached| -> PyResult<_> {
            if let Some(state) = cached.borrow().as_ref() {
                if state.event_loop.is(event_loop) {
                    return Ok((state.of_loop(py), None));
                }
            }
            let (bell, ring) = UnixStream::pair()?;
            bell.set_nonblocking(true)?;
            ring.set_nonblocking(true)?;
            let queue = Arc::new(Queue {
                ended: Mutex::new(Vec::new()),
                bell,
                ring,
                rung: AtomicBool::new(false),
                reopened: Mutex::new(Vec::new()),
            });
            let future = py.import("asyncio")?.getattr("Future")?;
            let settler = Py::new(
                py,
                LoopQueue {
                    queue: Arc::clone(&queue),
                    set_result: future.getattr("set_result")?.unbind(),
                    set_exception: future.getattr("set_exception")?.unbind(),
                },
            )?;
            event_loop.call_method1(
                "add_reader",
                (queue.bell.as_raw_fd(), settler.clone_ref(py)),
            )?;
            let future_options = PyDict::new(py);
            future_options.set_item(pyo3::intern!(py, "loop"), event_loop)?;
            let state = LoopState {
                event_loop: event_loop.clone().unbind(),
                queue,
                future_options: future_options.unbind(),
                settler,
                on_loop: OnLoop::default(),
                pid: std::process::id(),
            };
            let of_loop = state.of_loop(py);
            Ok((of_loop, cached.borrow_mut().replace(state)))
        })?;
        if let Some(old) = replaced {
            old.let_go(py);
        }
        Ok(of_loop)
    }

    /// Settles one future on the loop's thread, through `asyncio.Future`'s own `set_result`
    /// and `set_exception`, called unbound (no bound method made per future).
    fn settle(&self, py: Python<'_>, future: &Bound<'_, PyAny>, settle: Option<Settle>) {
        let Some(settle) = settle else {
            return;
        };
        let set = match settle(py) {
            Ok(value) => self.set_result.bind(py).call1((future, value)),
            Err(err) => self
                .set_exception
                .bind(py)
                .call1((future, err.into_value(py))),
        };
        // A future cancelled meanwhile refuses a result: nothing to set (an acquisition made
        // for it is given back as it is dropped).
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

    fn settle_carried(&self, py: Python<'_>, (mut carried, settle): Ended) {
        if let Some(future) = carried.0.take() {
            self.settle(py, future.bind(py), settle);
        }
    }
}

impl LoopState {
    fn of_loop(&self, py: Python<'_>) -> OfLoop {
        (
            Arc::clone(&self.queue),
            self.future_options.clone_ref(py),
            self.on_loop
                .tasks
                .clone()
                .map(|tasks| (tasks, self.settler.clone_ref(py))),
        )
    }

    /// This state's loop is no longer the thread's: it stops watching the links (if it is not
    /// closed), which are closed, and its pending tasks go on on the runtime. In a forked child
    /// the loop's selector is the parent's too: the child leaves it alone.
    fn let_go(self, py: Python<'_>) {
        let event_loop = self.event_loop.bind(py);
        let closed = event_loop
            .call_method0("is_closed")
            .and_then(|closed| closed.is_truthy())
            .unwrap_or(true);
        if !closed && self.pid == std::process::id() {
            for watched in &self.on_loop.links {
                let _ = event_loop.call_method1("remove_reader", (watched.link.fd(),));
                let _ = event_loop.call_method1("remove_writer", (watched.link.fd(),));
            }
        }
    }
}

#[pymethods]
impl LoopQueue {
    /// The bell rang: settles every future queued, then polls the loop tasks woken.
    fn __call__(slf: &Bound<'_, Self>) {
        let py = slf.py();
        let this = slf.get();
        // One read: a ring left unread calls this again, as the loop watches the bell
        // level-triggered; reading until it would block cost a syscall per wake.
        let mut rung = [0u8; 64];
        let _ = (&this.queue.bell).read(&mut rung);
        // Only after the read: a ring between the read and this would be lost. What is queued
        // from here on is taken below, or rings again.
        this.queue.rung.store(false, Ordering::SeqCst);
        let ended =
            std::mem::take(&mut *this.queue.ended.lock().unwrap_or_else(|p| p.into_inner()));
        for (future, settle) in ended {
            this.settle(py, future.bind(py), settle);
        }
        let reopened = std::mem::take(
            &mut *this
                .queue
                .reopened
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        for link in reopened {
            let attached = attach_on(py, link, |state| Arc::ptr_eq(&state.queue, &this.queue));
            if let Err(err) = attached {
                err.write_unraisable(py, None);
            }
        }
        if let Some(tasks) = tasks_of(&this.queue) {
            tasks.run_ready(&mut |ended| this.settle_carried(py, ended));
            watch_writable(py);
        }
    }
}

/// This thread's loop tasks, if `queue` is its loop's and a link is attached there.
fn tasks_of(queue: &Arc<Queue>) -> Option<LoopTasks<Ended>> {
    LOOP_QUEUE.with(|cached| {
        let cached = cached.borrow();
        let state = cached.as_ref()?;
        if !Arc::ptr_eq(&state.queue, queue) {
            return None;
        }
        state.on_loop.tasks.clone()
    })
}

/// Attaches `link` to the running loop of this thread, which then watches its socket and polls
/// every call made on it here. Dropped (the client's calls then take its connection) when the
/// thread has no running loop with a state, or the loop refuses the watch.
pub(crate) fn attach(py: Python<'_>, link: LoopLink) -> PyResult<()> {
    static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let Ok(running) = GET_RUNNING_LOOP
        .import(py, "asyncio", "get_running_loop")?
        .call0()
    else {
        return Ok(());
    };
    attach_on(py, link, |state| state.event_loop.is(&running))
}

/// Attaches `link` to this thread's loop if `ours` says the thread's loop state is the one it
/// is for; drops it otherwise.
fn attach_on(
    py: Python<'_>,
    link: LoopLink,
    ours: impl FnOnce(&LoopState) -> bool,
) -> PyResult<()> {
    let fd = link.fd();
    let event_loop = LOOP_QUEUE.with(|cached| {
        let mut cached = cached.borrow_mut();
        let state = cached.as_mut().filter(|state| ours(state))?;
        let queue = Arc::clone(&state.queue);
        state
            .on_loop
            .tasks
            .get_or_insert_with(|| LoopTasks::new(move || queue.ring()));
        link.attach_here();
        link.defer_writes();
        state.on_loop.links.push(Watched {
            link,
            writable: false,
            flush_scheduled: false,
        });
        Some(state.event_loop.clone_ref(py))
    });
    let Some(event_loop) = event_loop else {
        return Ok(());
    };
    let watch = LinkReady { fd, flush: false };
    if let Err(err) = event_loop.call_method1(py, "add_reader", (fd, watch)) {
        drop(forget_link(fd));
        return Err(err);
    }
    Ok(())
}

/// Takes the link of `fd` out of this thread's state (dropping it closes it).
fn forget_link(fd: i32) -> Option<Watched> {
    LOOP_QUEUE.with(|cached| {
        let mut cached = cached.borrow_mut();
        let links = &mut cached.as_mut()?.on_loop.links;
        let index = links.iter().position(|watched| watched.link.fd() == fd)?;
        Some(links.remove(index))
    })
}

/// After a pass: a link holding commands not written gets a flush from the loop soon
/// (`call_soon`: after the other callbacks of this turn, whose calls' commands then go out in
/// the same write); one whose socket took everything stops being watched for writability.
fn watch_writable(py: Python<'_>) {
    let changed: Vec<(i32, bool, Py<PyAny>)> = LOOP_QUEUE.with(|cached| {
        let mut cached = cached.borrow_mut();
        let Some(state) = cached.as_mut() else {
            return Vec::new();
        };
        let mut changed = Vec::new();
        for watched in &mut state.on_loop.links {
            let wants = watched.link.wants_writable();
            if wants && !watched.writable && !watched.flush_scheduled {
                watched.flush_scheduled = true;
                changed.push((watched.link.fd(), true, state.event_loop.clone_ref(py)));
            } else if !wants && watched.writable {
                watched.writable = false;
                changed.push((watched.link.fd(), false, state.event_loop.clone_ref(py)));
            }
        }
        changed
    });
    for (fd, flush, event_loop) in changed {
        let watch = if flush {
            event_loop.call_method1(py, "call_soon", (LinkReady { fd, flush: true },))
        } else {
            event_loop.call_method1(py, "remove_writer", (fd,))
        };
        if let Err(err) = watch {
            err.write_unraisable(py, None);
        }
    }
}

/// The loop's callback for a link: its socket is readable or writable (reads the replies,
/// writes what is left to write), or, with `flush`, the pass that sent commands asked it to
/// write them. Then polls the tasks this woke.
#[pyclass(frozen)]
struct LinkReady {
    fd: i32,
    flush: bool,
}

#[pymethods]
impl LinkReady {
    fn __call__(&self, py: Python<'_>) {
        let Some((tasks, settler, event_loop, queue)) = LOOP_QUEUE.with(|cached| {
            let cached = cached.borrow();
            let state = cached.as_ref()?;
            Some((
                state.on_loop.tasks.clone()?,
                state.settler.clone_ref(py),
                state.event_loop.clone_ref(py),
                Arc::clone(&state.queue),
            ))
        }) else {
            return;
        };
        // The replies read wake their tasks, which only queue themselves (a pass is on).
        let outcome = LoopTasks::<Ended>::polling(|| {
            LOOP_QUEUE.with(|cached| {
                let mut cached = cached.borrow_mut();
                let links = &mut cached.as_mut()?.on_loop.links;
                let watched = links
                    .iter_mut()
                    .find(|watched| watched.link.fd() == self.fd)?;
                if !self.flush {
                    let alive = watched.link.on_writable() && watched.link.on_readable();
                    return Some((alive, false));
                }
                watched.flush_scheduled = false;
                let alive = watched.link.on_writable();
                // What the socket did not take goes out as it drains.
                let start_writer = alive && watched.link.wants_writable() && !watched.writable;
                watched.writable |= start_writer;
                Some((alive, start_writer))
            })
        });
        let alive = outcome.map(|(alive, _)| alive);
        if outcome.is_some_and(|(_, start_writer)| start_writer) {
            let watch = LinkReady {
                fd: self.fd,
                flush: false,
            };
            if let Err(err) = event_loop.call_method1(py, "add_writer", (self.fd, watch)) {
                err.write_unraisable(py, None);
            }
        }
        if alive == Some(false) {
            if let Some(watched) = forget_link(self.fd) {
                let _ = event_loop.call_method1(py, "remove_reader", (self.fd,));
                if watched.writable {
                    let _ = event_loop.call_method1(py, "remove_writer", (self.fd,));
                }
                // Meanwhile the calls take the client's connection.
                watched.link.reopen_later(move |link| {
                    queue
                        .reopened
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(link);
                    queue.ring();
                });
            }
        }
        let settler = settler.get();
        tasks.run_ready(&mut |ended| settler.settle_carried(py, ended));
        watch_writable(py);
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
