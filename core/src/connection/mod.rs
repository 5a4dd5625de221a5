//! The command connection of a client, whatever the deployment: one server (a
//! `ConnectionManager`), a Redis Cluster (the `redis` crate's cluster client, which follows
//! MOVED and ASK, slot migrations and failovers), or a primary found through Sentinel
//! (`sentinel`). Scripts are sent through [`Connection`] as through any `redis` connection.
//!
//! Also here: how lock scripts publish on this deployment ([`Publish`]), and waiting for
//! replicas to acknowledge a write (`WAIT`, for `sync_replicas`).
//!
//! And the pub/sub hub (`pubsub`): one pub/sub connection, one subscription per channel shared
//! by the local listeners, resubscribed after a reconnect or a slot move.

#[cfg(feature = "explorer")]
pub(crate) mod explored;
pub(crate) mod loop_link;
pub(crate) mod loop_tasks;
mod per_runtime;
pub(crate) mod pubsub;
mod replica_sync;
mod script_call;
pub(crate) mod sentinel;
pub(crate) mod target;

pub(crate) use replica_sync::{ReplicaSync, Synced};
pub(crate) use script_call::ScriptCall;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr,
};
use redis::{Cmd, Pipeline, RedisFuture, Value};

use per_runtime::SingleServer;
use sentinel::Sentinel;

use crate::foundation::error::{Error, Result};
use crate::metrics::Metrics;

/// How long to wait for a connection, and then for each reply, on every connection a client
/// opens (commands, pub/sub, sentinels).
#[derive(Clone, Copy)]
pub(crate) struct Timeouts {
    pub connect: Duration,
    pub response: Duration,
}

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
        Ok(Err(err)) => Err(match crate::foundation::redis_errors::tls_failure(&err) {
            Some(why) => Error::connection(format!("{what}: TLS: {why} ({err})")),
            None => Error::connection(format!("{what}: {err}")),
        }
        .with_source(err)),
        Err(_) => Err(Error::connection(format!(
            "{what}: no answer within {:?}",
            timeouts.connect
        ))),
    }
}

/// How lock scripts publish their wake-up messages: `PUBLISH`, or on Redis Cluster 7+
/// `SPUBLISH` (sharded pub/sub), as Redisson does there, so that both wake each other. On a
/// cluster without sharded pub/sub (`Broadcast`) a `PUBLISH` reaches subscribers on every node,
/// so no script can count a channel's listeners: it assumes some other client listens, and
/// never grants a lock by a message whose PUBLISH reply said nobody listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Publish {
    Plain,
    Sharded,
    Broadcast,
    /// Test only (the protocol explorer): every publish is logged on the server for the
    /// explorer to deliver, and answers the listener count the explorer keeps there. `exact`:
    /// listeners are counted as on one server or a sharded cluster; else as a broadcast
    /// cluster's `PUBLISH` counts them (the explorer then counts only same-node listeners, and
    /// the script assumes another client listens, as the broadcast form does).
    #[cfg(feature = "explorer")]
    Explored {
        exact: bool,
    },
}

/// The command connection of one deployment, counting what it sends once a client's metrics
/// are attached ([`Connection::counted`]).
#[derive(Clone)]
pub struct Connection {
    link: Link,
    counter: Option<Arc<CallCounter>>,
}

#[derive(Clone)]
enum Link {
    Single(Arc<SingleServer>),
    Cluster(ClusterConnection),
    Sentinel(Arc<Sentinel>),
    /// Test only: the protocol explorer's seam (`explored`).
    #[cfg(feature = "explorer")]
    Explored(Arc<explored::Wire>),
}

/// Counts a client's server calls, their errors by kind, and the reconnects of its command
/// connection. A reconnect is seen as a reply after calls failed for want of a connection (the
/// `redis` crate reconnects without telling), so counting sends nothing to the server.
struct CallCounter {
    metrics: Arc<Metrics>,
    /// A call failed for want of a connection since the last reply.
    broken: AtomicBool,
}

impl CallCounter {
    /// Whether a command is a call of its own: loading a script is part of the script's call.
    fn counts(cmd: &Cmd) -> bool {
        !cmd.args_iter().next().is_some_and(
            |name| matches!(name, redis::Arg::Simple(name) if name.eq_ignore_ascii_case(b"SCRIPT")),
        )
    }

