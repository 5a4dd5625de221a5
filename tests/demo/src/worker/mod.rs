//! `polylock demo-worker` (and `polylock-demo demo-worker`): the Rust ticket buyer. Same
//! protocol as `tests/demo/workers/worker.py` and `worker.mjs`:
//!
//! arguments `URL LOCK STOCK_KEY MODE THINK_MS [EXTRA]` (MODE: `lock`, `fair` or `none` for the
//! ticket sale; the other scenarios' modes are in `scenarios`); prints `{"event":"ready"}` once
//! connected, waits for a `go` line on stdin, then prints `{"event":"sale","wait_ms":W}` per
//! ticket bought and `{"event":"done","sold":N}` at the end. A purchase reads the stock,
//! "processes the payment" (sleeps THINK_MS) and writes stock-1: not atomic, so only the lock
//! keeps the count exact.

use polylock::AcquireOptions;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use clap::Args;

use polylock_cli_common::block_on;
use polylock_cli_common::error::{CliError, CliResult};
use polylock_cli_common::raw;

mod scenarios;

#[derive(Args)]
pub struct WorkerArgs {
    pub url: String,
    pub lock: String,
    pub stock_key: String,
    /// lock, fair or none.
    pub mode: String,
    pub think_ms: u64,
    /// The other scenarios' parameters, a JSON object (`{}` for the ticket sale).
    #[arg(default_value = "{}")]
    pub extra: String,
}

pub(crate) fn emit(line: &str) -> CliResult<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(|err| CliError::Failed(format!("the demo parent went away: {err}")))
}

/// Says ready, then waits for the parent's `go`.
pub(crate) fn ready_and_wait_for_go() -> CliResult<()> {
    emit(r#"{"event":"ready"}"#)?;
    let mut go = String::new();
    let _ = std::io::stdin().lock().read_line(&mut go);
    if go.trim() != "go" {
        return Err(CliError::Failed("no `go` from the demo parent".into()));
    }
    Ok(())
}

pub fn run(args: WorkerArgs) -> CliResult<()> {
    let think = Duration::from_millis(args.think_ms);
    let (client, mut connection) = block_on(async {
        let client = polylock::Client::connect(&args.url).await?;
        let connection = raw::connect(&args.url).await?;
        Ok::<_, CliError>((client, connection))
    })?;
    let lock = match args.mode.as_str() {
        "lock" => Some(client.lock(&args.lock)?),
        "fair" => Some(client.fair_lock(&args.lock)?),
        "fifo" => Some(client.fifo_lock(&args.lock)?),
        "none" => None,
        _ => return scenarios::run(&args, client, connection),
    };
    ready_and_wait_for_go()?;
    let mut sold = 0u64;
    loop {
        let started = Instant::now();
        let bought = block_on(async {
            if let Some(lock) = &lock {
                lock.acquire(AcquireOptions::new()).await?;
            }
            let waited = started.elapsed();
            let purchase = async {
                let stock: Option<i64> = redis::cmd("GET")
                    .arg(&args.stock_key)
                    .query_async(&mut connection)
                    .await
                    .map_err(|err| raw::redis_error("read the stock", err))?;
                let stock = stock.unwrap_or(0);
                if stock <= 0 {
                    return Ok(false);
                }
                tokio::time::sleep(think).await;
                let () = redis::cmd("SET")
                    .arg(&args.stock_key)
                    .arg(stock - 1)
                    .query_async(&mut connection)
                    .await
                    .map_err(|err| raw::redis_error("write the stock", err))?;
                Ok::<_, CliError>(true)
            }
            .await;
            if let Some(lock) = &lock {
                lock.release().await?;
            }
            purchase.map(|bought| bought.then_some(waited))
        })?;
        let Some(waited) = bought else { break };
        sold += 1;
        emit(&format!(
            r#"{{"event":"sale","wait_ms":{:.3}}}"#,
            waited.as_secs_f64() * 1000.0
        ))?;
        // The customer leaves the counter before the next one: gives other processes a turn.
        std::thread::sleep(think);
    }
    emit(&format!(r#"{{"event":"done","sold":{sold}}}"#))?;
    client.close();
    Ok(())
}
