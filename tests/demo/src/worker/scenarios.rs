//! The Rust worker of the demo's other scenarios (`polylock demo --scenario ...`). Same
//! protocol and keys as `workers/worker.py` and `worker.mjs` of this crate; arguments `URL LOCK
//! PREFIX MODE THINK_MS EXTRA` (EXTRA a JSON object). Every worker says `{"event":"ready"}`,
//! waits for `go`, reports what it did as JSON lines and ends with `{"event":"done",...}`.
//!
//! - `cache-rebuild` (`cache-rebuild-unlocked`): reads `PREFIX:cache` in a loop until
//!   `PREFIX:stop` exists. On a miss it takes the lock LOCK (not when unlocked), looks again,
//!   and if still missing rebuilds it from the slow "database" `PREFIX:db` (GET + EXTRA.db_ms):
//!   `{"event":"rebuild","value":V,"wait_ms":W}`; when another worker rebuilt it meanwhile it
//!   reads it: `{"event":"served","wait_ms":W}`. Done: `{"reads":N}`.
//! - `read-write` (`read-write-unlocked`): until the budget `PREFIX:budget` (DECR) runs out,
//!   EXTRA.write_percent of the operations write (under the write lock of the read-write lock
//!   LOCK: db = db+1, THINK_MS, cache = the same) and the others read (under the read lock:
//!   INCR `PREFIX:readers` to count readers inside, read cache, THINK_MS, read db, DECR):
//!   `{"event":"write","wait_ms":W}`, `{"event":"read","wait_ms":W,"inside":N,"agree":B}`.
//! - `segmented` / `global`: EXTRA.segments stock keys `PREFIX:0..N-1`; buy one unit at a time
//!   from a random segment that still has stock, under that segment's lock `LOCK:i`
//!   (`segmented`) or the one lock `LOCK` (`global`): `{"event":"sale","wait_ms":W,"segment":i}`.
//! - `fencing` / `fencing-off`, EXTRA.role `slow` or `fast`, EXTRA.lease_ms: the slow worker
//!   takes the fenced lock LOCK (a plain lock when off) with that fixed lease, sets
//!   `PREFIX:slow-holds`, pauses three leases and until `PREFIX:fast-wrote` exists, then writes
//!   `PREFIX:value` = `slow` with `fenced_set` and its token (a plain SET when off):
//!   `{"event":"late_write","token":T,"accepted":B}`. The fast worker waits for
//!   `PREFIX:slow-holds`, takes the lock (after the slow one's lease ran out), writes `fast`,
//!   sets `PREFIX:fast-wrote`: `{"event":"write","token":T,"wait_ms":W}`.

use std::time::{Duration, Instant};

use polylock::{AcquireOptions, Client, ErrorKind};
use redis::aio::MultiplexedConnection;

use super::{emit, ready_and_wait_for_go, WorkerArgs};
use polylock_cli_common::block_on;
use polylock_cli_common::error::{CliError, CliResult};
use polylock_cli_common::raw;

/// How long a worker waits for another worker's sign before it fails.
const SIGN_TIMEOUT: Duration = Duration::from_secs(30);

/// A small random generator (xorshift), seeded per process: enough to pick segments and
/// operations.
struct Random(u64);

