//! Every option of polylock, its default, its limits and the one validation of it.
//!
//! Bindings only convert units: they hand numbers of milliseconds (as `f64`, whatever the
//! language's own unit) to [`wait_from_millis`], [`lease_from_millis`] and [`option_from_millis`],
//! so the same input gives the same error kind and message in every language.

use std::time::Duration;

use crate::foundation::error::{Error, Result};

pub(crate) const CERT_WITHOUT_KEY: &str =
    "tls_cert is set without tls_key: a client certificate needs its private key";
pub(crate) const KEY_WITHOUT_CERT: &str =
    "tls_key is set without tls_cert: a private key needs its client certificate";

/// Longest lock name accepted: a longer one is almost surely a bug (a payload used as a name).
pub const MAX_NAME_BYTES: usize = 4096;
/// Longest lease, wait or option accepted (10 years); for "forever" pass no wait or no lease.
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// Shortest lease accepted.
pub const MIN_LEASE: Duration = Duration::from_millis(1);
/// Shortest watchdog lease: it is renewed every third of it.
pub const MIN_WATCHDOG_TIMEOUT: Duration = Duration::from_millis(30);
/// Shortest fair-queue timeout: live waiters look every half of it.
pub const MIN_FAIR_QUEUE_TIMEOUT: Duration = Duration::from_millis(10);

/// Options of a [`crate::Client`]. Start from `ClientOptions::default()` and set fields.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// The lease of locks acquired without one, renewed every third of it. Default 30 s.
    pub watchdog_timeout: Duration,
    /// How long connecting may take before [`ErrorKind::Connection`](crate::ErrorKind::Connection). Default 5 s.
    pub connect_timeout: Duration,
    /// How long one command may wait for its answer before [`ErrorKind::Timeout`](crate::ErrorKind::Timeout). Default 5 s.
    pub response_timeout: Duration,
    /// How long a fair-lock waiter that stopped looking (its process died) keeps its place.
    /// Live waiters look every half of it. Default 10 s.
    pub fair_queue_timeout: Duration,
    /// Follow every acquire, renewal and release with `WAIT` for the primary's connected
    /// replicas (Redisson's `checkLockSyncedSlaves`), so a lock survives a failover to a
    /// replica. An acquisition not every connected replica acknowledged is undone and tried again within the
    /// wait, then fails with [`ErrorKind::NotSynced`](crate::ErrorKind::NotSynced). A server that refuses `WAIT` turns it off
    /// for the client, with a warning. Default off.
    pub sync_replicas: bool,
    /// With `sync_replicas`: the fewest replicas an acquisition must reach, whatever the
    /// primary reports (as the server's `min-replicas-to-write`). The client waits for every
    /// replica it has seen online, and never for fewer than this: a primary cut off from its
    /// replicas (the old primary of a failover) reports none, and `WAIT 0` would confirm locks
    /// that the promoted replica hands out again. Below it an acquisition fails with
    /// [`ErrorKind::NotSynced`](crate::ErrorKind::NotSynced). 0 trusts what the primary
    /// reports (no replica, nothing to wait for). From 0 to [`MAX_MIN_REPLICAS`]; default 1.
    pub min_replicas: usize,
    /// How long `WAIT` waits for the replicas (with `sync_replicas`). Default 1 s.
    pub replica_sync_timeout: Duration,
    /// With a `rediss://` URL: the CA certificates to trust instead of the public web roots,
    /// as the path of a PEM file or as PEM text (`-----BEGIN CERTIFICATE-----...`). Default
    /// none (the webpki roots).
    pub tls_ca: Option<String>,
    /// With a `rediss://` URL: the client certificate (chain) for mutual TLS, a PEM file path
    /// or PEM text; needs [`ClientOptions::tls_key`]. Default none.
    pub tls_cert: Option<String>,
    /// The private key of [`ClientOptions::tls_cert`], a PEM file path or PEM text. Default
    /// none.
    pub tls_key: Option<String>,
    /// For development only: do not verify the server's certificate (nor its name). Anyone on
    /// the network path can then impersonate the server; a warning is logged at connect.
    /// Default off.
    pub tls_insecure: bool,
    /// The client's name, recorded on the server beside its locks so that tools and timed-out
    /// acquires can say who holds a lock. Default `None`: `host:pid`.
    pub name: Option<String>,
    /// Count what the locks do (`Client::metrics()`). Default on; off, every record returns at
    /// once.
    pub metrics: bool,
    /// How many lock names (per kind) metrics keep apart; the others are counted together as
    /// `_other`. Default 1000.
    pub metrics_max_lock_names: usize,
    /// A namespace for every key and channel of this client, as Redisson's `NameMapper`: the
    /// lock `orders:42` under the prefix `app:` is the key `app:orders:42`, and every key and
    /// channel derived from a name derives from `app:orders:42` (`redisson_lock__channel:{app:orders:42}`,
    /// ...), as does the client record (`app:polylock:client:<id>`). A Redisson client shares
    /// the locks when its `NameMapper` adds the same prefix. Errors, metrics and `LockInfo` show
    /// the name without it. 1 to [`crate::key_prefix::MAX_KEY_PREFIX_BYTES`] bytes, no whitespace,
    /// control characters, `{ }` (cluster hash tags) or glob characters `* ? [ ] \`. Default
    /// none.
    pub key_prefix: Option<String>,
    /// How waiters learn that a lock may be free: [`WaitMode::PubSub`] (the default) or
    /// [`WaitMode::Poll`], which never subscribes (nor opens a pub/sub connection). A lock
    /// handle may override it (`Lock::with_wait_mode`).
    pub wait_mode: WaitMode,
}

