//! The client: one id, one multiplexed command connection, one pub/sub connection, one upkeep
//! task, all on the core's runtime; and the registry of the holds made through it.
//!
//! Also here, the recipes made through a client: the run-once job lock (`job_lock`) and leader
//! election (`election`).

pub(crate) mod election;
pub(crate) mod job_lock;

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::connection::sentinel::Sentinel;
use crate::connection::target::{redact, Target};
use crate::connection::{connect_manager, Connection, Publish, ReplicaSync, Timeouts};

use crate::connection::pubsub::Source;
use crate::engine::context::{ClientInner, ClientParts};
use crate::engine::renew::Scheduler;
use crate::engine::LockCore;
use crate::foundation::error::{Error, ErrorKind, Result};
use crate::foundation::runtime::runtime;
use crate::handles::expirable_semaphore::ExpirableSemaphore;
use crate::handles::guard::{Guard, Hold};
use crate::handles::inspect::LockInfo;
use crate::handles::lock::Lock;
use crate::handles::read_write_lock::ReadWriteLock;
use crate::handles::semaphore::Semaphore;
use crate::kinds::fair::Fair;
use crate::kinds::fenced::{fence, Fenced};
use crate::kinds::fifo::Fifo;
use crate::kinds::messages::LockHub;
use crate::kinds::read_write::ReadWriteSide;
use crate::kinds::reentrant::Reentrant;
use crate::kinds::LockKind;
use crate::metrics::{kind as metric_kind, Metrics};
use crate::settings::options::{
    validate_fenced_write, validate_name, AcquireOptions, ClientOptions,
};
use crate::settings::tls::Tls;

/// Builds a [`Client`] option by option; see [`ClientOptions`] for each option.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    url: String,
    options: ClientOptions,
}

impl ClientBuilder {
    /// See [`ClientOptions::sync_replicas`].
    pub fn sync_replicas(mut self, on: bool) -> Self {
        self.options.sync_replicas = on;
        self
    }

    /// See [`ClientOptions::min_replicas`].
    pub fn min_replicas(mut self, replicas: usize) -> Self {
        self.options.min_replicas = replicas;
        self
    }

    pub fn replica_sync_timeout(mut self, timeout: Duration) -> Self {
        self.options.replica_sync_timeout = timeout;
        self
    }

    pub fn fair_queue_timeout(mut self, timeout: Duration) -> Self {
        self.options.fair_queue_timeout = timeout;
        self
    }

    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.options.watchdog_timeout = timeout;
        self
    }

    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.options.connect_timeout = timeout;
        self
    }

    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.options.response_timeout = timeout;
        self
    }

    /// See [`ClientOptions::tls_ca`]: a PEM file path or PEM text.
    pub fn tls_ca(mut self, ca: impl Into<String>) -> Self {
        self.options.tls_ca = Some(ca.into());
        self
    }

    /// See [`ClientOptions::tls_cert`] and [`ClientOptions::tls_key`]: mutual TLS.
    pub fn tls_client_cert(mut self, cert: impl Into<String>, key: impl Into<String>) -> Self {
        self.options.tls_cert = Some(cert.into());
        self.options.tls_key = Some(key.into());
        self
    }

    /// See [`ClientOptions::tls_insecure`]: for development only.
    pub fn tls_insecure(mut self, on: bool) -> Self {
        self.options.tls_insecure = on;
        self
    }

    /// See [`ClientOptions::key_prefix`]: a namespace for every key and channel.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.options.key_prefix = Some(prefix.into());
        self
    }

    /// Connects. See [`Client::connect_with`].
    pub async fn connect(self) -> Result<Client> {
        Client::connect_with(&self.url, self.options).await
    }
}

async fn connect_on_runtime(url: String, options: ClientOptions) -> Result<Client> {
    let tls = Tls::from_options(&options)?;
    let deployment = Target::parse(&url, &tls)?;
    connect_target(deployment, redact(&url), options).await
}

/// A connect task that did not finish (it panicked: a bug) as a connection error, so that
/// nothing unwinds into a binding.
fn connect_task_failed(shown_url: &str, err: tokio::task::JoinError) -> Error {
    let why = match err.try_into_panic() {
        Ok(panic) => match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
            (Some(text), _) => format!("it panicked: {text}"),
            (_, Some(text)) => format!("it panicked: {text}"),
            _ => "it panicked".to_owned(),
        },
        Err(err) => err.to_string(),
    };
    Error::connection(format!(
        "connect to {shown_url}: the connection setup failed unexpectedly ({why})"
    ))
}

