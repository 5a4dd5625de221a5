//! One reading of the locks whose names match a pattern, for `watch` and `console`: the names
//! SCAN finds, each read by `Client::inspect` and named from the client records, with the rates
//! the records' metrics give.
//!
//! Commands per reading, with K keys in the database (on a cluster, on each primary), C client
//! records and N names read: 2 x ceil(K / 500) SCAN (the names, then the records; SCAN walks
//! the whole keyspace whatever the pattern), C HMGET (pipelined), and per name one EVALSHA
//! (`inspect.lua`) and one HMGET per distinct holder client (the core's inspect names them).
//! The console reads by a budget instead (`console::snapshot`); [`shown_lock`] is the rule both
//! show a name by.

use std::collections::BTreeSet;

use polylock::Client;

use crate::client_records;
use crate::inspect::{read_state, Kind, LockState};
use crate::lock_rates::{LockRates, RateTracker};
use polylock_cli_common::error::CliResult;

/// A lock, semaphore, or free lock in use, as one reading saw it.
pub struct ScannedLock {
    /// The kind label: from the keys, or for a free lock from the clients' records.
    pub kind: String,
    /// A lock kind with holders now (semaphores are never `held`).
    pub held: bool,
    pub state: LockState,
    /// When it was read (epoch ms, this machine's clock).
    pub read_ms: i64,
    /// What the clients' records say about it; `None` when no record reports it.
    pub rates: Option<LockRates>,
}

/// One reading: the locks, and how many clients report metrics of some lock.
pub struct LockScan {
    pub locks: Vec<ScannedLock>,
    pub clients_reporting: usize,
}

/// One row per held lock, per semaphore, and per free lock the clients' records show activity
/// for (acquires in the window, holds or waiters now), matching `pattern`, each read by
/// `Client::inspect`; holders and waiters named from the client records.
pub async fn scan_locks(
    client: &Client,
    pattern: &str,
    tracker: &mut RateTracker,
) -> CliResult<LockScan> {
    // `scan_names` leaves the client records out, as the other keys beside the names.
    let mut names: BTreeSet<String> = client.scan_names(pattern).await?.into_iter().collect();
    let scanned = names.clone();
    let records = client_records::read_or_warn(client, None::<Vec<&str>>).await;
    let clients_reporting = records
        .values()
        .filter(|record| record.metrics.as_ref().is_some_and(|m| !m.locks.is_empty()))
        .count();
    let mut rates = tracker.update(&records, unix_ms());
    names.extend(
        rates
            .iter()
            .filter(|(name, rates)| rates.is_active() && glob_matches(pattern, name))
            .map(|(name, _)| name.clone()),
    );
    let mut locks = Vec::new();
    for name in names {
        let read_ms = unix_ms();
        let state = match read_state(client, &name).await {
            Ok(state) => state,
            // A name only the metrics know (e.g. `_other`, the fold of names past the limit)
            // may be no valid lock name.
            Err(_) if !scanned.contains(&name) => continue,
            Err(err) => return Err(err),
        };
        let mut state = state;
        state.attach_records(&records);
        locks.extend(shown_lock(state, rates.remove(&name), read_ms));
    }
    Ok(LockScan {
        locks,
        clients_reporting,
    })
}

/// The row of a name read at `read_ms` as `state`, with what the clients' records say of it
/// (`rates`); `None` when it is not shown: gone since the scan, free and idle, or not a lock.
pub fn shown_lock(state: LockState, rates: Option<LockRates>, read_ms: i64) -> Option<ScannedLock> {
    let held = state.kind.is_lock() && state.is_held();
    let in_use = match state.kind {
        Kind::NotALock => false,
        Kind::None => rates.as_ref().is_some_and(LockRates::is_active_while_free),
        _ => rates.as_ref().is_some_and(LockRates::is_active),
    };
    // Gone since the scan, free and idle, or not a lock at all: not shown.
    if !(held || state.kind.listed_while_free() || in_use) {
        return None;
    }
    let kind = match (&rates, state.kind) {
        (Some(rates), Kind::None) => kind_label_of_metrics(&rates.kind),
        _ => state.kind.label().to_owned(),
    };
    Some(ScannedLock {
        kind,
        held,
        state,
        read_ms,
        rates,
    })
}

/// The CLI's label for a kind as the metrics name it (`fair_lock` -> `fair`).
fn kind_label_of_metrics(kind: &str) -> String {
    match kind {
        "lock" => "plain",
        "fair_lock" => "fair",
        "fifo_lock" => "fifo",
        "fenced_lock" => "fenced",
        "read_write_lock" => "read-write",
        "expirable_semaphore" => "expirable-semaphore",
        other => other,
    }
    .replace('_', "-")
}

/// This machine's clock (epoch ms).
pub fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}

/// Redis's glob (`*`, `?`, `[abc]`, `[^a-z]`, `\x`), for the names only the metrics know.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    fn matches(pattern: &[char], name: &[char]) -> bool {
        let Some((&first, rest)) = pattern.split_first() else {
            return name.is_empty();
        };
        match first {
            '*' => (0..=name.len()).any(|skip| matches(rest, &name[skip..])),
            '?' => !name.is_empty() && matches(rest, &name[1..]),
            '[' => {
                let Some((&c, name_rest)) = name.split_first() else {
                    return false;
                };
                let (negate, mut class) = match rest.split_first() {
                    Some(('^', class)) => (true, class),
                    _ => (false, rest),
                };
                let mut found = false;
                loop {
                    match class {
                        [] => return false, // unclosed: no match, as Redis
                        [']', after @ ..] => {
                            class = after;
                            break;
                        }
                        ['\\', x, after @ ..] => {
                            found |= *x == c;
                            class = after;
                        }
                        [low, '-', high, after @ ..] if *high != ']' => {
                            let (low, high) = if low <= high {
                                (low, high)
                            } else {
                                (high, low)
                            };
                            found |= (*low..=*high).contains(&c);
                            class = after;
                        }
                        [x, after @ ..] => {
                            found |= *x == c;
                            class = after;
                        }
                    }
                }
                found != negate && matches(class, name_rest)
            }
            '\\' if !rest.is_empty() => {
                name.first() == Some(&rest[0]) && matches(&rest[1..], &name[1..])
            }
            literal => name.first() == Some(&literal) && matches(rest, &name[1..]),
        }
    }
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    matches(&pattern, &name)
}

#[cfg(test)]
mod tests {
    use super::glob_matches;

    #[test]
    fn globs_match_as_in_redis() {
        for (pattern, name) in [
            ("*", "orders:42"),
            ("orders:*", "orders:42"),
            ("orders:?2", "orders:42"),
            ("orders:[34]2", "orders:42"),
            ("orders:[0-9]2", "orders:42"),
            ("orders:[^a]2", "orders:42"),
            ("a\\*b", "a*b"),
        ] {
            assert!(glob_matches(pattern, name), "{pattern} {name}");
        }
        for (pattern, name) in [
            ("orders:*", "order:42"),
            ("orders:?", "orders:42"),
            ("orders:[^4]2", "orders:42"),
            ("a\\*b", "axb"),
            ("orders:[4", "orders:4"),
        ] {
            assert!(!glob_matches(pattern, name), "{pattern} {name}");
        }
    }
}
