//! The options objects of `Client.connect`, the lock handles' acquires and defaults and the
//! semaphore acquire: their declarations (for `native.d.ts`) and their conversion into the
//! core's options. Each field's JavaScript type is checked here ([`crate::args`]), each value by
//! the core, so a bad value gets the same message in every language. Times are milliseconds.
//!
//! The `#[napi(object)]` structs declare the objects to TypeScript; the conversions read the
//! fields by their JavaScript names instead of through napi's conversion of the structs, whose
//! errors (`NumberExpected`, ...) are napi's own rather than `ERR_INVALID_ARGUMENT`.

use std::time::Duration;

use napi::bindgen_prelude::Unknown;
use napi_derive::napi;
use polylock::options::{
    lease_from_millis, option_from_millis, wait_from_millis, ClientOptionsInMillis,
};
use polylock::AcquireOptions as CoreAcquireOptions;

use crate::args::{boolean, integer, number, string, Fields};

/// Options of `Client.connect`. Times in milliseconds; an option left out (or `null`) takes the
/// core's default.
#[napi(object)]
#[allow(
    dead_code,
    reason = "declares the object to TypeScript; connect_options reads it field by field"
)]
pub struct ConnectOptions {
    /// The lease of locks acquired without `leaseMs`, renewed every third of it. Default 30000.
    pub watchdog_timeout_ms: Option<f64>,
    /// How long connecting may take before `ERR_CONNECTION`. Default 5000.
    pub connect_timeout_ms: Option<f64>,
    /// How long one Redis command may wait for its answer before `ERR_TIMEOUT`. Default 5000.
    pub response_timeout_ms: Option<f64>,
    /// How long a fair-lock waiter that stopped answering (its process died) keeps its place.
    /// Default 10000.
    pub fair_queue_timeout_ms: Option<f64>,
    /// Follow every acquire, renewal and release with `WAIT` for the replicas; an acquisition
    /// no replica acknowledged is undone (`ERR_NOT_SYNCED` once the wait runs out). Default false.
    pub sync_replicas: Option<bool>,
    /// How long `WAIT` waits for the replicas (with `syncReplicas`). Default 1000.
    pub replica_sync_timeout_ms: Option<f64>,
    /// With `syncReplicas`: the fewest replicas an acquisition must reach, whatever the primary
    /// reports (as Redis's `min-replicas-to-write`); below it acquisitions fail with
    /// `ERR_NOT_SYNCED`. 0 trusts the primary's own count. 0 to 100, default 1.
    pub min_replicas: Option<f64>,
    /// With a `rediss://` URL: the CA certificates to trust instead of the public web roots, a
    /// PEM file path or PEM text.
    pub tls_ca: Option<String>,
    /// With a `rediss://` URL: a client certificate (mutual TLS), a PEM file path or PEM text;
    /// needs `tlsKey`.
    pub tls_cert: Option<String>,
    /// The private key of `tlsCert`, a PEM file path or PEM text.
    pub tls_key: Option<String>,
    /// For development only: do not verify the server's certificate (a warning is logged).
    /// Default false.
    pub tls_insecure: Option<bool>,
    /// The client's name, recorded on the server beside its locks, so that tools and a
    /// timed-out `using` of another client name the holder. Default `host:pid`.
    pub name: Option<String>,
    /// Count what the locks do (`client.metrics()`); off, nothing is counted. Default true.
    pub metrics: Option<bool>,
    /// How many lock names (per kind) metrics keep apart; the others are counted together as
    /// `_other`. 1 to 100000, default 1000.
    pub metrics_max_lock_names: Option<f64>,
    /// A namespace put before every lock name, and so in every key and channel (Redisson's
    /// `NameMapper` with the same prefix shares the locks). Default none.
    pub key_prefix: Option<String>,
    /// `'pubsub'` (the default: waiters subscribe and are woken by the release) or `'poll'`
    /// (waiters never subscribe, nor does the client: they look again after a backoff with
    /// jitter).
    pub wait_mode: Option<String>,
    /// With `waitMode: 'poll'`: the first backoff step, doubling from there. Default 1.
    pub poll_min_ms: Option<f64>,
    /// With `waitMode: 'poll'`: the longest sleep between two looks. Default 128.
    pub poll_max_ms: Option<f64>,
}

