//! The one mapping of this binding: a core error as a JavaScript `Error` whose `code` names its
//! kind (`ERR_INVALID_ARGUMENT`, `ERR_NOT_HELD`, ...), the same kinds every language has.

use napi::{Env, JsError};

/// The `code` of the JS `Error` for each kind of core error.
fn error_code(kind: polylock::ErrorKind) -> &'static str {
    use polylock::ErrorKind::*;
    match kind {
        InvalidArgument => "ERR_INVALID_ARGUMENT",
        NotHeld => "ERR_NOT_HELD",
        LockLost => "ERR_LOCK_LOST",
        Connection => "ERR_CONNECTION",
        Timeout => "ERR_TIMEOUT",
        WrongType => "ERR_WRONG_TYPE",
        Redis => "ERR_REDIS",
        StaleToken => "ERR_STALE_TOKEN",
        NotSynced => "ERR_NOT_SYNCED",
        Permission => "ERR_PERMISSION",
        // A kind newer than this mapping: coded as an unexpected Redis error is.
        _ => "ERR_REDIS",
    }
}

/// A core error as a napi error whose JS form is an `Error` with `code` set (napi puts the
/// status string into `code`).
pub(crate) fn coded(err: &polylock::Error) -> napi::Error<&'static str> {
    napi::Error::new(error_code(err.kind()), err.to_string())
}

/// A core error as the JS `Error` to throw or reject with, built on the JS thread so that napi
/// throws this very object (with its `code`) rather than a generic one.
pub(crate) fn js_error(env: &Env, err: &polylock::Error) -> napi::Error {
    napi::Error::from(JsError::from(coded(err)).into_unknown(*env))
}

/// Turns a core result into what an exported function returns: its error thrown as a coded
/// JS `Error`.
pub(crate) trait OrThrow<T> {
    fn or_throw(self, env: &Env) -> napi::Result<T>;
}

impl<T> OrThrow<T> for polylock::Result<T> {
    fn or_throw(self, env: &Env) -> napi::Result<T> {
        self.map_err(|err| js_error(env, &err))
    }
}
