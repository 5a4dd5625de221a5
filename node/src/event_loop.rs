//! The hot path's I/O on the event loop (issue 44, U Node).
//!
//! A client of one plain TCP server opens a loop link (`polylock::LoopLink`) at connect; it is
//! attached to the JS thread that gets the client. From then on every promise made on that
//! thread is its engine future polled on that thread (`polylock::LoopTasks`), inside
//! polylock's runtime context (its timers and spawned tasks are polylock's):
//! - the first poll runs in the call itself, so a command goes out before the call returns;
//! - a uv poll handle watches each link's socket: its replies are read in that callback, which
//!   polls the futures they wake and settles their promises, in a callback scope (promise
//!   reactions run when it closes);
//! - a wake from another thread (a timer, pub/sub, a client without a link) goes through one uv
//!   async handle.
//!
//! No threadsafe function and no runtime thread sit between a call and its reply. While any of
//! these promises is pending the async handle keeps the loop alive; the poll handles never do.
//! A link that fails is let go: calls then take the client's connection until a new link,
//! opened in the background (`LoopLink::reopen_later`), is attached from the async handle's
//! callback. Everything is closed when the environment is torn down.

use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::FutureExt;
use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{sys, Env};
use polylock::LoopTasks;

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

/// The async handle that wakes the loop, for any thread (`None` once the environment is torn
/// down).
type Wake = Arc<Mutex<Option<Handle>>>;

fn lock_wake(wake: &Wake) -> MutexGuard<'_, Option<Handle>> {
    wake.lock().unwrap_or_else(|p| p.into_inner())
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
    tasks: LoopTasks<Box<Outcome>>,
    wake: Wake,
    /// Links opened again after one died (`LoopLink::reopen_later`), to attach here.
    reopened: Arc<Mutex<Vec<polylock::LoopLink>>>,
    /// Whether the async handle keeps the loop alive (while any promise made here is pending).
    referenced: bool,
    /// The resource and async context of the callback scopes.
    resource: sys::napi_ref,
    async_context: sys::napi_async_context,
    watched: Vec<Watched>,
}

