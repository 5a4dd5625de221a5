//! The ticket sale: every worker buys tickets under one lock (fair, or none with `--no-lock`)
//! until the stock runs out; exactly the stock must be sold.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::launchers::Launcher;
use crate::percentile;
use crate::workers::{run_workers, Planned};
use crate::DemoArgs;
use polylock_cli_common::block_on;
use polylock_cli_common::error::{CliError, CliResult};
use polylock_cli_common::raw;

struct Sale {
    /// Per language: wait times in ms of every ticket sold.
    waits: BTreeMap<&'static str, Vec<f64>>,
}

fn run_sale(
    args: &DemoArgs,
    launchers: &[Launcher],
    url: &str,
    lock_name: &str,
    stock_key: &str,
) -> CliResult<(Sale, Vec<(&'static str, u64)>)> {
    let mode = if args.no_lock {
        "none"
    } else if args.fair {
        "fair"
    } else {
        "lock"
    };
    let worker_args = vec![
        url.to_owned(),
        lock_name.to_owned(),
        stock_key.to_owned(),
        mode.to_owned(),
        args.think_ms.to_string(),
    ];
    let mut plan = Vec::new();
    for launcher in launchers {
        for _ in 0..args.workers {
            plan.push(Planned {
                launcher,
                args: worker_args.clone(),
            });
        }
    }
    let run = run_workers(args, &plan, args.tickets, None)?;
    let mut sale = Sale {
        waits: launchers.iter().map(|l| (l.language, Vec::new())).collect(),
    };
    for (language, event) in run.named("sale") {
        if let Some(waits) = sale.waits.get_mut(language) {
            waits.push(event["wait_ms"].as_f64().unwrap_or(0.0));
        }
    }
    let per_language = launchers
        .iter()
        .map(|launcher| {
            let sold = sale.waits.get(launcher.language).map_or(0, Vec::len) as u64;
            (launcher.language, sold)
        })
        .collect();
    Ok((sale, per_language))
}

/// Sells the stock with every launcher's workers, prints who sold what and how long they waited,
/// and checks that exactly the stock was sold (unless `--no-lock`).
pub(super) fn sell(
    args: &DemoArgs,
    launchers: &[Launcher],
    url: &str,
    lock_name: &str,
    stock_key: &str,
) -> CliResult<()> {
    let mut connection = block_on(raw::connect(url))?;
    block_on(async {
        redis::cmd("SET")
            .arg(stock_key)
            .arg(args.tickets)
            .query_async::<()>(&mut connection)
            .await
            .map_err(|err| raw::redis_error("set the stock", err))
    })?;
    let names: Vec<&str> = launchers.iter().map(|l| l.language).collect();
    let how = if args.no_lock {
        "WITHOUT a lock".to_owned()
    } else if args.fair {
        format!("under the fair lock '{lock_name}'")
    } else {
        format!("under the lock '{lock_name}'")
    };
    println!(
        "selling {} tickets: {} worker(s) each in {}, {how}",
        args.tickets,
        args.workers,
        names.join(", ")
    );
    let started = Instant::now();
    let outcome = run_sale(args, launchers, url, lock_name, stock_key);
    let left: Option<i64> = block_on(async {
        let left = redis::cmd("GET")
            .arg(stock_key)
            .query_async(&mut connection)
            .await
            .map_err(|err| raw::redis_error("read the stock", err));
        let _ = redis::cmd("DEL")
            .arg(stock_key)
            .query_async::<i64>(&mut connection)
            .await;
        left
    })?;
    let (sale, per_language) = outcome?;
    let elapsed = started.elapsed();
    println!();
    println!(
        "{:<8} {:>7} {:>6} {:>12} {:>12}",
        "language", "workers", "sold", "wait p50 ms", "wait p99 ms"
    );
    let mut total = 0u64;
    let mut all_waits = Vec::new();
    for (language, sold) in &per_language {
        total += sold;
        let mut waits = sale.waits.get(language).cloned().unwrap_or_default();
        waits.sort_by(f64::total_cmp);
        all_waits.extend_from_slice(&waits);
        println!(
            "{:<8} {:>7} {:>6} {:>12} {:>12}",
            language,
            args.workers,
            sold,
            format_ms(percentile(&waits, 50.0)),
            format_ms(percentile(&waits, 99.0))
        );
    }
    all_waits.sort_by(f64::total_cmp);
    println!(
        "{:<8} {:>7} {:>6} {:>12} {:>12}",
        "total",
        args.workers * per_language.len() as u64,
        total,
        format_ms(percentile(&all_waits, 50.0)),
        format_ms(percentile(&all_waits, 99.0))
    );
    println!();
    println!(
        "sold {total} tickets for {} seats in {:.2} s; stock left in Redis: {}",
        args.tickets,
        elapsed.as_secs_f64(),
        left.map_or_else(|| "none".to_owned(), |left| left.to_string())
    );
    if args.no_lock {
        if total > args.tickets {
            println!(
                "WITHOUT the lock: oversold by {} ticket(s): concurrent purchases read the same \
                 stock and each wrote it back minus one. Run it with the lock to see exactly {}.",
                total - args.tickets,
                args.tickets
            );
        } else {
            println!(
                "WITHOUT the lock: no oversell this time (the race is timing-dependent); try \
                 more --workers or a larger --think-ms"
            );
        }
        return Ok(());
    }
    if total == args.tickets && left == Some(0) {
        println!("OK: exactly {} tickets sold, none twice", args.tickets);
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "FAILED: sold {total} tickets for {} seats under the lock",
            args.tickets
        )))
    }
}

fn format_ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |ms| format!("{ms:.1}"))
}
