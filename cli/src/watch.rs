//! `polylock watch [PATTERN]`: a table of the locks matching a pattern, refreshed every second.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use clap::Args;
use polylock::Client;

use crate::client_records;
use crate::inspect::{read_state, Kind, LockState};
use crate::lock_rates::{LockRates, RateTracker};
use polylock_cli_common::block_on;
use polylock_cli_common::error::CliResult;
use polylock_cli_common::raw;

#[derive(Args)]
#[command(after_help = "Examples:
  polylock watch                 # every lock, refreshed every second (Ctrl-C to stop)
  polylock watch 'orders:*'      # only names matching the glob pattern
  polylock watch --once          # print the table once and exit
  polylock watch --json | jq .   # one JSON object per refresh (each lock as inspect --json)

Uses SCAN (never KEYS) and reads each name with one read-only snapshot (as `inspect`). Shows
held locks of every kind (plain, fair, fenced with its token, read-write with each holder's
side; WAITING: the fair queue, or the writers waiting for a read-write lock) and semaphores
(permits available, and taken for expirable ones). Any string holding an integer looks like a
semaphore to Redis, so it shows as one. Keys the kinds keep beside a name (redisson_*,
polylock_*, read levels, permit sets) are not rows.

Holders show as `worker-7 (pid 1234 on host-a) held 12.3 s` from their client records
(polylock:client:<id>); Redisson owners as their owner string. Live metrics from the records,
summed over the clients, per row: ACQ/S and TMO/S (acquires got and timed out per second since
the last refresh; on the first, since each client connected), AVG WAIT, HOLDS and WAITERS now,
LOST (leases lost); `-` when no client reports the lock. A free lock in use is a row too.
Fair and read-write rows end with who waits, in order (queue: / writers waiting:).")]
pub struct WatchArgs {
    /// Redis glob pattern of lock names.
    #[arg(default_value = "*")]
    pub pattern: String,
    /// The global --redis URL (filled in by main).
    #[arg(skip)]
    pub redis: String,
    /// Print one table and exit.
    #[arg(long)]
    pub once: bool,
    /// One JSON object per refresh, on one line each (as `inspect --json` for every row).
    #[arg(long)]
    pub json: bool,
    /// Seconds between refreshes.
    #[arg(long, default_value_t = 1.0, value_parser = parse_interval)]
    pub interval: f64,
    /// The clients' key prefix (`key_prefix`): the pattern matches the names under it, shown
    /// without it.
    #[arg(long, env = "POLYLOCK_KEY_PREFIX", value_name = "PREFIX")]
    pub key_prefix: Option<String>,
}

fn parse_interval(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if (0.05..=3600.0).contains(&seconds) => Ok(seconds),
        _ => Err(format!(
            "'{text}' is not a number of seconds between 0.05 and 3600"
        )),
    }
}

struct Row {
    name: String,
    /// The kind label: from the keys, or for a free lock from the clients' records.
    kind: String,
    is_semaphore: bool,
    held: bool,
    holders: String,
    lease: String,
    waiting: usize,
    state: LockState,
    rates: Option<LockRates>,
}

/// `owner x1 (write)`, or for an owner with a client record
/// `worker-7 (pid 1234 on host-a) held 12.3 s (write)` (the count only when above 1).
fn holders_text(state: &LockState) -> String {
    let mut text = state
        .holders
        .iter()
        .map(|holder| {
            let mut text = match &holder.client.text {
                Some(who) if holder.count > 1 => format!("{who} x{}", holder.count),
                Some(who) => who.clone(),
                None => format!("{} x{}", holder.owner, holder.count),
            };
            if let Some(mode) = holder.mode {
                text.push_str(&format!(" ({mode})"));
            }
            text
        })
        .collect::<Vec<_>>()
        .join(", ");
    if let Some(token) = state.fence_token {
        text.push_str(&format!("  token {token}"));
    }
    // Who waits, in queue order: client names, or owner strings without a record.
    let (label, waiters) = match state.kind {
        Kind::ReadWrite => ("writers waiting", &state.waiting_writers),
        _ => ("queue", &state.queue),
    };
    if !waiters.is_empty() {
        let names: Vec<&str> = waiters
            .iter()
            .map(|waiter| {
                waiter
                    .client
                    .client_name
                    .as_deref()
                    .unwrap_or(&waiter.owner)
            })
            .collect();
        text.push_str(&format!("  {label}: {}", names.join(", ")));
    }
    text
}

