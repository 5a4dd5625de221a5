//! The command connection of a client, whatever the deployment: one server (a
//! `ConnectionManager`), a Redis Cluster (the `redis` crate's cluster client, which follows
//! MOVED and ASK, slot migrations and failovers), or a primary found through Sentinel
//! (`sentinel`). Scripts are sent through [`Connection`] as through any `redis` connection.
//!
//! Also here: how lock scripts publish on this deployment ([`Publish`]), and waiting for
//! replicas to acknowledge a write (`WAIT`, for `sync_replicas`).

pub(crate) mod sentinel;
pub(crate) mod target;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::{Cmd, Pipeline, RedisFuture, Value};

use sentinel::Sentinel;

use crate::error::{Error, Result};
use crate::pubsub::Timeouts;

/// Opens a command connection to one server (which reconnects by itself), within the connect
/// timeout; its failures are connection errors naming `what`.
pub(crate) async fn connect_manager(
    client: &redis::Client,
    what: &str,
    timeouts: Timeouts,
) -> Result<ConnectionManager> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeouts.connect))
        .set_response_timeout(Some(timeouts.response))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(500));
    match tokio::time::timeout(
        timeouts.connect,
        ConnectionManager::new_with_config(client.clone(), config),
    )
    .await
    {
        Ok(Ok(manager)) => Ok(manager),
        Ok(Err(err)) => Err(Error::Connection(format!("{what}: {err}"))),
        Err(_) => Err(Error::Connection(format!(
            "{what}: no answer within {:?}",
            timeouts.connect
        ))),
    }
}

/// How lock scripts publish their wake-up messages: `PUBLISH`, or on Redis Cluster 7+
/// `SPUBLISH` (sharded pub/sub), as Redisson does there, so that both wake each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Publish {
    Plain,
    Sharded,
}

/// A lock script in its two forms: publishing with `PUBLISH` or with `SPUBLISH`.
pub(crate) struct LockScript {
    plain: redis::Script,
    sharded: redis::Script,
}

impl LockScript {
    pub(crate) fn new(text: &str) -> LockScript {
        LockScript {
            plain: redis::Script::new(text),
            sharded: redis::Script::new(
                &text.replace("redis.call('publish'", "redis.call('spublish'"),
            ),
        }
    }

    pub(crate) fn prepare_invoke(
        &'static self,
        publish: Publish,
    ) -> redis::ScriptInvocation<'static> {
        match publish {
            Publish::Plain => self.plain.prepare_invoke(),
            Publish::Sharded => self.sharded.prepare_invoke(),
        }
    }
}

#[derive(Clone)]
pub(crate) enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(Arc<Sentinel>),
}

impl Connection {
    /// The hash slot of `key` as the cluster sees it (one group for other deployments): what
    /// one script may touch together.
    pub(crate) fn slot_of(&self, key: &str) -> Slot {
        match self {
            Connection::Cluster(_) => Slot::for_key(key),
            _ => Slot::for_key(""),
        }
    }

