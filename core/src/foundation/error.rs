//! The one error type of polylock: a kind, a message, and the failure underneath where there is
//! one. Every binding maps the kinds in one place.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The failure underneath an [`Error`]: shared, so that an error (kept by a lost hold and
/// handed to every caller that asks) stays cheap to clone.
type Source = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong: a [`kind`](Error::kind) to branch on, a message that names the lock (where
/// there is one) and says what happened, and the underlying `redis::RedisError` (connection,
/// I/O, TLS) as [`source`](std::error::Error::source) where there is one.
///
/// `Display` prints the message (an [`ErrorKind::InvalidArgument`] with `invalid argument: `
/// before it), the same text in every language.
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<Source>,
}

/// Calls `$callback!` with the one list of error kinds, each as `$(#[doc])* Kind => constructor,`.
/// The core declares [`ErrorKind`] and the constructors from it, and the Kotlin/Swift binding
/// its exception cases, so a new kind is one entry here.
#[doc(hidden)]
#[macro_export]
macro_rules! with_error_kinds {
    ($callback:ident) => {
        $callback! {
            /// A bad argument (empty name, zero lease, bad URL or option), rejected before any I/O.
            InvalidArgument => invalid_argument,
            /// Released without holding: never acquired, released twice, or (a permit) held by
            /// nobody.
            NotHeld => not_held,
            /// The lease ran out, or the key was deleted or taken, while this holder held the lock.
            LockLost => lock_lost,
            /// Redis could not be reached, the connection broke, or the client was closed.
            Connection => connection,
            /// An operation with a deadline ran out of time: Redis did not answer within the
            /// response timeout, or a scoped hold's wait ran out (a plain acquire returns false
            /// instead).
            Timeout => timeout,
            /// The lock's name holds a Redis key that is not a lock.
            WrongType => wrong_type,
            /// Redis answered with an error polylock did not expect.
            Redis => redis,
            /// A fenced write was refused: its token is lower than one already applied to that
            /// key (a newer holder of the lock wrote since).
            StaleToken => stale_token,
            /// With replica sync on: not every connected replica acknowledged an acquisition
            /// within the wait (it was undone), so the lock would not survive a failover.
            NotSynced => not_synced,
            /// The Redis user may not run a command polylock needs, or use a key or channel of
            /// the lock (Redis answered `NOPERM`, or refused a lock script's call).
            Permission => permission,
        }
    };
}

