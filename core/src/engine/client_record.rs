//! The client record `polylock:client:<client-id>` (`docs/PROTOCOL.md`): a hash that says which
//! program a client id belongs to (its name, host, pid), what it holds since when, and its
//! metrics, so that tools and a timed-out acquire can name the holder of a lock. Redisson's
//! owner fields stay as they are: the record is beside them, keyed by the client id that starts
//! every owner string.
//!
//! Each client writes its record at connect, then from one small task: every third of the
//! watchdog lease (the record expires with that lease, so a killed process's record goes with
//! its locks), and about a second after its holds change (debounced: at most one such write a
//! second, and none when the holds are back as written, so an uncontended acquire and release
//! costs no command). The task deletes the record when the client is closed or dropped. A
//! refused write (an ACL without the record's key, a read-only replica) is logged once, and the
//! client goes on without a record.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Value;
use serde_json::json;

use crate::connection::Connection;
use crate::engine::context::{ClientInner, HoldSummary};
use crate::foundation::keys;

/// How long after a change of holds the record is written (changes meanwhile join it).
const HOLDS_DEBOUNCE: Duration = Duration::from_secs(1);

/// What the record fixes at connect.
struct Identity {
    key: String,
    name: String,
    host: String,
    pid: u32,
    connected_ms: u64,
}

/// The writer of one client's record.
struct Writer {
    identity: Identity,
    connection: Connection,
    client: Weak<ClientInner>,
    lease: Duration,
    /// The holds as last written (`None` before the first write).
    written_holds: Option<Vec<HoldSummary>>,
    /// Set once a write was refused: nothing more is written.
    refused: bool,
    /// The client's signal that its holds changed.
    holds_wake: Arc<tokio::sync::Notify>,
    /// The client's `record_kept`, false again when this writer ends (its task returned, or
    /// was dropped with the runtime), which a closing client waits for.
    kept: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.kept.send_replace(false);
    }
}

fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

/// Writes `client`'s record (awaited, so the record exists once connect returns), then starts
/// the task that keeps it.
pub(crate) async fn start(client: &Arc<ClientInner>) {
    // The protocol explorer's clients: a record's writes would be steps of their own.
    #[cfg(feature = "explorer")]
    if client.connection.is_explored() {
        return;
    }
    let identity = Identity {
        key: client.key_of(&keys::client_record(&client.id)),
        name: client.metrics.client_name().to_owned(),
        host: crate::foundation::ids::host_name(),
        pid: client.pid(),
        connected_ms: unix_ms(SystemTime::now()),
    };
    let mut writer = Writer {
        identity,
        connection: client.connection.clone(),
        client: Arc::downgrade(client),
        lease: client.options.watchdog_timeout,
        written_holds: None,
        refused: false,
        holds_wake: client.holds_wake.clone(),
        kept: client.record_kept.clone(),
    };
    writer.write(client).await;
    writer.kept.send_replace(true);
    let closed = client.closed_receiver();
    crate::foundation::runtime::runtime().spawn(writer.run(closed));
}

impl Writer {
    async fn run(mut self, mut closed: tokio::sync::watch::Receiver<bool>) {
        use tokio::time::{sleep_until, Instant};
        let refresh_every = self.lease / 3;
        let mut next_refresh = Instant::now() + refresh_every;
        // When the holds changed: the debounced write's time (the refresh goes on meanwhile,
        // or a short lease would let the record expire).
        let mut holds_write_at: Option<Instant> = None;
        loop {
            // Without the client's Arc while waiting: dropping the client ends the wait.
            let refresh = tokio::select! {
                _ = closed.wait_for(|closed| *closed) => break,
                _ = sleep_until(next_refresh) => true,
                _ = self.holds_wake.notified(), if holds_write_at.is_none() => {
                    holds_write_at = Some(Instant::now() + HOLDS_DEBOUNCE);
                    continue;
                }
                _ = sleep_until(holds_write_at.unwrap_or(next_refresh)), if holds_write_at.is_some() => false,
            };
            if self.refused {
                // Nothing to keep; wait for the end only.
                let _ = closed.wait_for(|closed| *closed).await;
                return;
            }
            let Some(client) = self.client.upgrade() else {
                break;
            };
            // A refresh writes the holds of now too.
            holds_write_at = None;
            if !refresh && self.written_holds.as_ref() == Some(&client.hold_summaries()) {
                continue;
            }
            self.write(&client).await;
            next_refresh = Instant::now() + refresh_every;
        }
        if !self.refused {
            let mut delete = redis::cmd("DEL");
            delete.arg(&self.identity.key);
            if let Err(err) = self.connection.query_at(&self.identity.key, delete).await {
                tracing::debug!(%err, "deleting the client record failed; it expires with its lease");
            }
        }
    }

