//! The demo's scenarios other than the ticket sale: each sets its keys, runs the workers
//! (`worker/scenarios.rs`, `workers/worker.py`, `worker.mjs`), checks one invariant and
//! prints it. The keys of a scenario live under the lock name (`polylock-demo:<scenario>`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use crate::launchers::Launcher;
use crate::workers::{run_workers, Driver, Planned, Run};
use crate::{percentile, DemoArgs, Scenario};
use polylock_cli_common::block_on;
use polylock_cli_common::error::{CliError, CliResult};
use polylock_cli_common::raw;

/// How long the driver waits for the workers to rebuild an expired key.
const REBUILD_TIMEOUT: Duration = Duration::from_secs(30);

fn set(connection: &mut MultiplexedConnection, key: &str, value: &str) -> CliResult<()> {
    block_on(
        redis::cmd("SET")
            .arg(key)
            .arg(value)
            .query_async::<()>(connection),
    )
    .map_err(|err| raw::redis_error(&format!("write {key}"), err))
}

fn get(connection: &mut MultiplexedConnection, key: &str) -> CliResult<Option<String>> {
    block_on(redis::cmd("GET").arg(key).query_async(connection))
        .map_err(|err| raw::redis_error(&format!("read {key}"), err))
}

fn delete(connection: &mut MultiplexedConnection, keys: &[String]) -> CliResult<()> {
    block_on(redis::cmd("DEL").arg(keys).query_async::<i64>(connection))
        .map(|_| ())
        .map_err(|err| raw::redis_error("delete the demo's keys", err))
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

fn ms_text(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |ms| format!("{ms:.1}"))
}

/// Each launcher `count` times, every worker with `args(language)`.
fn plan<'a>(
    launchers: &'a [Launcher],
    count: u64,
    args: impl Fn(&'static str) -> Vec<String>,
) -> Vec<Planned<'a>> {
    let mut plan = Vec::new();
    for launcher in launchers {
        for _ in 0..count {
            plan.push(Planned {
                launcher,
                args: args(launcher.language),
            });
        }
    }
    plan
}

/// The arguments of a scenario worker: `URL LOCK PREFIX MODE THINK_MS EXTRA`.
fn worker_args(
    url: &str,
    lock: &str,
    prefix: &str,
    mode: &str,
    think_ms: u64,
    extra: serde_json::Value,
) -> Vec<String> {
    vec![
        url.to_owned(),
        lock.to_owned(),
        prefix.to_owned(),
        mode.to_owned(),
        think_ms.to_string(),
        extra.to_string(),
    ]
}

/// Counts of events per language, in the launchers' order.
fn per_language(launchers: &[Launcher], run: &Run, event: &str) -> BTreeMap<&'static str, u64> {
    let mut counts: BTreeMap<&'static str, u64> =
        launchers.iter().map(|l| (l.language, 0)).collect();
    for (language, _) in run.named(event) {
        *counts.entry(language).or_default() += 1;
    }
    counts
}

/// What every scenario runs with: the options, the languages that can run, the server, the lock
/// name (its keys live under it) and the languages' names for the messages.
struct Stage<'a> {
    args: &'a DemoArgs,
    launchers: &'a [Launcher],
    url: &'a str,
    lock: &'a str,
    names: String,
}

impl Stage<'_> {
    /// (args, launchers, url, lock, names)
    fn parts(&self) -> (&DemoArgs, &[Launcher], &str, &str, &str) {
        (self.args, self.launchers, self.url, self.lock, &self.names)
    }
}

pub fn run(args: &DemoArgs, launchers: &[Launcher], url: &str, lock: &str) -> CliResult<()> {
    let mut connection = block_on(raw::connect(url))?;
    let names: Vec<&str> = launchers.iter().map(|l| l.language).collect();
    let stage = Stage {
        args,
        launchers,
        url,
        lock,
        names: names.join(", "),
    };
    match args.scenario {
        Scenario::CacheRebuild => cache_rebuild(&stage, connection),
        Scenario::ReadWrite => read_write(&stage, &mut connection),
        Scenario::SegmentedStock => segmented(&stage, &mut connection),
        Scenario::Fencing => fencing(&stage, &mut connection),
        Scenario::TicketSale => Err(CliError::Failed(
            "the ticket sale is not one of these scenarios".into(),
        )),
    }
}

// ---- cache-rebuild ----