/// How a waiter learns that it may take the lock now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WaitMode {
    /// Subscribe to the lock's channel and sleep until a release tells (Redisson's way).
    #[default]
    PubSub,
    /// Never subscribe: look again after a bounded exponential backoff with full jitter, each
    /// sleep a random time up to `min * 2^n`, capped at `max` (Redisson's spin lock). For
    /// servers or proxies without pub/sub, or very many locks; a waiter wakes up to a sleep
    /// after the release, and each look is one script call.
    Poll { min: Duration, max: Duration },
}

/// [`WaitMode::Poll`]'s default shortest backoff step, as Redisson's spin lock.
pub const DEFAULT_POLL_MIN: Duration = Duration::from_millis(1);
/// [`WaitMode::Poll`]'s default longest sleep, as Redisson's spin lock.
pub const DEFAULT_POLL_MAX: Duration = Duration::from_millis(128);

impl WaitMode {
    /// Polling with the defaults: 1 ms doubling up to 128 ms.
    pub const fn poll() -> WaitMode {
        WaitMode::Poll {
            min: DEFAULT_POLL_MIN,
            max: DEFAULT_POLL_MAX,
        }
    }

    /// Whether this mode never subscribes.
    pub fn is_poll(&self) -> bool {
        matches!(self, WaitMode::Poll { .. })
    }

    /// `poll_min` from 1 ms, `poll_max` from `poll_min`, both up to 10 years.
    pub fn validate(&self) -> Result<()> {
        if let WaitMode::Poll { min, max } = *self {
            within("poll_min", min, Duration::from_millis(1))?;
            if max < min {
                return Err(invalid(format!(
                    "poll_max must be at least poll_min ({} ms), got {} ms",
                    ms(min),
                    ms(max)
                )));
            }
            within("poll_max", max, min)?;
        }
        Ok(())
    }
}

/// Most replicas `min_replicas` may ask for.
pub const MAX_MIN_REPLICAS: usize = 100;

