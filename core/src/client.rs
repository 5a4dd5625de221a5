//! The client: one id, one multiplexed command connection, one pub/sub connection, one
//! watchdog, all on the core's runtime.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::error::{Error, Result};
use crate::lock::{validate_name, Lock};
use crate::runtime::{current_pid, runtime};
use crate::waiter::{Hub, Timeouts};
use crate::watchdog::Watchdog;

const DEFAULT_WATCHDOG_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
/// A fair-lock waiter that has not looked at the queue for this long (its process died) is
/// skipped. Live waiters look every half of it, so they never lose their place.
const DEFAULT_FAIR_QUEUE_TIMEOUT: Duration = Duration::from_secs(10);

/// Options for [`Client`]; start from [`Client::builder`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    url: String,
    watchdog_timeout: Duration,
    connect_timeout: Duration,
    response_timeout: Duration,
    fair_queue_timeout: Duration,
}

impl ClientBuilder {
    /// How long a fair-lock waiter that stopped answering keeps its place. Default 10 s.
    pub fn fair_queue_timeout(mut self, timeout: Duration) -> Self {
        self.fair_queue_timeout = timeout;
        self
    }

    /// The lease of locks acquired without one; renewed every third of it. Default 30 s.
    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.watchdog_timeout = timeout;
        self
    }

    /// How long connecting may take before it fails with [`Error::Connection`]. Default 5 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one command may wait for its answer before [`Error::Timeout`]. Default 5 s.
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Connects. Fails with [`Error::Connection`] within the connect timeout when the server
    /// cannot be reached, and with [`Error::InvalidArgument`] for a bad URL or option.
    pub async fn connect(self) -> Result<Client> {
        if self.watchdog_timeout < Duration::from_millis(30) {
            return Err(Error::InvalidArgument(format!(
                "watchdog timeout must be at least 30 ms, got {:?}",
                self.watchdog_timeout
            )));
        }
        if self.fair_queue_timeout < Duration::from_millis(10)
            || self.fair_queue_timeout > crate::MAX_DURATION
        {
            return Err(Error::InvalidArgument(format!(
                "fair queue timeout must be between 10 ms and 10 years, got {:?}",
                self.fair_queue_timeout
            )));
        }
        if self.connect_timeout.is_zero() || self.response_timeout.is_zero() {
            return Err(Error::InvalidArgument(
                "connect and response timeouts must be positive".into(),
            ));
        }
        let redis_client = redis::Client::open(self.url.as_str()).map_err(|err| {
            Error::InvalidArgument(format!("bad Redis URL '{}': {err}", redact(&self.url)))
        })?;
        // Connections live on the core's runtime, whatever runtime the caller awaits on.
        runtime()
            .spawn(self.connect_on_runtime(redis_client))
            .await
            .map_err(|err| Error::Connection(format!("connect task failed: {err}")))?
    }

    async fn connect_on_runtime(self, redis_client: redis::Client) -> Result<Client> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let what = format!("connect to {}", redact(&self.url));
        let connection = match tokio::time::timeout(
            self.connect_timeout,
            ConnectionManager::new_with_config(redis_client.clone(), config),
        )
        .await
        {
            Ok(Ok(connection)) => connection,
            Ok(Err(err)) => {
                return Err(match Error::from_redis(&what, err) {
                    Error::Timeout(message) | Error::Redis(message) => Error::Connection(message),
                    other => other,
                })
            }
            Err(_) => {
                return Err(Error::Connection(format!(
                    "{what}: no answer within {:?}",
                    self.connect_timeout
                )))
            }
        };
        let timeouts = Timeouts {
            connect: self.connect_timeout,
            response: self.response_timeout,
        };
        let inner = ClientInner {
            id: uuid::Uuid::new_v4().to_string(),
            pid: current_pid(),
            hub: Hub::start(redis_client, timeouts),
            watchdog: Watchdog::start(connection.clone(), self.watchdog_timeout),
            connection,
            timeouts,
            fair_queue_timeout: self.fair_queue_timeout,
            closed: AtomicBool::new(false),
            next_handle: AtomicU64::new(1),
            held: Mutex::new(HashMap::new()),
        };
        Ok(Client {
            inner: Arc::new(inner),
        })
    }
}

/// Hides a password in a URL before it goes into a message.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// A connection to one Redis server, shared by every lock made from it. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

pub(crate) struct ClientInner {
    pub(crate) id: String,
    pid: u32,
    pub(crate) connection: ConnectionManager,
    pub(crate) hub: Hub,
    pub(crate) watchdog: Arc<Watchdog>,
    pub(crate) timeouts: Timeouts,
    pub(crate) fair_queue_timeout: Duration,
    closed: AtomicBool,
    next_handle: AtomicU64,
    /// Handles that hold a lock now: handle id -> lock name (reported by `close`).
    held: Mutex<HashMap<u64, String>>,
}

impl ClientInner {
    /// Fails when the client was closed, or was made by the parent of this forked process.
    pub(crate) fn check_usable(&self, name: &str) -> Result<()> {
        if self.pid != current_pid() {
            return Err(Error::Connection(format!(
                "lock '{name}': this client was created in process {} before a fork; \
                 create a new client in the child process",
                self.pid
            )));
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Connection(format!(
                "lock '{name}': the client is closed"
            )));
        }
        Ok(())
    }

    pub(crate) fn next_handle_id(&self) -> u64 {
        self.next_handle.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn set_held(&self, handle: u64, name: Option<&str>) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        match name {
            Some(name) => held.insert(handle, name.to_owned()),
            None => held.remove(&handle),
        };
    }
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        self.watchdog.shutdown();
    }
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
        Client::builder(url).connect().await
    }

    /// Options: watchdog timeout, connect and response timeouts.
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            url: url.into(),
            watchdog_timeout: DEFAULT_WATCHDOG_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            fair_queue_timeout: DEFAULT_FAIR_QUEUE_TIMEOUT,
        }
    }

    /// This client's id, the first half of every owner string it writes.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The lease of watchdog-renewed locks.
    pub fn watchdog_timeout(&self) -> Duration {
        self.inner.watchdog.lease()
    }

    /// A handle on the lock `name`, with a holder id of its own. No I/O.
    pub fn lock(&self, name: &str) -> Result<Lock> {
        let holder = self.inner.next_handle_id();
        self.lock_with_holder(name, holder)
    }

    /// A handle on the lock `name` for the given holder id (a thread or task id): two handles
    /// with the same holder id are the same owner and re-enter each other's holds. No I/O.
    pub fn lock_with_holder(&self, name: &str, holder_id: u64) -> Result<Lock> {
        validate_name(name)?;
        Ok(Lock::new(self.inner.clone(), name, holder_id, false))
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
        Ok(Lock::new(self.inner.clone(), name, holder_id, true))
    }

    /// Stops the watchdog and the pub/sub connection. Returns the names of the locks still held
    /// through this client (each also logged): they are not released, and expire with their
    /// lease. Later calls on this client's locks fail with [`Error::Connection`].
    pub fn close(&self) -> Vec<String> {
        self.inner.closed.store(true, Ordering::Release);
        self.inner.watchdog.shutdown();
        let held: Vec<String> = self
            .inner
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        for name in &held {
            tracing::warn!(lock = %name, "client closed while holding a lock; it will expire with its lease");
        }
        held
    }

    /// Number of channels this client's waiters are subscribed to now.
    pub fn subscribed_channels(&self) -> usize {
        self.inner.hub.subscribed_channels()
    }

    /// Number of locks the watchdog renews now.
    pub fn watched_locks(&self) -> usize {
        self.inner.watchdog.len()
    }
}
