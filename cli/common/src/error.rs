//! The CLI's errors and their exit codes (listed in `polylock --help`).

use std::fmt;

#[derive(Debug)]
pub enum CliError {
    /// Bad arguments or URL: exit 2, like clap's own usage errors.
    Usage(String),
    /// Redis unreachable, failing, or refusing this user a command (ACL): exit 3.
    Connection(String),
    /// The name holds a Redis key that is not a lock: exit 4.
    NotALock(String),
    /// The command ran but did not succeed (e.g. the demo sold the wrong number): exit 1.
    Failed(String),
    /// Ctrl-C or SIGTERM: exit 130.
    Interrupted,
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Failed(_) => 1,
            CliError::Usage(_) => 2,
            CliError::Connection(_) => 3,
            CliError::NotALock(_) => 4,
            CliError::Interrupted => 130,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(message)
            | CliError::Connection(message)
            | CliError::NotALock(message)
            | CliError::Failed(message) => f.write_str(message),
            CliError::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for CliError {}

/// The one mapping of core errors to CLI errors.
impl From<polylock::Error> for CliError {
    fn from(err: polylock::Error) -> CliError {
        use polylock::ErrorKind;
        let message = err.message().to_owned();
        match err.kind() {
            ErrorKind::InvalidArgument => CliError::Usage(message),
            ErrorKind::WrongType => CliError::NotALock(message),
            ErrorKind::Connection
            | ErrorKind::Timeout
            | ErrorKind::Redis
            | ErrorKind::Permission => CliError::Connection(message),
            ErrorKind::NotHeld
            | ErrorKind::LockLost
            | ErrorKind::StaleToken
            | ErrorKind::NotSynced => CliError::Failed(message),
            // A kind newer than this mapping: exits as an unexpected Redis error does.
            _ => CliError::Connection(message),
        }
    }
}

pub type CliResult<T> = Result<T, CliError>;