/// Longest client name accepted.
pub const MAX_CLIENT_NAME_BYTES: usize = 256;
/// Most lock names metrics keep apart.
pub const MAX_METRICS_LOCK_NAMES: usize = 100_000;

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A key given as PEM text is a secret: never printed.
        let key = self.tls_key.as_deref().map(|key| {
            if key.trim_start().starts_with("-----BEGIN") {
                "<PEM text>"
            } else {
                key
            }
        });
        f.debug_struct("ClientOptions")
            .field("watchdog_timeout", &self.watchdog_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("fair_queue_timeout", &self.fair_queue_timeout)
            .field("sync_replicas", &self.sync_replicas)
            .field("min_replicas", &self.min_replicas)
            .field("replica_sync_timeout", &self.replica_sync_timeout)
            .field("tls_ca", &self.tls_ca.as_ref().map(|_| "<set>"))
            .field("tls_cert", &self.tls_cert.as_ref().map(|_| "<set>"))
            .field("tls_key", &key.map(|_| "<set>"))
            .field("tls_insecure", &self.tls_insecure)
            .field("name", &self.name)
            .field("metrics", &self.metrics)
            .field("metrics_max_lock_names", &self.metrics_max_lock_names)
            .field("key_prefix", &self.key_prefix)
            .field("wait_mode", &self.wait_mode)
            .finish()
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            watchdog_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(5),
            fair_queue_timeout: Duration::from_secs(10),
            sync_replicas: false,
            min_replicas: 1,
            replica_sync_timeout: Duration::from_secs(1),
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            tls_insecure: false,
            name: None,
            metrics: true,
            metrics_max_lock_names: 1000,
            key_prefix: None,
            wait_mode: WaitMode::PubSub,
        }
    }
}

impl ClientOptions {
    /// Checks every option against its limits.
    pub fn validate(&self) -> Result<()> {
        if let Some(prefix) = &self.key_prefix {
            crate::foundation::key_prefix::validate(prefix)?;
        }
        if let Some(name) = &self.name {
            if name.trim().is_empty() || name.len() > MAX_CLIENT_NAME_BYTES {
                return Err(invalid(format!(
                    "name must be 1 to {MAX_CLIENT_NAME_BYTES} bytes and not blank, got {} bytes",
                    name.len()
                )));
            }
        }
        if self.min_replicas > MAX_MIN_REPLICAS {
            return Err(invalid(format!(
                "min_replicas must be a whole number from 0 to {MAX_MIN_REPLICAS}, got {}",
                self.min_replicas
            )));
        }
        if !(1..=MAX_METRICS_LOCK_NAMES).contains(&self.metrics_max_lock_names) {
            return Err(invalid(format!(
                "metrics_max_lock_names must be from 1 to {MAX_METRICS_LOCK_NAMES}, got {}",
                self.metrics_max_lock_names
            )));
        }
        within(
            "watchdog_timeout",
            self.watchdog_timeout,
            MIN_WATCHDOG_TIMEOUT,
        )?;
        within(
            "connect_timeout",
            self.connect_timeout,
            Duration::from_millis(1),
        )?;
        within(
            "response_timeout",
            self.response_timeout,
            Duration::from_millis(1),
        )?;
        within(
            "fair_queue_timeout",
            self.fair_queue_timeout,
            MIN_FAIR_QUEUE_TIMEOUT,
        )?;
        within(
            "replica_sync_timeout",
            self.replica_sync_timeout,
            Duration::from_millis(1),
        )?;
        self.wait_mode.validate()?;
        for (what, value) in [
            ("tls_ca", &self.tls_ca),
            ("tls_cert", &self.tls_cert),
            ("tls_key", &self.tls_key),
        ] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(invalid(format!(
                    "{what} must be a PEM file path or PEM text, got an empty string"
                )));
            }
        }
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => Err(invalid(CERT_WITHOUT_KEY.into())),
            (None, Some(_)) => Err(invalid(KEY_WITHOUT_CERT.into())),
            _ => Ok(()),
        }
    }
}

