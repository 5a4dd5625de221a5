//! A line-driven polylock holder for cross-language and interop tests.
//!
//! Usage: `peer <redis-url> [watchdog-timeout-ms]`; then one command per line on stdin, one reply line on stdout:
//! - `acquire NAME WAIT_MS|- LEASE_MS|-` -> `ok true` / `ok false` (`-` = no bound / watchdog)
//! - `release NAME`                      -> `ok`
//! - `force_unlock NAME`                 -> `ok true` / `ok false`
//! - `hold_count NAME`                   -> `ok N`
//! - `is_locked NAME`                    -> `ok true` / `ok false`
//! - `owner NAME`                        -> `ok <client-uuid>:<holder-id>`
//! - `token NAME`                        -> `ok N`, the token of the handle's hold, or `ok -`
//! - `increment NAME COUNTER N`          -> `ok` after N times: acquire, GET and SET COUNTER+1
//!   (a non-atomic increment, so only the lock keeps it exact), release; on a cluster URL the
//!   counter is read and written through a cluster connection
//! - `quit` (closes the client, then exits: held locks expire with their lease)
//! - every lock command prefixed with `fair_` (e.g. `fair_acquire NAME 0 -`) works on the fair
//!   lock of that name instead. `POLYLOCK_FAIR_QUEUE_TIMEOUT_MS` sets the fair queue timeout,
//!   `POLYLOCK_KEY_PREFIX` the client's key prefix (`ClientOptions::key_prefix`).
//! - likewise `fifo_` (e.g. `fifo_acquire NAME - -`): the FIFO lock, with the same queue timeout;
//!   `fenced_` (e.g. `fenced_acquire NAME 0 -`, `fenced_token NAME`): the fenced lock,
//!   and `read_` / `write_` (e.g. `write_acquire NAME - -`): the read or the write lock of the
//!   read-write lock NAME (one read-write lock per name, so the writer's reads are its own).
//! - `sem_acquire NAME PERMITS WAIT_MS|-` -> `ok true` / `ok false`; `sem_release NAME PERMITS`,
//!   `sem_add NAME PERMITS` -> `ok`; `sem_try_set NAME PERMITS` -> `ok true|false`;
//!   `sem_available NAME` -> `ok N`: the semaphore NAME.
//! - `xsem_acquire NAME WAIT_MS|- LEASE_MS|-` -> `ok <permit-id>` / `ok -`;
//!   `xsem_release NAME ID` -> `ok`; `xsem_try_set NAME PERMITS` -> `ok true|false`;
//!   `xsem_available NAME` -> `ok N`: the expirable semaphore NAME.
//! - `latch_try_set NAME COUNT` -> `ok true|false`; `latch_count_down NAME` -> `ok`;
//!   `latch_count NAME` -> `ok N`; `latch_await NAME TIMEOUT_MS` -> `ok true|false`;
//!   `latch_delete NAME` -> `ok true|false`: the count-down latch NAME.
//! - `elect_campaign NAME VALUE WAIT_MS|-` -> `ok <term>` / `ok -` (the wait ran out);
//!   `elect_resign NAME` -> `ok`: a campaign in the election NAME (one leadership per name).
//!
//! Errors reply `err <Kind> <message>`. One handle per name and kind, so reentrancy works
//! across lines.
//! `ready <client-id>` is printed once connected.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::Duration;

use polylock::{AcquireOptions, Client, ExpirableSemaphore, Lock, ReadWriteLock, Semaphore};

fn millis(arg: Option<&str>) -> Result<Option<Duration>, String> {
    match arg {
        None | Some("-") => Ok(None),
        Some(ms) => ms
            .parse::<u64>()
            .map(|ms| Some(Duration::from_millis(ms)))
            .map_err(|_| format!("not a number of milliseconds: {ms}")),
    }
}

fn number<T: std::str::FromStr>(arg: Option<&str>, what: &str) -> Result<T, String> {
    arg.and_then(|arg| arg.parse().ok())
        .ok_or_else(|| format!("missing or bad {what}"))
}

/// The handles a peer keeps, one per name and kind, so holds persist across lines.
#[derive(Default)]
struct Handles {
    locks: HashMap<String, Lock>,
    read_write: HashMap<String, ReadWriteLock>,
    semaphores: HashMap<String, Semaphore>,
    expirable: HashMap<String, ExpirableSemaphore>,
    leaderships: HashMap<String, polylock::Leadership>,
}

