//! Core futures as JavaScript promises, settled through one threadsafe function per JavaScript
//! thread.
//!
//! napi-rs's `create_deferred` makes a threadsafe function (and its libuv handle) for every
//! promise, and tears it down once settled. Here one function per thread is made at the first
//! call, and every outcome is queued on it: the event loop settles, in one turn, every promise
//! whose work ended since its last turn (issue 44: many locks from Node). While promises are
//! pending it keeps the event loop alive, as a promise of napi-rs's does; with none, it lets
//! the process exit.

use std::cell::RefCell;
use std::ffi::c_void;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{sys, Env, JsError};

use crate::error::coded;

/// Runs `work` on the core's runtime and returns a promise settled with its outcome. A panic in
/// `work` rejects the promise instead of crossing into Node.
pub(crate) fn promise<'env, T, F>(env: &'env Env, work: F) -> napi::Result<Object<'env>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = polylock::Result<T>> + Send + 'static,
{
    // Polled on the event loop where this thread has a loop link (`event_loop`).
    if crate::event_loop::active() {
        return crate::event_loop::promise(env, work);
    }
    let raw_env = env.raw();
    let mut deferred = ptr::null_mut();
    let mut promise = ptr::null_mut();
    napi::check_status!(unsafe { sys::napi_create_promise(raw_env, &mut deferred, &mut promise) })?;
    let queue = Settler::pending_one_more(raw_env)?;
    let deferred = Deferred(deferred);
    polylock::runtime().spawn(async move {
        let outcome = AssertUnwindSafe(work)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err(polylock::Error::redis("polylock: internal error (panic)")));
        queue.send(Box::new(Outcome {
            deferred,
            settle: Box::new(move |env| settle_value(env, outcome)),
        }));
    });
    Ok(Object::from_raw(raw_env, promise))
}

/// The value to resolve with (`Ok`) or the error to reject with (`Err`), made on the JS thread.
pub(crate) fn settle_value<T: ToNapiValue>(
    env: sys::napi_env,
    outcome: polylock::Result<T>,
) -> Result<sys::napi_value, sys::napi_value> {
    match outcome {
        Ok(value) => unsafe { T::to_napi_value(env, value) }
            .map_err(|err| unsafe { JsError::from(err).into_value(env) }),
        Err(err) => Err(unsafe { JsError::from(coded(&err)).into_value(env) }),
    }
}

/// A promise's `napi_deferred`: made and settled on the JS thread, carried in between.
pub(crate) struct Deferred(pub(crate) sys::napi_deferred);
// SAFETY: only the JS thread that made it touches it (in `settle_on_js_thread`).
unsafe impl Send for Deferred {}

pub(crate) type Settle =
    Box<dyn FnOnce(sys::napi_env) -> Result<sys::napi_value, sys::napi_value> + Send>;

/// One ended work: its promise, and how to make what settles it.
pub(crate) struct Outcome {
    pub(crate) deferred: Deferred,
    pub(crate) settle: Settle,
}

impl Outcome {
    /// Settles the promise, on its JS thread.
    pub(crate) unsafe fn settle_now(self, env: sys::napi_env) {
        let Outcome { deferred, settle } = self;
        unsafe {
            match settle(env) {
                Ok(value) => sys::napi_resolve_deferred(env, deferred.0, value),
                Err(error) => sys::napi_reject_deferred(env, deferred.0, error),
            };
        }
    }
}

/// The threadsafe function outcomes are queued on; `None` once Node finalized it (its
/// environment torn down), after which an outcome is dropped. The lock keeps finalization from
/// freeing the function while a thread calls it.
struct Queue(Mutex<Option<Tsfn>>);

struct Tsfn(sys::napi_threadsafe_function);
// SAFETY: a threadsafe function is made to be called from any thread.
unsafe impl Send for Tsfn {}

impl Queue {
    fn tsfn(&self) -> std::sync::MutexGuard<'_, Option<Tsfn>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn send(&self, outcome: Box<Outcome>) {
        let tsfn = self.tsfn();
        let Some(tsfn) = tsfn.as_ref() else {
            return;
        };
        let data = Box::into_raw(outcome);
        let status = unsafe {
            sys::napi_call_threadsafe_function(
                tsfn.0,
                data.cast(),
                sys::ThreadsafeFunctionCallMode::nonblocking,
            )
        };
        if status != sys::Status::napi_ok {
            // Closing: the environment goes away with its promises.
            drop(unsafe { Box::from_raw(data) });
        }
    }
}

