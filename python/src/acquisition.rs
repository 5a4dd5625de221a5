//! `_native.Acquisition`: the outcome of an asyncio acquire (a hold, semaphore permits, an
//! expirable permit), claimed by the awaiting task.

use std::future::Future;
use std::sync::Mutex;

use polylock::Hold;
use pyo3::prelude::*;

/// What gives an unclaimed acquisition back (in the background).
pub(crate) type Undo = Box<dyn FnOnce() + Send>;

/// The undo that runs `release` in the background. Nobody is left to tell about a failure:
/// a lease then runs out by itself.
pub(crate) fn undo_by<T: Send + 'static>(
    release: impl Future<Output = polylock::Result<T>> + Send + 'static,
) -> Undo {
    Box::new(move || {
        polylock::runtime().spawn(release);
    })
}

/// The outcome of an asyncio acquire (a lock, semaphore permits, an expirable permit),
/// claimed by the awaiting task.
///
/// The core undoes an acquisition whose future is dropped before it returns, but once the
/// core future has returned the acquisition is ours, and the asyncio side can still lose
/// it: the result is dropped when the Python future was cancelled in the
/// meantime, and the task can be cancelled after the result was set but before it resumed.
/// Whatever nobody claims is given back (in the background) when dropped or abandoned, so a
/// cancelled acquire never leaves a lock or a permit held.
#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct Acquisition {
    acquired: bool,
    permit_id: Option<String>,
    unclaimed: Mutex<Option<Undo>>,
}

impl Acquisition {
    /// `undo` is run when the acquisition is abandoned; `None` when nothing was acquired.
    pub(crate) fn new(acquired: bool, permit_id: Option<String>, undo: Option<Undo>) -> Self {
        Acquisition {
            acquired,
            permit_id,
            unclaimed: Mutex::new(undo),
        }
    }

    /// An acquisition of a hold (a lock, a group), undone by one release.
    pub(crate) fn of_hold(hold: impl Hold, acquired: bool) -> Self {
        let undo = acquired.then(|| undo_by(async move { hold.release().await }));
        Acquisition::new(acquired, None, undo)
    }

    fn take(&self) -> Option<Undo> {
        self.unclaimed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

#[pymethods]
impl Acquisition {
    /// Takes the acquisition over; true when something was acquired.
    fn claim(&self) -> bool {
        self.take();
        self.acquired
    }

    /// The id of the permit acquired (expirable semaphores only).
    #[getter]
    fn permit_id(&self) -> Option<String> {
        self.permit_id.clone()
    }

    /// Gives an unclaimed acquisition back now (in the background).
    fn abandon(&self) {
        if let Some(undo) = self.take() {
            undo();
        }
    }
}

impl Drop for Acquisition {
    fn drop(&mut self) {
        self.abandon();
    }
}