async fn run(
    client: &Client,
    url: &str,
    handles: &mut Handles,
    line: &str,
) -> Result<String, String> {
    let mut words = line.split_whitespace();
    let word = words.next().unwrap_or("");
    let (kind, command) = [
        "fair_", "fifo_", "fenced_", "read_", "write_", "sem_", "xsem_", "latch_", "elect_",
    ]
    .into_iter()
    .find_map(|kind| word.strip_prefix(kind).map(|command| (kind, command)))
    .unwrap_or(("", word));
    let name = words.next().ok_or("missing lock name")?.to_owned();
    match kind {
        "sem_" => {
            if !handles.semaphores.contains_key(&name) {
                let semaphore = client.semaphore(&name).map_err(describe)?;
                handles.semaphores.insert(name.clone(), semaphore);
            }
            return semaphore(&handles.semaphores[&name], command, words).await;
        }
        "xsem_" => {
            if !handles.expirable.contains_key(&name) {
                let semaphore = client.expirable_semaphore(&name).map_err(describe)?;
                handles.expirable.insert(name.clone(), semaphore);
            }
            return expirable(&handles.expirable[&name], command, words).await;
        }
        "latch_" => {
            let latch = client.count_down_latch(&name).map_err(describe)?;
            return count_down_latch(&latch, command, words).await;
        }
        "elect_" => return election(client, handles, &name, command, words).await,
        _ => {}
    }
    let key = format!("{kind}{name}");
    if !handles.locks.contains_key(&key) {
        let lock = match kind {
            "fair_" => client.fair_lock(&name),
            "fifo_" => client.fifo_lock(&name),
            "fenced_" => client.fenced_lock(&name),
            "read_" | "write_" => {
                if !handles.read_write.contains_key(&name) {
                    let read_write = client.read_write_lock(&name).map_err(describe)?;
                    handles.read_write.insert(name.clone(), read_write);
                }
                let read_write = &handles.read_write[&name];
                Ok(if kind == "read_" {
                    read_write.read_lock()
                } else {
                    read_write.write_lock()
                })
            }
            _ => client.lock(&name),
        };
        handles.locks.insert(key.clone(), lock.map_err(describe)?);
    }
    let lock = &handles.locks[&key];
    Ok(match command {
        "acquire" => {
            let wait = millis(words.next())?;
            let lease = millis(words.next())?;
            format!(
                "ok {}",
                lock.acquire(AcquireOptions { wait, lease })
                    .await
                    .map_err(describe)?
            )
        }
        "release" => lock
            .release()
            .await
            .map(|()| "ok".to_owned())
            .map_err(describe)?,
        "force_unlock" => format!("ok {}", lock.force_unlock().await.map_err(describe)?),
        "hold_count" => format!("ok {}", lock.hold_count()),
        "is_locked" => format!("ok {}", lock.is_locked().await.map_err(describe)?),
        "owner" => format!("ok {}", lock.owner()),
        "token" => match lock.token() {
            Some(token) => format!("ok {token}"),
            None => "ok -".to_owned(),
        },
        "increment" => {
            let counter = words.next().ok_or("missing counter key")?;
            let times: u32 = words
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or("missing count")?;
            increment(url, lock, counter, times).await?;
            "ok".to_owned()
        }
        other => return Err(format!("Usage unknown command '{other}'")),
    })
}

async fn semaphore<'a>(
    semaphore: &Semaphore,
    command: &str,
    mut words: impl Iterator<Item = &'a str>,
) -> Result<String, String> {
    Ok(match command {
        "acquire" => {
            let permits = number(words.next(), "permits")?;
            let wait = millis(words.next())?;
            let acquired = semaphore.acquire(permits, wait).await;
            format!("ok {}", acquired.map_err(describe)?)
        }
        "release" => {
            let permits = number(words.next(), "permits")?;
            semaphore.release(permits).await.map_err(describe)?;
            "ok".to_owned()
        }
        "add" => {
            let permits = number(words.next(), "permits")?;
            semaphore.add_permits(permits).await.map_err(describe)?;
            "ok".to_owned()
        }
        "try_set" => {
            let permits = number(words.next(), "permits")?;
            let set = semaphore.try_set_permits(permits).await;
            format!("ok {}", set.map_err(describe)?)
        }
        "available" => {
            let available = semaphore.available_permits().await;
            format!("ok {}", available.map_err(describe)?)
        }
        other => return Err(format!("Usage unknown command 'sem_{other}'")),
    })
}

async fn expirable<'a>(
    semaphore: &ExpirableSemaphore,
    command: &str,
    mut words: impl Iterator<Item = &'a str>,
) -> Result<String, String> {
    Ok(match command {
        "acquire" => {
            let wait = millis(words.next())?;
            let lease = millis(words.next())?;
            match semaphore
                .acquire(AcquireOptions { wait, lease })
                .await
                .map_err(describe)?
            {
                Some(id) => format!("ok {id}"),
                None => "ok -".to_owned(),
            }
        }
        "release" => {
            let id = words.next().ok_or("missing permit id")?;
            semaphore.release(id).await.map_err(describe)?;
            "ok".to_owned()
        }
        "try_set" => {
            let permits = number(words.next(), "permits")?;
            let set = semaphore.try_set_permits(permits).await;
            format!("ok {}", set.map_err(describe)?)
        }
        "available" => {
            let available = semaphore.available_permits().await;
            format!("ok {}", available.map_err(describe)?)
        }
        other => return Err(format!("Usage unknown command 'xsem_{other}'")),
    })
}

