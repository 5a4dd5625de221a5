//! `polylock watch [PATTERN]`: a table of the locks matching a pattern, refreshed every second.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use clap::Args;
use polylock::Client;

use crate::inspect::{Kind, LockState};
use crate::lock_rates::{LockRates, RateTracker};
use crate::lock_scan::{scan_locks, unix_ms};
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

/// One refresh: the rows, and how many clients report metrics of some lock.
struct Refresh {
    rows: Vec<Row>,
    clients_reporting: usize,
}

/// The rows of one [`scan_locks`] reading.
async fn refresh(client: &Client, pattern: &str, tracker: &mut RateTracker) -> CliResult<Refresh> {
    let scan = scan_locks(client, pattern, tracker).await?;
    let rows = scan
        .locks
        .into_iter()
        .map(|lock| {
            let state = lock.state;
            let lease = match state.remaining_lease_ms {
                Some(ms) => crate::seconds(ms),
                None if lock.held => "no expiry".to_owned(),
                None => "-".to_owned(),
            };
            let waiting = match state.kind {
                Kind::ReadWrite => state.waiting_writers.len(),
                _ => state.queue.len(),
            };
            Row {
                name: state.name.clone(),
                kind: lock.kind,
                is_semaphore: state.kind.is_semaphore(),
                held: lock.held,
                holders: if lock.held {
                    holders_text(&state)
                } else if state.kind.is_semaphore() {
                    permits_text(&state)
                } else if state.kind == Kind::Latch {
                    format!("count {}", state.latch_count.unwrap_or(0))
                } else {
                    "free".to_owned()
                },
                lease,
                waiting,
                state,
                rates: lock.rates,
            }
        })
        .collect();
    Ok(Refresh {
        rows,
        clients_reporting: scan.clients_reporting,
    })
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