impl Random {
    fn new() -> Random {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64);
        Random((nanos ^ (u64::from(std::process::id()) << 32)) | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

fn ms(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0
}

fn send(value: serde_json::Value) -> CliResult<()> {
    emit(&value.to_string())
}

async fn get(connection: &mut MultiplexedConnection, key: &str) -> CliResult<Option<String>> {
    redis::cmd("GET")
        .arg(key)
        .query_async(connection)
        .await
        .map_err(|err| raw::redis_error(&format!("read {key}"), err))
}

async fn set(connection: &mut MultiplexedConnection, key: &str, value: &str) -> CliResult<()> {
    redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async::<()>(connection)
        .await
        .map_err(|err| raw::redis_error(&format!("write {key}"), err))
}

async fn incr_by(connection: &mut MultiplexedConnection, key: &str, by: i64) -> CliResult<i64> {
    redis::cmd("INCRBY")
        .arg(key)
        .arg(by)
        .query_async(connection)
        .await
        .map_err(|err| raw::redis_error(&format!("count {key}"), err))
}

/// Waits until `key` exists (another worker's sign).
async fn wait_for(connection: &mut MultiplexedConnection, key: &str) -> CliResult<()> {
    let deadline = Instant::now() + SIGN_TIMEOUT;
    while get(connection, key).await?.is_none() {
        if Instant::now() > deadline {
            return Err(CliError::Failed(format!(
                "{key} did not appear within {SIGN_TIMEOUT:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

pub fn run(
    args: &WorkerArgs,
    client: Client,
    mut connection: MultiplexedConnection,
) -> CliResult<()> {
    let extra: serde_json::Value = serde_json::from_str(&args.extra)
        .map_err(|err| CliError::Usage(format!("EXTRA is not a JSON object: {err}")))?;
    let think = Duration::from_millis(args.think_ms);
    let number = |field: &str, default: u64| extra[field].as_u64().unwrap_or(default);
    let prefix = args.stock_key.as_str();
    let name = args.lock.as_str();
    let outcome = match args.mode.as_str() {
        "cache-rebuild" | "cache-rebuild-unlocked" => {
            let locked = args.mode == "cache-rebuild";
            let database = Duration::from_millis(number("db_ms", 50));
            let lock = client.lock(name)?;
            ready_and_wait_for_go()?;
            block_on(cache_rebuild(
                &mut connection,
                locked.then_some(&lock),
                prefix,
                database,
            ))
        }
        "read-write" | "read-write-unlocked" => {
            let locked = args.mode == "read-write";
            let lock = client.read_write_lock(name)?;
            let write_percent = number("write_percent", 20);
            ready_and_wait_for_go()?;
            block_on(read_write(
                &mut connection,
                locked.then_some(&lock),
                prefix,
                write_percent,
                think,
            ))
        }
        "segmented" | "global" => {
            let segments = number("segments", 4).max(1);
            let locks = if args.mode == "global" {
                vec![client.lock(name)?]
            } else {
                (0..segments)
                    .map(|segment| client.lock(&format!("{name}:{segment}")))
                    .collect::<Result<Vec<_>, _>>()?
            };
            ready_and_wait_for_go()?;
            block_on(segmented(&mut connection, &locks, prefix, segments, think))
        }
        "fencing" | "fencing-off" => {
            let fenced = args.mode == "fencing";
            let lease = Duration::from_millis(number("lease_ms", 200));
            let lock = if fenced {
                client.fenced_lock(name)?
            } else {
                client.lock(name)?
            };
            let role = extra["role"].as_str().unwrap_or("").to_owned();
            ready_and_wait_for_go()?;
            match role.as_str() {
                "slow" => block_on(fencing_slow(
                    &client,
                    &mut connection,
                    &lock,
                    fenced,
                    prefix,
                    lease,
                )),
                "fast" => block_on(fencing_fast(
                    &client,
                    &mut connection,
                    &lock,
                    fenced,
                    prefix,
                )),
                other => Err(CliError::Usage(format!("unknown fencing role '{other}'"))),
            }
        }
        other => Err(CliError::Usage(format!("unknown mode '{other}'"))),
    };
    let done = outcome?;
    send(done)?;
    client.close();
    Ok(())
}

async fn cache_rebuild(
    connection: &mut MultiplexedConnection,
    lock: Option<&polylock::Lock>,
    prefix: &str,
    database: Duration,
) -> CliResult<serde_json::Value> {
    let (cache, db, stop) = (
        format!("{prefix}:cache"),
        format!("{prefix}:db"),
        format!("{prefix}:stop"),
    );
    let mut reads = 0u64;
    while get(connection, &stop).await?.is_none() {
        if get(connection, &cache).await?.is_some() {
            reads += 1;
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        }
        // A miss: one worker rebuilds, the others wait on the lock and then read the cache.
        let started = Instant::now();
        if let Some(lock) = lock {
            lock.acquire(AcquireOptions::new()).await?;
        }
        let waited = started.elapsed();
        let rebuilt = async {
            if get(connection, &cache).await?.is_some() {
                return Ok::<_, CliError>(None);
            }
            let value = get(connection, &db).await?.unwrap_or_default();
            tokio::time::sleep(database).await;
            set(connection, &cache, &value).await?;
            Ok(Some(value))
        }
        .await;
        if let Some(lock) = lock {
            lock.release().await?;
        }
        match rebuilt? {
            Some(value) => send(serde_json::json!({
                "event": "rebuild", "value": value, "wait_ms": ms(waited)
            }))?,
            None => {
                reads += 1;
                send(serde_json::json!({"event": "served", "wait_ms": ms(waited)}))?;
            }
        }
    }
    Ok(serde_json::json!({"event": "done", "reads": reads}))
}

async fn read_write(
    connection: &mut MultiplexedConnection,
    lock: Option<&polylock::ReadWriteLock>,
    prefix: &str,
    write_percent: u64,
    think: Duration,
) -> CliResult<serde_json::Value> {
    let (cache, db, budget, readers) = (
        format!("{prefix}:cache"),
        format!("{prefix}:db"),
        format!("{prefix}:budget"),
        format!("{prefix}:readers"),
    );
    let mut random = Random::new();
    let mut operations = 0u64;
    while incr_by(connection, &budget, -1).await? >= 0 {
        operations += 1;
        let writing = random.below(100) < write_percent;
        let side = lock.map(|lock| {
            if writing {
                lock.write_lock()
            } else {
                lock.read_lock()
            }
        });
        let started = Instant::now();
        if let Some(side) = &side {
            side.acquire(AcquireOptions::new()).await?;
        }
        let waited = ms(started.elapsed());
        let work = async {
            if writing {
                let value = get(connection, &db)
                    .await?
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(0)
                    + 1;
                set(connection, &db, &value.to_string()).await?;
                tokio::time::sleep(think).await;
                set(connection, &cache, &value.to_string()).await?;
                Ok::<_, CliError>(serde_json::json!({"event": "write", "wait_ms": waited}))
            } else {
                let inside = incr_by(connection, &readers, 1).await?;
                let cached = get(connection, &cache).await?;
                tokio::time::sleep(think).await;
                let stored = get(connection, &db).await?;
                incr_by(connection, &readers, -1).await?;
                Ok(serde_json::json!({
                    "event": "read", "wait_ms": waited, "inside": inside,
                    "agree": cached == stored
                }))
            }
        }
        .await;
        if let Some(side) = &side {
            side.release().await?;
        }
        send(work?)?;
        // Between operations: gives the other workers a turn.
        tokio::time::sleep(think).await;
    }
    Ok(serde_json::json!({"event": "done", "operations": operations}))
}

async fn segmented(
    connection: &mut MultiplexedConnection,
    locks: &[polylock::Lock],
    prefix: &str,
    segments: u64,
    think: Duration,
) -> CliResult<serde_json::Value> {
    let mut random = Random::new();
    let mut left: Vec<u64> = (0..segments).collect();
    let mut sold = 0u64;
    while !left.is_empty() {
        let at = random.below(left.len() as u64) as usize;
        let segment = left[at];
        let lock = &locks[(segment as usize).min(locks.len() - 1)];
        let key = format!("{prefix}:{segment}");
        let started = Instant::now();
        lock.acquire(AcquireOptions::new()).await?;
        let waited = started.elapsed();
        let bought = async {
            let stock = get(connection, &key)
                .await?
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0);
            if stock <= 0 {
                return Ok::<_, CliError>(false);
            }
            tokio::time::sleep(think).await;
            set(connection, &key, &(stock - 1).to_string()).await?;
            Ok(true)
        }
        .await;
        lock.release().await?;
        if bought? {
            sold += 1;
            send(serde_json::json!({
                "event": "sale", "wait_ms": ms(waited), "segment": segment
            }))?;
        } else {
            left.swap_remove(at);
        }
    }
    Ok(serde_json::json!({"event": "done", "sold": sold}))
}

/// Writes `PREFIX:value` = `who`: with `fenced_set` and the token, or a plain SET.
async fn write_value(
    client: &Client,
    connection: &mut MultiplexedConnection,
    fenced: bool,
    key: &str,
    who: &str,
    token: Option<i64>,
) -> CliResult<bool> {
    match (fenced, token) {
        (true, Some(token)) => match client.fenced_set(key, who, token).await {
            Ok(()) => Ok(true),
            Err(err) if err.kind() == ErrorKind::StaleToken => Ok(false),
            Err(err) => Err(err.into()),
        },
        (true, None) => Err(CliError::Failed("the fenced lock gave no token".into())),
        (false, _) => set(connection, key, who).await.map(|()| true),
    }
}

async fn fencing_slow(
    client: &Client,
    connection: &mut MultiplexedConnection,
    lock: &polylock::Lock,
    fenced: bool,
    prefix: &str,
    lease: Duration,
) -> CliResult<serde_json::Value> {
    if !lock
        .acquire(AcquireOptions::new().wait(SIGN_TIMEOUT).lease(lease))
        .await?
    {
        return Err(CliError::Failed(
            "the slow worker never got the lock".into(),
        ));
    }
    let token = lock.token();
    set(connection, &format!("{prefix}:slow-holds"), "1").await?;
    send(serde_json::json!({"event": "acquired", "role": "slow", "token": token}))?;
    // A pause (a GC, a stalled VM) longer than the lease: the lock expires meanwhile.
    tokio::time::sleep(lease * 3).await;
    wait_for(connection, &format!("{prefix}:fast-wrote")).await?;
    let accepted = write_value(
        client,
        connection,
        fenced,
        &format!("{prefix}:value"),
        "slow",
        token,
    )
    .await?;
    send(serde_json::json!({"event": "late_write", "token": token, "accepted": accepted}))?;
    // The hold is gone (its lease ran out): the release says so.
    match lock.release().await {
        Ok(()) => {}
        Err(err) if matches!(err.kind(), ErrorKind::LockLost | ErrorKind::NotHeld) => {}
        Err(err) => return Err(err.into()),
    }
    Ok(serde_json::json!({"event": "done", "role": "slow"}))
}

async fn fencing_fast(
    client: &Client,
    connection: &mut MultiplexedConnection,
    lock: &polylock::Lock,
    fenced: bool,
    prefix: &str,
) -> CliResult<serde_json::Value> {
    wait_for(connection, &format!("{prefix}:slow-holds")).await?;
    let started = Instant::now();
    if !lock
        .acquire(AcquireOptions::new().wait(SIGN_TIMEOUT))
        .await?
    {
        return Err(CliError::Failed(
            "the fast worker never got the lock".into(),
        ));
    }
    let waited = started.elapsed();
    let token = lock.token();
    let written = write_value(
        client,
        connection,
        fenced,
        &format!("{prefix}:value"),
        "fast",
        token,
    )
    .await;
    let signed = set(connection, &format!("{prefix}:fast-wrote"), "1").await;
    lock.release().await?;
    written?;
    signed?;
    send(serde_json::json!({
        "event": "write", "role": "fast", "token": token, "wait_ms": ms(waited)
    }))?;
    Ok(serde_json::json!({"event": "done", "role": "fast"}))
}
