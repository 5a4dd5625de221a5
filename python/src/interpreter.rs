//! Keeps polylock's own threads (the tokio workers and blocking pool of `polylock::runtime()`)
//! away from Python once the interpreter starts finalizing.
//!
//! Those threads live until the process ends; the interpreter does not. On CPython < 3.14 a
//! thread that takes the GIL after `Py_FinalizeEx` has marked the interpreter finalizing is
//! ended inside `take_gil` with `pthread_exit`: the unwinding runs pyo3's `AttachGuard` drop,
//! whose `PyGILState_Release` aborts ("must be current when releasing"), or the thread uses
//! interpreter state that is being freed (SIGSEGV). pyo3's `try_attach` cannot prevent it: its
//! `Py_IsFinalizing` check is compiled only for 3.13+ targets (not for our abi3-py39 build), and
//! a check is no guard anyway while the thread can wait for the GIL past the moment finalization
//! begins.
//!
//! So every attachment from a polylock thread passes a gate. CPython runs `atexit` callbacks
//! before it marks the interpreter finalizing; ours shuts the gate and waits, GIL released, for
//! the threads already inside to finish. Work refused at the shut gate is leaked, not dropped:
//! dropping would queue its Python references for the finalizing main thread to release.
//! An asyncio awaitable needs no gate: its outcome is settled on its loop's own thread
//! (`asyncio.rs`); no polylock thread attaches for it.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// How long the exit hook waits for threads inside the gate. A completion takes microseconds;
/// only an `on_lost` callback that blocks (say, on the event loop that no longer runs) can take
/// longer, and exit must not hang on it.
const LINGER: Duration = Duration::from_secs(2);

struct State {
    shut: bool,
    /// Threads between passing the gate and detaching from Python again.
    inside: usize,
    /// The process those threads belong to: a forked child has none of them.
    pid: u32,
}

static STATE: Mutex<State> = Mutex::new(State {
    shut: false,
    inside: 0,
    pid: 0,
});
static LEFT: Condvar = Condvar::new();

fn state() -> MutexGuard<'static, State> {
    let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
    let pid = std::process::id();
    if state.pid != pid {
        state.pid = pid;
        state.inside = 0;
    }
    state
}

/// A thread inside the gate; leaving wakes the exit hook.
struct Inside;

impl Inside {
    fn enter() -> Option<Inside> {
        let mut state = state();
        if state.shut {
            return None;
        }
        state.inside += 1;
        Some(Inside)
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        let mut state = state();
        state.inside = state.inside.saturating_sub(1);
        LEFT.notify_all();
    }
}

/// Runs `work`, which may attach to Python, on a polylock thread; once the interpreter is
/// exiting, leaks `work` instead (returns `None`).
pub(crate) fn unless_exiting<R>(work: impl FnOnce() -> R) -> Option<R> {
    let Some(_inside) = Inside::enter() else {
        std::mem::forget(work);
        return None;
    };
    Some(work())
}

/// The `atexit` hook: shuts the gate, then waits (at most [`LINGER`]) for the threads inside.
#[pyfunction]
fn shut_gate(py: Python<'_>) {
    // Detached, so that a thread inside can take the GIL to finish.
    py.detach(|| {
        let deadline = Instant::now() + LINGER;
        let mut state = state();
        state.shut = true;
        while state.inside > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = LEFT
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    });
}

/// Registers the exit hook (once, when `polylock._native` is imported).
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let hook = wrap_pyfunction!(shut_gate, module)?;
    module
        .py()
        .import("atexit")?
        .call_method1("register", (hook,))?;
    Ok(())
}
