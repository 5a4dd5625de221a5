//! `LockError`, the one exception type of Kotlin and Swift, and the one mapping to it from the
//! core's errors.

/// Declares `LockError`, one case a core error kind, and its mapping from the core's errors,
/// from the one list below: a new kind of error is one line there.
macro_rules! lock_error {
    ($($(#[$doc:meta])* $kind:ident,)*) => {
        /// Every failure of polylock, with the same cases as the core. The message says what happened
        /// and names the lock.
        #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, uniffi::Error)]
        #[uniffi(flat_error)]
        pub enum LockError {
            $(
                $(#[$doc])*
                #[error("{0}")]
                $kind(String),
            )*
        }

        /// The one mapping from the core's errors. The core's message becomes the exception message.
        impl From<polylock::Error> for LockError {
            fn from(err: polylock::Error) -> Self {
                let message = err.to_string();
                match err.kind() {
                    $(polylock::ErrorKind::$kind => LockError::$kind(message),)*
                }
            }
        }
    };
}

lock_error! {
    /// A bad argument (empty name, zero lease, negative milliseconds, bad URL), rejected before any I/O.
    InvalidArgument,
    /// Release without holding the lock (never acquired, or released twice).
    NotHeld,
    /// The lease ran out, or the key was deleted or taken, while this handle held the lock.
    LockLost,
    /// Redis could not be reached, the connection broke, or the client was closed.
    Connection,
    /// A Redis command did not answer within the response timeout.
    Timeout,
    /// The lock's name holds a Redis key that is not a lock.
    WrongType,
    /// Redis answered with an unexpected error.
    Redis,
    /// A fenced write was refused: its token is lower than one already applied to the key.
    StaleToken,
    /// With `syncReplicas`: no replica acknowledged an acquisition within the timeout (undone).
    NotSynced,
    /// The Redis user may not run a command polylock needs, or use a key or channel of the
    /// lock (ACL).
    Permission,
}
