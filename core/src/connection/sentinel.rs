//! A primary found through Sentinel, followed across failovers.
//!
//! The command connection is a `ConnectionManager` to the primary the sentinels name. It is
//! replaced when the sentinels name a new primary (asked twice a second, one sentinel at a
//! time) and when a command fails in a way a failover causes (the old primary
//! refused, gone, or demoted to a read-only replica). After a switch the client's hooks run:
//! the pub/sub hub reconnects to the new primary and every held lock is checked at once (a
//! lock that had not reached the promoted replica is reported lost).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{ConnectionAddr, ConnectionInfo, RedisError};

use crate::connection::connect_manager;
use crate::error::{Error, Result};
use crate::pubsub::Timeouts;

/// How often the sentinels are asked which primary they name.
const WATCH_PERIOD: Duration = Duration::from_millis(500);

pub(crate) type SwitchHook = Box<dyn Fn() + Send + Sync>;

struct Primary {
    generation: u64,
    addr: String,
    client: redis::Client,
    manager: ConnectionManager,
}

pub(crate) struct Sentinel {
    master: String,
    /// The primary's (and replicas') credentials, database and TLS.
    node: ConnectionInfo,
    /// The sentinels, in the URL's order (watched one at a time for `+switch-master`).
    sentinels: Vec<ConnectionInfo>,
    sentinel: tokio::sync::Mutex<SentinelClient>,
    primary: RwLock<Primary>,
    generations: AtomicU64,
    /// One rediscovery at a time; a caller that waited finds the switch already made.
    switching: tokio::sync::Mutex<()>,
    timeouts: Timeouts,
    on_switch: OnceLock<SwitchHook>,
    watcher: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Errors after which the primary may have moved: it refused, went away, or is a replica now.
fn may_mean_failover(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_timeout()
        || matches!(err.code(), Some("READONLY" | "MASTERDOWN"))
}

impl Sentinel {
    /// Asks the sentinels for the primary of `master` and connects to it.
    pub(crate) async fn connect(
        sentinels: Vec<ConnectionInfo>,
        master: String,
        node: ConnectionInfo,
        tls: &crate::tls::Tls,
        timeouts: Timeouts,
    ) -> Result<Arc<Sentinel>> {
        let mut client = sentinel_client(&sentinels, &master, &node, tls)
            .map_err(|err| Error::InvalidArgument(format!("bad sentinel URL: {err}")))?;
        let (addr, redis_client) = discover(&mut client, &master, timeouts).await?;
        let manager = connect_manager(
            &redis_client,
            &format!("connect to the primary at {addr}"),
            timeouts,
        )
        .await?;
        let sentinel = Arc::new(Sentinel {
            master,
            node: node.clone(),
            sentinels,
            sentinel: tokio::sync::Mutex::new(client),
            primary: RwLock::new(Primary {
                generation: 0,
                addr,
                client: redis_client,
                manager,
            }),
            generations: AtomicU64::new(1),
            switching: tokio::sync::Mutex::new(()),
            timeouts,
            on_switch: OnceLock::new(),
            watcher: Mutex::new(None),
        });
        let watcher = tokio::spawn(watch_switches(Arc::downgrade(&sentinel)));
        *sentinel.watcher.lock().unwrap_or_else(|p| p.into_inner()) = Some(watcher);
        Ok(sentinel)
    }

