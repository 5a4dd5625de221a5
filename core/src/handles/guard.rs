//! [`Hold`]: what every thing you hold offers (a [`crate::Lock`], a [`crate::MultiLock`] or
//! [`crate::RedLock`], a semaphore's permits), and [`Guard`], the one RAII face of a hold.
//! The scoped forms (`lock`, `try_lock`, `try_lock_with`, `acquire_or_fail`) are written here
//! once, over the few calls each kind implements.

use std::future::Future;
use std::ops::Deref;
use std::time::Duration;

use tokio::sync::watch;

use crate::foundation::error::{Error, Result};
use crate::foundation::runtime::runtime;
use crate::settings::options::AcquireOptions;

/// A thing you hold: acquired, released level by level, and possibly lost while held.
/// Clones share the handle and its hold.
///
/// Bring it into scope (`use polylock::Hold;`) for `lock()`, `try_lock()` and the rest.
pub trait Hold: Clone + std::fmt::Debug + Send + Sync + 'static {
    /// What messages call it (a lock's name; a group's names joined by ", ").
    fn name(&self) -> &str;

    /// The defaults that [`Hold::lock`] and [`Hold::try_lock`] use (bindings use them for the
    /// options a call leaves out).
    fn defaults(&self) -> AcquireOptions;

    /// This handle with `defaults` (validated; no I/O).
    fn with_defaults(self, defaults: AcquireOptions) -> Result<Self>;

    /// Acquires one more level; `false` when `options.wait` ran out. Dropping the future
    /// leaves nothing held.
    fn acquire(&self, options: AcquireOptions) -> impl Future<Output = Result<bool>> + Send;

    /// Releases one level: [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when nothing is held, [`ErrorKind::LockLost`](crate::ErrorKind::LockLost) when
    /// the hold was lost while held.
    fn release(&self) -> impl Future<Output = Result<()>> + Send;

    /// Whether this handle holds it, as far as it knows (no I/O).
    fn is_held(&self) -> bool;

    /// How many levels this handle holds (no I/O).
    fn hold_count(&self) -> u32;

    /// Whether the current hold was lost (no I/O).
    fn is_lost(&self) -> bool;

    /// A receiver that turns `true` when the current hold is lost, and back to `false` when
    /// the handle acquires afresh.
    fn lost_receiver(&self) -> watch::Receiver<bool>;

    /// Calls `callback` (on a blocking-pool thread, never the caller's) each time a hold of
    /// this handle is lost.
    fn on_lost(&self, callback: impl Fn(&Error) + Send + Sync + 'static);

    /// The acquire of every language's scoped hold (Rust [`Hold::lock`], Python `with`, Node
    /// `using`, Kotlin and Swift `withLock`): [`Hold::acquire`], but a wait that runs out is
    /// [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) with the same message in every language, since the scoped code must
    /// not run.
    fn acquire_or_fail(&self, options: AcquireOptions) -> impl Future<Output = Result<()>> + Send {
        async move {
            if self.acquire(options).await? {
                return Ok(());
            }
            Err(self
                .not_acquired_error(options.wait.unwrap_or(Duration::MAX))
                .await)
        }
    }

    /// The error of a scoped acquire whose wait of `wait` ran out ([`Error::not_acquired`]),
    /// naming who holds it now when the server tells (from their client records: `held by
    /// 'worker-7', pid 1234 on host-a, for 1.2 s`). For bindings that decide on the timeout
    /// themselves (Python's `with`).
    fn not_acquired_error(&self, wait: Duration) -> impl Future<Output = Error> + Send {
        async move { Error::not_acquired(self.name(), wait) }
    }

    /// Acquires with the defaults (by default: waiting without bound, the watchdog lease) and
    /// returns a guard that releases one level when dropped (or by [`Guard::release`], which
    /// reports errors). A default wait that runs out is [`ErrorKind::Timeout`](crate::ErrorKind::Timeout), as
    /// [`Hold::acquire_or_fail`].
    fn lock(&self) -> impl Future<Output = Result<Guard<Self>>> + Send {
        async move {
            self.acquire_or_fail(self.defaults()).await?;
            Ok(Guard::new(self.clone()))
        }
    }

    /// Acquires with the defaults, but with one attempt when they set no wait; `None` when it
    /// stayed taken.
    fn try_lock(&self) -> impl Future<Output = Result<Option<Guard<Self>>>> + Send {
        let defaults = self.defaults();
        self.try_lock_with(AcquireOptions {
            wait: Some(defaults.wait.unwrap_or(Duration::ZERO)),
            ..defaults
        })
    }

    /// Acquires with `options`; a guard, or `None` when the wait ran out.
    fn try_lock_with(
        &self,
        options: AcquireOptions,
    ) -> impl Future<Output = Result<Option<Guard<Self>>>> + Send {
        async move {
            let acquired = self.acquire(options).await?;
            Ok(acquired.then(|| Guard::new(self.clone())))
        }
    }
}