fn cache_rebuild(stage: &Stage<'_>, mut connection: MultiplexedConnection) -> CliResult<()> {
    let (args, launchers, url, lock, names) = stage.parts();
    let (cache, db, stop) = (
        format!("{lock}:cache"),
        format!("{lock}:db"),
        format!("{lock}:stop"),
    );
    let keys = [cache.clone(), db.clone(), stop.clone()];
    delete(&mut connection, &keys)?;
    set(&mut connection, &db, "value-0")?;
    set(&mut connection, &cache, "value-0")?;
    let locked = !args.no_lock;
    println!(
        "cache rebuild: {} worker(s) each in {names} read the hot key '{cache}'; it expires {} \
         time(s); a rebuild reads the \"database\" '{db}' for {} ms, {}",
        args.workers,
        args.rounds,
        args.slow_ms,
        if locked {
            format!("under the lock '{lock}'")
        } else {
            "WITHOUT a lock".to_owned()
        }
    );
    let mode = if locked {
        "cache-rebuild"
    } else {
        "cache-rebuild-unlocked"
    };
    let extra = serde_json::json!({ "db_ms": args.slow_ms });
    let plan = plan(launchers, args.workers, |_| {
        worker_args(url, lock, lock, mode, args.think_ms, extra.clone())
    });
    // The parent makes the key expire, round after round, while the workers read it.
    let rounds = args.rounds;
    let mut driving = connection.clone();
    let (driver_cache, driver_db, driver_stop) = (cache.clone(), db.clone(), stop.clone());
    let driver: Driver = Box::new(move || {
        let expire = |connection: &mut MultiplexedConnection| -> CliResult<()> {
            for round in 1..=rounds {
                // The key is hot for a while, then expires.
                std::thread::sleep(Duration::from_millis(150));
                let value = format!("value-{round}");
                set(connection, &driver_db, &value)?;
                block_on(
                    redis::cmd("PEXPIRE")
                        .arg(&driver_cache)
                        .arg(1)
                        .query_async::<i64>(connection),
                )
                .map_err(|err| raw::redis_error("expire the cache", err))?;
                let deadline = Instant::now() + REBUILD_TIMEOUT;
                while get(connection, &driver_cache)?.as_deref() != Some(value.as_str()) {
                    if Instant::now() > deadline {
                        return Err(CliError::Failed(format!(
                            "nobody rebuilt the cache within {REBUILD_TIMEOUT:?} (round {round})"
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            std::thread::sleep(Duration::from_millis(150));
            Ok(())
        };
        let expired = expire(&mut driving);
        // Whatever happened, the workers stop.
        let stopped = set(&mut driving, &driver_stop, "1");
        expired.and(stopped)
    });
    let outcome = run_workers(args, &plan, 0, Some(driver));
    let _ = delete(&mut connection, &keys);
    let run = outcome?;

    let rebuilds = per_language(launchers, &run, "rebuild");
    let served = per_language(launchers, &run, "served");
    let mut reads: BTreeMap<&str, u64> = BTreeMap::new();
    for (language, done) in run.named("done") {
        *reads.entry(language).or_default() += done["reads"].as_u64().unwrap_or(0);
    }
    println!();
    println!(
        "{:<8} {:>7} {:>8} {:>22} {:>8}",
        "language", "workers", "rebuilds", "waited, then read it", "reads"
    );
    for launcher in launchers {
        let language = launcher.language;
        println!(
            "{:<8} {:>7} {:>8} {:>22} {:>8}",
            language,
            args.workers,
            rebuilds.get(language).copied().unwrap_or(0),
            served.get(language).copied().unwrap_or(0),
            reads.get(language).copied().unwrap_or(0)
        );
    }
    let total: u64 = rebuilds.values().sum();
    let waited: u64 = served.values().sum();
    let mut per_value: BTreeMap<String, u64> = BTreeMap::new();
    for (_, event) in run.named("rebuild") {
        let value = event["value"].as_str().unwrap_or("?").to_owned();
        *per_value.entry(value).or_default() += 1;
    }
    println!();
    println!(
        "{} expiries, {total} rebuild(s) from the database in {:.2} s",
        args.rounds,
        run.elapsed.as_secs_f64()
    );
    let once_each = per_value.len() as u64 == args.rounds && per_value.values().all(|n| *n == 1);
    if !locked {
        let extra = total.saturating_sub(args.rounds);
        if extra > 0 {
            println!(
                "WITHOUT the lock: {extra} rebuild(s) too many: every worker that missed the \
                 key went to the database at once (a cache stampede). Run it with the lock to \
                 see exactly one per expiry."
            );
        } else {
            println!(
                "WITHOUT the lock: no extra rebuild this time (timing-dependent); try more \
                 --workers or a larger --slow-ms"
            );
        }
        return Ok(());
    }
    if total == args.rounds && once_each {
        println!(
            "OK: exactly one rebuild per expiry; {waited} read(s) waited on the lock and then \
             read the rebuilt cache instead of going to the database"
        );
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "FAILED: {total} rebuild(s) for {} expiries under the lock ({per_value:?})",
            args.rounds
        )))
    }
}

// ---- read-write ----

fn read_write(stage: &Stage<'_>, connection: &mut MultiplexedConnection) -> CliResult<()> {
    let (args, launchers, url, lock, names) = stage.parts();
    let keys = ["cache", "db", "budget", "readers"].map(|key| format!("{lock}:{key}"));
    delete(connection, &keys)?;
    set(connection, &keys[0], "0")?;
    set(connection, &keys[1], "0")?;
    set(connection, &keys[2], &args.ops.to_string())?;
    let locked = !args.no_lock;
    println!(
        "read-write: {} worker(s) each in {names} do {} operations in all on '{}' and '{}' \
         (1 in 5 writes both), {}",
        args.workers,
        args.ops,
        keys[0],
        keys[1],
        if locked {
            format!("under the read-write lock '{lock}'")
        } else {
            "WITHOUT a lock".to_owned()
        }
    );
    let mode = if locked {
        "read-write"
    } else {
        "read-write-unlocked"
    };
    let extra = serde_json::json!({ "write_percent": 20 });
    let plan = plan(launchers, args.workers, |_| {
        worker_args(url, lock, lock, mode, args.think_ms, extra.clone())
    });
    let outcome = run_workers(args, &plan, 0, None);
    let _ = delete(connection, &keys);
    let run = outcome?;

    println!();
    println!(
        "{:<8} {:>7} {:>6} {:>7} {:>13} {:>13} {:>14}",
        "language", "workers", "reads", "writes", "disagreements", "read wait ms", "write wait ms"
    );
    let mut all_reads = Vec::new();
    let mut all_writes = Vec::new();
    let mut disagreements = 0u64;
    let mut inside = 0u64;
    for launcher in launchers {
        let language = launcher.language;
        let reads: Vec<&serde_json::Value> = run
            .named("read")
            .filter(|(l, _)| *l == language)
            .map(|(_, e)| e)
            .collect();
        let writes: Vec<f64> = run
            .named("write")
            .filter(|(l, _)| *l == language)
            .map(|(_, e)| e["wait_ms"].as_f64().unwrap_or(0.0))
            .collect();
        let read_waits: Vec<f64> = reads
            .iter()
            .map(|e| e["wait_ms"].as_f64().unwrap_or(0.0))
            .collect();
        let disagreed = reads.iter().filter(|e| e["agree"] == false).count() as u64;
        disagreements += disagreed;
        inside = reads
            .iter()
            .filter_map(|e| e["inside"].as_u64())
            .fold(inside, u64::max);
        println!(
            "{:<8} {:>7} {:>6} {:>7} {:>13} {:>13} {:>14}",
            language,
            args.workers,
            reads.len(),
            writes.len(),
            disagreed,
            ms_text(mean(&read_waits)),
            ms_text(mean(&writes))
        );
        all_reads.extend(read_waits);
        all_writes.extend(writes);
    }
    let done = (all_reads.len() + all_writes.len()) as u64;
    println!();
    println!(
        "{} reads and {} writes in {:.2} s; up to {inside} reader(s) inside at once; writers \
         waited {} ms on average (readers {} ms)",
        all_reads.len(),
        all_writes.len(),
        run.elapsed.as_secs_f64(),
        ms_text(mean(&all_writes)),
        ms_text(mean(&all_reads))
    );
    if !locked {
        if disagreements > 0 {
            println!(
                "WITHOUT the lock: {disagreements} read(s) saw the cache and the database \
                 disagree (a writer was between its two writes). Run it with the lock to see none."
            );
        } else {
            println!(
                "WITHOUT the lock: no disagreement this time (timing-dependent); try more \
                 --workers or a larger --think-ms"
            );
        }
        return Ok(());
    }
    if done != args.ops || disagreements > 0 {
        return Err(CliError::Failed(format!(
            "FAILED: {disagreements} disagreement(s) under the read-write lock, {done} of {} \
             operations done",
            args.ops
        )));
    }
    let shared = if inside > 1 {
        "readers shared the lock".to_owned()
    } else {
        "only one reader was seen inside at a time (too few workers or operations)".to_owned()
    };
    println!(
        "OK: zero disagreements in {} reads; {shared}",
        all_reads.len()
    );
    Ok(())
}

// ---- segmented-stock ----

/// One sale of the whole stock: with one lock per segment, or one lock for all.
struct Phase {
    sold: u64,
    left: i64,
    elapsed: Duration,
    waits: Vec<f64>,
}

#[allow(clippy::too_many_arguments)]
fn sell_segments(
    args: &DemoArgs,
    launchers: &[Launcher],
    url: &str,
    lock: &str,
    connection: &mut MultiplexedConnection,
    keys: &[String],
    global: bool,
) -> CliResult<Phase> {
    let segments = keys.len() as u64;
    for (segment, key) in keys.iter().enumerate() {
        let share = args.tickets / segments + u64::from((segment as u64) < args.tickets % segments);
        set(connection, key, &share.to_string())?;
    }
    let prefix = format!("{lock}:stock");
    let (mode, lock) = if global {
        ("global", format!("{lock}:global"))
    } else {
        ("segmented", format!("{lock}:segment"))
    };
    let extra = serde_json::json!({ "segments": segments });
    let plan = plan(launchers, args.workers, |_| {
        worker_args(url, &lock, &prefix, mode, args.think_ms, extra.clone())
    });
    let run = run_workers(args, &plan, args.tickets, None);
    let mut left = 0i64;
    for key in keys {
        left += get(connection, key)?
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0);
    }
    let run = run?;
    let mut waits: Vec<f64> = run
        .named("sale")
        .map(|(_, e)| e["wait_ms"].as_f64().unwrap_or(0.0))
        .collect();
    waits.sort_by(f64::total_cmp);
    Ok(Phase {
        sold: waits.len() as u64,
        left,
        elapsed: run.elapsed,
        waits,
    })
}

fn segmented(stage: &Stage<'_>, connection: &mut MultiplexedConnection) -> CliResult<()> {
    let (args, launchers, url, lock, names) = stage.parts();
    let keys: Vec<String> = (0..args.segments)
        .map(|segment| format!("{lock}:stock:{segment}"))
        .collect();
    println!(
        "segmented stock: {} units split into {} segment(s) ('{lock}:stock:0..'), {} worker(s) \
         each in {names} buy one unit at a time from a random segment with stock",
        args.tickets, args.segments, args.workers
    );
    let segmented = sell_segments(args, launchers, url, lock, connection, &keys, false);
    let global = segmented
        .as_ref()
        .ok()
        .map(|_| sell_segments(args, launchers, url, lock, connection, &keys, true));
    let _ = delete(connection, &keys);
    let segmented = segmented?;
    let global = global.expect("run after the segmented sale")?;

    println!();
    println!(
        "{:<26} {:>6} {:>5} {:>8} {:>10} {:>12} {:>12}",
        "locking", "sold", "left", "seconds", "units/s", "wait p50 ms", "wait p99 ms"
    );
    let throughput = |phase: &Phase| phase.sold as f64 / phase.elapsed.as_secs_f64().max(1e-6);
    for (label, phase) in [
        (
            format!("one lock per segment ({})", args.segments),
            &segmented,
        ),
        ("one global lock".to_owned(), &global),
    ] {
        println!(
            "{:<26} {:>6} {:>5} {:>8.2} {:>10.1} {:>12} {:>12}",
            label,
            phase.sold,
            phase.left,
            phase.elapsed.as_secs_f64(),
            throughput(phase),
            ms_text(percentile(&phase.waits, 50.0)),
            ms_text(percentile(&phase.waits, 99.0))
        );
    }
    let ratio = throughput(&segmented) / throughput(&global).max(1e-9);
    println!();
    println!(
        "throughput with {} segment locks / with one global lock: {ratio:.2}x",
        args.segments
    );
    let exact = |phase: &Phase| phase.sold == args.tickets && phase.left == 0;
    if exact(&segmented) && exact(&global) {
        println!(
            "OK: both sales sold exactly {} units: no oversell, no leftover",
            args.tickets
        );
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "FAILED: segmented sold {} (left {}), global sold {} (left {}), for {} units",
            segmented.sold, segmented.left, global.sold, global.left, args.tickets
        )))
    }
}

