//! `Client` and its `ClientOptions`: a connection to one Redis server and the handles made
//! from it.

use std::sync::Arc;

use polylock::options::ClientOptionsInMillis;

use crate::arguments::{millis, ms};
use crate::error::LockError;
use crate::expirable_semaphore::ExpirableSemaphore;
use crate::job_lock::JobLock;
use crate::lock::Lock;
use crate::read_write_lock::ReadWriteLock;
use crate::semaphore::Semaphore;

/// Declares `ClientOptions`, whose fields are all optional and left out by default (`null` in
/// Kotlin, `nil` in Swift), from the list below.
macro_rules! client_options {
    ($($(#[$doc:meta])* $field:ident: $type:ty,)*) => {
        /// Options of [`Client::connect_with`]; an absent value takes the core's default.
        #[derive(Debug, Clone, Default, uniffi::Record)]
        pub struct ClientOptions {
            $(
                $(#[$doc])*
                #[uniffi(default = None)]
                pub $field: Option<$type>,
            )*
        }
    };
}

client_options! {
    /// Lease of locks acquired without `leaseMs`, renewed every third of it (default 30 000).
    watchdog_timeout_ms: i64,
    /// How long connecting may take before `Connection` (default 5 000).
    connect_timeout_ms: i64,
    /// How long one Redis command may take before `Timeout` (default 5 000).
    response_timeout_ms: i64,
    /// How long a fair-lock or FIFO-lock waiter that stopped answering (its process died) keeps
    /// its place (default 10 000).
    fair_queue_timeout_ms: i64,
    /// Follow every acquire, renewal and release with `WAIT` for the replicas; an acquisition
    /// no replica acknowledged is undone (`NotSynced` once the wait runs out). Default false.
    sync_replicas: bool,
    /// How long `WAIT` waits for the replicas (with `syncReplicas`; default 1 000).
    replica_sync_timeout_ms: i64,
    /// With `syncReplicas`: the fewest replicas an acquisition must reach, whatever the primary
    /// reports (as Redis's `min-replicas-to-write`); below it acquisitions fail with
    /// `NotSynced`. 0 trusts the primary's own count. 0 to 100, default 1.
    min_replicas: i64,
    /// With a `rediss://` URL: the CA certificates to trust instead of the public web roots, a
    /// PEM file path or PEM text.
    tls_ca: String,
    /// With a `rediss://` URL: a client certificate (mutual TLS), a PEM file path or PEM text;
    /// needs `tlsKey`.
    tls_cert: String,
    /// The private key of `tlsCert`, a PEM file path or PEM text.
    tls_key: String,
    /// For development only: do not verify the server's certificate (a warning is logged).
    /// Default false.
    tls_insecure: bool,
    /// The client's name, recorded on the server beside its locks, so that tools and a
    /// timed-out `withLock` of another client name the holder (default `host:pid`).
    name: String,
    /// Count what the locks do (`metrics()`); default true.
    metrics: bool,
    /// How many lock names (per kind) metrics keep apart; the others are counted together as
    /// `_other` (default 1 000).
    metrics_max_lock_names: i64,
    /// A namespace put before every lock name, and so in every key and channel (Redisson's
    /// `NameMapper` with the same prefix shares the locks); default none.
    key_prefix: String,
    /// `"pubsub"` (the default: waiters subscribe and are woken by the release) or `"poll"`
    /// (waiters never subscribe: they look again after a backoff with jitter).
    wait_mode: String,
    /// With `waitMode` `"poll"`: the first backoff step, doubling from there (default 1).
    poll_min_ms: i64,
    /// With `waitMode` `"poll"`: the longest sleep between two looks (default 128).
    poll_max_ms: i64,
}

/// A connection to one Redis server, shared by every lock made from it.
#[derive(uniffi::Object)]
pub struct Client {
    inner: polylock::Client,
}

#[uniffi::export]
impl Client {
    /// Connects with the default options (`redis://host:port/db`, `rediss://` for TLS).
    #[uniffi::constructor]
    pub async fn connect(url: String) -> Result<Arc<Client>, LockError> {
        Self::connect_with(url, ClientOptions::default()).await
    }

    /// Connects with options (watchdog, connect and response timeouts in milliseconds).
    #[uniffi::constructor]
    pub async fn connect_with(
        url: String,
        options: ClientOptions,
    ) -> Result<Arc<Client>, LockError> {
        let options = ClientOptionsInMillis {
            watchdog_timeout: ms(options.watchdog_timeout_ms),
            connect_timeout: ms(options.connect_timeout_ms),
            response_timeout: ms(options.response_timeout_ms),
            fair_queue_timeout: ms(options.fair_queue_timeout_ms),
            sync_replicas: options.sync_replicas,
            replica_sync_timeout: ms(options.replica_sync_timeout_ms),
            min_replicas: options.min_replicas.map(|count| count as f64),
            tls_ca: options.tls_ca,
            tls_cert: options.tls_cert,
            tls_key: options.tls_key,
            tls_insecure: options.tls_insecure,
            name: options.name,
            metrics: options.metrics,
            metrics_max_lock_names: options.metrics_max_lock_names.map(|count| count as f64),
            key_prefix: options.key_prefix,
            wait_mode: options.wait_mode,
            poll_min: ms(options.poll_min_ms),
            poll_max: ms(options.poll_max_ms),
        }
        .into_options()?;
        let inner = polylock::Client::connect_with(&url, options).await?;
        Ok(Arc::new(Client { inner }))
    }

    /// `connect`/`connect_with` for plain threads: blocks the calling thread, at most about the
    /// connect timeout.
    #[uniffi::constructor(default(options = None))]
    pub fn connect_blocking(
        url: String,
        options: Option<ClientOptions>,
    ) -> Result<Arc<Client>, LockError> {
        // Parks only this thread, like `wait_for` (which explains why that cannot deadlock).
        futures_executor::block_on(Self::connect_with(url, options.unwrap_or_default()))
    }

    /// Sets `key` to `value` (a Redis string, no expiry) only if `token` is at least the
    /// highest token already applied to `key`; else `StaleToken`, and nothing is written.
    /// `token` is a `token()` of the one fenced lock that guards `key`.
    pub async fn fenced_set(
        &self,
        key: String,
        value: Vec<u8>,
        token: i64,
    ) -> Result<(), LockError> {
        Ok(self.inner.fenced_set(&key, value, token).await?)
    }

    /// Deletes `key` under the same rule as `fencedSet`; `true` when a key was deleted.
    pub async fn fenced_delete(&self, key: String, token: i64) -> Result<bool, LockError> {
        Ok(self.inner.fenced_delete(&key, token).await?)
    }

    /// A handle on the read-write lock `name` (Redisson's RReadWriteLock layout) for an owner
    /// of its own. No I/O.
    pub fn read_write_lock(&self, name: String) -> Result<Arc<ReadWriteLock>, LockError> {
        let inner = self.inner.read_write_lock(&name)?;
        Ok(Arc::new(ReadWriteLock { inner }))
    }

    /// A handle on the semaphore `name` (Redisson's RSemaphore layout). No I/O.
    pub fn semaphore(&self, name: String) -> Result<Arc<Semaphore>, LockError> {
        let inner = self.inner.semaphore(&name)?;
        Ok(Arc::new(Semaphore { inner }))
    }

    /// A handle on the expirable semaphore `name` (Redisson's RPermitExpirableSemaphore
    /// layout): permits with ids and leases. No I/O.
    pub fn expirable_semaphore(&self, name: String) -> Result<Arc<ExpirableSemaphore>, LockError> {
        let inner = self.inner.expirable_semaphore(&name)?;
        Ok(Arc::new(ExpirableSemaphore { inner }))
    }

    /// This client's id, the first half of the owner of every lock it takes.
    pub fn id(&self) -> String {
        self.inner.id().to_owned()
    }

    /// The client's name (the `name` option, default `host:pid`), recorded beside its locks.
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// What the locks of this client did so far: counters, gauges and histograms per lock
    /// name and kind. No I/O.
    pub fn metrics(&self) -> crate::metrics::MetricsSnapshot {
        self.inner.metrics().into()
    }

    /// Lease of locks acquired without `leaseMs`, in milliseconds.
    pub fn watchdog_timeout_ms(&self) -> i64 {
        millis(self.inner.watchdog_timeout())
    }

    /// Closes the connection now, even while locks made from it are in use: waiting acquires
    /// and later calls fail with `Connection` at once. Returns the names of locks still held:
    /// they are not released and expire with their lease; their handles report the hold lost
    /// (`isLost()`, the lost listener, `release` fails with `LockLost`). In Kotlin this is
    /// `shutdown()`, since `close()` is `AutoCloseable`'s.
    pub fn close(&self) -> Vec<String> {
        self.inner.close()
    }

    /// A run-once job lock on the lock `name` (ShedLock's semantics): held at most `atMostMs`
    /// (a fixed lease: a node that dies holding it blocks the job no longer), at least
    /// `atLeastMs` from the job's start (a node whose clock or schedule lags by less skips).
    /// No I/O; `InvalidArgument` unless 0 < atMostMs and atLeastMs <= atMostMs.
    #[uniffi::method(default(at_least_ms = 0))]
    pub fn job_lock(
        &self,
        name: String,
        at_most_ms: i64,
        at_least_ms: i64,
    ) -> Result<Arc<JobLock>, LockError> {
        JobLock::new(&self.inner, &name, at_most_ms, at_least_ms)
    }

    /// A handle on the count-down latch `name` (Redisson's RCountDownLatch layout). No I/O.
    pub fn count_down_latch(
        &self,
        name: String,
    ) -> Result<Arc<crate::latch::CountDownLatch>, LockError> {
        let inner = self.inner.count_down_latch(&name)?;
        Ok(Arc::new(crate::latch::CountDownLatch { inner }))
    }

    /// The leader election `name`. No I/O.
    pub fn election(&self, name: String) -> Result<Arc<crate::election::Election>, LockError> {
        let inner = self.inner.election(&name)?;
        Ok(Arc::new(crate::election::Election { inner }))
    }
}

/// Exports on `Client` one call a kind of lock with the `Lock` API (`$kind`, also the name of
/// the core's constructor), each taking the handle's defaults; each gives its doc comment.
macro_rules! lock_kinds {
    ($($(#[$doc:meta])* $kind:ident;)*) => {
        #[uniffi::export]
        impl Client {
            $(
                $(#[$doc])*
                #[uniffi::method(default(
                    wait_ms = None,
                    lease_ms = None,
                    wait_mode = None,
                    poll_min_ms = None,
                    poll_max_ms = None
                ))]
                pub fn $kind(
                    &self,
                    name: String,
                    wait_ms: Option<i64>,
                    lease_ms: Option<i64>,
                    wait_mode: Option<String>,
                    poll_min_ms: Option<i64>,
                    poll_max_ms: Option<i64>,
                ) -> Result<Arc<Lock>, LockError> {
                    let lock = self.inner.$kind(&name)?.with_wait_mode_from_millis(
                        wait_mode.as_deref(),
                        poll_min_ms.map(|ms| ms as f64),
                        poll_max_ms.map(|ms| ms as f64),
                    )?;
                    Lock::with_defaults(lock, wait_ms, lease_ms)
                }
            )*
        }
    };
}

lock_kinds! {
    /// A handle on the lock `name`, with an owner of its own (two handles exclude each other,
    /// even in one thread). No I/O. `InvalidArgument` for an empty or over-long name, or a
    /// default out of bounds.
    ///
    /// `waitMs`, `leaseMs`: the handle's defaults, used by every `acquire` that leaves them out
    /// (`null`: wait without bound, the watchdog lease). `waitMode` (`"pubsub"` or `"poll"`,
    /// with `pollMinMs` and `pollMaxMs` as `ClientOptions` takes them): how this handle's
    /// waiters wait instead of as the client's `waitMode` says (`null`: the client's);
    /// `"pubsub"` on a client connected with `waitMode = "poll"` fails each acquire with
    /// `InvalidArgument` (that client opened no pub/sub connection). Also for `fairLock`,
    /// `fifoLock`, `fencedLock`.
    lock;
    /// A handle on the fair lock `name` (Redisson's RFairLock layout): waiters are served in
    /// arrival order and a release wakes only the next one. Same handle API as `lock`. No I/O.
    fair_lock;
    /// A handle on the FIFO lock `name` (polylock's own layout, not Redisson's): waiters are
    /// served in arrival order, and a release hands the lock to the next one directly, at about
    /// half the server calls of `fairLock`. It excludes every other hash lock of the same name
    /// (a `lock`, Redisson's RLock), but Redisson clients do not see its line. Same handle API
    /// as `lock`. No I/O.
    fifo_lock;
    /// A handle on the fenced lock `name` (Redisson's RFencedLock layout): the same handle as
    /// `lock`, whose `token()` is the fencing token of the current hold (it grows on every
    /// acquisition of the name, reentrant ones too). No I/O.
    fenced_lock;
}
