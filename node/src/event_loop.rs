//! The hot path's I/O on the event loop (issue 44, U Node).
//!
//! A client of one plain TCP server opens a loop link (`polylock::LoopLink`) at connect; it is
//! attached to the JS thread that gets the client. From then on every promise made on that
//! thread is its engine future polled on that thread, inside polylock's runtime context (its
//! timers and spawned tasks are polylock's):
//! - the first poll runs in the call itself, so a command goes out before the call returns;
//! - a uv poll handle watches each link's socket: its replies are read in that callback, which
//!   polls the futures they wake and settles their promises, in a callback scope (promise
//!   reactions run when it closes);
//! - a wake from another thread (a timer, pub/sub, a client without a link) goes through one uv
//!   async handle.
//!
//! No threadsafe function and no runtime thread sit between a call and its reply. While any of
//! these promises is pending the async handle keeps the loop alive; the poll handles never do.
//! A link that fails is let go (calls then take the client's connection, `promise.rs`'s way for
//! the client's promises is unchanged). Everything is closed when the environment is torn down.

use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::ThreadId;

use futures_util::FutureExt;
use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{sys, Env};

use crate::promise::{settle_value, Deferred, Outcome};

// libuv, as the Node process exports it.
extern "C" {
    fn uv_handle_size(kind: c_int) -> usize;
    fn uv_poll_init(uv_loop: *mut c_void, handle: *mut c_void, fd: c_int) -> c_int;
    fn uv_poll_start(
        handle: *mut c_void,
        events: c_int,
        callback: unsafe extern "C" fn(*mut c_void, c_int, c_int),
    ) -> c_int;
    fn uv_poll_stop(handle: *mut c_void) -> c_int;
    fn uv_async_init(
        uv_loop: *mut c_void,
        handle: *mut c_void,
        callback: unsafe extern "C" fn(*mut c_void),
    ) -> c_int;
    fn uv_async_send(handle: *mut c_void) -> c_int;
    fn uv_close(handle: *mut c_void, callback: unsafe extern "C" fn(*mut c_void));
    fn uv_ref(handle: *mut c_void);
    fn uv_unref(handle: *mut c_void);
}

// uv_handle_type and uv_poll_event values (uv.h).
const UV_ASYNC: c_int = 1;
const UV_POLL: c_int = 8;
const UV_READABLE: c_int = 1;
const UV_WRITABLE: c_int = 2;

/// What any thread may touch: the tasks woken, and the async handle that wakes the loop
/// (`None` once the environment is torn down).
struct Shared {
    ready: Mutex<Vec<Arc<Task>>>,
    wake: Mutex<Option<Handle>>,
    js_thread: ThreadId,
}

impl Shared {
    fn ready(&self) -> MutexGuard<'_, Vec<Arc<Task>>> {
        self.ready.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wake(&self) -> MutexGuard<'_, Option<Handle>> {
        self.wake.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A libuv handle, allocated by [`new_handle`].
#[derive(Clone, Copy, PartialEq, Eq)]
struct Handle(*mut c_void);
// SAFETY: an async handle is made to be signalled from any thread (uv_async_send); the others
// are only touched on the JS thread.
unsafe impl Send for Handle {}

fn new_handle(kind: c_int) -> Handle {
    // SAFETY: calloc of the handle's size; freed by `free_handle` once libuv closed it.
    Handle(unsafe { libc::calloc(1, uv_handle_size(kind)) })
}

unsafe extern "C" fn free_handle(handle: *mut c_void) {
    unsafe { libc::free(handle) };
}

/// A link the loop watches.
struct Watched {
    link: polylock::LoopLink,
    poll: Handle,
    writable: bool,
}

/// The JS thread's state, made when its first link is attached.
struct LoopState {
    env: sys::napi_env,
    shared: Arc<Shared>,
    /// The resource and async context of the callback scopes.
    resource: sys::napi_ref,
    async_context: sys::napi_async_context,
    watched: Vec<Watched>,
    /// Promises made here and not settled.
    pending: usize,
    /// Their tasks (and some settled ones, pruned as more are made).
    tasks: Vec<std::sync::Weak<Task>>,
}

thread_local! {
    static LOOP: RefCell<Option<LoopState>> = const { RefCell::new(None) };
    /// Set while this thread polls tasks: a task woken meanwhile is polled in the same pass.
    static POLLING: Cell<bool> = const { Cell::new(false) };
}

type TaskFuture = Pin<Box<dyn Future<Output = Box<Outcome>> + Send>>;

/// One promise's work.
struct Task {
    future: Mutex<Option<TaskFuture>>,
    shared: Arc<Shared>,
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.shared.ready().push(Arc::clone(self));
        let polling_here =
            std::thread::current().id() == self.shared.js_thread && POLLING.with(Cell::get);
        if !polling_here {
            if let Some(wake) = *self.shared.wake() {
                // SAFETY: the handle lives until the environment's cleanup, which clears it
                // under this lock first.
                unsafe { uv_async_send(wake.0) };
            }
        }
    }
}

/// Whether this thread's promises are polled on its loop (it has attached a link).
pub(crate) fn active() -> bool {
    LOOP.with(|state| state.try_borrow().is_ok_and(|state| state.is_some()))
}