thread_local! {
    static LOOP: RefCell<Option<LoopState>> = const { RefCell::new(None) };
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
        // Concurrent calls' commands go out a few in one write; what is kept goes out when
        // the socket reports writable (`after_pass` watches for it), at the loop's next poll.
        link.defer_writes();
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
        let handle = new_handle(UV_ASYNC);
        unsafe {
            uv_async_init(uv_loop.cast(), handle.0, on_async);
            uv_unref(handle.0);
        }
        napi::check_status!(unsafe {
            sys::napi_add_env_cleanup_hook(env, Some(torn_down), ptr::null_mut())
        })?;
        let wake: Wake = Arc::new(Mutex::new(Some(handle)));
        let bell = Arc::clone(&wake);
        let tasks = LoopTasks::new(move || {
            if let Some(handle) = *lock_wake(&bell) {
                // SAFETY: the handle lives until the environment's cleanup, which clears it
                // under this lock first.
                unsafe { uv_async_send(handle.0) };
            }
        });
        Ok(LoopState {
            env,
            tasks,
            wake,
            reopened: Arc::default(),
            referenced: false,
            resource: reference,
            async_context,
            watched: Vec::new(),
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
    // `promise.rs` calls this only where `active()`; nothing in between clears it.
    let tasks = LOOP
        .with(|state| state.borrow().as_ref().map(|state| state.tasks.clone()))
        .ok_or_else(|| {
            napi::Error::from_reason("polylock: this thread's event loop state is gone")
        })?;
    let mut deferred = ptr::null_mut();
    let mut promise = ptr::null_mut();
    napi::check_status!(unsafe { sys::napi_create_promise(raw_env, &mut deferred, &mut promise) })?;
    let deferred = Deferred(deferred);
    let future = async move {
        // A panic rejects the promise instead of crossing into Node.
        let outcome = AssertUnwindSafe(work)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err(polylock::Error::redis("polylock: internal error (panic)")));
        Box::new(Outcome {
            deferred,
            settle: Box::new(move |env| settle_value(env, outcome)),
        })
    };
    // The first poll now: the command is written before the call returns.
    tasks.spawn(future, &mut |outcome| settle(raw_env, outcome));
    after_pass();
    Ok(Object::from_raw(raw_env, promise))
}

fn settle(env: sys::napi_env, outcome: Box<Outcome>) {
    let _ = catch_unwind(AssertUnwindSafe(|| unsafe { outcome.settle_now(env) }));
}

/// After polling: the async handle keeps the loop alive while any promise is pending, and each
/// link is watched for writability too while it holds bytes its socket did not take.
fn after_pass() {
    LOOP.with(|state| {
        let mut state = state.borrow_mut();
        let Some(state) = state.as_mut() else {
            return;
        };
        let referenced = state.tasks.pending() > 0;
        if referenced != state.referenced {
            if let Some(handle) = *lock_wake(&state.wake) {
                unsafe {
                    if referenced {
                        uv_ref(handle.0);
                    } else {
                        uv_unref(handle.0);
                    }
                }
            }
            state.referenced = referenced;
        }
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
    let Some((env, tasks, resource, async_context)) = LOOP.with(|state| {
        let state = state.borrow();
        state.as_ref().map(|state| {
            (
                state.env,
                state.tasks.clone(),
                state.resource,
                state.async_context,
            )
        })
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
        let _ = catch_unwind(AssertUnwindSafe(|| {
            work(env);
            tasks.run_ready(&mut |outcome| settle(env, outcome));
            after_pass();
        }));
        sys::napi_close_callback_scope(env, scope);
        sys::napi_close_handle_scope(env, handle_scope);
    }
}

unsafe extern "C" fn on_poll(handle: *mut c_void, status: c_int, events: c_int) {
    in_callback_scope(|_env| {
        // The replies read wake their tasks, which only queue themselves (a pass is on).
        let dead = LoopTasks::<Box<Outcome>>::polling(|| {
            LOOP.with(|state| {
                let mut state = state.borrow_mut();
                let state = state.as_mut()?;
                let index = state
                    .watched
                    .iter()
                    .position(|watched| watched.poll.0 == handle)?;
                let link = &state.watched[index].link;
                let alive = (events & UV_WRITABLE == 0 || link.on_writable())
                    && (events & UV_READABLE == 0 && status >= 0 || link.on_readable());
                (!alive).then(|| state.watched.remove(index))
            })
        });
        if let Some(watched) = dead {
            unsafe {
                uv_poll_stop(watched.poll.0);
                uv_close(watched.poll.0, free_handle);
            }
            // Meanwhile the calls take the client's connection.
            if let Some((reopened, wake)) = LOOP.with(|state| {
                let state = state.borrow();
                let state = state.as_ref()?;
                Some((Arc::clone(&state.reopened), Arc::clone(&state.wake)))
            }) {
                watched.link.reopen_later(move |link| {
                    reopened
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(link);
                    if let Some(handle) = *lock_wake(&wake) {
                        // SAFETY: as in the bell (`LoopState::make`).
                        unsafe { uv_async_send(handle.0) };
                    }
                });
            }
            // Dropping it lets the socket go once no call holds it.
            drop(watched);
        }
    });
}

unsafe extern "C" fn on_async(_handle: *mut c_void) {
    in_callback_scope(|env| {
        let reopened = LOOP.with(|state| {
            let state = state.borrow();
            let state = state.as_ref()?;
            let links =
                std::mem::take(&mut *state.reopened.lock().unwrap_or_else(|p| p.into_inner()));
            Some(links)
        });
        for link in reopened.into_iter().flatten() {
            // On failure the link is dropped: the calls keep the client's connection.
            let _ = attach(env, link);
        }
    });
}

/// The environment is torn down (a worker thread ends): nothing is woken, watched or polled
/// here any more. The work of the promises still pending goes on on polylock's runtime, its
/// outcome dropped, as it does for a promise of `promise.rs`'s: what it acquired is released
/// when the handle it holds goes.
unsafe extern "C" fn torn_down(_arg: *mut c_void) {
    let Some(state) = LOOP.with(|state| state.borrow_mut().take()) else {
        return;
    };
    let wake = lock_wake(&state.wake).take();
    state.tasks.hand_over();
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
