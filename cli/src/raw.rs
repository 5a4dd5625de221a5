//! Read-only inspection of the Redisson data layout (`shared/PROTOCOL.md`) with plain Redis
//! commands: the core has no inspection API, and these are only TYPE/HGETALL/PTTL/LRANGE/ZRANGE.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;
use serde::Serialize;

use crate::error::{CliError, CliResult};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Hides a password in a URL before it goes into a message.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// Checks the URL before anything else, so a typo is a usage error and not "unreachable".
pub fn parse_url(url: &str) -> CliResult<redis::Client> {
    if !url.contains("://") {
        return Err(CliError::Usage(format!(
            "bad Redis URL '{}': expected redis://[user:password@]host:port[/db] (or rediss:// for TLS)",
            redact(url)
        )));
    }
    redis::Client::open(url).map_err(|err| {
        CliError::Usage(format!(
            "bad Redis URL '{}': {err}; expected redis://[user:password@]host:port[/db]",
            redact(url)
        ))
    })
}

/// A plain connection, failing within a bounded time when Redis cannot be reached.
pub async fn connect(url: &str) -> CliResult<MultiplexedConnection> {
    let client = parse_url(url)?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT));
    let mut connection = tokio::time::timeout(
        CONNECT_TIMEOUT + Duration::from_secs(1),
        client.get_multiplexed_async_connection_with_config(&config),
    )
    .await
    .map_err(|_| unreachable_error(url, "no answer in time"))?
    .map_err(|err| unreachable_error(url, &err.to_string()))?;
    // A server that accepts connections but refuses commands (auth) fails here, clearly.
    let _: String = redis::cmd("PING")
        .query_async(&mut connection)
        .await
        .map_err(|err| unreachable_error(url, &err.to_string()))?;
    Ok(connection)
}

fn unreachable_error(url: &str, why: &str) -> CliError {
    CliError::Connection(format!(
        "cannot reach Redis at {}: {why} (is redis-server running? set --redis URL or POLYLOCK_REDIS_URL)",
        redact(url)
    ))
}