/// Attaches `link` to this JS thread and watches its socket (making the loop's state at the
/// first). On failure the link is dropped: the client's calls then use its connection.
pub(crate) fn attach(env: sys::napi_env, link: polylock::LoopLink) -> napi::Result<()> {
    LOOP.with(|state| {
        let mut state = state.borrow_mut();
        if state.as_ref().is_some_and(|state| state.env != env) {
            // Another environment's, on a thread reused: not ours to use.
            return Ok(());
        }
        let state = match &mut *state {
            Some(state) => state,
            empty => empty.insert(LoopState::make(env)?),
        };
        let mut uv_loop = ptr::null_mut();
        napi::check_status!(unsafe { sys::napi_get_uv_event_loop(env, &mut uv_loop) })?;
        let poll = new_handle(UV_POLL);
        unsafe {
            if uv_poll_init(uv_loop.cast(), poll.0, link.fd()) != 0 {
                free_handle(poll.0);
                return Ok(());
            }
            uv_poll_start(poll.0, UV_READABLE, on_poll);
            uv_unref(poll.0);
        }
        link.attach_here();
        state.watched.push(Watched {
            link,
            poll,
            writable: false,
        });
        Ok(())
    })
}

impl LoopState {
    fn make(env: sys::napi_env) -> napi::Result<LoopState> {
        let mut uv_loop = ptr::null_mut();
        napi::check_status!(unsafe { sys::napi_get_uv_event_loop(env, &mut uv_loop) })?;
        let mut resource = ptr::null_mut();
        napi::check_status!(unsafe { sys::napi_create_object(env, &mut resource) })?;
        let mut name = ptr::null_mut();
        napi::check_status!(unsafe {
            sys::napi_create_string_utf8(env, c"polylock".as_ptr(), 8, &mut name)
        })?;
        let mut async_context = ptr::null_mut();
        napi::check_status!(unsafe {
            sys::napi_async_init(env, resource, name, &mut async_context)
        })?;
        let mut reference = ptr::null_mut();
        napi::check_status!(unsafe {
            sys::napi_create_reference(env, resource, 1, &mut reference)
        })?;
        let wake = new_handle(UV_ASYNC);
        unsafe {
            uv_async_init(uv_loop.cast(), wake.0, on_async);
            uv_unref(wake.0);
        }
        napi::check_status!(unsafe {
            sys::napi_add_env_cleanup_hook(env, Some(torn_down), ptr::null_mut())
        })?;
        Ok(LoopState {
            env,
            shared: Arc::new(Shared {
                ready: Mutex::new(Vec::new()),
                wake: Mutex::new(Some(wake)),
                js_thread: std::thread::current().id(),
            }),
            resource: reference,
            async_context,
            watched: Vec::new(),
            pending: 0,
            tasks: Vec::new(),
        })
    }
}

/// A promise of `work`, polled on this thread's loop (see the module's doc).
pub(crate) fn promise<'env, T, F>(env: &'env Env, work: F) -> napi::Result<Object<'env>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = polylock::Result<T>> + Send + 'static,
{
    let raw_env = env.raw();
    let mut deferred = ptr::null_mut();
    let mut promise = ptr::null_mut();
    napi::check_status!(unsafe { sys::napi_create_promise(raw_env, &mut deferred, &mut promise) })?;
    let deferred = Deferred(deferred);
    let future: TaskFuture = Box::pin(async move {
        // A panic rejects the promise instead of crossing into Node.
        let outcome = AssertUnwindSafe(work)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err(polylock::Error::redis("polylock: internal error (panic)")));
        Box::new(Outcome {
            deferred,
            settle: Box::new(move |env| settle_value(env, outcome)),
        })
    });
    let task = LOOP
        .with(|state| {
            let mut state = state.borrow_mut();
            // `promise.rs` calls this only where `active()`; nothing in between clears it.
            let state = state.as_mut()?;
            if state.pending == 0 {
                if let Some(wake) = *state.shared.wake() {
                    unsafe { uv_ref(wake.0) };
                }
            }
            state.pending += 1;
            let task = Arc::new(Task {
                future: Mutex::new(Some(future)),
                shared: Arc::clone(&state.shared),
            });
            if state.tasks.len() >= 2 * state.pending + 16 {
                state.tasks.retain(|task| task.strong_count() > 0);
            }
            state.tasks.push(Arc::downgrade(&task));
            Some(task)
        })
        .ok_or_else(|| {
            napi::Error::from_reason("polylock: this thread's event loop state is gone")
        })?;
    // The first poll now: the command is written before the call returns.
    polling(|| {
        poll_task(raw_env, &task);
        poll_ready(raw_env);
    });
    Ok(Object::from_raw(raw_env, promise))
}

/// Runs `work` with [`POLLING`] set, then updates what the loop watches the links for.
fn polling(work: impl FnOnce()) {
    let was = POLLING.with(|polling| polling.replace(true));
    work();
    POLLING.with(|polling| polling.set(was));
    watch_links();
}

