//! Waiting for replicas to acknowledge a write (`sync_replicas`): `WAIT` for the replicas the
//! primary serving a key has, after every acquire, renewal and release.
//!
//! The number to wait for is a high-water mark, not the live count: a primary cut off from its
//! replicas (the old primary in a failover, still reached by some clients) has no replica left
//! to wait for, and `WAIT 0` would confirm every lock taken there while the promoted replica
//! hands the same locks out again. So a replica that left is still waited for, until it has
//! been gone for as long as Sentinel takes by default to call a server down; a new primary (a
//! new replication id) starts from its own count. Neither ever goes below the user's
//! `min_replicas` (as the server's `min-replicas-to-write`): a client that first looks at a
//! primary during a partition sees no replica at all, and one whose replica has been gone for
//! that long would otherwise wait for none, and confirm locks that a promoted replica hands out
//! again.
//!
//! An acquisition is confirmed by one pipeline that repeats the acquire (a retry of the same
//! request, which finds its level, renews it and so writes), reads `INFO replication` and sends
//! `WAIT`, all on one connection to one server: `WAIT` counts only the writes of its own
//! connection, and between two separate calls the connection may have been opened again, to
//! another server (a failover behind Sentinel or behind a managed service's address), where a
//! `WAIT` would confirm nothing, or an `INFO` would count another server's replicas.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use redis::cluster_routing::Slot;
use redis::Value;

use super::{Connection, ScriptCall};

/// What `WAIT` found after a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Synced {
    /// Every replica acknowledged it.
    Acked,
    /// Not every one of the `replicas` replicas acknowledged it within the timeout.
    NotAcked { replicas: usize },
    /// The primary has no replica, had none, and `min_replicas` is 0: nothing to wait for.
    NoReplicas,
    /// The server refused `WAIT` (some managed offerings): sync is off for this client.
    Unsupported,
}

/// How long a replica count is trusted before `INFO replication` is asked again.
const REPLICA_COUNT_TTL: Duration = Duration::from_secs(1);

/// How many confirmation pipelines an acquisition may need: the deployment changes under it
/// only in a failover, and each round learns the server it reached.
const CONFIRM_ROUNDS: usize = 4;

/// How long a replica may be gone before it is no longer waited for: Sentinel's default
/// `down-after-milliseconds`, after which it would call the replica down too.
const REPLICA_GONE_AFTER: Duration = Duration::from_secs(30);

/// The replicas of the primary serving one slot, as last seen.
struct Replicas {
    /// The primary's replication id: a promoted replica gets a new one.
    replication_id: String,
    /// How many replicas to wait for: the most seen online, until one is gone for good.
    expected: usize,
    /// Since when fewer than `expected` are online.
    short_since: Option<Instant>,
    asked_at: Instant,
}

/// Follows writes with `WAIT` for the replicas of the node serving the key, asked with
/// `INFO replication` at most once a second per slot.
pub(crate) struct ReplicaSync {
    timeout: Duration,
    /// The fewest replicas an acquisition must reach, whatever the primary reports.
    min_replicas: usize,
    replicas: Mutex<HashMap<Slot, Replicas>>,
    unsupported: AtomicBool,
}

