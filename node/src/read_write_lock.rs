//! The native `ReadWriteLock`: one owner's read lock and write lock.

use napi::Env;
use napi_derive::napi;
use polylock::AcquireOptions as CoreAcquireOptions;

use crate::error::OrThrow;
use crate::lock::Lock;

/// One owner's read-write lock: `readLock()` and `writeLock()` are `Lock`s of that owner.
#[napi]
pub struct ReadWriteLock {
    inner: polylock::ReadWriteLock,
    defaults: CoreAcquireOptions,
}

impl ReadWriteLock {
    /// The handle of `inner`'s owner whose both locks take `defaults` (checked now, with the
    /// same messages as an acquire's).
    pub(crate) fn new(
        inner: polylock::ReadWriteLock,
        defaults: CoreAcquireOptions,
    ) -> polylock::Result<Self> {
        inner.read_lock().with_defaults(defaults)?;
        Ok(ReadWriteLock { inner, defaults })
    }

    fn handle(&self, env: &Env, lock: polylock::Lock) -> napi::Result<Lock> {
        let inner = lock.with_defaults(self.defaults).or_throw(env)?;
        Ok(Lock { inner })
    }
}

#[napi]
impl ReadWriteLock {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// The read lock (readers share it), a handle of this owner. No I/O.
    #[napi]
    pub fn read_lock(&self, env: &Env) -> napi::Result<Lock> {
        self.handle(env, self.inner.read_lock())
    }

    /// The write lock (excludes readers and writers), a handle of this owner. No I/O.
    #[napi]
    pub fn write_lock(&self, env: &Env) -> napi::Result<Lock> {
        self.handle(env, self.inner.write_lock())
    }
}
