//! The one error type of polylock. Every binding maps these variants in one place.

use std::time::Duration;

/// What went wrong. Each message names the lock (where there is one) and says what happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A bad argument, rejected before any I/O.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The caller does not hold the lock it tried to release.
    #[error("{0}")]
    NotHeld(String),
    /// The lease ran out, or the key was deleted or taken, while this holder held the lock.
    #[error("{0}")]
    LockLost(String),
    /// Redis could not be reached, or the connection broke.
    #[error("{0}")]
    Connection(String),
    /// An operation with a deadline ran out of time: Redis did not answer within the response
    /// timeout, or a scoped hold's wait ran out (`Lock::acquire_or_fail`; a plain acquire
    /// returns `false` instead).
    #[error("{0}")]
    Timeout(String),
    /// The lock's name holds a Redis key that is not a lock.
    #[error("{0}")]
    WrongType(String),
    /// Redis answered with an error we did not expect.
    #[error("{0}")]
    Redis(String),
    /// A fenced write (`Client::fenced_set`, `Client::fenced_delete`) was refused: its token
    /// is lower than one already applied to that key (a newer holder of the lock wrote since).
    #[error("{0}")]
    StaleToken(String),
    /// With `sync_replicas`: not every connected replica acknowledged an acquisition within the wait (it was
    /// undone), so the lock would not survive a failover.
    #[error("{0}")]
    NotSynced(String),
    /// The Redis user may not run a command polylock needs, or use a key or channel of the
    /// lock (Redis answered `NOPERM`, or refused a lock script's call): see [`crate::acl`].
    #[error("{0}")]
    Permission(String),
}

/// The kind of an [`Error`], for bindings that map kinds to their own exception types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    InvalidArgument,
    NotHeld,
    LockLost,
    Connection,
    Timeout,
    WrongType,
    Redis,
    StaleToken,
    NotSynced,
    Permission,
}

impl Error {
    /// [`ErrorKind::InvalidArgument`]: A bad argument, rejected before any I/O.
    pub fn invalid_argument(message: impl Into<String>) -> Error {
        Error::InvalidArgument(message.into())
    }

    /// [`ErrorKind::NotHeld`]: The caller does not hold what it tried to release.
    pub fn not_held(message: impl Into<String>) -> Error {
        Error::NotHeld(message.into())
    }

    /// [`ErrorKind::LockLost`]: The lease was lost while held.
    pub fn lock_lost(message: impl Into<String>) -> Error {
        Error::LockLost(message.into())
    }

    /// [`ErrorKind::Connection`]: Redis could not be reached, or the connection broke.
    pub fn connection(message: impl Into<String>) -> Error {
        Error::Connection(message.into())
    }

    /// [`ErrorKind::Timeout`]: An operation with a deadline ran out of time.
    pub fn timeout(message: impl Into<String>) -> Error {
        Error::Timeout(message.into())
    }

    /// [`ErrorKind::WrongType`]: The name holds a Redis key that is not a lock.
    pub fn wrong_type(message: impl Into<String>) -> Error {
        Error::WrongType(message.into())
    }

    /// [`ErrorKind::Redis`]: Redis answered with an error polylock did not expect.
    pub fn redis(message: impl Into<String>) -> Error {
        Error::Redis(message.into())
    }

    /// [`ErrorKind::StaleToken`]: A fenced write was refused.
    pub fn stale_token(message: impl Into<String>) -> Error {
        Error::StaleToken(message.into())
    }

    /// [`ErrorKind::NotSynced`]: Not every replica acknowledged an acquisition within the wait.
    pub fn not_synced(message: impl Into<String>) -> Error {
        Error::NotSynced(message.into())
    }

    /// [`ErrorKind::Permission`]: The Redis user may not do what polylock needs (ACL).
    pub fn permission(message: impl Into<String>) -> Error {
        Error::Permission(message.into())
    }

