//! `Lock`: a handle on one lock (plain, fair, FIFO, fenced, or a read-write lock's read or write
//! lock) for one owner, and `LockDefaults`, its per-lock defaults.

use std::sync::Arc;

use crate::arguments::{acquire_args, millis};
use crate::error::LockError;
use crate::held::hold_api;

/// The per-lock defaults of a handle (`client.lock(name, waitMs, leaseMs)`); `null`: no bound
/// (wait without bound, the watchdog lease).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct LockDefaults {
    pub wait_ms: Option<i64>,
    pub lease_ms: Option<i64>,
}

/// A handle on one lock for one owner: reentrant, released one level per `release`.
///
/// Closing (Kotlin `close()`, Swift deinit) a handle that still holds the lock releases it in
/// the background.
#[derive(uniffi::Object)]
pub struct Lock {
    pub(crate) inner: polylock::Lock,
}

impl Lock {
    pub(crate) fn with_defaults(
        lock: polylock::Lock,
        wait_ms: Option<i64>,
        lease_ms: Option<i64>,
    ) -> Result<Arc<Lock>, LockError> {
        let inner = lock.with_defaults(acquire_args(wait_ms, lease_ms)?)?;
        Ok(Arc::new(Lock { inner }))
    }
}

hold_api!(Lock, lock);

/// The calls of a single lock only; those it shares with the groups are in `held.rs`.
#[uniffi::export]
impl Lock {
    /// The per-lock defaults of this handle (no I/O).
    pub fn defaults(&self) -> LockDefaults {
        let defaults = self.inner.defaults();
        LockDefaults {
            wait_ms: defaults.wait.map(millis),
            lease_ms: defaults.lease.map(millis),
        }
    }

    /// The holder's remaining lease in milliseconds (asks Redis): `null` when nobody holds the
    /// lock, `Long.MAX_VALUE` (Swift `Int64.max`) when the lock's key has no expiry.
    pub async fn remaining_lease_ms(&self) -> Result<Option<i64>, LockError> {
        Ok(self.inner.remaining_lease().await?.map(millis))
    }

    /// Deletes the lock whoever holds it. `true` when there was a lock to delete.
    pub async fn force_unlock(&self) -> Result<bool, LockError> {
        Ok(self.inner.force_unlock().await?)
    }

    /// Whether anyone holds the lock (asks Redis).
    pub async fn is_locked(&self) -> Result<bool, LockError> {
        Ok(self.inner.is_locked().await?)
    }

    /// The fencing token of the current hold of a fenced lock (`fencedLock`): the token of its
    /// latest acquisition, reentrant ones included. `null` when this handle holds nothing (or
    /// lost its hold), and for the other kinds of lock. No I/O.
    pub fn token(&self) -> Option<i64> {
        self.inner.token()
    }

    /// `<client id>:<holder id>`, the owner this handle writes into the lock.
    pub fn owner(&self) -> String {
        self.inner.owner().to_owned()
    }
}