async fn count_down_latch<'a>(
    latch: &polylock::CountDownLatch,
    command: &str,
    mut words: impl Iterator<Item = &'a str>,
) -> Result<String, String> {
    Ok(match command {
        "try_set" => {
            let count = number(words.next(), "count")?;
            format!("ok {}", latch.try_set_count(count).await.map_err(describe)?)
        }
        "count_down" => {
            latch.count_down().await.map_err(describe)?;
            "ok".to_owned()
        }
        "count" => format!("ok {}", latch.count().await.map_err(describe)?),
        "await" => {
            let timeout = number(words.next(), "timeout")?;
            let reached = latch.await_zero(Duration::from_millis(timeout)).await;
            format!("ok {}", reached.map_err(describe)?)
        }
        "delete" => format!("ok {}", latch.delete().await.map_err(describe)?),
        other => return Err(format!("Usage unknown command 'latch_{other}'")),
    })
}

async fn election<'a>(
    client: &Client,
    handles: &mut Handles,
    name: &str,
    command: &str,
    mut words: impl Iterator<Item = &'a str>,
) -> Result<String, String> {
    Ok(match command {
        "campaign" => {
            let value = words.next().ok_or("missing value")?;
            let wait = millis(words.next())?;
            let election = client.election(name).map_err(describe)?;
            match election.campaign(value, wait).await.map_err(describe)? {
                Some(leadership) => {
                    let term = leadership.term();
                    handles.leaderships.insert(name.to_owned(), leadership);
                    format!("ok {term}")
                }
                None => "ok -".to_owned(),
            }
        }
        "resign" => {
            if let Some(leadership) = handles.leaderships.remove(name) {
                leadership.resign().await.map_err(describe)?;
            }
            "ok".to_owned()
        }
        other => return Err(format!("Usage unknown command 'elect_{other}'")),
    })
}

async fn increment(url: &str, lock: &Lock, counter: &str, times: u32) -> Result<(), String> {
    let failed = |err: redis::RedisError| err.to_string();
    // The counter may live on any node of a cluster (no credentials in the peer's cluster URLs).
    if let Some(nodes) = url.strip_prefix("redis+cluster://") {
        let nodes: Vec<String> = nodes
            .split(',')
            .map(|node| format!("redis://{node}"))
            .collect();
        let cluster = redis::cluster::ClusterClient::new(nodes).map_err(failed)?;
        let mut con = cluster.get_async_connection().await.map_err(failed)?;
        return increment_on(&mut con, lock, counter, times).await;
    }
    let raw = redis::Client::open(url).map_err(failed)?;
    let mut con = raw
        .get_multiplexed_async_connection()
        .await
        .map_err(failed)?;
    increment_on(&mut con, lock, counter, times).await
}

async fn increment_on(
    con: &mut impl redis::aio::ConnectionLike,
    lock: &Lock,
    counter: &str,
    times: u32,
) -> Result<(), String> {
    for _ in 0..times {
        lock.acquire(AcquireOptions::new())
            .await
            .map_err(describe)?;
        let value: Option<i64> = redis::cmd("GET")
            .arg(counter)
            .query_async(con)
            .await
            .map_err(|err| err.to_string())?;
        let () = redis::cmd("SET")
            .arg(counter)
            .arg(value.unwrap_or(0) + 1)
            .query_async(con)
            .await
            .map_err(|err| err.to_string())?;
        lock.release().await.map_err(describe)?;
    }
    Ok(())
}

fn describe(err: polylock::Error) -> String {
    format!("{:?} {err}", err.kind())
}

fn main() {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into());
    let runtime = polylock::runtime();
    let mut builder = Client::builder(url.clone());
    if let Some(ms) = std::env::var("POLYLOCK_FAIR_QUEUE_TIMEOUT_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
    {
        builder = builder.fair_queue_timeout(Duration::from_millis(ms));
    }
    if let Ok(prefix) = std::env::var("POLYLOCK_KEY_PREFIX") {
        builder = builder.key_prefix(prefix);
    }
    if let Some(ms) = std::env::args().nth(2).and_then(|ms| ms.parse().ok()) {
        builder = builder.watchdog_timeout(Duration::from_millis(ms));
    }
    let client = match runtime.block_on(builder.connect()) {
        Ok(client) => client,
        Err(err) => {
            println!("err {}", describe(err));
            std::process::exit(1);
        }
    };
    println!("ready {}", client.id());
    let mut handles = Handles::default();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line == "quit" {
            break;
        }
        let reply = runtime
            .block_on(run(&client, &url, &mut handles, line))
            .unwrap_or_else(|err| format!("err {err}"));
        // The test that drove this peer may be gone already: a closed pipe ends the peer quietly.
        let mut stdout = std::io::stdout();
        if writeln!(stdout, "{reply}")
            .and_then(|_| stdout.flush())
            .is_err()
        {
            break;
        }
    }
    // Closed on this plain thread, `close` waits for the record's DEL: a peer that quits leaves
    // no client record behind (its holds are not released: they expire with their lease).
    client.close();
}