    /// The major version of Redis (`INFO server`; on a cluster, of one primary).
    pub(crate) async fn server_major_version(&self) -> Option<u32> {
        let mut info = redis::cmd("INFO");
        info.arg("server");
        let reply = match self {
            Connection::Cluster(cluster) => cluster
                .clone()
                .route_command(
                    info,
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary),
                )
                .await
                .ok()?,
            other => info.query_async(&mut other.clone()).await.ok()?,
        };
        let text: String = redis::from_redis_value(reply).ok()?;
        text.lines()
            .find_map(|line| line.strip_prefix("redis_version:"))
            .and_then(|version| version.split('.').next()?.trim().parse().ok())
    }

    /// Runs `command` on the node that serves `key` (the primary, on a cluster).
    async fn query_at(&self, key: &str, command: Cmd) -> redis::RedisResult<Value> {
        match self {
            Connection::Cluster(cluster) => {
                let route = Route::with_key(key, SlotAddr::Master);
                cluster
                    .clone()
                    .route_command(
                        command,
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                    )
                    .await
            }
            other => command.query_async(&mut other.clone()).await,
        }
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(manager) => manager.req_packed_command(cmd),
            Connection::Cluster(cluster) => cluster.req_packed_command(cmd),
            Connection::Sentinel(sentinel) => Box::pin(async move {
                let (generation, mut manager) = sentinel.manager();
                sentinel.watch_reply(generation, manager.req_packed_command(cmd).await)
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(manager) => manager.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(cluster) => cluster.req_packed_commands(pipeline, offset, count),
            Connection::Sentinel(sentinel) => Box::pin(async move {
                let (generation, mut manager) = sentinel.manager();
                let reply = manager.req_packed_commands(pipeline, offset, count).await;
                sentinel.watch_reply(generation, reply)
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(manager) => manager.get_db(),
            Connection::Cluster(cluster) => cluster.get_db(),
            Connection::Sentinel(sentinel) => sentinel.manager().1.get_db(),
        }
    }
}

/// What `WAIT` found after a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Synced {
    /// Every connected replica acknowledged it.
    Acked,
    /// Not every one of the `replicas` connected replicas acknowledged it within the timeout.
    NotAcked { replicas: usize },
    /// The server has no connected replica: nothing to wait for.
    NoReplicas,
    /// The server refused `WAIT` (some managed offerings): sync is off for this client.
    Unsupported,
}

/// How long a count of connected replicas is trusted before `ROLE` is asked again.
const REPLICA_COUNT_TTL: Duration = Duration::from_secs(1);

/// Follows writes with `WAIT` for the connected replicas (`sync_replicas`). The number of
/// replicas to wait for comes from `ROLE` on the node, asked at most once a second per slot.
pub(crate) struct ReplicaSync {
    timeout: Duration,
    counts: Mutex<HashMap<Slot, (usize, Instant)>>,
    unsupported: std::sync::atomic::AtomicBool,
}

impl ReplicaSync {
    pub(crate) fn new(timeout: Duration) -> ReplicaSync {
        ReplicaSync {
            timeout,
            counts: Mutex::new(HashMap::new()),
            unsupported: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Waits until the replicas of the node serving `key` acknowledged every write sent so far
    /// on this client's connection to it.
    pub(crate) async fn wait(
        &self,
        connection: &Connection,
        key: &str,
    ) -> redis::RedisResult<Synced> {
        use std::sync::atomic::Ordering;
        if self.unsupported.load(Ordering::Relaxed) {
            return Ok(Synced::Unsupported);
        }
        let replicas = match self.replicas(connection, key).await {
            Ok(replicas) => replicas,
            Err(err) if is_refused(&err) => return Ok(self.refused(&err)),
            Err(err) => return Err(err),
        };
        if replicas == 0 {
            return Ok(Synced::NoReplicas);
        }
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(self.timeout.as_millis() as u64);
        match connection.query_at(key, wait).await {
            // Every connected replica must have it: during a failover the replica being
            // promoted stops acknowledging, while the others still follow the old primary and
            // would acknowledge a write the new primary never gets.
            Ok(Value::Int(acked)) if acked as usize >= replicas => Ok(Synced::Acked),
            Ok(Value::Int(_)) => {
                // A replica that left makes the count stale: ask ROLE again next time.
                self.forget(connection, key);
                Ok(Synced::NotAcked { replicas })
            }
            Ok(other) => Err(redis::RedisError::from((
                redis::ErrorKind::Parse,
                "unexpected WAIT reply",
                format!("{other:?}"),
            ))),
            Err(err) if is_refused(&err) => Ok(self.refused(&err)),
            Err(err) => Err(err),
        }
    }

    fn refused(&self, err: &redis::RedisError) -> Synced {
        use std::sync::atomic::Ordering;
        if !self.unsupported.swap(true, Ordering::Relaxed) {
            tracing::warn!(error = %err, "this Redis refuses WAIT (or ROLE): sync_replicas is off for this client; locks are not confirmed on replicas");
        }
        Synced::Unsupported
    }

    fn forget(&self, connection: &Connection, key: &str) {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&connection.slot_of(key));
    }

    async fn replicas(&self, connection: &Connection, key: &str) -> redis::RedisResult<usize> {
        let slot = connection.slot_of(key);
        if let Some((count, at)) = self
            .counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&slot)
        {
            if at.elapsed() < REPLICA_COUNT_TTL {
                return Ok(*count);
            }
        }
        // ROLE on a primary: ["master", offset, [[ip, port, offset], ...]].
        let role = connection.query_at(key, redis::cmd("ROLE")).await?;
        let count = match role {
            Value::Array(parts) => match parts.get(2) {
                Some(Value::Array(replicas)) => replicas.len(),
                _ => 0,
            },
            _ => 0,
        };
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(slot, (count, Instant::now()));
        Ok(count)
    }
}

/// The server does not offer the command (unknown, renamed, or forbidden by ACL).
fn is_refused(err: &redis::RedisError) -> bool {
    matches!(err.code(), Some("NOPERM"))
        || (err.code() == Some("ERR") && err.to_string().to_lowercase().contains("unknown command"))
}

impl ReplicaSync {
    /// Waits for the replicas to take `what` (a release, a watchdog renewal), just written for
    /// the lock `name`. It holds on the primary whatever they say, so a miss is only reported.
    pub(crate) async fn confirm(&self, connection: &Connection, name: &str, what: &str) {
        match self.wait(connection, name).await {
            Ok(Synced::NotAcked { replicas }) => tracing::warn!(
                lock = %name,
                replicas,
                "not every replica acknowledged {what} within {:?}; a failover now could lose it",
                self.timeout
            ),
            Err(err) => {
                tracing::warn!(lock = %name, error = %err, "could not wait for the replicas after {what}")
            }
            Ok(_) => {}
        }
    }
}
