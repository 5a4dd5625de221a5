//! A primary found through Sentinel, followed across failovers.
//!
//! The command connection is a `ConnectionManager` to the primary the sentinels name. It is
//! replaced when a sentinel announces a new primary (`+switch-master`, on one long-lived
//! subscription per sentinel: see [`watch_sentinel`]; while none is subscribed they are asked
//! twice a second instead) and when a command fails in a way a failover causes (the old primary
//! refused, gone, or demoted to a read-only replica). After a switch the client's hooks run:
//! the pub/sub hub reconnects to the new primary and every held lock is checked at once (a
//! lock that had not reached the promoted replica is reported lost).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{ConnectionAddr, ConnectionInfo, RedisError};

use crate::connection::connect_manager;
use crate::connection::Timeouts;
use crate::foundation::error::{Error, Result};

/// How often the sentinels are asked which primary they name while no subscription is up.
const WATCH_PERIOD: Duration = Duration::from_millis(500);
/// How often a subscription is checked with `PING`: a sentinel that stopped answering without
/// closing the connection (a hung process, a cut network) is noticed this late at most.
const SUBSCRIPTION_PING_PERIOD: Duration = Duration::from_secs(3);
/// The first and the longest wait before subscribing again to a sentinel that went away.
const RESUBSCRIBE_BACKOFF: (Duration, Duration) =
    (Duration::from_millis(250), Duration::from_secs(5));
/// The channel on which every sentinel announces a new primary:
/// `<master-name> <old-ip> <old-port> <new-ip> <new-port>`.
const SWITCH_MASTER_CHANNEL: &str = "+switch-master";

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
    /// How many sentinels we are subscribed to now; none: [`poll_while_unsubscribed`] asks.
    subscribed: AtomicUsize,
    /// One subscription task per sentinel and the fallback poll; aborted on shutdown, which
    /// closes their connections.
    watchers: Mutex<Vec<tokio::task::JoinHandle<()>>>,
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
        tls: &crate::settings::tls::Tls,
        timeouts: Timeouts,
    ) -> Result<Arc<Sentinel>> {
        let mut client = sentinel_client(&sentinels, &master, &node, tls).map_err(|err| {
            Error::invalid_argument(format!("bad sentinel URL: {err}")).with_source(err)
        })?;
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
            subscribed: AtomicUsize::new(0),
            watchers: Mutex::new(Vec::new()),
        });
        let mut watchers: Vec<_> = (0..sentinel.sentinels.len())
            .map(|index| tokio::spawn(watch_sentinel(Arc::downgrade(&sentinel), index)))
            .collect();
        watchers.push(tokio::spawn(poll_while_unsubscribed(Arc::downgrade(
            &sentinel,
        ))));
        *sentinel.watchers.lock().unwrap_or_else(|p| p.into_inner()) = watchers;
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
            .map_err(|err| Error::connection(format!("{what}: {err}")).with_source(err))?;
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
            Ok(Ok(other)) => Err(Error::connection(format!(
                "{what}: it is not a primary ({other:?})"
            ))),
            Ok(Err(err)) => Err(Error::connection(format!("{what}: {err}")).with_source(err)),
            Err(_) => Err(Error::connection(format!("{what}: no answer"))),
        }
    }

    pub(crate) fn shutdown(&self) {
        for watcher in self
            .watchers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            watcher.abort();
        }
    }

    /// Acts on a `+switch-master` message: switches when it names another primary of ours.
    async fn on_switch_master(&self, payload: &str) {
        let mut fields = payload.split(' ');
        let (Some(master), Some(_), Some(_), Some(host), Some(port)) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            tracing::warn!(payload, "a +switch-master message of an unknown form");
            return;
        };
        let Ok(port) = port.parse::<u16>() else {
            tracing::warn!(payload, "a +switch-master message of an unknown form");
            return;
        };
        if master == self.master && format!("{host}:{port}") != self.read().addr {
            self.rediscover(None, Some((host.to_owned(), port))).await;
        }
    }
}

/// The `redis` crate's sentinel client, which finds the primary and checks its role, connecting
/// to it as `node` says (credentials, database, TLS and its certificates).
fn sentinel_client(
    sentinels: &[ConnectionInfo],
    master: &str,
    node: &ConnectionInfo,
    #[allow(unused_variables)] tls: &crate::settings::tls::Tls,
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
        Ok(Err(err)) => {
            return Err(Error::connection(
                match crate::foundation::redis_errors::tls_failure(&err) {
                    Some(why) => format!("{what}: TLS: {why} ({err})"),
                    None => format!("{what}: {err}"),
                },
            )
            .with_source(err))
        }
        Err(_) => {
            return Err(Error::connection(format!(
                "{what}: no answer within {:?}",
                timeouts.connect
            )))
        }
    };
    let addr = client.get_connection_info().addr().to_string();
    Ok((addr, client))
}

