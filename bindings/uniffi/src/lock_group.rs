//! `MultiLock` and `RedLock`: groups of locks over the core's `MultiLock` and `RedLock`, with
//! the same hold API as `Lock`.

use std::sync::Arc;

use crate::arguments::count;
use crate::error::LockError;
use crate::held::hold_api;
use crate::lock::Lock;

/// One exported group object per core group kind (`$core`: `MultiLock` or `RedLock`); their
/// hold API, the same as `Lock`'s, is in `held.rs`.
macro_rules! lock_group {
    ($name:ident, $core:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(uniffi::Object)]
        pub struct $name {
            inner: polylock::$core,
        }

        #[uniffi::export]
        impl $name {
            /// A group over `locks` (handles of one or several clients): at least one, none
            /// twice, else `InvalidArgument` with the core's message. No I/O.
            #[uniffi::constructor]
            pub fn new(locks: Vec<Arc<Lock>>) -> Result<Arc<Self>, LockError> {
                let locks = locks.iter().map(|lock| lock.inner.clone()).collect();
                let inner = polylock::$core::new(locks)?;
                Ok(Arc::new($name { inner }))
            }

            /// How many of its locks must be held.
            pub fn quorum(&self) -> i32 {
                count(self.inner.quorum())
            }
        }

        hold_api!($name, group);
    };
}

lock_group!(
    MultiLock,
    MultiLock,
    "All of several locks (of one or several servers), held together or not at all (Redisson \
     RedissonMultiLock). Lost when any of them is lost."
);
lock_group!(
    RedLock,
    RedLock,
    "One lock per independent Redis master, held when a majority is (Redlock). Lost when fewer \
     than the quorum remain held; its safety rests on timing assumptions: fence where \
     correctness matters."
);
