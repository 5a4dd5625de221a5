//! `LostListener`, the callback interface told when a hold is lost.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::LockError;

/// Told when a lock held through a handle is lost (lease ran out, key deleted or taken).
///
/// Called on a background thread of polylock, never on the caller's. It must not throw: an
/// exception is ignored.
#[uniffi::export(callback_interface)]
pub trait LostListener: Send + Sync {
    /// `error` is a `LockLost` saying what happened.
    fn on_lost(&self, error: LockError);
}

/// A foreign listener as the core's lost callback (of a lock or a group).
pub(crate) fn lost_callback(
    listener: Box<dyn LostListener>,
) -> impl Fn(&polylock::Error) + Send + Sync + 'static {
    move |err: &polylock::Error| {
        let error = LockError::from(err.clone());
        // A listener that throws surfaces as a panic in uniffi's callback glue: contain it
        // here, on polylock's thread, so one bad listener affects nothing else.
        let _ = catch_unwind(AssertUnwindSafe(|| listener.on_lost(error)));
    }
}
