//! The hold API that a lock (`Lock`) and the groups of locks (`MultiLock`, `RedLock`) share:
//! each call is written once, over the core's `polylock::Hold` (`Lock`, `MultiLock`, `RedLock`).
//! Only the doc comments differ: they say "lock" or "group".

/// `hold_api!(Object, lock)` (or `group`) exports the hold API on `Object`, with the doc comments
/// of a lock (or of a group). It is called in the object's own module, as uniffi orders an
/// object's methods by module, then name. The list below gives, for each call, the doc comment
/// of `Lock`, the call's name, the doc comment of the groups, then `;`.
macro_rules! hold_api {
    ($object:ident, $docs:ident) => {
        hold_api!(@each $object, $docs,
            /// Acquires the lock, or re-enters it. `waitMs`: `0` makes one attempt, otherwise waits
            /// that long and returns `false`. `leaseMs`: a fixed lease, never renewed. `null` (left
            /// out) takes the lock's default (`client.lock(name, waitMs, leaseMs)`), which is to wait
            /// without bound and take the watchdog lease, renewed while held, unless set; `acquireWith`
            /// asks for no bound whatever the default.
            ///
            /// Cancelling the caller (Kotlin coroutine) leaves no lock held.
            acquire
            /// Acquires (one more level of) the group; `false` when `waitMs` ran out. `null`:
            /// no bound, the watchdog lease of each lock. Cancelling the caller leaves nothing
            /// held.
            ;
            /// `acquire` with a `Bound` for each of the wait and the lease: the lock's default, no
            /// bound, or milliseconds.
            acquire_with
            /// `acquire` with a `Bound` for each of the wait and the lease.
            ;
            /// The acquire of `withLock`: `acquireWith`, but a wait that runs out throws `Timeout`
            /// (the same message in every language) instead of returning `false`.
            acquire_or_fail
            /// The acquire of `withLock`: a wait that runs out throws `Timeout`.
            ;
            /// `acquire` for plain threads: blocks the calling thread. Do not call it on a coroutine
            /// dispatcher or the main thread; use `acquire` there.
            acquire_blocking
            /// `acquire` for plain threads: blocks the calling thread.
            ;
            /// `acquireWith` for plain threads: blocks the calling thread.
            acquire_with_blocking
            /// `acquireWith` for plain threads: blocks the calling thread.
            ;
            /// Releases one level of the hold. `NotHeld` when this handle does not hold the lock,
            /// `LockLost` when the lease was lost while held.
            release
            /// Releases one level: every lock that acquisition took, on every server.
            /// `NotHeld`, or `LockLost` when the group was lost while held.
            ;
            /// `release` for plain threads: blocks the calling thread (bounded by the response timeout).
            release_blocking
            /// `release` for plain threads: blocks the calling thread.
            ;
            /// Whether this handle holds the lock, as far as it knows (no I/O).
            is_held
            /// Whether the group is held (no I/O).
            ;
            /// How many times this handle acquired without releasing (no I/O).
            hold_count
            /// How many times the group was acquired and not released (no I/O).
            ;
            /// Whether the current hold's lease was lost (no I/O).
            is_lost
            /// Whether the current hold was lost (no I/O).
            ;
            /// Calls `listener` each time a hold of this handle is lost.
            on_lost
            /// Calls `listener` each time a hold of the group is lost.
            ;
            /// The lock's name (its Redis key).
            name
            /// The distinct names of its locks, joined by ", ".
            ;
        );
    };
    (@each $object:ident, lock, $($(#[$lock:meta])* $call:ident $(#[$group:meta])* ;)*) => {
        $(hold_api!(@call $object, $call, $(#[$lock])*);)*
    };
    (@each $object:ident, group, $($(#[$lock:meta])* $call:ident $(#[$group:meta])* ;)*) => {
        $(hold_api!(@call $object, $call, $(#[$group])*);)*
    };
    // One exported impl block a call (uniffi merges them), as a macro cannot expand inside an
    // exported impl block; in a block of its own, where this module's names are in scope.
    (@export $object:ident, [$(#[$doc:meta])*] $($call:tt)*) => {
        const _: () = {
            // What the calls use; each uses some.
            #[allow(unused_imports)]
            use polylock::Hold;
            #[allow(unused_imports)]
            use $crate::{
                arguments::{bounded_options, count, wait_for, Bound},
                error::LockError,
                lost_listener::{lost_callback, LostListener},
            };

            #[uniffi::export]
            impl $object {
                $(#[$doc])*
                $($call)*
            }
        };
    };
    (@call $object:ident, acquire, $(#[$doc:meta])*) => {
        hold_api!(@export $object, [$(#[$doc])*]
            #[uniffi::method(default(wait_ms = None, lease_ms = None))]
            pub async fn acquire(
                &self,
                wait_ms: Option<i64>,
                lease_ms: Option<i64>,
            ) -> Result<bool, LockError> {
                self.acquire_with(Bound::from_ms(wait_ms), Bound::from_ms(lease_ms))
                    .await
            }
        );
    };
    (@call $object:ident, acquire_with, $(#[$doc:meta])*) => {
        hold_api!(@export $object, [$(#[$doc])*]
            pub async fn acquire_with(&self, wait: Bound, lease: Bound) -> Result<bool, LockError> {
                let options = bounded_options(self.inner.defaults(), wait, lease)?;
                Ok(self.inner.acquire(options).await?)
            }
        );
    };
    (@call $object:ident, acquire_or_fail, $(#[$doc:meta])*) => {
        hold_api!(@export $object, [$(#[$doc])*]
            pub async fn acquire_or_fail(&self, wait: Bound, lease: Bound) -> Result<(), LockError> {
                let options = bounded_options(self.inner.defaults(), wait, lease)?;
                Ok(self.inner.acquire_or_fail(options).await?)
            }
        );
    };
    (@call $object:ident, acquire_blocking, $(#[$doc:meta])*) => {
        hold_api!(@export $object, [$(#[$doc])*]
            #[uniffi::method(default(wait_ms = None, lease_ms = None))]
            pub fn acquire_blocking(
                &self,
                wait_ms: Option<i64>,
                lease_ms: Option<i64>,
            ) -> Result<bool, LockError> {
                self.acquire_with_blocking(Bound::from_ms(wait_ms), Bound::from_ms(lease_ms))
            }
        );
    };
    (@call $object:ident, acquire_with_blocking, $(#[$doc:meta])*) => {
        hold_api!(@export $object, [$(#[$doc])*]
            pub fn acquire_with_blocking(&self, wait: Bound, lease: Bound) -> Result<bool, LockError> {
                let options = bounded_options(self.inner.defaults(), wait, lease)?;
                wait_for(self.inner.acquire(options))
            }
        );
    };
    (@call $object:ident, release, $(#[$doc:meta])*) => {
        hold_api!(@export $object, [$(#[$doc])*]
            pub async fn release(&self) -> Result<(), LockError> {
                Ok(self.inner.release().await?)
            }
        );
    };
    (@call $object:ident, release_blocking, $(#[$doc:meta])*) => {
        hold_api!(@export $object, [$(#[$doc])*]
            pub fn release_blocking(&self) -> Result<(), LockError> {
                wait_for(self.inner.release())
            }
        );
    };
    (@call $object:ident, hold_count, $(#[$doc:meta])*) => {
        hold_api!(@export $object, [$(#[$doc])*]
            pub fn hold_count(&self) -> i32 {
                count(self.inner.hold_count())
            }
        );
    };
    (@call $object:ident, on_lost, $(#[$doc:meta])*) => {
        hold_api!(@export $object, [$(#[$doc])*]
            pub fn on_lost(&self, listener: Box<dyn LostListener>) {
                self.inner.on_lost(lost_callback(listener));
            }
        );
    };
    (@call $object:ident, name, $(#[$doc:meta])*) => {
        hold_api!(@export $object, [$(#[$doc])*]
            pub fn name(&self) -> String {
                self.inner.name().to_owned()
            }
        );
    };
    // The other calls, `is_held` and `is_lost`: what the core's handle knows (no I/O).
    (@call $object:ident, $query:ident, $(#[$doc:meta])*) => {
        hold_api!(@export $object, [$(#[$doc])*]
            pub fn $query(&self) -> bool {
                self.inner.$query()
            }
        );
    };
}

pub(crate) use hold_api;