fn as_connection_error(err: Error) -> Error {
    match err.kind() {
        ErrorKind::Timeout | ErrorKind::Redis => err.into_kind(ErrorKind::Connection),
        _ => err,
    }
}

/// Runs `connecting` within the connect timeout; its failures are connection errors.
async fn within_connect_timeout<T>(
    what: &str,
    timeout: Duration,
    connecting: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T> {
    match tokio::time::timeout(timeout, connecting).await {
        Ok(Ok(connected)) => Ok(connected),
        Ok(Err(err)) => Err(as_connection_error(Error::from_redis(what, err))),
        Err(_) => Err(Error::connection(format!(
            "{what}: no answer within {timeout:?}"
        ))),
    }
}

async fn connect_target(
    deployment: Target,
    shown_url: String,
    options: ClientOptions,
) -> Result<Client> {
    let what = format!("connect to {shown_url}");
    let opened = open(deployment, &shown_url, &options).await?;
    let publish = opened.publish.map_err(as_connection_error)?;
    start_client(
        opened.connection,
        opened.source,
        publish,
        opened.sentinel,
        options,
        &what,
    )
    .await
}

/// A deployment's command connection, opened, and where its pub/sub connection goes.
pub(crate) struct Opened {
    pub(crate) connection: Connection,
    pub(crate) source: Source,
    /// How lock scripts publish there; on a cluster, as its answer to the `SPUBLISH` probe
    /// (an error when the probe was refused: the source then assumes sharded pub/sub).
    pub(crate) publish: Result<Publish>,
    pub(crate) sentinel: Option<Arc<Sentinel>>,
}

/// Opens the command connection of `deployment`, shown as `shown_url` in errors.
pub(crate) async fn open(
    deployment: Target,
    shown_url: &str,
    options: &ClientOptions,
) -> Result<Opened> {
    let what = &format!("connect to {shown_url}");
    let timeouts = Timeouts {
        connect: options.connect_timeout,
        response: options.response_timeout,
    };
    Ok(match deployment {
        Target::Single(redis_client) => {
            let manager = connect_manager(&redis_client, what, timeouts).await?;
            Opened {
                connection: Connection::single(manager, redis_client.clone(), timeouts),
                source: Source::Single(Box::new(redis_client)),
                publish: Ok(Publish::Plain),
                sentinel: None,
            }
        }
        Target::Cluster { nodes, tls } => {
            let cluster = tls
                .cluster(redis::cluster::ClusterClientBuilder::new(nodes.clone()))
                .connection_timeout(options.connect_timeout)
                .response_timeout(options.response_timeout)
                .build()
                .map_err(|err| {
                    Error::invalid_argument(format!("bad cluster URL '{shown_url}': {err}"))
                        .with_source(err)
                })?;
            let cluster = match within_connect_timeout(
                what,
                options.connect_timeout,
                cluster.get_async_connection(),
            )
            .await
            {
                Ok(cluster) => cluster,
                Err(err) => {
                    // The cluster client keeps only the text of a failed handshake: one seed
                    // node, asked alone, tells why.
                    let why = crate::settings::tls::diagnose(&nodes, options.connect_timeout).await;
                    return Err(match why {
                        Some(why) => Error::connection(format!("{what}: TLS: {why} ({err})"))
                            .with_source(err),
                        None => err,
                    });
                }
            };
            let connection = Connection::cluster(cluster);
            // Redisson uses sharded pub/sub on a Redis 7+ cluster; so must we, to wake it.
            let publish = connection.cluster_publish_mode(what).await;
            let sharded = !matches!(publish, Ok(Publish::Broadcast));
            Opened {
                connection,
                source: Source::Cluster {
                    nodes,
                    sharded,
                    tls,
                },
                publish,
                sentinel: None,
            }
        }
        Target::Sentinel {
            sentinels,
            master,
            node,
            tls,
        } => {
            let sentinel = Sentinel::connect(sentinels, master, node, &tls, timeouts)
                .await
                .map_err(as_connection_error)?;
            Opened {
                connection: Connection::sentinel(sentinel.clone()),
                source: Source::Sentinel(sentinel.clone()),
                publish: Ok(Publish::Plain),
                sentinel: Some(sentinel),
            }
        }
    })
}

/// Test only (the protocol explorer): a client on the explorer's seam, whose scripts publish
/// through the explorer (see `Publish::Explored`; `exact`: listeners counted as on one server,
/// else as a cluster's broadcast `PUBLISH` counts them).
#[cfg(feature = "explorer")]
pub async fn explored(
    seam: &crate::connection::explored::Seam,
    options: ClientOptions,
    exact: bool,
) -> Result<Client> {
    start_client(
        Connection::explored(seam.wire.clone()),
        Source::Explored(seam.bus.clone()),
        Publish::Explored { exact },
        None,
        options,
        "explored",
    )
    .await
}

async fn start_client(
    connection: Connection,
    source: Source,
    publish: Publish,
    sentinel: Option<Arc<Sentinel>>,
    options: ClientOptions,
    what: &str,
) -> Result<Client> {
    let name = options
        .name
        .clone()
        .unwrap_or_else(crate::foundation::ids::default_client_name);
    let metrics = Arc::new(Metrics::new(
        name,
        options.metrics,
        options.metrics_max_lock_names,
    ));
    let connection = connection.counted(metrics.clone());
    let replica_sync = options.sync_replicas.then(|| {
        Arc::new(ReplicaSync::new(
            options.replica_sync_timeout,
            options.min_replicas,
        ))
    });
    if let Some(sync) = &replica_sync {
        if let Err(err) = sync.check(&connection, what).await {
            if let Some(sentinel) = &sentinel {
                sentinel.shutdown();
            }
            return Err(as_connection_error(err));
        }
    }
    let upkeep = Scheduler::start(
        connection.clone(),
        options.watchdog_timeout,
        publish,
        replica_sync.clone(),
    );
    let on_reconnect = {
        let upkeep = upkeep.clone();
        Box::new(move || upkeep.check_now())
    };
    let timeouts = Timeouts {
        connect: options.connect_timeout,
        response: options.response_timeout,
    };
    // A client that polls opens no pub/sub connection, so nothing of it can subscribe.
    let hub = if options.wait_mode.is_poll() {
        None
    } else {
        match LockHub::start(source, timeouts, on_reconnect, metrics.clone()).await {
            Ok(hub) => Some(Arc::new(hub)),
            Err(err) => {
                upkeep.stop();
                if let Some(sentinel) = &sentinel {
                    sentinel.shutdown();
                }
                return Err(as_connection_error(err));
            }
        }
    };
    if let Some(sentinel) = &sentinel {
        // After a failover: waiters resubscribe on the new primary, holds are checked at once.
        let (hub, upkeep) = (hub.as_ref().map(Arc::downgrade), Arc::downgrade(&upkeep));
        let metrics = Arc::downgrade(&metrics);
        sentinel.on_switch(Box::new(move || {
            // The command connection now goes to the new primary (the hub counts its own).
            if let Some(metrics) = metrics.upgrade() {
                metrics.reconnected();
            }
            if let Some(hub) = hub.as_ref().and_then(Weak::upgrade) {
                hub.reconnect();
            }
            if let Some(upkeep) = upkeep.upgrade() {
                upkeep.check_now();
            }
        }));
    }
    let inner = Arc::new(ClientInner::new(ClientParts {
        connection,
        publish,
        replica_sync,
        sentinel,
        hub,
        upkeep,
        options,
        metrics,
    }));
    crate::engine::client_record::start(&inner).await;
    Ok(Client { inner })
}

/// A connection to one Redis server, shared by every lock made from it. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .finish()
    }
}