pub fn redis_error(what: &str, err: redis::RedisError) -> CliError {
    CliError::Connection(format!("{what}: Redis failed: {err}"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A reentrant lock (or a fair lock nobody waits for: Redis stores them alike).
    Plain,
    /// A lock whose fair queue or timeout set exists.
    Fair,
    /// Nothing at this name.
    None,
    /// A key that is not a lock (another type, or a hash with other fields).
    NotALock,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Fair => "fair",
            Kind::None => "none",
            Kind::NotALock => "not-a-lock",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Holder {
    /// `<client-uuid>:<holder-id>`.
    pub owner: String,
    /// Reentrancy count.
    pub count: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Waiter {
    pub owner: String,
    /// Absolute deadline (epoch ms, by the enqueuing client's clock) after which it is skipped.
    pub deadline_ms: Option<u64>,
    /// The deadline minus now; negative when already passed.
    pub deadline_in_ms: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LockState {
    pub name: String,
    pub kind: Kind,
    /// What TYPE says about the key at the name (`none`, `hash`, `string`, ...).
    pub redis_type: String,
    pub holders: Vec<Holder>,
    /// PTTL of the lock key; `None` when not held, or held without an expiry (see `expires`).
    pub remaining_lease_ms: Option<u64>,
    /// False for a held key without an expiry (never written by polylock or Redisson).
    pub expires: bool,
    /// Fair lock waiters in queue order.
    pub queue: Vec<Waiter>,
}

impl LockState {
    pub fn is_held(&self) -> bool {
        !self.holders.is_empty()
    }
}

/// `<uuid>:<digits>`, the owner strings polylock and Redisson write.
fn is_owner(field: &str) -> bool {
    let Some((client, holder)) = field.rsplit_once(':') else {
        return false;
    };
    let uuid_shape = client.len() == 36
        && client.char_indices().all(|(at, c)| match at {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
    uuid_shape && !holder.is_empty() && holder.bytes().all(|b| b.is_ascii_digit())
}

/// Holders of a lock hash, or `None` when the hash is not a lock.
pub fn holders_of(fields: &[(String, String)]) -> Option<Vec<Holder>> {
    let mut holders = Vec::with_capacity(fields.len());
    for (field, value) in fields {
        let count = value.parse::<u64>().ok().filter(|count| *count > 0)?;
        if !is_owner(field) {
            return None;
        }
        holders.push(Holder {
            owner: field.clone(),
            count,
        });
    }
    (!holders.is_empty()).then_some(holders)
}

pub fn now_epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

/// Reads everything known about the lock `name`.
pub async fn read_lock(connection: &mut MultiplexedConnection, name: &str) -> CliResult<LockState> {
    let what = format!("inspect '{name}'");
    let queue_key = polylock::keys::fair_queue(name);
    let timeouts_key = polylock::keys::fair_timeouts(name);
    let (redis_type, pttl, queue_type, timeouts_type): (String, i64, String, String) =
        redis::pipe()
            .cmd("TYPE")
            .arg(name)
            .cmd("PTTL")
            .arg(name)
            .cmd("TYPE")
            .arg(&queue_key)
            .cmd("TYPE")
            .arg(&timeouts_key)
            .query_async(connection)
            .await
            .map_err(|err| redis_error(&what, err))?;
    let mut state = LockState {
        name: name.to_owned(),
        kind: Kind::None,
        redis_type: redis_type.clone(),
        holders: Vec::new(),
        remaining_lease_ms: None,
        expires: pttl >= 0,
        queue: Vec::new(),
    };
    match redis_type.as_str() {
        "none" => {}
        "hash" => {
            let fields: Vec<(String, String)> = redis::cmd("HGETALL")
                .arg(name)
                .query_async(connection)
                .await
                .map_err(|err| redis_error(&what, err))?;
            match holders_of(&fields) {
                Some(holders) => {
                    state.kind = Kind::Plain;
                    state.holders = holders;
                    state.remaining_lease_ms = u64::try_from(pttl).ok();
                }
                None => {
                    state.kind = Kind::NotALock;
                    return Ok(state);
                }
            }
        }
        _ => {
            state.kind = Kind::NotALock;
            return Ok(state);
        }
    }
    // The fair queue: a list of owners, their deadlines in a sorted set.
    let owners: Vec<String> = if queue_type == "list" {
        redis::cmd("LRANGE")
            .arg(&queue_key)
            .arg(0)
            .arg(-1)
            .query_async(connection)
            .await
            .map_err(|err| redis_error(&what, err))?
    } else {
        Vec::new()
    };
    let deadlines: Vec<(String, f64)> = if timeouts_type == "zset" {
        redis::cmd("ZRANGE")
            .arg(&timeouts_key)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(connection)
            .await
            .map_err(|err| redis_error(&what, err))?
    } else {
        Vec::new()
    };
    // polylock waiters also record their last look; they are skipped when either passes.
    let seen: Vec<(String, f64)> = if timeouts_type == "zset" {
        redis::cmd("ZRANGE")
            .arg(polylock::keys::fair_seen(name))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(connection)
            .await
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    if queue_type == "list" || timeouts_type == "zset" {
        state.kind = Kind::Fair;
    }
    let now = now_epoch_ms() as i64;
    let score_of = |scores: &[(String, f64)], owner: &str| {
        scores
            .iter()
            .find(|(queued, _)| queued == owner)
            .map(|(_, score)| *score as u64)
    };
    state.queue = owners
        .into_iter()
        .map(|owner| {
            let deadline = match (score_of(&deadlines, &owner), score_of(&seen, &owner)) {
                (Some(shared), Some(seen)) => Some(shared.min(seen)),
                (shared, seen) => shared.or(seen),
            };
            Waiter {
                deadline_in_ms: deadline.map(|deadline| deadline as i64 - now),
                deadline_ms: deadline,
                owner,
            }
        })
        .collect();
    Ok(state)
}

/// Seconds with one decimal, for tables: `29.4 s`.
pub fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_uuid_colon_number() {
        assert!(is_owner("6e3814a1-e847-452b-a982-45baf93a1df2:1"));
        assert!(!is_owner("6e3814a1-e847-452b-a982-45baf93a1df2:x"));
        assert!(!is_owner("mode"));
        assert!(!is_owner("6e3814a1e847452ba98245baf93a1df2abcd:1"));
    }

    #[test]
    fn a_hash_with_other_fields_is_not_a_lock() {
        let lock = vec![(
            "6e3814a1-e847-452b-a982-45baf93a1df2:7".to_owned(),
            "2".to_owned(),
        )];
        assert_eq!(holders_of(&lock).map(|h| h[0].count), Some(2));
        let user = vec![("name".to_owned(), "ada".to_owned())];
        assert!(holders_of(&user).is_none());
    }
}