    /// Writes every field and the record's expiry; a refusal stops the record for good.
    async fn write(&mut self, client: &ClientInner) {
        let holds = client.hold_summaries();
        let fields = self.fields(client, &holds);
        let key = &self.identity.key;
        let mut pipe = redis::pipe();
        pipe.cmd("HSET").arg(key).arg(&fields).ignore();
        pipe.cmd("PEXPIRE")
            .arg(key)
            .arg(self.lease.as_millis() as u64)
            .ignore();
        match pipe.query_async::<()>(&mut self.connection.clone()).await {
            Ok(()) => self.written_holds = Some(holds),
            // Redis answered with an error: it will answer the same next time.
            Err(err) if err.code().is_some() => {
                self.refused = true;
                tracing::warn!(
                    key = %key,
                    %err,
                    "polylock cannot write its client record, so tools and timed-out acquires \
                     will not name this client (grant the key pattern polylock:client:* as in \
                     docs/PROTOCOL.md, \"Permissions\"); locks work as before"
                );
            }
            Err(err) => tracing::debug!(%err, "writing the client record failed; retried later"),
        }
    }

    fn fields(&self, client: &ClientInner, holds: &[HoldSummary]) -> Vec<(&'static str, String)> {
        let holds: Vec<_> = holds
            .iter()
            .map(|hold| json!({"lock": hold.lock, "kind": hold.kind, "since_ms": hold.since_ms}))
            .collect();
        let identity = &self.identity;
        vec![
            ("name", identity.name.clone()),
            ("host", identity.host.clone()),
            ("pid", identity.pid.to_string()),
            ("connected_ms", identity.connected_ms.to_string()),
            ("refreshed_ms", unix_ms(SystemTime::now()).to_string()),
            ("holds", serde_json::Value::Array(holds).to_string()),
            ("metrics", metrics_json(client).to_string()),
        ]
    }
}

/// The cumulative counters of the locks with any activity.
fn metrics_json(client: &ClientInner) -> serde_json::Value {
    let snapshot = client.metrics.snapshot();
    let locks: Vec<_> = snapshot
        .locks
        .iter()
        .filter(|lock| {
            lock.acquired + lock.timed_out + lock.cancelled + lock.failed > 0
                || lock.holds != 0
                || lock.waiters != 0
        })
        .map(|lock| {
            json!({
                "name": lock.name,
                "kind": lock.kind,
                "acquired": lock.acquired,
                "timed_out": lock.timed_out,
                "cancelled": lock.cancelled,
                "failed": lock.failed,
                "holds": lock.holds,
                "waiters": lock.waiters,
                "wait_count": lock.wait_time.count,
                "wait_sum_s": lock.wait_time.sum_seconds,
                // Per bucket of `metrics::BUCKET_BOUNDS_SECONDS`, then the larger waits: a
                // tool sums the clients' into the lock's wait histogram.
                "wait_buckets": lock.wait_time.bucket_counts,
                "hold_count": lock.hold_time.count,
                "hold_sum_s": lock.hold_time.sum_seconds,
                "lost": lock.lost_expired + lock.lost_taken + lock.lost_connection,
                "renewal_failures": lock.renewal_failures,
            })
        })
        .collect();
    json!({"at_ms": unix_ms(SystemTime::now()), "locks": locks})
}

/// What a reader learns from a client's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordView {
    pub(crate) name: String,
    pub(crate) host: String,
    pub(crate) pid: String,
    /// Its holds: (lock name, since unix ms).
    pub(crate) holds: Vec<(String, u64)>,
}

impl RecordView {
    /// How long this client has held `lock` (its oldest hold of it), by the reader's clock.
    pub(crate) fn held_for(&self, lock: &str) -> Option<Duration> {
        let since = self
            .holds
            .iter()
            .filter(|(name, _)| name == lock)
            .map(|(_, since)| *since)
            .min()?;
        Some(Duration::from_millis(
            unix_ms(SystemTime::now()).saturating_sub(since),
        ))
    }
}

