//! The foreign side's arguments as the core takes them, and `Bound`, the wait or lease of
//! `acquireWith`. Only units are converted here: the core checks every value, so a bad one gets
//! the same message in every language.

use std::time::Duration;

use polylock::options::{lease_from_millis, wait_from_millis};
use polylock::AcquireOptions;

use crate::error::LockError;

/// Milliseconds from the foreign side (Kotlin `Long`, Swift `Int64`) as the core takes them.
pub(crate) fn ms(value: Option<i64>) -> Option<f64> {
    value.map(|ms| ms as f64)
}

/// Milliseconds of a duration for the foreign side (saturating).
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// A count for the foreign side (Kotlin `Int`, Swift `Int32`; saturating).
pub(crate) fn count<T: TryInto<i32>>(value: T) -> i32 {
    value.try_into().unwrap_or(i32::MAX)
}

/// The wait and lease of an acquire (`null`: no bound, the watchdog lease).
pub(crate) fn acquire_args(
    wait_ms: Option<i64>,
    lease_ms: Option<i64>,
) -> polylock::Result<AcquireOptions> {
    Ok(AcquireOptions {
        wait: wait_from_millis(ms(wait_ms))?,
        lease: lease_from_millis(ms(lease_ms))?,
    })
}

/// A wait or a lease of `Lock.acquireWith`, where "left out" and "no bound" differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Bound {
    /// The lock's default: what `client.lock(name, waitMs, leaseMs)` set, else no bound.
    LockDefault,
    /// No bound: wait without bound; for a lease, the watchdog lease, renewed while held.
    Unbounded,
    /// This many milliseconds (a wait of `0` makes one attempt).
    Millis { ms: i64 },
}

impl Bound {
    /// `null` milliseconds (an argument left out) mean the lock's default.
    pub(crate) fn from_ms(value: Option<i64>) -> Bound {
        value.map_or(Bound::LockDefault, |ms| Bound::Millis { ms })
    }

    fn resolve(
        self,
        default: Option<Duration>,
        convert: fn(Option<f64>) -> polylock::Result<Option<Duration>>,
    ) -> polylock::Result<Option<Duration>> {
        match self {
            Bound::LockDefault => Ok(default),
            Bound::Unbounded => Ok(None),
            Bound::Millis { ms } => convert(Some(ms as f64)),
        }
    }
}

/// The wait and lease of an acquire, the lock's (or group's) `defaults` filling what is left out.
pub(crate) fn bounded_options(
    defaults: AcquireOptions,
    wait: Bound,
    lease: Bound,
) -> polylock::Result<AcquireOptions> {
    Ok(AcquireOptions {
        wait: wait.resolve(defaults.wait, wait_from_millis)?,
        lease: lease.resolve(defaults.lease, lease_from_millis)?,
    })
}

/// Waits for a core future on the calling (foreign) thread.
///
/// Why this cannot deadlock: the core future only awaits the handle of a task that runs on
/// `polylock::runtime()`'s worker threads, and those never run foreign code (lost listeners run
/// on the runtime's blocking pool), so they are never the thread parked here. Unlike
/// `runtime().block_on`, this also works on a thread that is inside a tokio runtime (a lost
/// listener calling `releaseBlocking`).
pub(crate) fn wait_for<T>(
    future: impl std::future::Future<Output = polylock::Result<T>>,
) -> Result<T, LockError> {
    futures_executor::block_on(future).map_err(LockError::from)
}
