//! The clients table: each polylock client's record (name, host, pid, connected since, what it
//! holds, its metrics) and what it waits for. A record lists holds but no waits, so the waits
//! are found from both sides: the lines Redis keeps (a fair queue, a FIFO line, a read-write
//! lock's waiting writers), whose owners start with the client id, give the lock and the place
//! in line; a plain lock's waiters are in no line (they listen for the release), so for them
//! the client's own metrics (`waiters` of a lock above 0) say it waits, as of its last record.

use std::collections::HashMap;

use serde::Serialize;

use super::snapshot::LockView;
use crate::client_records::{client_id, ClientRecord};

/// One row of the clients table.
#[derive(Debug, Clone, Serialize)]
pub struct ClientView {
    #[serde(flatten)]
    pub record: ClientRecord,
    /// The locks it waits for, in name order.
    pub waits_for: Vec<Wait>,
}

/// A lock a client waits for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Wait {
    pub lock: String,
    /// Its first place in the lock's line (1 is next); `None` for a lock without a line in
    /// Redis, known from the client's metrics.
    pub place: Option<usize>,
    /// How many of its acquires wait for it (threads or tasks of one client).
    pub count: usize,
}

/// The rows, one per record (in the order given), each with the waits found in `locks` and in
/// its metrics.
pub fn client_views(records: Vec<ClientRecord>, locks: &[LockView]) -> Vec<ClientView> {
    let mut in_lines: HashMap<&str, Vec<Wait>> = HashMap::new();
    for lock in locks {
        let line = lock.state.queue.iter().chain(&lock.state.waiting_writers);
        for (index, waiter) in line.enumerate() {
            let waits = in_lines.entry(client_id(&waiter.owner)).or_default();
            match waits.iter_mut().find(|wait| wait.lock == lock.state.name) {
                Some(wait) => wait.count += 1,
                None => waits.push(Wait {
                    lock: lock.state.name.clone(),
                    place: Some(index + 1),
                    count: 1,
                }),
            }
        }
    }
    records
        .into_iter()
        .map(|record| {
            let mut waits = in_lines
                .remove(record.client_id.as_str())
                .unwrap_or_default();
            let reported = record.metrics.iter().flat_map(|metrics| &metrics.locks);
            for lock in reported.filter(|lock| lock.waiters > 0) {
                if !waits.iter().any(|wait| wait.lock == lock.name) {
                    waits.push(Wait {
                        lock: lock.name.clone(),
                        place: None,
                        count: lock.waiters as usize,
                    });
                }
            }
            waits.sort_by(|a, b| a.lock.cmp(&b.lock));
            ClientView {
                record,
                waits_for: waits,
            }
        })
        .collect()
}