/// Keeps one connection to sentinel `index` subscribed to `+switch-master`, for as long as the
/// client lives, and switches when it names a new primary of ours. When the connection fails
/// it subscribes again after a growing pause (meanwhile [`poll_while_unsubscribed`] asks, if
/// no other sentinel's subscription is up), then asks the sentinels once for a switch it may
/// have missed.
async fn watch_sentinel(sentinel: std::sync::Weak<Sentinel>, index: usize) {
    use futures_util::StreamExt;

    let mut backoff = RESUBSCRIBE_BACKOFF.0;
    let mut subscribed_before = false;
    loop {
        let (info, timeouts) = {
            let Some(sentinel) = sentinel.upgrade() else {
                return;
            };
            (sentinel.sentinels[index].clone(), sentinel.timeouts)
        };
        let subscribing = async {
            let client = redis::Client::open(info.clone())?;
            let (mut sink, stream) = client.get_async_pubsub().await?.split();
            sink.subscribe(SWITCH_MASTER_CHANNEL).await?;
            redis::RedisResult::Ok((sink, stream))
        };
        let (mut sink, mut stream) = match tokio::time::timeout(timeouts.connect, subscribing).await
        {
            Ok(Ok(subscription)) => subscription,
            failed => {
                let why = match failed {
                    Ok(Err(err)) => err.to_string(),
                    _ => "no answer".to_owned(),
                };
                tracing::debug!(sentinel = %info.addr(), %why, "could not subscribe to a sentinel; trying again later");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(RESUBSCRIBE_BACKOFF.1);
                continue;
            }
        };
        let Some(watched) = sentinel.upgrade() else {
            return;
        };
        watched.subscribed.fetch_add(1, Ordering::Relaxed);
        // Counted down however this subscription ends, the task's abort included.
        let subscribed = Subscribed(sentinel.clone());
        if subscribed_before {
            // A switch announced while this subscription was down.
            watched.rediscover(None, None).await;
        }
        subscribed_before = true;
        drop(watched);
        let mut ping = tokio::time::interval(SUBSCRIPTION_PING_PERIOD);
        ping.reset();
        // Whether the sentinel answered on this subscription: the pause before the next one
        // starts short again only then, so a sentinel that drops every subscription at once
        // is not asked in a tight loop.
        let mut answered_once = false;
        loop {
            tokio::select! {
                message = stream.next() => {
                    let Some(message) = message else {
                        break; // the connection closed
                    };
                    let Ok(payload) = message.get_payload::<String>() else {
                        continue;
                    };
                    answered_once = true;
                    let Some(watched) = sentinel.upgrade() else {
                        return;
                    };
                    watched.on_switch_master(&payload).await;
                }
                _ = ping.tick() => {
                    if sentinel.strong_count() == 0 {
                        return; // the client is gone
                    }
                    let answered = tokio::time::timeout(
                        timeouts.response,
                        sink.ping::<redis::Value>(),
                    )
                    .await;
                    if !matches!(answered, Ok(Ok(_))) {
                        break;
                    }
                    answered_once = true;
                }
            }
        }
        drop(subscribed);
        tracing::debug!(sentinel = %info.addr(), "the subscription to a sentinel ended; subscribing again");
        if answered_once {
            backoff = RESUBSCRIBE_BACKOFF.0;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(RESUBSCRIBE_BACKOFF.1);
    }
}

/// Counts one live subscription of [`watch_sentinel`] until dropped.
struct Subscribed(std::sync::Weak<Sentinel>);

impl Drop for Subscribed {
    fn drop(&mut self) {
        if let Some(sentinel) = self.0.upgrade() {
            sentinel.subscribed.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// While no sentinel subscription is up, asks one sentinel at a time, every [`WATCH_PERIOD`]
/// (on a new connection each time), which primary it names, and switches at once when that is
/// another one; moves to the next sentinel when one does not answer.
async fn poll_while_unsubscribed(sentinel: std::sync::Weak<Sentinel>) {
    let mut turn = 0usize;
    loop {
        tokio::time::sleep(WATCH_PERIOD).await;
        let (info, master, timeout, current) = {
            let Some(sentinel) = sentinel.upgrade() else {
                return;
            };
            if sentinel.subscribed.load(Ordering::Relaxed) > 0 {
                continue;
            }
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
