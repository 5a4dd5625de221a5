//! A line-driven polylock holder for cross-language and interop tests.
//!
//! Usage: `peer <redis-url> [watchdog-timeout-ms]`; then one command per line on stdin, one reply line on stdout:
//! - `acquire NAME WAIT_MS|- LEASE_MS|-` -> `ok true` / `ok false` (`-` = no bound / watchdog)
//! - `release NAME`                      -> `ok`
//! - `force_unlock NAME`                 -> `ok true` / `ok false`
//! - `hold_count NAME`                   -> `ok N`
//! - `is_locked NAME`                    -> `ok true` / `ok false`
//! - `owner NAME`                        -> `ok <client-uuid>:<holder-id>`
//! - `quit`
//!
//! Errors reply `err <Kind> <message>`. One handle per name, so reentrancy works across lines.
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
    locks: &mut HashMap<String, Lock>,
    line: &str,
) -> Result<String, String> {
    let mut words = line.split_whitespace();
    let command = words.next().unwrap_or("");
    let name = words.next().ok_or("missing lock name")?.to_owned();
    if !locks.contains_key(&name) {
        let lock = client.lock(&name).map_err(describe)?;
        locks.insert(name.clone(), lock);
    }
    let lock = &locks[&name];
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
        other => return Err(format!("Usage unknown command '{other}'")),
    })
}

fn describe(err: polylock::Error) -> String {
    format!("{:?} {err}", err.kind())
}

fn main() {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into());
    let runtime = polylock::runtime();
    let mut builder = Client::builder(url);
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
            .block_on(run(&client, &mut locks, line))
            .unwrap_or_else(|err| format!("err {err}"));
        println!("{reply}");
        let _ = std::io::stdout().flush();
    }
}