impl Client {
    /// Connects with the default options.
    pub async fn connect(url: &str) -> Result<Client> {
        Client::connect_with(url, ClientOptions::default()).await
    }

    /// Connects with `options`. Fails with [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a bad URL or option,
    /// and with [`ErrorKind::Connection`](crate::ErrorKind::Connection) within the connect timeout when the server cannot be
    /// reached.
    pub async fn connect_with(url: &str, options: ClientOptions) -> Result<Client> {
        options.validate()?;
        crate::settings::tls::install_crypto_provider();
        // Connections live on the core's runtime, whatever runtime the caller awaits on.
        runtime()
            .spawn(connect_on_runtime(url.to_owned(), options))
            .await
            .map_err(|err| connect_task_failed(&redact(url), err))?
    }

    /// Connects with the address, credentials, database and TLS settings of an existing
    /// `redis::Client` (opening its own connections, as every client does), and `options`.
    pub async fn from_redis_client(
        redis_client: redis::Client,
        options: ClientOptions,
    ) -> Result<Client> {
        options.validate()?;
        let info = redis_client.get_connection_info();
        let url = format!("{}/{}", info.addr(), info.redis_settings().db());
        let tls = Tls::from_options(&options)?;
        let redis_client = if tls.is_set() {
            redis::Client::open(tls.apply(info.clone())?).map_err(|err| {
                Error::invalid_argument(format!("TLS options for {url}: {err}")).with_source(err)
            })?
        } else {
            redis_client
        };
        crate::settings::tls::install_crypto_provider();
        runtime()
            .spawn(connect_target(
                Target::Single(redis_client),
                url.clone(),
                options,
            ))
            .await
            .map_err(|err| connect_task_failed(&url, err))?
    }