    /// One call got `reply` (the server's errors come as values: see [`CallCounter::server_errors`]).
    fn replied(&self, reply: Result<&[Value], &redis::RedisError>) {
        let err = match reply {
            Ok(values) => {
                let mut errors = values.iter().filter_map(|value| match value {
                    Value::ServerError(err) => Some(err),
                    _ => None,
                });
                let first = errors.next();
                if first.is_some_and(|err| err.kind() == Some(redis::ServerErrorKind::NoScript)) {
                    // The `redis` crate loads the script and sends it again: that call counts.
                    return self.reconnected_if_broken();
                }
                self.metrics.server_call();
                // The server answered: the connection works.
                self.reconnected_if_broken();
                for err in first.into_iter().chain(errors) {
                    let err = redis::RedisError::from(err.clone());
                    self.metrics
                        .server_error(Error::kind_of_redis(&err).as_str());
                }
                return;
            }
            Err(err) => err,
        };
        self.metrics.server_call();
        self.metrics
            .server_error(Error::kind_of_redis(err).as_str());
        if err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal() {
            self.broken.store(true, Ordering::Relaxed);
        }
    }

    fn reconnected_if_broken(&self) {
        if self.broken.swap(false, Ordering::Relaxed) {
            self.metrics.reconnected();
        }
    }
}

impl Connection {
    pub(crate) fn single(
        manager: ConnectionManager,
        client: redis::Client,
        timeouts: Timeouts,
    ) -> Connection {
        Connection::of(Link::Single(Arc::new(SingleServer::new(
            manager, client, timeouts,
        ))))
    }

    /// The single server a loop link may reach (`loop_link`), for a client of one server.
    pub(crate) fn single_server(&self) -> Option<Arc<SingleServer>> {
        match &self.link {
            Link::Single(server) => Some(Arc::clone(server)),
            _ => None,
        }
    }

    /// Closes the connections opened for calling runtimes (the client closes).
    pub(crate) fn close(&self) {
        if let Link::Single(server) = &self.link {
            server.close();
        }
    }

    pub(crate) fn cluster(cluster: ClusterConnection) -> Connection {
        Connection::of(Link::Cluster(cluster))
    }

    pub(crate) fn sentinel(sentinel: Arc<Sentinel>) -> Connection {
        Connection::of(Link::Sentinel(sentinel))
    }

    #[cfg(feature = "explorer")]
    pub fn explored(wire: Arc<explored::Wire>) -> Connection {
        Connection::of(Link::Explored(wire))
    }

    /// Whether this is the protocol explorer's seam (which keeps no client record).
    #[cfg(feature = "explorer")]
    pub(crate) fn is_explored(&self) -> bool {
        matches!(self.link, Link::Explored(_))
    }

    fn of(link: Link) -> Connection {
        Connection {
            link,
            counter: None,
        }
    }

    /// This connection, counting into `metrics` from now on (its clones too).
    pub(crate) fn counted(self, metrics: Arc<Metrics>) -> Connection {
        Connection {
            counter: Some(Arc::new(CallCounter {
                metrics,
                broken: AtomicBool::new(false),
            })),
            ..self
        }
    }

    /// The hash slot of `key` as the cluster sees it (one group for other deployments): what
    /// one script may touch together.
    pub(crate) fn slot_of(&self, key: &str) -> Slot {
        match self.link {
            Link::Cluster(_) => Slot::for_key(key),
            _ => Slot::for_key(""),
        }
    }

    /// Counts one call routed to chosen cluster nodes.
    fn count(&self, reply: redis::RedisResult<Value>) -> redis::RedisResult<Value> {
        if let Some(counter) = &self.counter {
            counter.replied(reply.as_ref().map(std::slice::from_ref));
        }
        reply
    }