/// The wait and lease of an acquire, and a lock's defaults (`client.lock(name, defaults)`).
/// Times in milliseconds. A field left out (or `null`) takes the lock's default.
#[napi(object)]
#[derive(Default)]
pub struct AcquireOptions {
    /// Longest wait: `Infinity` = no bound, 0 = one attempt; fractions of a ms are accepted.
    /// Left out: the lock's default wait, which is no bound unless `client.lock` set one.
    pub wait_ms: Option<f64>,
    /// A fixed lease, never renewed (1 ms to 10 years). Left out: the lock's default lease,
    /// which is the watchdog-renewed lease unless `client.lock` set one.
    pub lease_ms: Option<f64>,
}

/// A lock's own options (`client.lock(name, options)`): the defaults of its acquires and how
/// its waiters wait. Times in milliseconds.
#[napi(object)]
#[derive(Default)]
pub struct LockOptions {
    /// The default longest wait of its acquires: `Infinity` = no bound, 0 = one attempt.
    /// Left out: no bound.
    pub wait_ms: Option<f64>,
    /// The default fixed lease of its acquires (1 ms to 10 years). Left out: the
    /// watchdog-renewed lease.
    pub lease_ms: Option<f64>,
    /// `'pubsub'` or `'poll'`: how this lock's waiters wait, instead of the client's
    /// `waitMode` (as Redisson's `RSpinLock` beside `RLock`). Left out: the client's.
    /// `'pubsub'` on a client connected with `waitMode: 'poll'` rejects each acquire with
    /// `ERR_INVALID_ARGUMENT` (that client opened no pub/sub connection).
    pub wait_mode: Option<String>,
    /// With `waitMode: 'poll'`: the first backoff step, doubling from there. Default 1.
    pub poll_min_ms: Option<f64>,
    /// With `waitMode: 'poll'`: the longest sleep between two looks. Default 128.
    pub poll_max_ms: Option<f64>,
}

/// `lock` waiting as its `options` say (`client.lock(name, options)`: `waitMode`, `pollMinMs`,
/// `pollMaxMs`; none of them: as the client). Checked by the core, so its messages are every
/// language's.
pub(crate) fn with_lock_wait_mode(
    lock: polylock::Lock,
    options: Option<Unknown>,
) -> polylock::Result<polylock::Lock> {
    let fields = Fields::of(options, "defaults")?;
    // Its acquires' defaults are `lock_defaults`' to read.
    let given = LockOptions {
        wait_mode: fields.get("waitMode", string)?,
        poll_min_ms: fields.get("pollMinMs", number)?,
        poll_max_ms: fields.get("pollMaxMs", number)?,
        ..LockOptions::default()
    };
    lock.with_wait_mode_from_millis(
        given.wait_mode.as_deref(),
        given.poll_min_ms,
        given.poll_max_ms,
    )
}

/// The options of a `Semaphore` acquire. Times in milliseconds.
#[napi(object)]
#[derive(Default)]
pub struct SemaphoreAcquireOptions {
    /// How many permits to take: 1 (the default) to 2147483647. A fraction is truncated.
    pub permits: Option<i64>,
    /// Longest wait: left out or `Infinity` = no bound, 0 = one attempt. Fractions of a ms are
    /// accepted.
    pub wait_ms: Option<f64>,
}

impl AcquireOptions {
    /// The fields of the JavaScript object `value` (`what` names it in messages).
    fn from_js(value: Option<Unknown>, what: &str) -> polylock::Result<Self> {
        let fields = Fields::of(value, what)?;
        Ok(AcquireOptions {
            wait_ms: fields.get("waitMs", number)?,
            lease_ms: fields.get("leaseMs", number)?,
        })
    }

    /// A lock's defaults as JavaScript sees them: a field is absent when its default is none.
    pub(crate) fn of_defaults(defaults: CoreAcquireOptions) -> Self {
        let millis = |duration: Duration| duration.as_secs_f64() * 1000.0;
        AcquireOptions {
            wait_ms: defaults.wait.map(millis),
            lease_ms: defaults.lease.map(millis),
        }
    }
}

