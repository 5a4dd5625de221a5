//! Core futures as JavaScript promises.
//!
//! Each JavaScript thread settles its promises through one threadsafe function, made at its
//! first promise and kept. napi's own deferred makes a threadsafe function per promise (a
//! libuv handle opened and closed, an env cleanup hook added and removed, for every call): in
//! the uncontended bench that was the largest part of the binding's cost. One function per
//! thread also batches: the settlements queued while the thread was busy run in one wake-up.
//!
//! The function holds the event loop open only while a promise is pending (ref at the first,
//! unref at the last), as a per-promise function did. When the thread's env tears down (a
//! worker thread ends), a cleanup hook closes the function before Node finalizes it, so a
//! future that ends later drops its outcome instead of calling a freed function.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::future::Future;
use std::panic::AssertUnwindSafe;
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
    let raw_env = env.raw();
    let (id, channel, promise) = SETTLER.with(|settler| -> napi::Result<_> {
        let mut settler = settler.borrow_mut();
        if settler.is_none() {
            *settler = Some(Settler::new(raw_env)?);
        }
        let settler = settler.as_mut().expect("made above");
        let mut deferred = ptr::null_mut();
        let mut promise = ptr::null_mut();
        check(
            unsafe { sys::napi_create_promise(raw_env, &mut deferred, &mut promise) },
            "create a promise",
        )?;
        let id = settler.add(raw_env, deferred)?;
        Ok((id, settler.channel.clone(), promise))
    })?;
    polylock::runtime().spawn(async move {
        let outcome = AssertUnwindSafe(work)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err(polylock::Error::redis("polylock: internal error (panic)")));
        channel.send(Box::new(Settlement {
            id,
            settle: Box::new(move |env| settle_with(env, outcome)),
        }));
    });
    Ok(Object::from_raw(raw_env, promise))
}

/// The JS value to resolve with (`Ok`) or reject with (`Err`), made on the JS thread.
type Settle = Box<dyn FnOnce(sys::napi_env) -> Result<sys::napi_value, sys::napi_value> + Send>;

/// A promise's outcome on its way to the JS thread.
struct Settlement {
    id: u64,
    settle: Settle,
}

fn settle_with<T: ToNapiValue>(
    env: sys::napi_env,
    outcome: polylock::Result<T>,
) -> Result<sys::napi_value, sys::napi_value> {
    match outcome {
        Ok(value) => unsafe { T::to_napi_value(env, value) }
            .map_err(|err| unsafe { JsError::from(err).into_value(env) }),
        Err(err) => Err(unsafe { JsError::from(coded(&err)).into_value(env) }),
    }
}

thread_local! {
    /// This JS thread's settler (each JS thread has its own env).
    static SETTLER: RefCell<Option<Settler>> = const { RefCell::new(None) };
}

/// The JS thread's side: its pending promises and the threadsafe function that settles them.
struct Settler {
    channel: Arc<Channel>,
    /// Pending promises by id; only this thread touches them.
    pending: HashMap<u64, sys::napi_deferred>,
    next_id: u64,
}

impl Settler {
    fn new(env: sys::napi_env) -> napi::Result<Self> {
        let mut name = ptr::null_mut();
        let label = "polylock.settle";
        check(
            unsafe {
                sys::napi_create_string_utf8(
                    env,
                    label.as_ptr().cast(),
                    label.len() as isize,
                    &mut name,
                )
            },
            "name the settling function",
        )?;
        let mut tsfn = ptr::null_mut();
        check(
            unsafe {
                sys::napi_create_threadsafe_function(
                    env,
                    ptr::null_mut(),
                    ptr::null_mut(),
                    name,
                    0, // unbounded: a settlement never waits for room
                    1,
                    ptr::null_mut(),
                    None,
                    ptr::null_mut(),
                    Some(call_js),
                    &mut tsfn,
                )
            },
            "create the settling function",
        )?;
        // Nothing pending yet: the function must not keep the process alive.
        unsafe { sys::napi_unref_threadsafe_function(env, tsfn) };
        let channel = Arc::new(Channel {
            tsfn: Mutex::new(Some(Tsfn(tsfn))),
        });
        let hook = Arc::into_raw(channel.clone()) as *mut c_void;
        unsafe { sys::napi_add_env_cleanup_hook(env, Some(env_teardown), hook) };
        Ok(Settler {
            channel,
            pending: HashMap::new(),
            next_id: 0,
        })
    }