// ---- fencing ----

fn fencing(stage: &Stage<'_>, connection: &mut MultiplexedConnection) -> CliResult<()> {
    let (args, launchers, url, lock, names) = stage.parts();
    let fenced = !args.no_fencing;
    let keys_of = |language: &str| {
        let prefix = format!("{lock}:{language}");
        let value = format!("{prefix}:value");
        let keys = vec![
            polylock::keys::fence(&value),
            format!("{prefix}:slow-holds"),
            format!("{prefix}:fast-wrote"),
            value,
        ];
        (prefix, keys)
    };
    for launcher in launchers {
        delete(connection, &keys_of(launcher.language).1)?;
    }
    println!(
        "fencing: in each of {names}, a slow worker takes the {} '{lock}:<language>' with a \
         {} ms lease and pauses past it; a fast worker takes it meanwhile and writes \
         '{lock}:<language>:value'; then the slow one writes it too, {}",
        if fenced { "fenced lock" } else { "lock" },
        args.lease_ms,
        if fenced {
            "with client.fenced_set and its (older) token"
        } else {
            "with a plain SET (--no-fencing)"
        }
    );
    let mode = if fenced { "fencing" } else { "fencing-off" };
    let mut plan = Vec::new();
    for launcher in launchers {
        let (prefix, _) = keys_of(launcher.language);
        let name = format!("{lock}:{}", launcher.language);
        for role in ["slow", "fast"] {
            let extra = serde_json::json!({ "role": role, "lease_ms": args.lease_ms });
            plan.push(Planned {
                launcher,
                args: worker_args(url, &name, &prefix, mode, args.think_ms, extra),
            });
        }
    }
    let outcome = run_workers(args, &plan, 0, None);
    let mut finals = BTreeMap::new();
    for launcher in launchers {
        let (_, keys) = keys_of(launcher.language);
        let value_key = keys.last().cloned().unwrap_or_default();
        finals.insert(launcher.language, get(connection, &value_key)?);
        let _ = delete(connection, &keys);
    }
    let run = outcome?;

    println!();
    let mut refused_everywhere = true;
    let mut lost_somewhere = false;
    for launcher in launchers {
        let language = launcher.language;
        let find = |name: &str| {
            run.named(name)
                .find(|(l, _)| *l == language)
                .map(|(_, e)| e.clone())
                .unwrap_or_default()
        };
        let late = find("late_write");
        let fast = find("write");
        let accepted = late["accepted"].as_bool().unwrap_or(true);
        let final_value = finals.get(language).cloned().flatten();
        let token = |event: &serde_json::Value| {
            event["token"]
                .as_i64()
                .map_or_else(|| "-".to_owned(), |t| t.to_string())
        };
        println!(
            "{language}: the fast worker (token {}) wrote 'fast' after waiting {} ms; the slow \
             worker's late write (token {}): {}; final value: {}",
            token(&fast),
            ms_text(fast["wait_ms"].as_f64()),
            token(&late),
            if accepted {
                "ACCEPTED"
            } else {
                "REFUSED (StaleToken)"
            },
            final_value.as_deref().unwrap_or("(none)")
        );
        refused_everywhere &= !accepted && final_value.as_deref() == Some("fast");
        lost_somewhere |= accepted && final_value.as_deref() == Some("slow");
    }
    println!();
    if !fenced {
        if lost_somewhere {
            println!(
                "WITHOUT fencing: LOST UPDATE: the slow worker, whose lease had run out, \
                 overwrote the fast worker's value. Run it without --no-fencing to see it refused."
            );
        } else {
            println!("WITHOUT fencing: the late write did not overwrite this time");
        }
        return Ok(());
    }
    if refused_everywhere {
        println!(
            "OK: every late write with a stale token was refused; the newer holder's value stands"
        );
        Ok(())
    } else {
        Err(CliError::Failed(
            "FAILED: a stale token's write was accepted under the fenced lock".into(),
        ))
    }
}
