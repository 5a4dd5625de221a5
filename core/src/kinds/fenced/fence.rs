//! Fenced writes: a value in Redis guarded by fenced-lock tokens. Each guarded key has a fence
//! `polylock_fence:{key}` (a STRING, never expiring) holding the highest token applied to it;
//! a write applies only with a token at least that high, so a holder whose lease ran out (and
//! whose lock another holder took since, with a higher token) can no longer write.

use std::sync::LazyLock;

use redis::{Script, Value};

use crate::connection::Connection;
use crate::foundation::error::{Error, Result};
use crate::foundation::keys;

static FENCE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("fence.lua")));

/// What a fenced write does to its key.
pub(crate) enum Write {
    Set(Vec<u8>),
    Delete,
}

/// Applies `write` to `key` if `token` is at least the highest token applied to it; replies
/// the number of keys written or deleted, or [`ErrorKind::StaleToken`](crate::ErrorKind::StaleToken).
pub(crate) async fn apply(
    mut connection: Connection,
    key: &str,
    token: i64,
    write: Write,
) -> Result<i64> {
    let mut call = FENCE.prepare_invoke();
    call.key(key).key(keys::fence(key)).arg(token);
    let what = match write {
        Write::Set(value) => {
            call.arg("set").arg(value);
            format!("fenced set of key '{key}'")
        }
        Write::Delete => {
            call.arg("delete");
            format!("fenced delete of key '{key}'")
        }
    };
    let reply: Value =
        call.invoke_async(&mut connection)
            .await
            .map_err(|err| match err.code() {
                // The script names what holds another type; the generic message speaks of locks.
                Some("WRONGTYPE") => Error::wrong_type(format!(
                    "{what}: {}; fenced writes only guard string values",
                    err.detail().unwrap_or("the key holds another type")
                )),
                _ => Error::from_redis(&what, err),
            })?;
    match reply {
        Value::Array(ref items) => match items.as_slice() {
            [Value::Int(1), Value::Int(written)] => Ok(*written),
            [Value::Int(0), Value::BulkString(highest)] => Err(Error::stale_token(format!(
                "{what} refused: token {token} is lower than token {} already applied to it \
                 (the lock was taken by a newer holder since this token was given)",
                String::from_utf8_lossy(highest)
            ))),
            _ => Err(Error::redis(format!("{what}: unexpected reply {reply:?}"))),
        },
        other => Err(Error::redis(format!("{what}: unexpected reply {other:?}"))),
    }
}