    /// The message without the kind's prefix (`Display` prints `invalid argument: ` before an
    /// [`ErrorKind::InvalidArgument`]'s message).
    pub fn message(&self) -> &str {
        match self {
            Error::InvalidArgument(message) => message,
            Error::NotHeld(message) => message,
            Error::LockLost(message) => message,
            Error::Connection(message) => message,
            Error::Timeout(message) => message,
            Error::WrongType(message) => message,
            Error::Redis(message) => message,
            Error::StaleToken(message) => message,
            Error::NotSynced(message) => message,
            Error::Permission(message) => message,
        }
    }

    /// The error of a scoped hold (Rust `Lock::lock`, Python `with`, Node `using`, Kotlin and
    /// Swift `withLock`) whose wait of `wait` ran out: the same kind and message in every
    /// language.
    pub fn not_acquired(name: &str, wait: Duration) -> Error {
        Error::Timeout(format!(
            "lock '{name}' was not acquired within {} ms: another owner held it all that time",
            wait.as_secs_f64() * 1000.0
        ))
    }

    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::NotHeld(_) => ErrorKind::NotHeld,
            Error::LockLost(_) => ErrorKind::LockLost,
            Error::Connection(_) => ErrorKind::Connection,
            Error::Timeout(_) => ErrorKind::Timeout,
            Error::WrongType(_) => ErrorKind::WrongType,
            Error::Redis(_) => ErrorKind::Redis,
            Error::StaleToken(_) => ErrorKind::StaleToken,
            Error::NotSynced(_) => ErrorKind::NotSynced,
            Error::Permission(_) => ErrorKind::Permission,
        }
    }

    /// True for failures worth retrying with the same request (a dropped or timed-out
    /// connection), false for answers Redis gave.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, Error::Connection(_) | Error::Timeout(_))
    }

    /// Maps a `redis` error met while doing `what` (e.g. `acquire lock 'orders:42'`).
    pub(crate) fn from_redis(what: &str, err: redis::RedisError) -> Error {
        if err.is_timeout() {
            return Error::Timeout(format!("{what}: Redis did not answer in time ({err})"));
        }
        if let Some(refused) = crate::redis_errors::refusal(&err) {
            return Error::Permission(format!("{what}: {refused}"));
        }
        if err.code() == Some("WRONGTYPE") || err.to_string().contains("WRONGTYPE") {
            return Error::WrongType(format!(
                "{what}: the key holds a value of another type than this kind of lock \
                 keeps there; another program uses this name for something else"
            ));
        }
        // Replies that mean "not now": the server is loading, busy with a script, failing
        // over. Retried like a dropped connection.
        if matches!(
            err.code(),
            Some("LOADING" | "BUSY" | "TRYAGAIN" | "CLUSTERDOWN" | "MASTERDOWN" | "READONLY")
        ) {
            return Error::Connection(format!("{what}: Redis is not available for now ({err})"));
        }
        if let Some(why) = crate::redis_errors::tls_failure(&err) {
            return Error::Connection(format!("{what}: TLS: {why} ({err})"));
        }
        if err.is_io_error()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_unrecoverable_error()
        {
            return Error::Connection(format!("{what}: connection to Redis failed ({err})"));
        }
        Error::Redis(format!("{what}: Redis replied with an error ({err})"))
    }

    /// The same error with `note` appended to its message.
    pub(crate) fn with_note(self, note: &str) -> Error {
        let noted = |message: String| format!("{message}; {note}");
        match self {
            Error::InvalidArgument(m) => Error::InvalidArgument(noted(m)),
            Error::NotHeld(m) => Error::NotHeld(noted(m)),
            Error::LockLost(m) => Error::LockLost(noted(m)),
            Error::Connection(m) => Error::Connection(noted(m)),
            Error::Timeout(m) => Error::Timeout(noted(m)),
            Error::WrongType(m) => Error::WrongType(noted(m)),
            Error::Redis(m) => Error::Redis(noted(m)),
            Error::StaleToken(m) => Error::StaleToken(noted(m)),
            Error::NotSynced(m) => Error::NotSynced(noted(m)),
            Error::Permission(m) => Error::Permission(noted(m)),
        }
    }

    pub(crate) fn timed_out(what: &str, after: Duration) -> Error {
        Error::Timeout(format!("{what}: no answer from Redis within {after:?}"))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
