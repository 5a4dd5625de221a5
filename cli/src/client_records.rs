//! The client records (`polylock:client:<client-id>`, docs/PROTOCOL.md): who an owner string
//! belongs to (name, pid, host, what it holds since when) and what each client's locks do (its
//! `metrics` field), for `inspect` and `watch`. Parsed leniently: a field that is missing or
//! not in the expected shape reads as unknown, never as an error.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use polylock::{Client, ClientRecordFields};
use serde::{Deserialize, Serialize};

use polylock_cli_common::error::CliResult;

/// One client's record.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClientRecord {
    pub client_id: String,
    pub name: Option<String>,
    pub host: Option<String>,
    pub pid: Option<u64>,
    /// When the client connected (unix ms, its clock).
    pub connected_ms: Option<i64>,
    pub holds: Vec<RecordedHold>,
    pub metrics: Option<RecordedMetrics>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct RecordedHold {
    pub lock: String,
    /// When it was acquired (unix ms, the client's clock).
    pub since_ms: i64,
}

/// The `metrics` field: the cumulative counters of the client's locks at `at_ms`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct RecordedMetrics {
    pub at_ms: i64,
    #[serde(default)]
    pub locks: Vec<RecordedLock>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct RecordedLock {
    pub name: String,
    pub kind: String,
    pub acquired: u64,
    pub timed_out: u64,
    pub holds: i64,
    pub waiters: i64,
    pub wait_count: u64,
    pub wait_sum_s: f64,
    /// The waits per bucket of the core's `BUCKET_BOUNDS_SECONDS`, then the longer ones
    /// (empty from a client older than this field).
    pub wait_buckets: Vec<u64>,
    pub lost: u64,
}

/// The client id an owner string starts with (`<client-id>:<holder-id>`).
pub fn client_id(owner: &str) -> &str {
    polylock::keys::owner_client_id(owner)
}

impl ClientRecord {
    fn parse(record: ClientRecordFields) -> ClientRecord {
        let field = |name: &str| record.fields.get(name).map(String::as_str);
        let number = |name: &str| field(name).and_then(|text| text.trim().parse::<i64>().ok());
        ClientRecord {
            name: field("name").map(str::to_owned),
            host: field("host").map(str::to_owned),
            pid: number("pid").and_then(|pid| u64::try_from(pid).ok()),
            connected_ms: number("connected_ms"),
            holds: field("holds")
                .and_then(|json| serde_json::from_str(json).ok())
                .unwrap_or_default(),
            metrics: field("metrics").and_then(|json| serde_json::from_str(json).ok()),
            client_id: record.client_id,
        }
    }

    /// `worker-7 (pid 1234 on host-a)`; parts the record lacks are left out.
    pub fn describe(&self) -> String {
        let name = self.name.as_deref().unwrap_or(&self.client_id);
        match (self.pid, self.host.as_deref()) {
            (Some(pid), Some(host)) => format!("{name} (pid {pid} on {host})"),
            (Some(pid), None) => format!("{name} (pid {pid})"),
            (None, Some(host)) => format!("{name} (on {host})"),
            (None, None) => name.to_owned(),
        }
    }

    /// When this client acquired `lock` (its earliest hold of it), unix ms.
    pub fn held_since_ms(&self, lock: &str) -> Option<i64> {
        self.holds
            .iter()
            .filter(|hold| hold.lock == lock)
            .map(|hold| hold.since_ms)
            .min()
    }
}

/// The records by client id: of the clients these owner strings belong to, or of every client
/// when `owners` is `None`.
pub async fn read<'a>(
    client: &Client,
    owners: Option<impl IntoIterator<Item = &'a str>>,
) -> CliResult<HashMap<String, ClientRecord>> {
    let ids = owners.map(|owners| {
        let mut ids: Vec<String> = owners
            .into_iter()
            .map(|owner| client_id(owner).to_owned())
            .collect();
        ids.sort();
        ids.dedup();
        ids
    });
    if ids.as_ref().is_some_and(Vec::is_empty) {
        return Ok(HashMap::new());
    }
    Ok(client
        .client_records(ids)
        .await?
        .into_iter()
        // This tool's own client has a record too; it is not one of the clients looked at.
        .filter(|record| record.client_id != client.id())
        .map(ClientRecord::parse)
        .map(|record| (record.client_id.clone(), record))
        .collect())
}

/// [`read`], or no records (and one line on stderr) when they cannot be read, e.g. an ACL user
/// without the record keys: the views then show owner strings, as for Redisson owners.
pub async fn read_or_warn<'a>(
    client: &Client,
    owners: Option<impl IntoIterator<Item = &'a str>>,
) -> HashMap<String, ClientRecord> {
    read(client, owners).await.unwrap_or_else(|err| {
        warn_unreadable(&err);
        HashMap::new()
    })
}

/// Says once on stderr that the records cannot be read, and what that leaves out.
pub fn warn_unreadable(err: &dyn std::fmt::Display) {
    // Said once: `watch` would repeat it every refresh.
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        eprintln!(
            "polylock: cannot read the client records ({}*), so owners show as owner \
             strings and there are no metrics: {err}",
            polylock::keys::CLIENT_RECORD_PREFIX
        );
    }
}

/// Who an owner is, from its record: `worker-7 (pid 1234 on host-a) held 12.3 s`, or `None`
/// without a record (Redisson owners, closed clients).
pub fn owner_text(
    records: &HashMap<String, ClientRecord>,
    owner: &str,
    held_for_ms: Option<u64>,
) -> Option<String> {
    let record = records.get(client_id(owner))?;
    Some(match held_for_ms {
        Some(ms) => format!("{} held {}", record.describe(), crate::seconds(ms)),
        None => record.describe(),
    })
}

/// How long the owner has held `lock`, by the server's clock `now_ms` (clocks apart by a little
/// never give a negative age).
pub fn held_for_ms(
    records: &HashMap<String, ClientRecord>,
    owner: &str,
    lock: &str,
    now_ms: i64,
) -> Option<u64> {
    let since = records.get(client_id(owner))?.held_since_ms(lock)?;
    Some(now_ms.saturating_sub(since).max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(fields: &[(&str, &str)]) -> ClientRecord {
        ClientRecord::parse(ClientRecordFields {
            client_id: "5f3e".into(),
            fields: fields
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
        })
    }

    #[test]
    fn a_record_names_its_client_and_its_holds() {
        let record = record(&[
            ("name", "worker-7"),
            ("host", "host-a"),
            ("pid", "1234"),
            (
                "holds",
                r#"[{"lock":"a","kind":"lock","since_ms":50},{"lock":"a","kind":"lock","since_ms":40}]"#,
            ),
        ]);
        assert_eq!(record.describe(), "worker-7 (pid 1234 on host-a)");
        assert_eq!(record.held_since_ms("a"), Some(40));
        assert_eq!(record.held_since_ms("b"), None);
        let records = HashMap::from([("5f3e".to_owned(), record)]);
        assert_eq!(
            owner_text(
                &records,
                "5f3e:9",
                held_for_ms(&records, "5f3e:9", "a", 12_340)
            ),
            Some("worker-7 (pid 1234 on host-a) held 12.3 s".to_owned())
        );
        assert_eq!(owner_text(&records, "other:1", None), None);
    }

    #[test]
    fn a_malformed_field_reads_as_unknown() {
        let record = record(&[("pid", "x"), ("holds", "{"), ("metrics", "[]")]);
        assert_eq!(record.describe(), "5f3e");
        assert!(record.holds.is_empty() && record.metrics.is_none());
    }
}