    /// How lock scripts must publish on this cluster, from what the server answers to one
    /// `SPUBLISH` on the probe channel (no admin command, no `INFO`, which managed services and
    /// least-privilege users may not have): a reply means sharded pub/sub (Redis 7+, as
    /// Redisson uses there); "unknown command" means a server without it (Redis 6.2, or the
    /// command renamed away), where `PUBLISH` reaches every node; a refusal is a Permission
    /// error naming `SPUBLISH`, never a silent fall back to broadcast.
    pub(crate) async fn cluster_publish_mode(&self, what: &str) -> Result<Publish> {
        let mut probe = redis::cmd("SPUBLISH");
        probe.arg(crate::acl::rules::PROBE_CHANNEL).arg("probe");
        match self.query_at(crate::acl::rules::PROBE_CHANNEL, probe).await {
            Ok(_) => {
                tracing::info!(
                    mode = "sharded",
                    "cluster pub/sub mode: sharded (SPUBLISH/SSUBSCRIBE), because the cluster \
                     answered SPUBLISH"
                );
                Ok(Publish::Sharded)
            }
            Err(err) if is_unknown_command(&err) => {
                tracing::info!(
                    mode = "broadcast",
                    "cluster pub/sub mode: broadcast (PUBLISH/SUBSCRIBE), because the cluster \
                     does not know SPUBLISH ({err})"
                );
                Ok(Publish::Broadcast)
            }
            Err(err) => Err(Error::from_redis(
                &format!("{what}: learn the cluster's pub/sub mode (SPUBLISH)"),
                err,
            )),
        }
    }

    /// Every key matching `pattern`, by `SCAN` (on a cluster, on every primary: each has its
    /// own keys and its own cursor). Unsorted; a key may appear twice.
    pub(crate) async fn scan(&self, pattern: &str) -> redis::RedisResult<Vec<String>> {
        let mut keys = Vec::new();
        let mut cursors = ScanCursors::default();
        loop {
            self.scan_page(pattern, &mut cursors, &mut keys).await?;
            if cursors.through() {
                return Ok(keys);
            }
        }
    }

    /// One `SCAN` call on each primary whose cursor is not through yet (the first call on every
    /// primary when `cursors` is new), its keys appended to `keys`: a sweep spread over as many
    /// calls as the caller likes. [`ScanCursors::through`] once every primary's cursor is back
    /// at 0.
    pub(crate) async fn scan_page(
        &self,
        pattern: &str,
        cursors: &mut ScanCursors,
        keys: &mut Vec<String>,
    ) -> redis::RedisResult<()> {
        let scan = |cursor: u64| {
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT);
            cmd
        };
        match &self.link {
            Link::Cluster(cluster) => {
                let mut cluster = cluster.clone();
                if cursors.0.is_empty() {
                    // With no response policy the cluster client answers with each primary's
                    // own reply, by address; each primary's cursor then continues there.
                    let first = self.count(
                        cluster
                            .route_command(
                                scan(0),
                                RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None)),
                            )
                            .await,
                    )?;
                    let Value::Map(replies) = first else {
                        return Err(unexpected("SCAN on every primary", &first));
                    };
                    for (address, reply) in replies {
                        let address: String = redis::from_redis_value(address)?;
                        let (host, port) = address
                            .rsplit_once(':')
                            .and_then(|(host, port)| Some((host.to_owned(), port.parse().ok()?)))
                            .ok_or_else(|| unexpected("a node address", &Value::Nil))?;
                        let cursor = take_page(reply, keys)?;
                        cursors.0.push((Some((host, port)), cursor));
                    }
                    return Ok(());
                }
                for (node, cursor) in cursors.0.iter_mut().filter(|(_, cursor)| *cursor != 0) {
                    let Some((host, port)) = node.clone() else {
                        continue;
                    };
                    let route = SingleNodeRoutingInfo::ByAddress { host, port };
                    let reply = self.count(
                        cluster
                            .route_command(scan(*cursor), RoutingInfo::SingleNode(route))
                            .await,
                    )?;
                    *cursor = take_page(reply, keys)?;
                }
            }
            _ => {
                let mut connection = self.clone();
                let cursor = match cursors.0.first() {
                    None => 0,
                    Some((_, 0)) => return Ok(()),
                    Some((_, cursor)) => *cursor,
                };
                let reply = scan(cursor).query_async(&mut connection).await?;
                cursors.0 = vec![(None, take_page(reply, keys)?)];
            }
        }
        Ok(())
    }

    /// Runs `command` on the node that serves `key` (the primary, on a cluster).
    pub(crate) async fn query_at(&self, key: &str, command: Cmd) -> redis::RedisResult<Value> {
        match &self.link {
            Link::Cluster(cluster) => {
                let route = Route::with_key(key, SlotAddr::Master);
                // A routed command hands a server's error back as a value: made an error here.
                self.count(
                    cluster
                        .clone()
                        .route_command(
                            command,
                            RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                        )
                        .await
                        .and_then(Value::extract_error),
                )
            }
            _ => command.query_async(&mut self.clone()).await,
        }
    }
}