/// Milliseconds as they appear in messages: `1500`, `0.5`, `-3`.
fn ms(duration: Duration) -> String {
    format!("{}", duration.as_secs_f64() * 1000.0)
}

pub(crate) fn invalid(message: String) -> Error {
    Error::invalid_argument(message)
}

/// The one message of each limit, whichever way (a duration, or milliseconds from a binding)
/// the value came.
fn out_of_range(what: &str, min: Duration, millis: f64) -> Error {
    invalid(format!(
        "{what} must be from {} ms to 10 years, got {millis} ms",
        ms(min)
    ))
}

fn wait_too_long(millis: f64) -> Error {
    invalid(format!(
        "wait of {millis} ms is longer than the 10 years accepted; leave it out to wait without bound"
    ))
}

fn within(what: &str, value: Duration, min: Duration) -> Result<()> {
    if value < min || value > MAX_DURATION {
        return Err(out_of_range(what, min, value.as_secs_f64() * 1000.0));
    }
    Ok(())
}

fn max_millis() -> f64 {
    MAX_DURATION.as_secs_f64() * 1000.0
}

/// A non-negative number of milliseconds as a duration; `too_long` words a value past the
/// 10 years (which a duration may not even hold).
fn from_millis(what: &str, millis: f64, too_long: impl Fn(f64) -> Error) -> Result<Duration> {
    if millis.is_nan() || millis < 0.0 {
        return Err(invalid(format!(
            "{what} must be a number of milliseconds >= 0, got {millis}"
        )));
    }
    if millis > max_millis() {
        return Err(too_long(millis));
    }
    Ok(Duration::from_secs_f64(millis / 1000.0))
}

/// The shortest value of each client option.
fn option_minimum(what: &str) -> Duration {
    match what {
        "watchdog_timeout" => MIN_WATCHDOG_TIMEOUT,
        "fair_queue_timeout" => MIN_FAIR_QUEUE_TIMEOUT,
        _ => Duration::from_millis(1),
    }
}

/// A client option given in milliseconds (bindings); checked again by [`ClientOptions::validate`].
pub fn option_from_millis(what: &str, millis: f64) -> Result<Duration> {
    from_millis(what, millis, |millis| {
        out_of_range(what, option_minimum(what), millis)
    })
}

/// The wait of an acquire given in milliseconds: `None` or infinity wait without bound, zero
/// makes one attempt.
pub fn wait_from_millis(millis: Option<f64>) -> Result<Option<Duration>> {
    match millis {
        None => Ok(None),
        Some(millis) if millis == f64::INFINITY => Ok(None),
        Some(millis) => from_millis("wait", millis, wait_too_long).map(Some),
    }
}

/// The lease of an acquire given in milliseconds: `None` takes the watchdog lease.
pub fn lease_from_millis(millis: Option<f64>) -> Result<Option<Duration>> {
    millis
        .map(|millis| {
            if millis.is_infinite() {
                return Err(invalid(format!(
                    "lease must be a finite number of milliseconds, got {millis}; \
                     leave it out for a lease renewed by the watchdog"
                )));
            }
            from_millis("lease", millis, |millis| {
                out_of_range("lease", MIN_LEASE, millis)
            })
        })
        .transpose()
}

/// [`ClientOptions`] as the bindings receive them: times in milliseconds, each checked by
/// [`option_from_millis`] so every language gives the same message; an option left out (`None`)
/// takes its default. Written once here rather than in each binding.
#[derive(Clone, Default)]
pub struct ClientOptionsInMillis {
    pub watchdog_timeout: Option<f64>,
    pub connect_timeout: Option<f64>,
    pub response_timeout: Option<f64>,
    pub fair_queue_timeout: Option<f64>,
    pub sync_replicas: Option<bool>,
    /// A count, as a number (see [`ClientOptions::min_replicas`]).
    pub min_replicas: Option<f64>,
    pub replica_sync_timeout: Option<f64>,
    pub tls_ca: Option<String>,
    pub tls_cert: Option<String>,
    pub tls_key: Option<String>,
    pub tls_insecure: Option<bool>,
    pub name: Option<String>,
    pub metrics: Option<bool>,
    /// A count, as a number (every binding's numbers are `f64` or fit one).
    pub metrics_max_lock_names: Option<f64>,
    pub key_prefix: Option<String>,
    /// `"pubsub"` or `"poll"` (see [`wait_mode_from_millis`]).
    pub wait_mode: Option<String>,
    pub poll_min: Option<f64>,
    pub poll_max: Option<f64>,
}