impl ReplicaSync {
    pub(crate) fn new(timeout: Duration, min_replicas: usize) -> ReplicaSync {
        ReplicaSync {
            timeout,
            min_replicas,
            replicas: Mutex::new(HashMap::new()),
            unsupported: AtomicBool::new(false),
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
        if self.unsupported.load(Ordering::Relaxed) {
            return Ok(Synced::Unsupported);
        }
        let replicas = match self.expected(connection, key).await {
            Ok(replicas) => replicas,
            Err(err) if is_refused(&err) => return Ok(self.refused(&err)),
            Err(err) => return Err(err),
        };
        if replicas == 0 {
            return Ok(Synced::NoReplicas);
        }
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(self.timeout.as_millis() as u64);
        let acked = connection.query_at(key, wait).await;
        self.read_wait(connection, key, replicas, acked)
    }

    /// What `WAIT` for `replicas` replicas of the server serving `key` answered.
    fn read_wait(
        &self,
        connection: &Connection,
        key: &str,
        replicas: usize,
        acked: redis::RedisResult<Value>,
    ) -> redis::RedisResult<Synced> {
        match acked {
            // Every replica must have it: during a failover the replica being promoted stops
            // acknowledging, while the others still follow the old primary and would
            // acknowledge a write the new primary never gets.
            Ok(Value::Int(acked)) if acked as usize >= replicas => Ok(Synced::Acked),
            Ok(Value::Int(_)) => {
                // A replica that left or came back: count again next time.
                self.ask_again(connection, key);
                Ok(Synced::NotAcked { replicas })
            }
            Ok(Value::ServerError(err)) => self.unless_refused(err.into()),
            Ok(other) => Err(unexpected_reply("WAIT", &other)),
            Err(err) => self.unless_refused(err),
        }
    }

    /// `err`, unless it says the server refuses what sync needs: then sync is off.
    fn unless_refused(&self, err: redis::RedisError) -> redis::RedisResult<Synced> {
        if is_refused(&err) {
            Ok(self.refused(&err))
        } else {
            Err(err)
        }
    }

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

    /// False once the server refused what sync needs: then nothing is waited for.
    pub(crate) fn is_on(&self) -> bool {
        !self.unsupported.load(Ordering::Relaxed)
    }

    /// Confirms an acquisition: sends `repeat` (the acquire of the same request), `INFO
    /// replication` and `WAIT` for the replicas the cache expects of the server serving `key`,
    /// in one pipeline, until the server that answered is the one the count was for. Returns
    /// `repeat`'s reply from that server, and what `WAIT` found there.
    pub(crate) async fn confirm_acquisition(
        &self,
        connection: &Connection,
        key: &str,
        repeat: &ScriptCall,
    ) -> redis::RedisResult<(Value, Synced)> {
        let slot = connection.slot_of(key);
        let mut last = None;
        for _ in 0..CONFIRM_ROUNDS {
            let (server, replicas) = self.cached(&slot);
            // Before the first look at this slot's server the count is unknown: this round only
            // learns it (a WAIT now would be for a count that may be wrong, and is sent again).
            let replicas = if server.is_some() { replicas } else { 0 };
            let mut pipe = redis::pipe();
            pipe.ignore_errors()
                .add_command(repeat.eval_cmd())
                .cmd("INFO")
                .arg("replication");
            if replicas > 0 {
                pipe.cmd("WAIT")
                    .arg(replicas)
                    .arg(self.timeout.as_millis() as u64);
            }
            let mut replies: Vec<Value> = pipe.query_async(&mut connection.clone()).await?;
            let waited = (replicas > 0).then(|| replies.pop()).flatten();
            let (info, repeated) = match (replies.pop(), replies.pop()) {
                (Some(info), Some(repeated)) => (info, repeated),
                _ => return Err(unexpected_reply("the confirmation pipeline", &replies)),
            };
            if let Value::ServerError(err) = &repeated {
                if err.kind() == Some(redis::ServerErrorKind::NoScript) {
                    // Another server, which has not seen the script yet.
                    repeat.load_async(&mut connection.clone()).await?;
                    continue;
                }
                return Err(err.clone().into());
            }
            let info = match info {
                Value::ServerError(err) => {
                    return self
                        .unless_refused(err.into())
                        .map(|synced| (repeated, synced))
                }
                info => info,
            };
            let (replication_id, online) = parse_replication(info)?;
            let expected = self.observe(&slot, key, &replication_id, online);
            if server.as_deref() != Some(replication_id.as_str()) || replicas < expected {
                // The count was another server's (or is out of date): ask again with this one's.
                last = Some((repeated, Synced::NotAcked { replicas: expected }));
                continue;
            }
            let synced = match waited {
                None => Synced::NoReplicas,
                Some(acked) => self.read_wait(connection, key, replicas, Ok(acked))?,
            };
            return Ok((repeated, synced));
        }
        // Rounds ran out while the deployment changed under the pipeline: not confirmed.
        last.ok_or_else(|| unexpected_reply("the confirmation pipeline", &"no reply"))
    }

    /// At connect: whether this user may run what `sync_replicas` needs (`INFO replication`,
    /// `WAIT 0 0`, which returns at once). A refusal by ACL is a Permission error naming the
    /// command (the rule's `sync_replicas` addition is missing); a server without the command
    /// (renamed away, as some managed services do) turns sync off for the client, with a
    /// warning, as documented.
    pub(crate) async fn check(&self, connection: &Connection, what: &str) -> crate::Result<()> {
        let info = redis::cmd("INFO").arg("replication").clone();
        let wait = redis::cmd("WAIT").arg(0).arg(0).clone();
        for command in [info, wait] {
            match connection
                .query_at(crate::acl::rules::PROBE_CHANNEL, command)
                .await
            {
                Ok(_) => {}
                Err(err) if super::is_unknown_command(&err) => {
                    self.refused(&err);
                    return Ok(());
                }
                Err(err) => {
                    return Err(crate::Error::from_redis(
                        &format!("{what}: check sync_replicas"),
                        err,
                    ))
                }
            }
        }
        Ok(())
    }

    fn refused(&self, err: &redis::RedisError) -> Synced {
        if !self.unsupported.swap(true, Ordering::Relaxed) {
            tracing::warn!(error = %err, "this Redis refuses WAIT (or INFO): sync_replicas is off for this client; locks are not confirmed on replicas");
        }
        Synced::Unsupported
    }

    fn ask_again(&self, connection: &Connection, key: &str) {
        let mut replicas = self.replicas.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(seen) = replicas.get_mut(&connection.slot_of(key)) {
            seen.asked_at -= REPLICA_COUNT_TTL;
        }
    }

    /// How many replicas to wait for on the node serving `key`.
    async fn expected(&self, connection: &Connection, key: &str) -> redis::RedisResult<usize> {
        let slot = connection.slot_of(key);
        if let Some(seen) = self
            .replicas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&slot)
        {
            if seen.asked_at.elapsed() < REPLICA_COUNT_TTL {
                return Ok(seen.expected);
            }
        }
        let info = connection
            .query_at(key, redis::cmd("INFO").arg("replication").clone())
            .await?;
        let (replication_id, online) = parse_replication(info)?;
        Ok(self.observe(&slot, key, &replication_id, online))
    }