/// This JS thread's function, and how many of its promises are pending.
struct Settler {
    queue: Arc<Queue>,
    env: sys::napi_env,
    pending: usize,
}

thread_local! {
    static SETTLER: RefCell<Option<Settler>> = const { RefCell::new(None) };
}

impl Settler {
    /// Counts one more pending promise of the JS thread of `env` (making its function at the
    /// first): the function keeps the event loop alive while any is pending.
    fn pending_one_more(env: sys::napi_env) -> napi::Result<Arc<Queue>> {
        SETTLER.with(|settler| {
            let mut slot = settler.borrow_mut();
            // Another environment's (a torn-down one on this thread) is replaced.
            let settler = match slot.take() {
                Some(settler) if settler.env == env => slot.insert(settler),
                _ => slot.insert(Settler::make(env)?),
            };
            if settler.pending == 0 {
                settler.keep_loop_alive(true);
            }
            settler.pending += 1;
            Ok(Arc::clone(&settler.queue))
        })
    }

    fn make(env: sys::napi_env) -> napi::Result<Settler> {
        let queue = Arc::new(Queue(Mutex::new(None)));
        let mut name = ptr::null_mut();
        napi::check_status!(unsafe {
            sys::napi_create_string_utf8(env, c"polylock".as_ptr(), 8, &mut name)
        })?;
        let finalize_data = Arc::into_raw(Arc::clone(&queue)) as *mut c_void;
        let mut tsfn = ptr::null_mut();
        let made = napi::check_status!(unsafe {
            sys::napi_create_threadsafe_function(
                env,
                ptr::null_mut(),
                ptr::null_mut(),
                name,
                0,
                1,
                finalize_data,
                Some(finalized),
                ptr::null_mut(),
                Some(settle_on_js_thread),
                &mut tsfn,
            )
        });
        if let Err(err) = made {
            drop(unsafe { Arc::from_raw(finalize_data as *const Queue) });
            return Err(err);
        }
        *queue.tsfn() = Some(Tsfn(tsfn));
        let settler = Settler {
            queue,
            env,
            pending: 0,
        };
        settler.keep_loop_alive(false);
        Ok(settler)
    }

    fn keep_loop_alive(&self, keep: bool) {
        let tsfn = self.queue.tsfn();
        if let Some(tsfn) = tsfn.as_ref() {
            unsafe {
                if keep {
                    sys::napi_ref_threadsafe_function(self.env, tsfn.0);
                } else {
                    sys::napi_unref_threadsafe_function(self.env, tsfn.0);
                }
            }
        }
    }
}

/// On the JS thread: settles one promise. `env` is null while Node tears the function down;
/// the outcome is then dropped.
unsafe extern "C" fn settle_on_js_thread(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    _context: *mut c_void,
    data: *mut c_void,
) {
    let outcome = unsafe { Box::from_raw(data.cast::<Outcome>()) };
    if env.is_null() {
        return;
    }
    // Never unwind into Node.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        unsafe { outcome.settle_now(env) };
        SETTLER.with(|settler| {
            if let Some(settler) = settler.borrow_mut().as_mut() {
                settler.pending = settler.pending.saturating_sub(1);
                if settler.pending == 0 {
                    settler.keep_loop_alive(false);
                }
            }
        });
    }));
}

/// Node finalized the function (its environment is torn down): no outcome is queued on it any
/// more, and this thread makes a new one should its environment call again.
unsafe extern "C" fn finalized(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    let queue = unsafe { Arc::from_raw(data as *const Queue) };
    *queue.tsfn() = None;
    let _ = SETTLER.try_with(|settler| {
        if let Ok(mut settler) = settler.try_borrow_mut() {
            if settler
                .as_ref()
                .is_some_and(|settler| Arc::ptr_eq(&settler.queue, &queue))
            {
                *settler = None;
            }
        }
    });
}