/// A wait mode as the bindings receive it: `"pubsub"` or `"poll"`, and for `"poll"` its
/// backoff bounds in milliseconds (left out: the defaults). `None` with no bounds: `None`.
/// Bounds given with `"pubsub"` (or without a mode) are refused rather than ignored.
pub fn wait_mode_from_millis(
    mode: Option<&str>,
    poll_min: Option<f64>,
    poll_max: Option<f64>,
) -> Result<Option<WaitMode>> {
    let bounds_given = poll_min.is_some() || poll_max.is_some();
    match mode {
        None if !bounds_given => Ok(None),
        Some("pubsub") if !bounds_given => Ok(Some(WaitMode::PubSub)),
        None | Some("pubsub") => Err(invalid(
            "poll_min and poll_max apply only with wait_mode 'poll'".into(),
        )),
        Some("poll") => {
            let min = poll_min
                .map(|millis| option_from_millis("poll_min", millis))
                .transpose()?
                .unwrap_or(DEFAULT_POLL_MIN);
            let max = poll_max
                .map(|millis| option_from_millis("poll_max", millis))
                .transpose()?
                .unwrap_or(DEFAULT_POLL_MAX.max(min));
            let mode = WaitMode::Poll { min, max };
            mode.validate()?;
            Ok(Some(mode))
        }
        Some(other) => Err(invalid(format!(
            "wait_mode must be 'pubsub' or 'poll', got '{other}'"
        ))),
    }
}

impl ClientOptionsInMillis {
    /// The client options, or `InvalidArgument` for a time that is no number of milliseconds
    /// (NaN, negative, over the maximum); connecting checks the minimums.
    pub fn into_options(self) -> Result<ClientOptions> {
        let defaults = ClientOptions::default();
        let wait_mode =
            wait_mode_from_millis(self.wait_mode.as_deref(), self.poll_min, self.poll_max)?
                .unwrap_or(defaults.wait_mode);
        // The option `$field` of `$given`, else of `$defaults`; the field's name is the one
        // the message gives.
        macro_rules! time {
            ($given:ident, $defaults:ident, $field:ident) => {
                match $given.$field {
                    Some(millis) => option_from_millis(stringify!($field), millis)?,
                    None => $defaults.$field,
                }
            };
        }
        Ok(ClientOptions {
            watchdog_timeout: time!(self, defaults, watchdog_timeout),
            connect_timeout: time!(self, defaults, connect_timeout),
            response_timeout: time!(self, defaults, response_timeout),
            fair_queue_timeout: time!(self, defaults, fair_queue_timeout),
            sync_replicas: self.sync_replicas.unwrap_or(defaults.sync_replicas),
            min_replicas: match self.min_replicas {
                None => defaults.min_replicas,
                Some(count) if count.fract() == 0.0 && (0.0..=MAX_MIN_REPLICAS as f64).contains(&count) => {
                    count as usize
                }
                Some(count) => {
                    return Err(invalid(format!(
                        "min_replicas must be a whole number from 0 to {MAX_MIN_REPLICAS}, got {count}"
                    )))
                }
            },
            replica_sync_timeout: time!(self, defaults, replica_sync_timeout),
            tls_ca: self.tls_ca,
            tls_cert: self.tls_cert,
            tls_key: self.tls_key,
            tls_insecure: self.tls_insecure.unwrap_or(defaults.tls_insecure),
            name: self.name,
            metrics: self.metrics.unwrap_or(defaults.metrics),
            metrics_max_lock_names: match self.metrics_max_lock_names {
                None => defaults.metrics_max_lock_names,
                Some(count) if count.fract() == 0.0 && (1.0..=MAX_METRICS_LOCK_NAMES as f64).contains(&count) => {
                    count as usize
                }
                Some(count) => {
                    return Err(invalid(format!(
                        "metrics_max_lock_names must be a whole number from 1 to {MAX_METRICS_LOCK_NAMES}, got {count}"
                    )))
                }
            },
            key_prefix: self.key_prefix,
            wait_mode,
        })
    }
}

