//! The native `Cancellation`, which `node/lib/signal.js` fires from an `AbortSignal`, and the
//! cancellable acquire of every handle.

use std::future::Future;

use napi_derive::napi;
use tokio::sync::watch;

/// Cancels the `acquire` calls it was given to (the JS layer fires it from an AbortSignal).
#[napi]
pub struct Cancellation {
    sender: watch::Sender<bool>,
}

impl Default for Cancellation {
    fn default() -> Self {
        Cancellation {
            sender: watch::Sender::new(false),
        }
    }
}

#[napi]
impl Cancellation {
    #[napi(constructor)]
    pub fn new() -> Self {
        Cancellation::default()
    }

    #[napi]
    pub fn cancel(&self) {
        self.sender.send_replace(true);
    }
}

/// Runs `acquire` until it settles or `cancellation` fires (then resolves to `on_cancel`; the
/// core guarantees that dropping an acquire future leaves nothing taken).
pub(crate) fn cancellable<T>(
    cancellation: Option<&Cancellation>,
    on_cancel: T,
    acquire: impl Future<Output = polylock::Result<T>>,
) -> impl Future<Output = polylock::Result<T>> {
    // Subscribed now, on the JS thread: a cancel fired before the call is seen.
    let cancelled = cancellation.map(|cancellation| cancellation.sender.subscribe());
    async move {
        let Some(mut cancelled) = cancelled else {
            return acquire.await;
        };
        tokio::select! {
            biased;
            Ok(_) = cancelled.wait_for(|cancelled| *cancelled) => Ok(on_cancel),
            acquired = acquire => acquired,
        }
    }
}