/// One level of a hold. Dropping it releases that level in the background (errors are
/// logged; a lease still bounds the hold); [`Guard::release`] releases it and reports the
/// outcome. Derefs to what it holds, for its token, lost signal and the rest.
#[must_use = "dropping the guard releases at once"]
#[derive(Debug)]
pub struct Guard<H: Hold> {
    /// `None` once released.
    hold: Option<H>,
}

impl<H: Hold> Guard<H> {
    pub(crate) fn new(hold: H) -> Guard<H> {
        Guard { hold: Some(hold) }
    }

    /// Releases this level, as [`Hold::release`]: [`ErrorKind::LockLost`](crate::ErrorKind::LockLost) when the hold was lost
    /// while held.
    pub async fn release(mut self) -> Result<()> {
        match self.hold.take() {
            Some(hold) => hold.release().await,
            None => Ok(()),
        }
    }

    /// What this guard holds.
    pub fn held(&self) -> &H {
        self.hold
            .as_ref()
            .expect("a guard keeps what it holds until released")
    }
}

impl<H: Hold> Deref for Guard<H> {
    type Target = H;

    fn deref(&self) -> &H {
        self.held()
    }
}

impl<H: Hold> Drop for Guard<H> {
    fn drop(&mut self) {
        let Some(hold) = self.hold.take() else { return };
        // Drop cannot await: the release runs on the core's runtime, whatever thread drops.
        runtime().spawn(async move {
            if let Err(err) = hold.release().await {
                tracing::warn!(lock = %hold.name(), %err, "releasing a dropped guard failed");
            }
        });
    }
}

/// `impl Hold` for a handle whose inherent methods of the same names are the implementation
/// (a [`crate::Lock`], a [`crate::LockGroup`]): callers need no import for those.
macro_rules! hold_by_inherent_methods {
    ($handle:ty) => {
        impl $crate::handles::guard::Hold for $handle {
            fn name(&self) -> &str {
                <$handle>::name(self)
            }

            fn defaults(&self) -> $crate::settings::options::AcquireOptions {
                <$handle>::defaults(self)
            }

            fn with_defaults(
                self,
                defaults: $crate::settings::options::AcquireOptions,
            ) -> $crate::foundation::error::Result<Self> {
                <$handle>::with_defaults(self, defaults)
            }

            fn acquire(
                &self,
                options: $crate::settings::options::AcquireOptions,
            ) -> impl std::future::Future<Output = $crate::foundation::error::Result<bool>> + Send
            {
                <$handle>::acquire(self, options)
            }

            fn release(
                &self,
            ) -> impl std::future::Future<Output = $crate::foundation::error::Result<()>> + Send
            {
                <$handle>::release(self)
            }

            fn is_held(&self) -> bool {
                <$handle>::is_held(self)
            }

            fn hold_count(&self) -> u32 {
                <$handle>::hold_count(self)
            }

            fn is_lost(&self) -> bool {
                <$handle>::is_lost(self)
            }

            fn lost_receiver(&self) -> tokio::sync::watch::Receiver<bool> {
                <$handle>::lost_receiver(self)
            }

            fn on_lost(&self, callback: impl Fn(&$crate::Error) + Send + Sync + 'static) {
                <$handle>::on_lost(self, callback)
            }

            fn not_acquired_error(
                &self,
                wait: std::time::Duration,
            ) -> impl std::future::Future<Output = $crate::Error> + Send {
                async move {
                    let held_by = <$handle>::describe_holders(self).await;
                    $crate::Error::not_acquired_held_by(
                        <$handle>::name(self),
                        wait,
                        held_by.as_deref(),
                    )
                }
            }
        }
    };
}

pub(crate) use hold_by_inherent_methods;