/// Where a sweep of [`Connection::scan_page`] is: each primary's address (none for one
/// server) and cursor. New (empty): not started.
#[derive(Debug, Clone, Default)]
pub(crate) struct ScanCursors(Vec<(Option<(String, u16)>, u64)>);

impl ScanCursors {
    /// Every primary's cursor is back at 0: the sweep is through.
    pub(crate) fn through(&self) -> bool {
        !self.0.is_empty() && self.0.iter().all(|(_, cursor)| *cursor == 0)
    }
}

/// Keys asked for per `SCAN` call: large enough to page a big keyspace quickly, small enough
/// not to stall the server.
const SCAN_COUNT: usize = 500;

/// One `SCAN` reply, `[cursor, [key, ...]]`: its keys appended to `keys`, its next cursor.
fn take_page(reply: Value, keys: &mut Vec<String>) -> redis::RedisResult<u64> {
    if let Value::ServerError(err) = reply {
        return Err(err.into());
    }
    let (cursor, page): (u64, Vec<String>) = redis::from_redis_value(reply)?;
    keys.extend(page);
    Ok(cursor)
}

/// `ERR unknown command 'X'`: the server has no such command (too old, or renamed away).
pub(crate) fn is_unknown_command(err: &redis::RedisError) -> bool {
    err.code() == Some("ERR") && err.to_string().to_lowercase().contains("unknown command")
}

fn unexpected(what: &str, reply: &Value) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::Parse,
        "unexpected reply",
        format!("{what}: {reply:?}"),
    ))
}

/// `sent` (one command, or a pipeline), counted by `counter` when it answers.
fn counted<'a, T: Send + 'a>(
    counter: Option<Arc<CallCounter>>,
    sent: RedisFuture<'a, T>,
    values: fn(&T) -> &[Value],
) -> RedisFuture<'a, T> {
    match counter {
        None => sent,
        Some(counter) => Box::pin(async move {
            let reply = sent.await;
            counter.replied(reply.as_ref().map(values));
            reply
        }),
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let counter = self.counter.clone().filter(|_| CallCounter::counts(cmd));
        let sent = match &mut self.link {
            Link::Single(server) => server.req_packed_command(cmd),
            Link::Cluster(cluster) => cluster.req_packed_command(cmd),
            Link::Sentinel(sentinel) => Box::pin(async move {
                let (generation, mut manager) = sentinel.manager();
                sentinel.watch_reply(generation, manager.req_packed_command(cmd).await)
            }),
            #[cfg(feature = "explorer")]
            Link::Explored(wire) => wire.command(cmd),
        };
        counted(counter, sent, std::slice::from_ref)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        // A pipeline is one call.
        let counter = self.counter.clone();
        let sent = match &mut self.link {
            Link::Single(server) => server.req_packed_commands(pipeline, offset, count),
            Link::Cluster(cluster) => cluster.req_packed_commands(pipeline, offset, count),
            Link::Sentinel(sentinel) => Box::pin(async move {
                let (generation, mut manager) = sentinel.manager();
                let reply = manager.req_packed_commands(pipeline, offset, count).await;
                sentinel.watch_reply(generation, reply)
            }),
            #[cfg(feature = "explorer")]
            Link::Explored(wire) => wire.pipeline(pipeline, offset, count),
        };
        counted(counter, sent, Vec::as_slice)
    }

    fn get_db(&self) -> i64 {
        match &self.link {
            Link::Single(server) => server.own().get_db(),
            Link::Cluster(cluster) => cluster.get_db(),
            Link::Sentinel(sentinel) => sentinel.manager().1.get_db(),
            #[cfg(feature = "explorer")]
            Link::Explored(_) => 0,
        }
    }
}