/// Checks a lock name: 1 to [`MAX_NAME_BYTES`] bytes.
pub(crate) fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(invalid("lock name must not be empty".into()));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(invalid(format!(
            "lock name is {} bytes long; at most {MAX_NAME_BYTES} are accepted",
            name.len()
        )));
    }
    Ok(())
}

/// Checks the key and token of a fenced write: a key of 1 to [`MAX_NAME_BYTES`] bytes, a token
/// from 1 to `i64::MAX` (the tokens a fenced lock gives: its counter is a Redis integer that
/// starts at 1).
pub(crate) fn validate_fenced_write(key: &str, token: i64) -> Result<()> {
    if key.is_empty() {
        return Err(invalid("fenced key must not be empty".into()));
    }
    if key.len() > MAX_NAME_BYTES {
        return Err(invalid(format!(
            "fenced key is {} bytes long; at most {MAX_NAME_BYTES} are accepted",
            key.len()
        )));
    }
    if token < 1 {
        return Err(invalid(format!(
            "token must be from 1 to {} (a token a fenced lock gave), got {token}",
            i64::MAX
        )));
    }
    Ok(())
}

/// Most permits one call may take, give or set (Redisson counts them in Java `int`s).
pub const MAX_PERMITS: i64 = i32::MAX as i64;

/// Checks a number of permits: from `min` to [`MAX_PERMITS`] (from -[`MAX_PERMITS`] when
/// `min` is negative: `add_permits` may take some away).
pub(crate) fn validate_permits(what: &str, permits: i64, min: i64) -> Result<()> {
    let min = min.max(-MAX_PERMITS);
    if permits < min || permits > MAX_PERMITS {
        return Err(invalid(format!(
            "{what} must be from {min} to {MAX_PERMITS}, got {permits}"
        )));
    }
    Ok(())
}

/// Checks a permit id of an expirable semaphore: 32 hexadecimal characters (16 bytes, as
/// Redisson's).
pub(crate) fn validate_permit_id(id: &str) -> Result<()> {
    if id.len() != 32 || !id.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        let shown: String = id.chars().take(64).collect();
        return Err(invalid(format!(
            "permit id must be 32 hexadecimal characters (an id that acquire returned), got '{shown}'"
        )));
    }
    Ok(())
}

/// Checks the wait and lease of an acquire.
/// How one acquisition waits and what lease it takes, by name:
/// `AcquireOptions::new().wait(Duration::from_secs(5)).lease(Duration::from_secs(30))`.
///
/// `wait`: `None` (the default) waits without bound, zero makes one attempt, a duration waits
/// up to that long. `lease`: `None` (the default) takes the watchdog lease, renewed while held;
/// a duration is a fixed lease that is never renewed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AcquireOptions {
    pub wait: Option<Duration>,
    pub lease: Option<Duration>,
}

impl AcquireOptions {
    /// Wait without bound, watchdog lease.
    pub const fn new() -> Self {
        AcquireOptions {
            wait: None,
            lease: None,
        }
    }

    /// Waits up to `wait` for the lock (zero: one attempt).
    pub const fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// One attempt, no waiting.
    pub const fn no_wait(self) -> Self {
        self.wait(Duration::ZERO)
    }