/// Polls `task` once; settles its promise when it ends.
fn poll_task(env: sys::napi_env, task: &Arc<Task>) {
    let _runtime = polylock::runtime().enter();
    let mut slot = task.future.lock().unwrap_or_else(|p| p.into_inner());
    let Some(future) = slot.as_mut() else {
        return;
    };
    let waker = Waker::from(Arc::clone(task));
    let mut cx = Context::from_waker(&waker);
    let outcome = match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx))) {
        Ok(Poll::Pending) => return,
        Ok(Poll::Ready(outcome)) => Some(outcome),
        // The future catches the work's panics; this would be the settling code's.
        Err(_) => None,
    };
    *slot = None;
    drop(slot);
    if let Some(outcome) = outcome {
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe { outcome.settle_now(env) }));
    }
    LOOP.with(|state| {
        if let Some(state) = state.borrow_mut().as_mut() {
            state.pending = state.pending.saturating_sub(1);
            if state.pending == 0 {
                if let Some(wake) = *state.shared.wake() {
                    unsafe { uv_unref(wake.0) };
                }
            }
        }
    });
}

/// Polls every woken task until none is left.
fn poll_ready(env: sys::napi_env) {
    let Some(shared) = LOOP.with(|state| state.borrow().as_ref().map(|s| Arc::clone(&s.shared)))
    else {
        return;
    };
    loop {
        let ready = std::mem::take(&mut *shared.ready());
        if ready.is_empty() {
            return;
        }
        for task in ready {
            poll_task(env, &task);
        }
    }
}

/// Watches each link for writability too while it holds bytes its socket did not take.
fn watch_links() {
    LOOP.with(|state| {
        let mut state = state.borrow_mut();
        let Some(state) = state.as_mut() else {
            return;
        };
        for watched in &mut state.watched {
            let writable = watched.link.wants_writable();
            if writable != watched.writable {
                let events = UV_READABLE | if writable { UV_WRITABLE } else { 0 };
                unsafe { uv_poll_start(watched.poll.0, events, on_poll) };
                watched.writable = writable;
            }
        }
    });
}

/// Runs `work` in a handle scope and a callback scope, as Node runs a callback: promise
/// reactions run when the scope closes.
fn in_callback_scope(work: impl FnOnce(sys::napi_env)) {
    let Some((env, resource, async_context)) = LOOP.with(|state| {
        let state = state.borrow();
        state
            .as_ref()
            .map(|state| (state.env, state.resource, state.async_context))
    }) else {
        return;
    };
    unsafe {
        let mut handle_scope = ptr::null_mut();
        sys::napi_open_handle_scope(env, &mut handle_scope);
        let mut resource_object = ptr::null_mut();
        sys::napi_get_reference_value(env, resource, &mut resource_object);
        let mut scope = ptr::null_mut();
        sys::napi_open_callback_scope(env, resource_object, async_context, &mut scope);
        // Never unwind into libuv.
        let _ = catch_unwind(AssertUnwindSafe(|| polling(|| work(env))));
        sys::napi_close_callback_scope(env, scope);
        sys::napi_close_handle_scope(env, handle_scope);
    }
}

unsafe extern "C" fn on_poll(handle: *mut c_void, status: c_int, events: c_int) {
    in_callback_scope(|env| {
        let dead = LOOP.with(|state| {
            let mut state = state.borrow_mut();
            let state = state.as_mut()?;
            let index = state
                .watched
                .iter()
                .position(|watched| watched.poll.0 == handle)?;
            let link = &state.watched[index].link;
            // Settling wakes tasks, which only queue themselves here (POLLING is set).
            let alive = (events & UV_WRITABLE == 0 || link.on_writable())
                && (events & UV_READABLE == 0 && status >= 0 || link.on_readable());
            (!alive).then(|| state.watched.remove(index))
        });
        if let Some(watched) = dead {
            unsafe {
                uv_poll_stop(watched.poll.0);
                uv_close(watched.poll.0, free_handle);
            }
            // Dropping it lets the socket go once no call holds it.
            drop(watched);
        }
        poll_ready(env);
    });
}

unsafe extern "C" fn on_async(_handle: *mut c_void) {
    in_callback_scope(poll_ready);
}

/// The environment is torn down (a worker thread ends): nothing is woken, watched or polled
/// here any more. The work of the promises still pending goes on on polylock's runtime, its
/// outcome dropped, as it does for a promise of `promise.rs`'s: what it acquired is released
/// when the handle it holds goes.
unsafe extern "C" fn torn_down(_arg: *mut c_void) {
    let Some(state) = LOOP.with(|state| state.borrow_mut().take()) else {
        return;
    };
    let wake = state.shared.wake().take();
    state.shared.ready().clear();
    for task in state.tasks.iter().filter_map(std::sync::Weak::upgrade) {
        let future = task.future.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(future) = future {
            polylock::runtime().spawn(async move {
                drop(future.await);
            });
        }
    }
    unsafe {
        if let Some(wake) = wake {
            uv_close(wake.0, free_handle);
        }
        for watched in &state.watched {
            uv_poll_stop(watched.poll.0);
            uv_close(watched.poll.0, free_handle);
        }
    }
    drop(state);
}
