//! `LockError`, the one exception type of Kotlin and Swift, and the one mapping to it from the
//! core's errors.

/// Declares `LockError`, one case a core error kind, and its mapping from the core's errors.
/// The core calls it with its one list of kinds (`polylock::with_error_kinds!`), so a new kind
/// of error becomes a new case here without an edit.
macro_rules! lock_error {
    ($($(#[$doc:meta])* $kind:ident => $constructor:ident,)*) => {
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
                    // Not reached while the cases come from the core's list; the core's kinds
                    // are `#[non_exhaustive]`, so the match needs this arm. As an unexpected
                    // Redis error, like the other bindings' fallback.
                    _ => LockError::Redis(message),
                }
            }
        }
    };
}

polylock::with_error_kinds!(lock_error);