macro_rules! declare_error_kinds {
    ($($(#[$doc:meta])* $kind:ident => $constructor:ident,)*) => {
        /// The kind of an [`Error`]: what to branch on, and what bindings map to their own
        /// exception types. More kinds may come, so a `match` needs a fallback arm.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorKind {
            $($(#[$doc])* $kind,)*
        }

        impl ErrorKind {
            /// The kind's snake_case name (`lock_lost`, `wrong_type`...), as metrics label it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorKind::$kind => stringify!($constructor),)*
                }
            }
        }

        impl Error {
            $(
                #[doc = concat!("An error of kind [`ErrorKind::", stringify!($kind), "`] with `message`.")]
                pub fn $constructor(message: impl Into<String>) -> Error {
                    Error::new(ErrorKind::$kind, message)
                }
            )*
        }
    };
}

with_error_kinds!(declare_error_kinds);

impl Error {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            source: None,
        }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message without the kind's prefix (`Display` prints `invalid argument: ` before an
    /// [`ErrorKind::InvalidArgument`]'s message).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error with the failure underneath it as its `source()`.
    pub(crate) fn with_source(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        self.source = Some(Arc::new(source));
        self
    }

    /// The same message and source as another kind (e.g. a timeout while connecting is a
    /// connection failure).
    pub(crate) fn into_kind(mut self, kind: ErrorKind) -> Error {
        self.kind = kind;
        self
    }

    /// The error of a scoped hold (Rust `Lock::lock`, Python `with`, Node `using`, Kotlin and
    /// Swift `withLock`) whose wait of `wait` ran out: the same kind and message in every
    /// language.
    pub fn not_acquired(name: &str, wait: Duration) -> Error {
        Error::not_acquired_held_by(name, wait, None)
    }

    /// [`Error::not_acquired`] naming who held it (`held by 'worker-7', pid 1234 on host-a, for
    /// 1.2 s`, as the core describes holders from their client records), when known.
    pub fn not_acquired_held_by(name: &str, wait: Duration, held_by: Option<&str>) -> Error {
        let held_by = held_by
            .map(|held_by| format!(" ({held_by})"))
            .unwrap_or_default();
        Error::timeout(format!(
            "lock '{name}' was not acquired within {} ms: another owner held it all that \
             time{held_by}",
            wait.as_secs_f64() * 1000.0
        ))
    }

    /// True for failures worth retrying with the same request (a dropped or timed-out
    /// connection), false for answers Redis gave.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self.kind, ErrorKind::Connection | ErrorKind::Timeout)
    }

    /// Maps a `redis` error met while doing `what` (e.g. `acquire lock 'orders:42'`), keeping
    /// it as the source.
    pub(crate) fn from_redis(what: &str, err: redis::RedisError) -> Error {
        Error::describe_redis(what, &err).with_source(err)
    }

    /// The kind [`Error::from_redis`] gives `err`.
    pub(crate) fn kind_of_redis(err: &redis::RedisError) -> ErrorKind {
        Error::describe_redis("", err).kind
    }

    fn describe_redis(what: &str, err: &redis::RedisError) -> Error {
        if err.is_timeout() {
            return Error::timeout(format!("{what}: Redis did not answer in time ({err})"));
        }
        if let Some(refused) = crate::foundation::redis_errors::refusal(err) {
            return Error::permission(format!("{what}: {refused}"));
        }
        if err.code() == Some("WRONGTYPE") || err.to_string().contains("WRONGTYPE") {
            return Error::wrong_type(format!(
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
            return Error::connection(format!("{what}: Redis is not available for now ({err})"));
        }
        if let Some(why) = crate::foundation::redis_errors::tls_failure(err) {
            return Error::connection(format!("{what}: TLS: {why} ({err})"));
        }
        if err.is_io_error()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_unrecoverable_error()
        {
            return Error::connection(format!("{what}: connection to Redis failed ({err})"));
        }
        Error::redis(format!("{what}: Redis replied with an error ({err})"))
    }

    /// The same error with `note` appended to its message.
    pub(crate) fn with_note(mut self, note: &str) -> Error {
        self.message = format!("{}; {note}", self.message);
        self
    }

    pub(crate) fn timed_out(what: &str, after: Duration) -> Error {
        Error::timeout(format!("{what}: no answer from Redis within {after:?}"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ErrorKind::InvalidArgument => write!(f, "invalid argument: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn std::error::Error + 'static))
    }
}

/// Equal when kind and message are: the source is the detail behind the message.
impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl Eq for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use std::error::Error as _;
    use std::time::Duration;

    use super::*;
    use crate::{AcquireOptions, Client};

    /// Each constructor gives its kind, `message()` gives back what it was given, and `Display`
    /// prints what the enum printed (the parity suite compares these texts across languages).
    #[test]
    fn each_constructor_keeps_its_kind_message_and_display() {
        type Constructor = fn(String) -> Error;
        let table: [(Constructor, ErrorKind, &str); 10] = [
            (
                Error::invalid_argument,
                ErrorKind::InvalidArgument,
                "invalid argument: m",
            ),
            (Error::not_held, ErrorKind::NotHeld, "m"),
            (Error::lock_lost, ErrorKind::LockLost, "m"),
            (Error::connection, ErrorKind::Connection, "m"),
            (Error::timeout, ErrorKind::Timeout, "m"),
            (Error::wrong_type, ErrorKind::WrongType, "m"),
            (Error::redis, ErrorKind::Redis, "m"),
            (Error::stale_token, ErrorKind::StaleToken, "m"),
            (Error::not_synced, ErrorKind::NotSynced, "m"),
            (Error::permission, ErrorKind::Permission, "m"),
        ];
        for (constructor, kind, shown) in table {
            let err = constructor("m".to_owned());
            assert_eq!(err.kind(), kind);
            assert_eq!(err.message(), "m");
            assert_eq!(err.to_string(), shown, "{kind:?}");
            assert!(err.source().is_none(), "{kind:?}");
            let noted = err.with_note("n");
            assert_eq!(noted.kind(), kind);
            assert_eq!(noted.to_string(), format!("{shown}; n"), "{kind:?}");
        }
        let not_acquired = Error::not_acquired("orders:42", Duration::from_millis(250));
        assert_eq!(not_acquired.kind(), ErrorKind::Timeout);
        assert_eq!(
            not_acquired.to_string(),
            "lock 'orders:42' was not acquired within 250 ms: another owner held it all that time"
        );
    }

    /// A connection refused (nothing listens on the port) is a `Connection` error whose
    /// source is the `redis::RedisError` saying so.
    #[tokio::test]
    async fn a_refused_connection_has_the_redis_error_as_source() {
        let url = format!("redis://127.0.0.1:{}", polylock_testkit::free_port());
        let err = Client::builder(&url)
            .connect_timeout(Duration::from_secs(10))
            .connect()
            .await
            .expect_err("nothing listens there");
        assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
        let source = err.source().expect("the redis error underneath");
        let redis_error = source
            .downcast_ref::<redis::RedisError>()
            .expect("a redis::RedisError");
        assert!(redis_error.is_connection_refusal(), "{redis_error:?}");
        // Kept through a change of kind or an added note.
        let noted = err.with_note("n").into_kind(ErrorKind::Redis);
        assert!(noted.source().is_some());
    }

    /// An error reply mapped by `from_redis` (here WRONGTYPE) keeps the reply as its source.
    #[tokio::test]
    async fn an_error_reply_has_the_redis_error_as_source() {
        let server = polylock_testkit::RedisServer::start();
        server.command(&["SET", "not-a-lock", "text"]);
        let client = Client::connect(&server.url()).await.unwrap();
        let lock = client.lock("not-a-lock").unwrap();
        let err = lock
            .acquire(AcquireOptions::new().no_wait())
            .await
            .expect_err("the key is a string");
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        let redis_error = err
            .source()
            .and_then(|source| source.downcast_ref::<redis::RedisError>())
            .expect("the redis error underneath");
        assert_eq!(redis_error.code(), Some("WRONGTYPE"));
    }
}