    /// Options one by one, from the defaults.
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            url: url.into(),
            options: ClientOptions::default(),
        }
    }

    /// This client's id, the first half of every owner string it writes.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The client's name: `ClientOptions::name`, default `host:pid`.
    pub fn name(&self) -> &str {
        self.inner.metrics.client_name()
    }

    /// What the locks of this client did so far: counters, gauges and histograms per lock name
    /// and kind (see [`crate::metrics`]). Needs nothing: no exporter, no feature.
    pub fn metrics(&self) -> crate::metrics::MetricsSnapshot {
        self.inner.metrics.snapshot()
    }

    /// Starts (`true`) or stops buffering [`crate::metrics::MetricEvent`]s for an exporter,
    /// which takes them with [`Client::drain_metric_events`].
    pub fn record_metric_events(&self, on: bool) {
        self.inner.metrics.record_events(on);
    }

    /// The events buffered since the last call, oldest first.
    pub fn drain_metric_events(&self) -> Vec<crate::metrics::MetricEvent> {
        self.inner.metrics.drain_events()
    }

    pub fn options(&self) -> &ClientOptions {
        &self.inner.options
    }

    /// The lease of watchdog-renewed locks.
    pub fn watchdog_timeout(&self) -> Duration {
        self.inner.options.watchdog_timeout
    }

    /// A handle of `kind`, counted as a `metric_kind` (a [`crate::metrics::LockMetrics::kind`]).
    fn handle(&self, kind: Arc<dyn LockKind>, holder_id: u64, metric_kind: &'static str) -> Lock {
        let stats = self.inner.metrics.lock(kind.name(), metric_kind);
        Lock::new(LockCore::new(self.inner.clone(), kind, holder_id, stats))
    }

    /// A handle on the lock `name`, with a holder id of its own. No I/O.
    pub fn lock(&self, name: &str) -> Result<Lock> {
        let holder = self.inner.next_handle_id();
        self.lock_with_holder(name, holder)
    }

    /// Runs `f`'s future under the lock `name` and returns its output: a new handle (a new
    /// owner, so concurrent calls exclude each other) acquired as [`Hold::acquire_or_fail`]
    /// (`options.wait` runs out: [`ErrorKind::Timeout`] naming the holder, and `f` is not
    /// called), released after. A release that fails ([`ErrorKind::LockLost`]) is the error.
    /// Dropping the returned future (or a panic in `f`) releases in the background, as a
    /// dropped [`Guard`]. Python's `@client.locked`, Node's, Kotlin's and Swift's
    /// `client.withLock`.
    pub async fn with_lock<F, Fut, T>(&self, name: &str, options: AcquireOptions, f: F) -> Result<T>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let lock = self.lock(name)?;
        lock.acquire_or_fail(options).await?;
        let guard = Guard::new(lock);
        let output = f().await;
        guard.release().await?;
        Ok(output)
    }

    /// A handle on the lock `name` for the given holder id (a thread or task id): two handles
    /// with the same holder id are the same owner and re-enter each other's holds. No I/O.
    pub fn lock_with_holder(&self, name: &str, holder_id: u64) -> Result<Lock> {
        validate_name(name)?;
        Ok(self.handle(
            Arc::new(Reentrant::new(
                name,
                &self.inner.key_of(name),
                self.inner.publish,
            )),
            holder_id,
            metric_kind::LOCK,
        ))
    }

    /// A handle on the fair lock `name` (Redisson RFairLock layout): waiters are served in
    /// arrival order and a release wakes only the next one. Same handle API as [`Client::lock`].
    pub fn fair_lock(&self, name: &str) -> Result<Lock> {
        let holder = self.inner.next_handle_id();
        self.fair_lock_with_holder(name, holder)
    }

    /// [`Client::fair_lock`] for the given holder id (a thread or task id). No I/O.
    pub fn fair_lock_with_holder(&self, name: &str, holder_id: u64) -> Result<Lock> {
        validate_name(name)?;
        Ok(self.handle(
            Arc::new(Fair::new(
                name,
                &self.inner.key_of(name),
                self.inner.publish,
            )),
            holder_id,
            metric_kind::FAIR_LOCK,
        ))
    }

    /// A handle on the FIFO lock `name` (polylock's own layout, not Redisson's): waiters are
    /// served in arrival order, and a release hands the lock to the next one directly, at about
    /// half the server calls of [`Client::fair_lock`]. It excludes every other hash lock of the
    /// same name (a [`Client::lock`], Redisson's RLock), but Redisson clients do not see its line.
    /// Same handle API as [`Client::lock`].
    pub fn fifo_lock(&self, name: &str) -> Result<Lock> {
        let holder = self.inner.next_handle_id();
        self.fifo_lock_with_holder(name, holder)
    }

    /// [`Client::fifo_lock`] for the given holder id (a thread or task id). No I/O.
    pub fn fifo_lock_with_holder(&self, name: &str, holder_id: u64) -> Result<Lock> {
        validate_name(name)?;
        Ok(self.handle(
            Arc::new(Fifo::new(
                name,
                &self.inner.key_of(name),
                self.inner.publish,
            )),
            holder_id,
            metric_kind::FIFO_LOCK,
        ))
    }

    /// A handle on the fenced lock `name` (Redisson RFencedLock layout): the reentrant lock,
    /// plus a fencing token per acquisition, read with [`Lock::token`]. Tokens only grow, across
    /// every holder of the name (Redisson's too) and on reentry, so a resource that remembers
    /// the highest token it saw can refuse a holder whose lease ran out meanwhile: see
    /// [`Client::fenced_set`]. Same handle API as [`Client::lock`].
    pub fn fenced_lock(&self, name: &str) -> Result<Lock> {
        let holder = self.inner.next_handle_id();
        self.fenced_lock_with_holder(name, holder)
    }

    /// [`Client::fenced_lock`] for the given holder id (a thread or task id). No I/O.
    pub fn fenced_lock_with_holder(&self, name: &str, holder_id: u64) -> Result<Lock> {
        validate_name(name)?;
        Ok(self.handle(
            Arc::new(Fenced::new(
                name,
                &self.inner.key_of(name),
                self.inner.publish,
            )),
            holder_id,
            metric_kind::FENCED_LOCK,
        ))
    }

    /// A handle on the read-write lock `name` (Redisson RReadWriteLock layout), for a holder
    /// of its own: `read_lock()` and `write_lock()` have the whole [`Lock`] API. No I/O.
    pub fn read_write_lock(&self, name: &str) -> Result<ReadWriteLock> {
        let holder = self.inner.next_handle_id();
        self.read_write_lock_with_holder(name, holder)
    }

    /// [`Client::read_write_lock`] for the given holder id (a thread or task id). No I/O.
    pub fn read_write_lock_with_holder(&self, name: &str, holder_id: u64) -> Result<ReadWriteLock> {
        validate_name(name)?;
        Ok(ReadWriteLock::new(
            self.handle(
                Arc::new(ReadWriteSide::read(
                    name,
                    &self.inner.key_of(name),
                    self.inner.publish,
                )),
                holder_id,
                metric_kind::READ_WRITE_LOCK,
            ),
            self.handle(
                Arc::new(ReadWriteSide::write(
                    name,
                    &self.inner.key_of(name),
                    self.inner.publish,
                )),
                holder_id,
                metric_kind::READ_WRITE_LOCK,
            ),
        ))
    }

    /// A handle on the semaphore `name` (Redisson RSemaphore layout). No I/O.
    pub fn semaphore(&self, name: &str) -> Result<Semaphore> {
        validate_name(name)?;
        Ok(Semaphore::new(self.inner.clone(), name))
    }

    /// A handle on the expirable semaphore `name` (Redisson RPermitExpirableSemaphore layout):
    /// permits with ids and leases. No I/O.
    pub fn expirable_semaphore(&self, name: &str) -> Result<ExpirableSemaphore> {
        validate_name(name)?;
        Ok(ExpirableSemaphore::new(self.inner.clone(), name))
    }

    /// Sets `key` to `value` (as `SET`: a string, no expiry) only if `token` is at least the
    /// highest token already applied to `key`, else fails with [`ErrorKind::StaleToken`](crate::ErrorKind::StaleToken) and writes
    /// nothing. `token` is a [`Lock::token`] of one fenced lock that guards `key` (tokens of
    /// different locks are not comparable). An equal token is accepted: one hold may write
    /// many times. The highest token is kept in polylock's fence key `polylock_fence:{key}`,
    /// which never expires (see `docs/PROTOCOL.md`).
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty or too long key or a token out of 1..=`i64::MAX`,
    /// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when `key` (or its fence) holds another type than a string. A
    /// Connection or Timeout error leaves the outcome unknown; writing again with the same
    /// token is safe.
    pub async fn fenced_set(&self, key: &str, value: impl AsRef<[u8]>, token: i64) -> Result<()> {
        let value = value.as_ref().to_vec();
        self.fenced_write(key, token, fence::Write::Set(value))
            .await
            .map(|_| ())
    }

    /// Deletes `key` under the same rule as [`Client::fenced_set`]; true when a key was
    /// deleted. An applied delete raises the fence to `token` even when there was no key, and
    /// the fence stays after the key is gone, so an older token can never write it again.
    pub async fn fenced_delete(&self, key: &str, token: i64) -> Result<bool> {
        self.fenced_write(key, token, fence::Write::Delete)
            .await
            .map(|deleted| deleted > 0)
    }

    async fn fenced_write(&self, key: &str, token: i64, write: fence::Write) -> Result<i64> {
        validate_fenced_write(key, token)?;
        self.inner.check_usable_for(&format!("key '{key}'"))?;
        let connection = self.inner.connection.clone();
        // A fenced key is named as a lock is: under the key prefix, as Redisson's buckets are.
        let key = self.inner.key_of(key);
        runtime()
            .spawn(async move { fence::apply(connection, &key, token, write).await })
            .await
            .map_err(|err| Error::redis(format!("fenced write task failed: {err}")))?
    }

    /// Closes the client: pending waits end at once with [`ErrorKind::Connection`](crate::ErrorKind::Connection), nothing is
    /// renewed or released any more, and the pub/sub connection and background tasks stop.
    /// Returns the names of the locks still held: each handle reports its hold lost at once
    /// (they are not released, and expire with their lease), so releasing one of them fails
    /// with [`ErrorKind::LockLost`](crate::ErrorKind::LockLost). Every other later call fails with [`ErrorKind::Connection`](crate::ErrorKind::Connection).
    ///
    /// Called where a thread may block (outside async code: a plain thread, as the Python,
    /// Kotlin and Swift bindings call it), it also waits until the client's record is deleted,
    /// at most the response timeout, so a process that exits next leaves no record behind. In
    /// async code it does not block, and the record's `DEL` goes on in the background: await
    /// [`Client::shutdown`] instead where the process may end next.
    pub fn close(&self) -> Vec<String> {
        let held = self.inner.close();
        if !self.inner.forked() && tokio::runtime::Handle::try_current().is_err() {
            runtime().block_on(self.inner.record_task_ended());
        }
        held
    }

    /// [`Client::close`], then waits until the client's record is deleted (`DEL`, at most the
    /// response timeout; past that it expires with its lease), as Redisson's `shutdown()`
    /// waits for its client to end: await it before a process exits.
    pub async fn shutdown(&self) -> Vec<String> {
        let held = self.inner.close();
        let inner = self.inner.clone();
        // On polylock's runtime: the caller's may have no timer.
        let _ = runtime()
            .spawn(async move { inner.record_task_ended().await })
            .await;
        held
    }

    /// For a binding whose calls run on a foreign event loop's thread (Node, Python's asyncio):
    /// opens a command connection whose socket that loop watches (`LoopLink`,
    /// `connection/loop_link.rs`).
    /// `None` when the client has no single plain TCP server (a cluster, Sentinel, TLS, a unix
    /// socket, RESP3), or the connection or its handshake (`AUTH`, `SELECT`) fails within the
    /// connect timeout; the client's calls then use its own connection. Await it in polylock's
    /// runtime context (on it, or in a `LoopTasks` task).
    #[doc(hidden)]
    pub async fn loop_link(&self) -> Option<crate::LoopLink> {
        crate::connection::loop_link::LoopLink::connect(&self.inner.connection).await
    }

    /// Describes what polylock (or Redisson) keeps under `name`: the kind, the holders with
    /// their hold counts, the TTL, a fair lock's queue, a read-write lock's mode and waiting
    /// writers, a semaphore's permits, a fenced lock's token counter. One Lua script reads
    /// every key of every kind at once, so the answer is one consistent snapshot; it writes
    /// nothing (expired permits or stale waiters are shown, not cleaned). Works whichever kind
    /// of handle made the keys, and without any handle.
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty or too long name; a name holding something else
    /// is not an error but [`InspectedKind::Unknown`](crate::InspectedKind::Unknown).
    pub async fn inspect(&self, name: &str) -> Result<LockInfo> {
        crate::handles::inspect::inspect(&self.inner, name).await
    }

    /// The names of everything matching the glob `pattern` (`SCAN`; on a cluster, on every
    /// primary), sorted, without the keys the kinds keep beside a name (latches, queues,
    /// counters, timeouts). For tools that list locks, as the CLI's `watch`: pass each name to
    /// [`Client::inspect`]. Not atomic: names come and go while it pages.
    pub async fn scan_names(&self, pattern: &str) -> Result<Vec<String>> {
        crate::handles::inspect::scan_names(&self.inner, pattern).await
    }

    /// One page of [`Client::scan_names`]: one `SCAN` call (`COUNT 500`) on each primary whose
    /// cursor in `sweep` is not through, the names it gave (sorted). A sweep spread over many
    /// calls bounds each call's cost on a large keyspace; once [`ScanSweep::is_through`], every
    /// name that existed throughout the sweep has been returned, and the next call starts again.
    ///
    /// [`ScanSweep::is_through`]: crate::ScanSweep::is_through
    pub async fn scan_names_page(
        &self,
        pattern: &str,
        sweep: &mut crate::ScanSweep,
    ) -> Result<Vec<String>> {
        crate::handles::inspect::scan_names_page(&self.inner, pattern, sweep).await
    }

    /// One page of the client records' ids (the keys `polylock:client:<client-id>`), as
    /// [`Client::scan_names_page`] pages the names: pass them to [`Client::client_records`].
    pub async fn scan_client_ids_page(&self, sweep: &mut crate::ScanSweep) -> Result<Vec<String>> {
        crate::handles::inspect::scan_client_ids_page(&self.inner, sweep).await
    }

    /// [`Client::inspect`] without naming the holders: the script's reading alone (one
    /// `EVALSHA`), `client_name` and `held_for` left `None`, for tools that read the client
    /// records once for many locks.
    pub async fn inspect_without_records(&self, name: &str) -> Result<LockInfo> {
        crate::handles::inspect::inspect_without_records(&self.inner, name).await
    }

    /// The client records (`polylock:client:<client-id>`, docs/PROTOCOL.md) of `client_ids`
    /// (the part of an owner string before its first `:`), or of every client (`SCAN`; on a
    /// cluster, on every primary) when `None`: who the owners are and what their locks do,
    /// for tools such as the CLI's `inspect` and `watch`. Read-only; missing records (closed
    /// clients, Redisson owners) are left out.
    pub async fn client_records(
        &self,
        client_ids: Option<Vec<String>>,
    ) -> Result<Vec<crate::handles::inspect::ClientRecordFields>> {
        crate::handles::inspect::client_records(&self.inner, client_ids).await
    }

    /// Number of channels this client's waiters are subscribed to now.
    pub fn subscribed_channels(&self) -> usize {
        self.inner
            .hub
            .as_ref()
            .map_or(0, |hub| hub.subscribed_channels())
    }

    /// Number of locks the watchdog renews now.
    pub fn watched_locks(&self) -> usize {
        self.inner.upkeep.renewed()
    }

    /// A run-once job lock on the lock `name` (ShedLock's semantics): held at most `at_most`,
    /// at least `at_least` from the job's start; see [`crate::JobLock`]. It is the plain lock
    /// ([`Client::lock`]'s keys), so a plain lock or Redisson's RLock of the same name
    /// excludes it. [`ErrorKind::InvalidArgument`] unless 1 ms <= `at_most` <= 10 years and
    /// `at_least` <= `at_most`, or for a bad name. No I/O.
    pub fn job_lock(
        &self,
        name: &str,
        at_most: Duration,
        at_least: Duration,
    ) -> Result<crate::JobLock> {
        crate::JobLock::new(
            self.clone(),
            name,
            crate::JobLockOptions::new(at_most, at_least),
        )
    }

    /// Runs `f`'s future once per schedule slot across every node that calls this: on the
    /// node that takes the job lock `name` ([`Client::job_lock`] with `options`), and not at
    /// all (`Ok(None)`, `f` not called) where another node holds it. Never waits.
    pub async fn run_job<F, Fut, T>(
        &self,
        name: &str,
        options: crate::JobLockOptions,
        f: F,
    ) -> Result<Option<T>>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let job = crate::JobLock::new(self.clone(), name, options)?;
        Ok(job.try_run(f).await?.ran())
    }

    /// A handle on the count-down latch `name` (Redisson RCountDownLatch layout). No I/O.
    pub fn count_down_latch(&self, name: &str) -> Result<crate::CountDownLatch> {
        validate_name(name)?;
        Ok(crate::CountDownLatch::new(self.inner.clone(), name))
    }

    /// The leader election `name` (see [`crate::Election`]): candidates campaign on the
    /// fenced lock `name`, whose fencing token is each leader's term. No I/O.
    pub fn election(&self, name: &str) -> Result<crate::Election> {
        validate_name(name)?;
        Ok(crate::Election::new(self.clone(), name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AcquireOptions;

    /// Without the `tls` feature a rediss:// URL is refused by name, before any I/O
    /// (`make test-rust-package` runs this with `--no-default-features`).
    #[test]
    fn a_tls_url_needs_the_tls_feature() {
        let connected = runtime().block_on(Client::connect("rediss://127.0.0.1:1/0"));
        if cfg!(feature = "tls") {
            assert_eq!(connected.unwrap_err().kind(), crate::ErrorKind::Connection);
        } else {
            let err = connected.unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument);
            assert!(err.to_string().contains("\"tls\" feature"), "{err}");
        }
    }

    /// A waiter may subscribe (its own channel, after the lock's) just as the client closes:
    /// the channel must not count as subscribed, or the gauge stays up for good.
    #[tokio::test]
    async fn a_subscription_after_the_client_closed_is_refused_and_not_counted() {
        let server = polylock_testkit::RedisServer::start();
        let client = Client::connect(&server.url()).await.unwrap();
        client.close();
        let hub = client.inner.hub.as_ref().unwrap();
        let ended = async {
            while !hub.control_ended() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        assert!(tokio::time::timeout(Duration::from_secs(20), ended)
            .await
            .is_ok());
        let refused = hub.subscribe("late", Some("late:companion")).await;
        assert_eq!(
            refused.err().map(|err| err.kind()),
            Some(ErrorKind::Connection)
        );
        assert_eq!(client.metrics().connection.subscriptions, 0);
        assert_eq!(client.subscribed_channels(), 0);
    }

    /// Whether `client`'s subscribed channels come to a count that `wanted` accepts, within 20 s.
    async fn channels_reach(client: &Client, wanted: impl Fn(usize) -> bool) -> bool {
        let reached = async {
            while !wanted(client.subscribed_channels()) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(20), reached)
            .await
            .is_ok()
    }

    /// What a client tracks per hold and per waiting channel lives in hash tables, which never
    /// shrink by themselves: once everything is released they must give their room back, or a
    /// client keeps the memory of its busiest moment (and, as hold ids never come back, more
    /// after each burst).
    #[tokio::test]
    async fn released_holds_and_waiters_leave_no_table_room_behind() {
        let server = polylock_testkit::RedisServer::start();
        let holder = Client::connect(&server.url()).await.unwrap();
        let waiter = Client::connect(&server.url()).await.unwrap();
        let names: Vec<String> = (0..300).map(|i| format!("room:{i}")).collect();
        let held: Vec<Lock> = names
            .iter()
            .map(|name| holder.lock(name).unwrap())
            .collect();
        for lock in &held {
            assert!(lock.acquire(AcquireOptions::new().no_wait()).await.unwrap());
        }
        // Each waiter in a task of its own, which drops its handle (and with it the handle's
        // subscription) once it has released.
        let waits: Vec<_> = names
            .iter()
            .map(|name| {
                let lock = waiter.lock(name).unwrap();
                tokio::spawn(async move {
                    let options = AcquireOptions::new().wait(Duration::from_secs(60));
                    assert!(lock.acquire(options).await.unwrap(), "a waiter timed out");
                    lock.release().await.unwrap();
                })
            })
            .collect();
        // Two channels per name: the lock's and the waiter's own.
        assert!(
            channels_reach(&waiter, |count| count == 2 * names.len()).await,
            "waiters not subscribed"
        );
        assert!(holder.inner.upkeep.table_room() >= names.len());
        assert!(waiter.inner.hub.as_ref().unwrap().channel_table_room() >= names.len());
        for lock in &held {
            lock.release().await.unwrap();
        }
        for wait in waits {
            wait.await.unwrap();
        }
        assert!(
            channels_reach(&waiter, |count| count == 0).await,
            "channels left subscribed"
        );
        for client in [&holder, &waiter] {
            assert_eq!(client.inner.registry().holds.capacity(), 0, "hold registry");
            assert_eq!(client.inner.upkeep.table_room(), 0, "upkeep table");
            assert_eq!(
                client.inner.hub.as_ref().unwrap().channel_table_room(),
                0,
                "channel table"
            );
        }
    }
}
