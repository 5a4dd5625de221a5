//! Connections for the CLI and the demo: a plain Redis connection (the demo's stock and its
//! workers) and a core client (inspection goes through `Client::inspect`), with clear errors for
//! bad URLs and unreachable servers.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;

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

/// Checks a one-server URL before anything else, so a typo is a usage error and not
/// "unreachable".
pub fn parse_url(url: &str) -> CliResult<redis::Client> {
    if !url.contains("://") {
        return Err(bad_url(url, "no scheme"));
    }
    redis::Client::open(url).map_err(|err| bad_url(url, &err.to_string()))
}

fn bad_url(url: &str, why: &str) -> CliError {
    CliError::Usage(format!(
        "bad Redis URL '{}': {why}; expected redis://[user:password@]host:port[/db] (rediss:// for TLS), redis+cluster://host:port[,host:port...] or redis+sentinel://host:port[,host:port...]/<master-name>[/db]",
        redact(url)
    ))
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

/// The CA bundle `--tls-ca` gave, for every core client of this process.
static TLS_CA: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Makes every core client of this process ([`client`], and those built with [`tls_ca`]) check
/// a TLS server's certificate with the CA bundle at `path` (a PEM file). The first call wins.
pub fn trust_tls_ca(path: &str) {
    let _ = TLS_CA.set(path.to_owned());
}

/// The CA bundle [`trust_tls_ca`] gave, for a client of `url`: only for a TLS URL (`rediss`),
/// as TLS options on another are an error.
pub fn tls_ca(url: &str) -> Option<String> {
    TLS_CA.get().filter(|_| url.starts_with("rediss")).cloned()
}

/// A core client (for `Client::inspect`, `scan_names` and force-unlock) on any deployment the
/// core connects to (one server, cluster, Sentinel), failing within a bounded time, with the
/// same messages as [`connect`], when Redis cannot be reached.
/// Under `key_prefix` (`ClientOptions::key_prefix`), names are those the locks' clients use.
pub async fn client(url: &str, key_prefix: Option<&str>) -> CliResult<polylock::Client> {
    // A bad URL or prefix is the core's `InvalidArgument`: a usage error.
    let mut builder = polylock::Client::builder(url)
        .connect_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT);
    if let Some(prefix) = key_prefix {
        builder = builder.key_prefix(prefix);
    }
    if let Some(ca) = tls_ca(url) {
        builder = builder.tls_ca(ca);
    }
    builder.connect().await.map_err(|err| match err.kind() {
        polylock::ErrorKind::Connection | polylock::ErrorKind::Timeout => {
            unreachable_error(url, err.message())
        }
        polylock::ErrorKind::InvalidArgument => CliError::Usage(err.message().to_owned()),
        _ => err.into(),
    })
}
