//! Waiting for a core future from a Python thread: GIL released, Ctrl-C honoured.
//!
//! The future is polled right here on the calling thread (the core's futures only await work
//! spawned on its runtime, so any executor does). Between slices of at most 0.1 s Python gets a
//! chance to run its signal handlers; when one raises (KeyboardInterrupt), the future is dropped,
//! and the core then cancels the operation and undoes any acquisition it made.
//! No tokio `block_on`: that would panic on a runtime thread, e.g. inside an `on_lost` callback.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

use crate::errors::to_py_err;

/// Longest time without looking at Python's signals.
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Wakes the waiting thread.
#[derive(Default)]
struct Signal {
    woken: Mutex<bool>,
    condvar: Condvar,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        *self.woken.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.condvar.notify_one();
    }
}

/// Polls `future` until it completes (`Some`) or `slice` has passed (`None`).
fn poll_for<F: Future>(
    mut future: Pin<&mut F>,
    signal: &Signal,
    waker: &Waker,
    slice: Duration,
) -> Option<F::Output> {
    let deadline = Instant::now() + slice;
    let mut context = Context::from_waker(waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return Some(output);
        }
        let mut woken = signal.woken.lock().unwrap_or_else(|p| p.into_inner());
        while !*woken {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            woken = signal
                .condvar
                .wait_timeout(woken, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *woken = false;
    }
}

/// Runs a core future to completion with the GIL released, mapping its error; a pending Python
/// signal (Ctrl-C) aborts the wait within [`SIGNAL_CHECK_INTERVAL`] and drops the future.
pub(crate) fn wait_interruptibly<F, T>(py: Python<'_>, future: F) -> PyResult<T>
where
    F: Future<Output = polylock::Result<T>> + Send,
    T: Send,
{
    let mut future = std::pin::pin!(future);
    let signal = Arc::new(Signal::default());
    let waker = Waker::from(signal.clone());
    loop {
        let pinned = future.as_mut();
        // Not through a loop link of this thread's (`asyncio.rs`): nothing reads it meanwhile.
        let outcome = py.detach(|| {
            polylock::LoopLink::bypassed_here(|| {
                poll_for(pinned, &signal, &waker, SIGNAL_CHECK_INTERVAL)
            })
        });
        if let Some(result) = outcome {
            return result.map_err(|err| to_py_err(py, err));
        }
        py.check_signals()?;
    }
}