    /// What runs after the primary changed (set once, by the client).
    pub(crate) fn on_switch(&self, hook: SwitchHook) {
        let _ = self.on_switch.set(hook);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Primary> {
        self.primary.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The command connection to the current primary, and its generation.
    pub(crate) fn manager(&self) -> (u64, ConnectionManager) {
        let primary = self.read();
        (primary.generation, primary.manager.clone())
    }

    /// A client for the current primary (for the pub/sub connection).
    pub(crate) fn primary_client(&self) -> redis::Client {
        self.read().client.clone()
    }

    /// Passes on the reply of a command sent on connection `generation`; when it failed as
    /// a failover would make it fail, asks the sentinels again (switching when they name
    /// another primary).
    pub(crate) fn watch_reply<T>(
        self: &Arc<Self>,
        generation: u64,
        reply: redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        if reply.as_ref().is_err_and(may_mean_failover) {
            let sentinel = self.clone();
            tokio::spawn(async move { sentinel.rediscover(Some(generation), None).await });
        }
        reply
    }

    /// Finds the primary again (`named`: the address a sentinel just named, checked with
    /// `ROLE`) and switches to it if it is another one.
    async fn rediscover(&self, failed_generation: Option<u64>, named: Option<(String, u16)>) {
        let _switching = self.switching.lock().await;
        if failed_generation.is_some_and(|generation| generation != self.read().generation) {
            return; // another caller switched meanwhile
        }
        let found = match named {
            Some((host, port)) => self.confirm_primary(host, port).await,
            None => {
                let mut client = self.sentinel.lock().await;
                discover(&mut client, &self.master, self.timeouts).await
            }
        };
        let (addr, client) = match found {
            Ok(found) => found,
            Err(err) => {
                tracing::warn!(error = %err, "no sentinel named a primary; asking again on the next failure");
                return;
            }
        };
        if addr == self.read().addr {
            return; // same primary: its connection manager reconnects by itself
        }
        let what = format!("connect to the primary at {addr}");
        let manager = match connect_manager(&client, &what, self.timeouts).await {
            Ok(manager) => manager,
            Err(err) => {
                tracing::warn!(error = %err, %addr, "could not connect to the new primary yet");
                return;
            }
        };
        {
            let mut primary = self.primary.write().unwrap_or_else(|p| p.into_inner());
            tracing::warn!(from = %primary.addr, to = %addr, master = %self.master, "Sentinel failover: switching to the new primary");
            *primary = Primary {
                generation: self.generations.fetch_add(1, Ordering::Relaxed),
                addr,
                client,
                manager,
            };
        }
        if let Some(hook) = self.on_switch.get() {
            hook();
        }
    }

    /// A client for `host:port` with the primary's credentials, database and TLS, if that
    /// server says it is a primary.
    async fn confirm_primary(&self, host: String, port: u16) -> Result<(String, redis::Client)> {
        let addr = match self.node.addr() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host: host.clone(),
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(host.clone(), port),
        };
        let what = format!("check the primary named at {host}:{port}");
        let client = redis::Client::open(self.node.clone().set_addr(addr))
            .map_err(|err| Error::Connection(format!("{what}: {err}")))?;
        let role = async {
            let mut connection = client.get_multiplexed_async_connection().await?;
            redis::cmd("ROLE")
                .query_async::<redis::Value>(&mut connection)
                .await
        };
        match tokio::time::timeout(self.timeouts.connect, role).await {
            Ok(Ok(redis::Value::Array(parts))) if matches!(parts.first(), Some(redis::Value::BulkString(role)) if role == b"master") => {
                Ok((format!("{host}:{port}"), client))
            }
            Ok(Ok(other)) => Err(Error::Connection(format!(
                "{what}: it is not a primary ({other:?})"
            ))),
            Ok(Err(err)) => Err(Error::Connection(format!("{what}: {err}"))),
            Err(_) => Err(Error::Connection(format!("{what}: no answer"))),
        }
    }

    pub(crate) fn shutdown(&self) {
        if let Some(watcher) = self
            .watcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            watcher.abort();
        }
    }
}

/// The `redis` crate's sentinel client, which finds the primary and checks its role, connecting
/// to it as `node` says (credentials, database, TLS and its certificates).
fn sentinel_client(
    sentinels: &[ConnectionInfo],
    master: &str,
    node: &ConnectionInfo,
    #[allow(unused_variables)] tls: &crate::tls::Tls,
) -> redis::RedisResult<SentinelClient> {
    let tls_mode = match node.addr() {
        ConnectionAddr::TcpTls { insecure: true, .. } => Some(redis::TlsMode::Insecure),
        ConnectionAddr::TcpTls { .. } => Some(redis::TlsMode::Secure),
        _ => None,
    };
    #[cfg(feature = "tls")]
    if let Some(certs) = tls.certs() {
        // Only the builder takes certificates: the node's settings one by one.
        let settings = node.redis_settings();
        let mut builder = redis::sentinel::SentinelClientBuilder::new(
            sentinels.iter().map(|sentinel| sentinel.addr().clone()),
            master,
            SentinelServerType::Master,
        )?
        .set_client_to_redis_db(settings.db())
        .set_client_to_redis_protocol(settings.protocol())
        .set_client_to_redis_certificates(certs);
        if let Some(mode) = tls_mode {
            builder = builder.set_client_to_redis_tls_mode(mode);
        }
        if let Some(username) = settings.username() {
            builder = builder.set_client_to_redis_username(username);
        }
        if let Some(password) = settings.password() {
            builder = builder.set_client_to_redis_password(password);
        }
        return builder.build();
    }
    let mut node_info = SentinelNodeConnectionInfo::default()
        .set_redis_connection_info(node.redis_settings().clone());
    if let Some(mode) = tls_mode {
        node_info = node_info.set_tls_mode(mode);
    }
    // A `String` without redis's TLS features, any `AsRef<str>` with them.
    #[allow(clippy::unnecessary_to_owned)]
    SentinelClient::build(
        sentinels.to_vec(),
        master.to_owned(),
        Some(node_info),
        SentinelServerType::Master,
    )
}

async fn discover(
    client: &mut SentinelClient,
    master: &str,
    timeouts: Timeouts,
) -> Result<(String, redis::Client)> {
    let what = format!("ask the sentinels for the primary of '{master}'");
    let client = match tokio::time::timeout(timeouts.connect, client.async_get_client()).await {
        Ok(Ok(client)) => client,
        Ok(Err(err)) => return Err(Error::Connection(format!("{what}: {err}"))),
        Err(_) => {
            return Err(Error::Connection(format!(
                "{what}: no answer within {:?}",
                timeouts.connect
            )))
        }
    };
    let addr = client.get_connection_info().addr().to_string();
    Ok((addr, client))
}

/// Asks one sentinel at a time, every [`WATCH_PERIOD`], which primary it names, and switches
/// at once when that is another one; moves to the next sentinel when one does not answer.
async fn watch_switches(sentinel: std::sync::Weak<Sentinel>) {
    let mut turn = 0usize;
    loop {
        tokio::time::sleep(WATCH_PERIOD).await;
        let (info, master, timeout, current) = {
            let Some(sentinel) = sentinel.upgrade() else {
                return;
            };
            let info = sentinel.sentinels[turn % sentinel.sentinels.len()].clone();
            let current = sentinel.read().addr.clone();
            (
                info,
                sentinel.master.clone(),
                sentinel.timeouts.response,
                current,
            )
        };
        let named = async {
            let client = redis::Client::open(info)?;
            let mut connection = client.get_multiplexed_async_connection().await?;
            redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(&master)
                .query_async::<Option<(String, u16)>>(&mut connection)
                .await
        };
        match tokio::time::timeout(timeout, named).await {
            Ok(Ok(Some((host, port)))) => {
                if format!("{host}:{port}") != current {
                    let Some(sentinel) = sentinel.upgrade() else {
                        return;
                    };
                    sentinel.rediscover(None, Some((host, port))).await;
                }
            }
            // No answer: ask the next sentinel.
            _ => turn += 1,
        }
    }
}