    /// The server last seen serving `slot` (its replication id) and how many replicas it is
    /// expected to have; none and `min_replicas` before the first look.
    fn cached(&self, slot: &Slot) -> (Option<String>, usize) {
        self.replicas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(slot)
            .map_or((None, self.min_replicas), |seen| {
                (
                    Some(seen.replication_id.clone()),
                    seen.expected.max(self.min_replicas),
                )
            })
    }

    /// Takes in what `INFO replication` of the server serving `slot` said; returns how many
    /// replicas to wait for there: the high-water mark, never below `min_replicas`.
    fn observe(&self, slot: &Slot, key: &str, replication_id: &str, online: usize) -> usize {
        let now = Instant::now();
        let mut replicas = self.replicas.lock().unwrap_or_else(|p| p.into_inner());
        let seen = replicas.entry(*slot).or_insert_with(|| Replicas {
            replication_id: replication_id.to_owned(),
            expected: online,
            short_since: None,
            asked_at: now,
        });
        seen.asked_at = now;
        if seen.replication_id != replication_id || online >= seen.expected {
            seen.replication_id = replication_id.to_owned();
            seen.expected = online;
            seen.short_since = None;
        } else {
            let since = *seen.short_since.get_or_insert(now);
            if now.duration_since(since) >= REPLICA_GONE_AFTER {
                tracing::warn!(
                    lock = %key,
                    was = seen.expected,
                    now = online,
                    min_replicas = self.min_replicas,
                    "replicas gone for {REPLICA_GONE_AFTER:?} are no longer waited for (min_replicas still is)"
                );
                seen.expected = online;
                seen.short_since = None;
            }
        }
        seen.expected.max(self.min_replicas)
    }
}

/// From `INFO replication`: the server's replication id and how many replicas are online.
fn parse_replication(info: Value) -> redis::RedisResult<(String, usize)> {
    let text: String = redis::from_redis_value(info)?;
    let mut replication_id = String::new();
    let mut online = 0;
    for line in text.lines() {
        if let Some(id) = line.strip_prefix("master_replid:") {
            replication_id = id.trim().to_owned();
        } else if is_replica_line(line) && line.contains("state=online") {
            online += 1;
        }
    }
    Ok((replication_id, online))
}

/// `slave<N>:ip=...,state=...`: one replica (not `slave_read_only` and the like).
fn is_replica_line(line: &str) -> bool {
    line.strip_prefix("slave")
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
}

fn unexpected_reply(what: &str, reply: &dyn std::fmt::Debug) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::Parse,
        "unexpected reply",
        format!("{what}: {reply:?}"),
    ))
}

/// The server does not offer the command (unknown, renamed, or forbidden by ACL).
fn is_refused(err: &redis::RedisError) -> bool {
    matches!(err.code(), Some("NOPERM")) || super::is_unknown_command(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn online_replicas_and_the_replication_id_are_read_from_info() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n\
                    slave0:ip=127.0.0.1,port=7001,state=online,offset=42,lag=0\r\n\
                    slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n\
                    slave2:ip=127.0.0.1,port=7003,state=online,offset=42,lag=1\r\n\
                    master_failover_state:no-failover\r\n\
                    master_replid:8f3a\r\nmaster_replid2:0000\r\n";
        let (id, online) = parse_replication(Value::BulkString(info.into())).unwrap();
        assert_eq!((id.as_str(), online), ("8f3a", 2));
    }
}