/// The records of `client_ids` that exist (one `HMGET` each, sent together; on a cluster each to
/// its own node). Ids without a record, or whose read failed, are left out.
pub(crate) async fn read_records(
    connection: &Connection,
    key_prefix: Option<&str>,
    client_ids: &[&str],
) -> HashMap<String, RecordView> {
    let reads = client_ids.iter().map(|id| {
        let key = crate::foundation::key_prefix::apply(key_prefix, &keys::client_record(id));
        let mut read = redis::cmd("HMGET");
        read.arg(&key).arg(&["name", "host", "pid", "holds"]);
        async move { (*id, connection.query_at(&key, read).await) }
    });
    futures_util::future::join_all(reads)
        .await
        .into_iter()
        .filter_map(|(id, reply)| Some((id.to_owned(), parse_record(reply.ok()?)?)))
        .collect()
}

fn parse_record(reply: Value) -> Option<RecordView> {
    let [name, host, pid, holds]: [Option<String>; 4] = redis::from_redis_value(reply).ok()?;
    let holds: serde_json::Value = serde_json::from_str(holds.as_deref().unwrap_or("[]")).ok()?;
    let holds = holds
        .as_array()?
        .iter()
        .filter_map(|hold| {
            Some((
                hold.get("lock")?.as_str()?.to_owned(),
                hold.get("since_ms")?.as_u64()?,
            ))
        })
        .collect();
    Some(RecordView {
        name: name?,
        host: host.unwrap_or_default(),
        pid: pid.unwrap_or_default(),
        holds,
    })
}

/// How a timed-out acquire names who held the lock: `held by 'worker-7', pid 1234 on host-a,
/// for 1.2 s`, or `held by owner 5f3e...:1, no polylock client record`; several holders
/// (readers) up to three, then `and N more`.
pub(crate) fn describe_holders(
    lock: &str,
    owners: &[String],
    records: &HashMap<String, RecordView>,
) -> Option<String> {
    const SHOWN: usize = 3;
    if owners.is_empty() {
        return None;
    }
    let described: Vec<String> = owners
        .iter()
        .take(SHOWN)
        .map(|owner| match records.get(keys::owner_client_id(owner)) {
            Some(record) => {
                let mut text = format!("'{}', pid {} on {}", record.name, record.pid, record.host);
                if let Some(held_for) = record.held_for(lock) {
                    text.push_str(&format!(", for {}", seconds(held_for)));
                }
                text
            }
            None => format!("owner {owner}, no polylock client record"),
        })
        .collect();
    let mut text = format!("held by {}", described.join("; "));
    if owners.len() > SHOWN {
        text.push_str(&format!(" and {} more", owners.len() - SHOWN));
    }
    Some(text)
}

/// A duration as `1.2 s` (one decimal).
fn seconds(duration: Duration) -> String {
    format!("{:.1} s", duration.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, holds: Vec<(String, u64)>) -> RecordView {
        RecordView {
            name: name.to_owned(),
            host: "host-a".to_owned(),
            pid: "1234".to_owned(),
            holds,
        }
    }

    #[test]
    fn holders_are_named_with_pid_host_and_age_or_by_owner() {
        let id = "6e3814a1-e847-452b-a982-45baf93a1df2";
        let since = unix_ms(SystemTime::now()) - 1_200;
        let records = HashMap::from([(
            id.to_owned(),
            record("worker-7", vec![("orders:42".to_owned(), since)]),
        )]);
        let text = describe_holders("orders:42", &[format!("{id}:1")], &records).unwrap();
        assert!(
            text.starts_with("held by 'worker-7', pid 1234 on host-a, for 1."),
            "{text}"
        );
        let stranger = "5f3e0000-0000-4000-8000-000000000000:1".to_owned();
        assert_eq!(
            describe_holders("orders:42", std::slice::from_ref(&stranger), &records).unwrap(),
            format!("held by owner {stranger}, no polylock client record")
        );
        let readers: Vec<String> = (1..=5).map(|n| format!("{id}:{n}")).collect();
        let text = describe_holders("other", &readers, &records).unwrap();
        assert!(text.ends_with("on host-a and 2 more"), "{text}");
        assert_eq!(text.matches("'worker-7'").count(), 3, "{text}");
        assert!(describe_holders("x", &[], &records).is_none());
    }
}
