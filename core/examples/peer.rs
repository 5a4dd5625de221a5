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
//!   (a non-atomic increment, so only the lock keeps it exact), release
//! - `quit`
//! - every lock command prefixed with `fair_` (e.g. `fair_acquire NAME 0 -`) works on the fair
//!   lock of that name instead. `POLYLOCK_FAIR_QUEUE_TIMEOUT_MS` sets the fair queue timeout.
//! - likewise `fenced_` (e.g. `fenced_acquire NAME 0 -`, `fenced_token NAME`): the fenced lock.
//!
//! Errors reply `err <Kind> <message>`. One handle per name and kind, so reentrancy works
//! across lines.
//! `ready <client-id>` is printed once connected.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::Duration;

use polylock::{Client, Lock};

fn millis(arg: Option<&str>) -> Result<Option<Duration>, String> {
    match arg {
        None | Some("-") => Ok(None),
        Some(ms) => ms
            .parse::<u64>()
            .map(|ms| Some(Duration::from_millis(ms)))
            .map_err(|_| format!("not a number of milliseconds: {ms}")),
    }
}

async fn run(
    client: &Client,
    url: &str,
    locks: &mut HashMap<String, Lock>,
    line: &str,
) -> Result<String, String> {
    let mut words = line.split_whitespace();
    let word = words.next().unwrap_or("");
    let (kind, command) = ["fair_", "fenced_"]
        .into_iter()
        .find_map(|kind| word.strip_prefix(kind).map(|command| (kind, command)))
        .unwrap_or(("", word));
    let name = words.next().ok_or("missing lock name")?.to_owned();
    let key = format!("{kind}{name}");
    if !locks.contains_key(&key) {
        let lock = match kind {
            "fair_" => client.fair_lock(&name),
            "fenced_" => client.fenced_lock(&name),
            _ => client.lock(&name),
        };
        locks.insert(key.clone(), lock.map_err(describe)?);
    }
    let lock = &locks[&key];
    Ok(match command {
        "acquire" => {
            let wait = millis(words.next())?;
            let lease = millis(words.next())?;
            format!("ok {}", lock.acquire(wait, lease).await.map_err(describe)?)
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

async fn increment(url: &str, lock: &Lock, counter: &str, times: u32) -> Result<(), String> {
    let raw = redis::Client::open(url).map_err(|err| err.to_string())?;
    let mut con = raw
        .get_multiplexed_async_connection()
        .await
        .map_err(|err| err.to_string())?;
    for _ in 0..times {
        lock.acquire(None, None).await.map_err(describe)?;
        let value: Option<i64> = redis::cmd("GET")
            .arg(counter)
            .query_async(&mut con)
            .await
            .map_err(|err| err.to_string())?;
        let () = redis::cmd("SET")
            .arg(counter)
            .arg(value.unwrap_or(0) + 1)
            .query_async(&mut con)
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
    let mut locks = HashMap::new();
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
            .block_on(run(&client, &url, &mut locks, line))
            .unwrap_or_else(|err| format!("err {err}"));
        println!("{reply}");
        let _ = std::io::stdout().flush();
    }
}