    /// A fixed lease, never renewed, instead of the watchdog's.
    pub const fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Checks the wait and the lease against their limits.
    pub fn validate(&self) -> Result<()> {
        validate_acquire(self.wait, self.lease)
    }
}

pub(crate) fn validate_acquire(wait: Option<Duration>, lease: Option<Duration>) -> Result<()> {
    if let Some(wait) = wait {
        if wait > MAX_DURATION {
            return Err(wait_too_long(wait.as_secs_f64() * 1000.0));
        }
    }
    if let Some(lease) = lease {
        within("lease", lease, MIN_LEASE)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_number_gives_the_same_message_whatever_the_path() {
        let from_number = lease_from_millis(Some(0.5)).and_then(|l| validate_acquire(None, l));
        let from_duration = validate_acquire(None, Some(Duration::from_micros(500)));
        assert_eq!(from_number, from_duration);
        assert_eq!(
            from_number.unwrap_err().to_string(),
            "invalid argument: lease must be from 1 ms to 10 years, got 0.5 ms"
        );
    }

    #[test]
    fn infinity_waits_without_bound_and_nan_or_negative_is_rejected() {
        assert_eq!(wait_from_millis(Some(f64::INFINITY)), Ok(None));
        assert_eq!(wait_from_millis(None), Ok(None));
        assert_eq!(wait_from_millis(Some(0.0)), Ok(Some(Duration::ZERO)));
        for bad in [f64::NAN, -1.0, f64::NEG_INFINITY] {
            assert_eq!(
                wait_from_millis(Some(bad)).unwrap_err().kind(),
                crate::ErrorKind::InvalidArgument
            );
        }
        assert!(lease_from_millis(Some(f64::INFINITY)).is_err());
    }

    #[test]
    fn options_in_millis_take_defaults_and_check_each_time() {
        let none = ClientOptionsInMillis::default().into_options().unwrap();
        assert!(none == ClientOptions::default());
        let given = ClientOptionsInMillis {
            connect_timeout: Some(250.0),
            sync_replicas: Some(true),
            ..ClientOptionsInMillis::default()
        };
        let options = given.into_options().unwrap();
        assert_eq!(options.connect_timeout, Duration::from_millis(250));
        assert!(options.sync_replicas);
        let bad = ClientOptionsInMillis {
            replica_sync_timeout: Some(-1.0),
            ..ClientOptionsInMillis::default()
        };
        assert_eq!(
            bad.into_options().err().unwrap().to_string(),
            "invalid argument: replica_sync_timeout must be a number of milliseconds >= 0, got -1"
        );
    }

    #[test]
    fn min_replicas_is_a_whole_number_from_0_to_100() {
        let given = |count: f64| ClientOptionsInMillis {
            min_replicas: Some(count),
            ..Default::default()
        };
        assert_eq!(ClientOptions::default().min_replicas, 1);
        assert_eq!(given(0.0).into_options().unwrap().min_replicas, 0);
        assert_eq!(given(3.0).into_options().unwrap().min_replicas, 3);
        for bad in [-1.0, 1.5, 101.0, f64::NAN] {
            assert_eq!(
                given(bad).into_options().err().unwrap().to_string(),
                format!("invalid argument: min_replicas must be a whole number from 0 to 100, got {bad}")
            );
        }
        let options = ClientOptions {
            min_replicas: 101,
            ..ClientOptions::default()
        };
        assert_eq!(
            options.validate().unwrap_err().to_string(),
            "invalid argument: min_replicas must be a whole number from 0 to 100, got 101"
        );
    }

    #[test]
    fn defaults_are_valid_and_limits_are_enforced() {
        ClientOptions::default().validate().unwrap();
        let options = ClientOptions {
            watchdog_timeout: Duration::from_millis(29),
            ..ClientOptions::default()
        };
        assert_eq!(
            options.validate().unwrap_err().to_string(),
            "invalid argument: watchdog_timeout must be from 30 ms to 10 years, got 29 ms"
        );
    }
}
