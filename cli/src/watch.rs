//! `polylock watch [PATTERN]`: a table of the locks matching a pattern, refreshed every second.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use clap::Args;
use polylock::Client;

use crate::block_on;
use crate::error::CliResult;
use crate::inspect::{read_state, Kind, LockState};
use crate::raw;

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
polylock_*, read levels, permit sets) are not rows.")]
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
    kind: Kind,
    holders: String,
    lease: String,
    waiting: usize,
    state: LockState,
}

fn holders_text(state: &LockState) -> String {
    let mut text = state
        .holders
        .iter()
        .map(|holder| match holder.mode {
            Some(mode) => format!("{} x{} ({mode})", holder.owner, holder.count),
            None => format!("{} x{}", holder.owner, holder.count),
        })
        .collect::<Vec<_>>()
        .join(", ");
    if let Some(token) = state.fence_token {
        text.push_str(&format!("  token {token}"));
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

/// One row per held lock and per semaphore matching `pattern`, each read by `Client::inspect`.
async fn rows(client: &Client, pattern: &str) -> CliResult<Vec<Row>> {
    let mut rows = Vec::new();
    for key in client.scan_names(pattern).await? {
        let state = read_state(client, &key).await?;
        let held_lock = state.kind.is_lock() && state.is_held();
        // Gone since the scan, free, or not a lock at all: not shown.
        if !held_lock && !state.kind.is_semaphore() {
            continue;
        }
        let lease = match state.remaining_lease_ms {
            Some(ms) => raw::seconds(ms),
            None if held_lock => "no expiry".to_owned(),
            None => "-".to_owned(),
        };
        let waiting = match state.kind {
            Kind::ReadWrite => state.waiting_writers.len(),
            _ => state.queue.len(),
        };
        rows.push(Row {
            name: key,
            kind: state.kind,
            holders: if held_lock {
                holders_text(&state)
            } else {
                permits_text(&state)
            },
            lease,
            waiting,
            state,
        });
    }
    Ok(rows)
}

fn render(url: &str, pattern: &str, rows: &[Row]) -> String {
    let name_width = rows
        .iter()
        .map(|row| row.name.len())
        .max()
        .unwrap_or(0)
        .max(4);
    let kind_width = rows
        .iter()
        .map(|row| row.kind.label().len())
        .max()
        .unwrap_or(0)
        .max(5);
    let semaphores = rows.iter().filter(|row| row.kind.is_semaphore()).count();
    let mut out = format!(
        "polylock watch  {}  pattern '{pattern}'  {} lock(s) held",
        raw::redact(url),
        rows.len() - semaphores
    );
    if semaphores > 0 {
        out.push_str(&format!(", {semaphores} semaphore(s)"));
    }
    out.push('\n');
    out.push_str(&format!(
        "{:<name_width$}  {:<kind_width$}  {:>10}  {:>7}  HOLDERS (owner x hold count) / PERMITS\n",
        "NAME", "KIND", "LEASE", "WAITING"
    ));
    for row in rows {
        out.push_str(&format!(
            "{:<name_width$}  {:<kind_width$}  {:>10}  {:>7}  {}\n",
            row.name,
            row.kind.label(),
            row.lease,
            row.waiting,
            row.holders
        ));
    }
    if rows.is_empty() {
        out.push_str("(no lock held)\n");
    }
    out
}

/// One refresh as one line of JSON: the pattern, the time, and each row's inspect state.
fn render_json(pattern: &str, rows: &[Row]) -> String {
    let unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64);
    let locks: Vec<&LockState> = rows.iter().map(|row| &row.state).collect();
    let line = serde_json::json!({ "pattern": pattern, "unix_ms": unix_ms, "locks": locks });
    format!("{line}\n")
}

pub fn run(args: WatchArgs) -> CliResult<()> {
    block_on(async {
        let client = raw::client(&args.redis).await?;
        let clear = !args.once && !args.json && std::io::stdout().is_terminal();
        loop {
            let rows = rows(&client, &args.pattern).await?;
            let table = if args.json {
                render_json(&args.pattern, &rows)
            } else {
                render(&args.redis, &args.pattern, &rows)
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