fn permits_text(state: &LockState) -> String {
    let available = state.permits_available.unwrap_or(0);
    if state.kind == Kind::ExpirableSemaphore {
        format!(
            "{available} permit(s) available, {} taken",
            state.permits.len()
        )
    } else {
        format!("{available} permit(s) available")
    }
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

/// One refresh: the rows, and how many clients report metrics of some lock.
struct Refresh {
    rows: Vec<Row>,
    clients_reporting: usize,
}

/// One row per held lock, per semaphore, and per free lock the clients' records show activity
/// for (acquires in the window, holds or waiters now), matching `pattern`, each read by
/// `Client::inspect`; holders and waiters named from the client records.
async fn refresh(client: &Client, pattern: &str, tracker: &mut RateTracker) -> CliResult<Refresh> {
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
    let mut rows = Vec::new();
    for name in names {
        let state = match read_state(client, &name).await {
            Ok(state) => state,
            // A name only the metrics know (e.g. `_other`, the fold of names past the limit)
            // may be no valid lock name.
            Err(_) if !scanned.contains(&name) => continue,
            Err(err) => return Err(err),
        };
        let mut state = state;
        state.attach_records(&records);
        let rates = rates.remove(&name);
        let held_lock = state.kind.is_lock() && state.is_held();
        let in_use =
            rates.as_ref().is_some_and(LockRates::is_active) && state.kind != Kind::NotALock;
        // Gone since the scan, free and idle, or not a lock at all: not shown.
        if !(held_lock || state.kind.is_semaphore() || in_use) {
            continue;
        }
        let lease = match state.remaining_lease_ms {
            Some(ms) => crate::seconds(ms),
            None if held_lock => "no expiry".to_owned(),
            None => "-".to_owned(),
        };
        let waiting = match state.kind {
            Kind::ReadWrite => state.waiting_writers.len(),
            _ => state.queue.len(),
        };
        let kind = match (&rates, state.kind) {
            (Some(rates), Kind::None) => kind_label_of_metrics(&rates.kind),
            _ => state.kind.label().to_owned(),
        };
        rows.push(Row {
            name,
            kind,
            is_semaphore: state.kind.is_semaphore(),
            held: held_lock,
            holders: if held_lock {
                holders_text(&state)
            } else if state.kind.is_semaphore() {
                permits_text(&state)
            } else {
                "free".to_owned()
            },
            lease,
            waiting,
            state,
            rates,
        });
    }
    Ok(Refresh {
        rows,
        clients_reporting,
    })
}

/// This machine's clock (epoch ms).
fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}