    fn add(&mut self, env: sys::napi_env, deferred: sys::napi_deferred) -> napi::Result<u64> {
        if self.pending.is_empty() {
            if let Some(Tsfn(tsfn)) = *self.channel.tsfn() {
                unsafe { sys::napi_ref_threadsafe_function(env, tsfn) };
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(id, deferred);
        Ok(id)
    }

    /// Takes promise `id` off the pending ones (letting the loop end when it was the last).
    fn take(&mut self, env: sys::napi_env, id: u64) -> Option<sys::napi_deferred> {
        let deferred = self.pending.remove(&id)?;
        if self.pending.is_empty() {
            if let Some(Tsfn(tsfn)) = *self.channel.tsfn() {
                unsafe { sys::napi_unref_threadsafe_function(env, tsfn) };
            }
        }
        Some(deferred)
    }
}

/// The runtime's side: the threadsafe function, gone once the env tore down.
struct Channel {
    tsfn: Mutex<Option<Tsfn>>,
}

#[derive(Clone, Copy)]
struct Tsfn(sys::napi_threadsafe_function);

// Calling a threadsafe function from any thread is its purpose; the mutex keeps a call from
// racing the env's teardown, which closes it.
unsafe impl Send for Tsfn {}

impl Channel {
    fn tsfn(&self) -> std::sync::MutexGuard<'_, Option<Tsfn>> {
        self.tsfn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `settlement` for the JS thread; dropped when its env is gone.
    fn send(&self, settlement: Box<Settlement>) {
        let tsfn = self.tsfn();
        let Some(Tsfn(tsfn)) = *tsfn else {
            return;
        };
        let data = Box::into_raw(settlement);
        let status = unsafe {
            sys::napi_call_threadsafe_function(
                tsfn,
                data.cast(),
                sys::ThreadsafeFunctionCallMode::nonblocking,
            )
        };
        if status != sys::Status::napi_ok {
            // Closing: the settlement was not queued, so it is still ours to free.
            drop(unsafe { Box::from_raw(data) });
        }
    }
}

/// On the JS thread: settles one promise. `env` is null when Node drains the queue of a closed
/// function; the settlement is only freed then.
unsafe extern "C" fn call_js(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    _context: *mut c_void,
    data: *mut c_void,
) {
    let settlement = unsafe { Box::from_raw(data.cast::<Settlement>()) };
    if env.is_null() {
        return;
    }
    let deferred = SETTLER.with(|settler| {
        settler
            .borrow_mut()
            .as_mut()
            .and_then(|settler| settler.take(env, settlement.id))
    });
    let Some(deferred) = deferred else {
        return;
    };
    match (settlement.settle)(env) {
        Ok(value) => unsafe { sys::napi_resolve_deferred(env, deferred, value) },
        Err(reason) => unsafe { sys::napi_reject_deferred(env, deferred, reason) },
    };
}

/// The env is tearing down: close the function before Node finalizes it, so that no later
/// settlement calls it, and forget the promises that can no longer be settled.
unsafe extern "C" fn env_teardown(hook: *mut c_void) {
    let channel = unsafe { Arc::from_raw(hook as *const Channel) };
    if let Some(Tsfn(tsfn)) = channel.tsfn().take() {
        unsafe {
            sys::napi_release_threadsafe_function(tsfn, sys::ThreadsafeFunctionReleaseMode::abort)
        };
    }
    SETTLER.with(|settler| settler.borrow_mut().take());
}

fn check(status: sys::napi_status, what: &str) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::from_reason(format!(
            "polylock: cannot {what} (napi status {status})"
        )))
    }
}