/// A lock's defaults from `client.lock(name, defaults)` (and the lock groups'), checked by the
/// core.
pub(crate) fn lock_defaults(defaults: Option<Unknown>) -> polylock::Result<CoreAcquireOptions> {
    let defaults = AcquireOptions::from_js(defaults, "defaults")?;
    Ok(CoreAcquireOptions {
        wait: wait_from_millis(defaults.wait_ms)?,
        lease: lease_from_millis(defaults.lease_ms)?,
    })
}

/// The options of one acquire: a field left out takes `defaults`' value.
pub(crate) fn acquire_options(
    defaults: CoreAcquireOptions,
    options: Option<Unknown>,
) -> polylock::Result<CoreAcquireOptions> {
    let options = AcquireOptions::from_js(options, "options")?;
    Ok(CoreAcquireOptions {
        wait: match options.wait_ms {
            None => defaults.wait,
            ms => wait_from_millis(ms)?,
        },
        lease: match options.lease_ms {
            None => defaults.lease,
            ms => lease_from_millis(ms)?,
        },
    })
}

/// The permits (default 1) and wait of a `Semaphore` acquire.
pub(crate) fn semaphore_acquire_options(
    options: Option<Unknown>,
) -> polylock::Result<(i64, Option<Duration>)> {
    let fields = Fields::of(options, "options")?;
    let options = SemaphoreAcquireOptions {
        permits: fields.get("permits", integer)?,
        wait_ms: fields.get("waitMs", number)?,
    };
    let wait = wait_from_millis(options.wait_ms)?;
    Ok((options.permits.unwrap_or(1), wait))
}

/// The URL and the core's client options from `Client.connect`'s arguments; an option left out
/// takes the core's default. `Client::connect_with` checks the values.
pub(crate) fn connect_options(
    url: Unknown,
    options: Option<Unknown>,
) -> polylock::Result<(String, polylock::ClientOptions)> {
    let url = string(url, "Redis URL")?;
    let fields = Fields::of(options, "options")?;
    let mut options = polylock::ClientOptions::default();
    // Each time's name in JavaScript, and in the core's messages (the same in every language).
    for (name, core_name, time) in [
        (
            "watchdogTimeoutMs",
            "watchdog_timeout",
            &mut options.watchdog_timeout,
        ),
        (
            "connectTimeoutMs",
            "connect_timeout",
            &mut options.connect_timeout,
        ),
        (
            "responseTimeoutMs",
            "response_timeout",
            &mut options.response_timeout,
        ),
        (
            "fairQueueTimeoutMs",
            "fair_queue_timeout",
            &mut options.fair_queue_timeout,
        ),
        (
            "replicaSyncTimeoutMs",
            "replica_sync_timeout",
            &mut options.replica_sync_timeout,
        ),
    ] {
        if let Some(ms) = fields.get(name, number)? {
            *time = option_from_millis(core_name, ms)?;
        }
    }
    for (name, flag) in [
        ("syncReplicas", &mut options.sync_replicas),
        ("tlsInsecure", &mut options.tls_insecure),
    ] {
        if let Some(on) = fields.get(name, boolean)? {
            *flag = on;
        }
    }
    for (name, pem) in [
        ("tlsCa", &mut options.tls_ca),
        ("tlsCert", &mut options.tls_cert),
        ("tlsKey", &mut options.tls_key),
    ] {
        *pem = fields.get(name, string)?;
    }
    options.name = fields.get("name", string)?;
    // The core's conversion checks the counts, so its messages are the ones every language
    // gives.
    let counted = ClientOptionsInMillis {
        min_replicas: fields.get("minReplicas", number)?,
        metrics: fields.get("metrics", boolean)?,
        metrics_max_lock_names: fields.get("metricsMaxLockNames", number)?,
        ..ClientOptionsInMillis::default()
    }
    .into_options()?;
    options.min_replicas = counted.min_replicas;
    options.metrics = counted.metrics;
    options.metrics_max_lock_names = counted.metrics_max_lock_names;
    options.key_prefix = fields.get("keyPrefix", string)?;
    let wait_mode = polylock::options::wait_mode_from_millis(
        fields.get("waitMode", string)?.as_deref(),
        fields.get("pollMinMs", number)?,
        fields.get("pollMaxMs", number)?,
    )?;
    options.wait_mode = wait_mode.unwrap_or(options.wait_mode);
    Ok((url, options))
}