/// Redis's glob (`*`, `?`, `[abc]`, `[^a-z]`, `\x`), for the names only the metrics know.
fn glob_matches(pattern: &str, name: &str) -> bool {
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

/// `12.5`, or `-` without metrics.
fn rate_text(rates: Option<&LockRates>, value: impl Fn(&LockRates) -> f64) -> String {
    rates.map_or("-".to_owned(), |rates| format!("{:.1}", value(rates)))
}

fn wait_text(rates: Option<&LockRates>) -> String {
    match rates.and_then(|rates| rates.avg_wait_ms) {
        Some(ms) if ms < 1000.0 => format!("{ms:.0} ms"),
        Some(ms) => format!("{:.1} s", ms / 1000.0),
        None => "-".to_owned(),
    }
}

fn count_text(rates: Option<&LockRates>, value: impl Fn(&LockRates) -> i64) -> String {
    rates.map_or("-".to_owned(), |rates| value(rates).to_string())
}

fn render(url: &str, pattern: &str, refresh: &Refresh) -> String {
    let rows = &refresh.rows;
    let name_width = rows
        .iter()
        .map(|row| row.name.len())
        .max()
        .unwrap_or(0)
        .max(4);
    let kind_width = rows
        .iter()
        .map(|row| row.kind.len())
        .max()
        .unwrap_or(0)
        .max(5);
    let semaphores = rows.iter().filter(|row| row.is_semaphore).count();
    let held = rows.iter().filter(|row| row.held).count();
    let free = rows.len() - semaphores - held;
    let mut out = format!(
        "polylock watch  {}  pattern '{pattern}'  {held} lock(s) held",
        raw::redact(url),
    );
    if semaphores > 0 {
        out.push_str(&format!(", {semaphores} semaphore(s)"));
    }
    if free > 0 {
        out.push_str(&format!(", {free} free but in use"));
    }
    out.push_str(&format!(
        "  (metrics from {} client(s))\n",
        refresh.clients_reporting
    ));
    out.push_str(&format!(
        "{:<name_width$}  {:<kind_width$}  {:>10}  {:>7}  {:>7}  {:>7}  {:>8}  {:>5}  {:>7}  {:>4}  HOLDERS / PERMITS\n",
        "NAME", "KIND", "LEASE", "WAITING", "ACQ/S", "TMO/S", "AVG WAIT", "HOLDS", "WAITERS", "LOST"
    ));
    for row in rows {
        let rates = row.rates.as_ref();
        out.push_str(&format!(
            "{:<name_width$}  {:<kind_width$}  {:>10}  {:>7}  {:>7}  {:>7}  {:>8}  {:>5}  {:>7}  {:>4}  {}\n",
            row.name,
            row.kind,
            row.lease,
            row.waiting,
            rate_text(rates, |rates| rates.acquires_per_s),
            rate_text(rates, |rates| rates.timeouts_per_s),
            wait_text(rates),
            count_text(rates, |rates| rates.holds),
            count_text(rates, |rates| rates.waiters),
            count_text(rates, |rates| rates.lost as i64),
            row.holders
        ));
    }
    if rows.is_empty() {
        out.push_str("(no lock held)\n");
    }
    out
}

/// One refresh as one line of JSON: the pattern, the time, and each row's inspect state with
/// its `metrics` (`null` when no client record reports the lock).
fn render_json(pattern: &str, refresh: &Refresh) -> String {
    let unix_ms = unix_ms();
    let locks: Vec<serde_json::Value> = refresh
        .rows
        .iter()
        .map(|row| {
            let mut lock = serde_json::to_value(&row.state).unwrap_or_default();
            if let serde_json::Value::Object(fields) = &mut lock {
                fields.insert("metrics".into(), serde_json::json!(row.rates));
            }
            lock
        })
        .collect();
    let line = serde_json::json!({
        "pattern": pattern,
        "unix_ms": unix_ms,
        "clients_reporting": refresh.clients_reporting,
        "locks": locks,
    });
    format!("{line}\n")
}

pub fn run(args: WatchArgs) -> CliResult<()> {
    block_on(async {
        let client = raw::client(&args.redis, args.key_prefix.as_deref()).await?;
        let clear = !args.once && !args.json && std::io::stdout().is_terminal();
        let mut tracker = RateTracker::default();
        loop {
            let refresh = refresh(&client, &args.pattern, &mut tracker).await?;
            let table = if args.json {
                render_json(&args.pattern, &refresh)
            } else {
                render(&args.redis, &args.pattern, &refresh)
            };
            let mut stdout = std::io::stdout().lock();
            if clear {
                // Clear the screen and go home, then draw the table.
                let _ = write!(stdout, "\x1b[2J\x1b[H");
            }
            let _ = write!(stdout, "{table}");
            let _ = stdout.flush();
            drop(stdout);
            if args.once {
                return Ok(());
            }
            if !clear && !args.json {
                println!();
            }
            tokio::time::sleep(Duration::from_secs_f64(args.interval)).await;
        }
    })
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
