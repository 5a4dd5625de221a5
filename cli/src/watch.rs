//! `polylock watch [PATTERN]`: a table of the locks matching a pattern, refreshed every second.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use clap::Args;
use redis::aio::MultiplexedConnection;

use crate::error::CliResult;
use crate::raw::{self, Kind};
use crate::{block_on, DEFAULT_URL};

/// Keys looked at per SCAN call: big enough to be quick, small enough not to block Redis.
const SCAN_COUNT: usize = 500;

#[derive(Args)]
#[command(after_help = "Examples:
  polylock watch                 # every lock, refreshed every second (Ctrl-C to stop)
  polylock watch 'orders:*'      # only names matching the glob pattern
  polylock watch --once          # print the table once and exit

Uses SCAN (never KEYS) and shows only hash keys whose fields are lock owners.")]
pub struct WatchArgs {
    /// Redis glob pattern of lock names.
    #[arg(default_value = "*")]
    pub pattern: String,
    /// Redis URL.
    #[arg(long, env = "POLYLOCK_REDIS_URL", hide_env_values = true, default_value = DEFAULT_URL)]
    pub redis: String,
    /// Print one table and exit.
    #[arg(long)]
    pub once: bool,
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
}

/// Every hash key matching `pattern`, by SCAN.
async fn scan_hashes(
    connection: &mut MultiplexedConnection,
    pattern: &str,
) -> CliResult<Vec<String>> {
    let mut cursor: u64 = 0;
    let mut keys = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(SCAN_COUNT)
            .arg("TYPE")
            .arg("hash")
            .query_async(connection)
            .await
            .map_err(|err| raw::redis_error("scan", err))?;
        keys.extend(batch);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    keys.sort();
    keys.dedup();
    Ok(keys)
}

async fn rows(connection: &mut MultiplexedConnection, pattern: &str) -> CliResult<Vec<Row>> {
    let mut rows = Vec::new();
    for key in scan_hashes(connection, pattern).await? {
        let state = raw::read_lock(connection, &key).await?;
        // Gone since the scan, or not a lock at all: not shown.
        if !matches!(state.kind, Kind::Plain | Kind::Fair) || !state.is_held() {
            continue;
        }
        let holders = state
            .holders
            .iter()
            .map(|holder| format!("{} x{}", holder.owner, holder.count))
            .collect::<Vec<_>>()
            .join(", ");
        let lease = match state.remaining_lease_ms {
            Some(ms) => raw::seconds(ms),
            None => "no expiry".to_owned(),
        };
        rows.push(Row {
            name: key,
            kind: state.kind,
            holders,
            lease,
            waiting: state.queue.len(),
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
    let mut out = format!(
        "polylock watch  {}  pattern '{pattern}'  {} lock(s) held\n",
        raw::redact(url),
        rows.len()
    );
    out.push_str(&format!(
        "{:<name_width$}  {:<5}  {:>10}  {:>7}  HOLDERS (owner x hold count)\n",
        "NAME", "KIND", "LEASE", "WAITING"
    ));
    for row in rows {
        out.push_str(&format!(
            "{:<name_width$}  {:<5}  {:>10}  {:>7}  {}\n",
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

pub fn run(args: WatchArgs) -> CliResult<()> {
    block_on(async {
        let mut connection = raw::connect(&args.redis).await?;
        let clear = !args.once && std::io::stdout().is_terminal();
        loop {
            let table = render(
                &args.redis,
                &args.pattern,
                &rows(&mut connection, &args.pattern).await?,
            );
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
            if !clear {
                println!();
            }
            tokio::time::sleep(Duration::from_secs_f64(args.interval)).await;
        }
    })
}
