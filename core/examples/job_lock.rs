//! A run-once job lock: a job that every node fires on the same schedule runs on one of them.
//!
//! Usage: `job_lock [redis-url]` (default redis://127.0.0.1:6379): two clients (two "nodes")
//! fire the job `report` at once; one runs it, the other skips; a third firing 100 ms later
//! still skips (`at_least` keeps the lock 1 s after the fast job). Prints one line per firing.
//!
//! As a fleet worker (tests/`test_job_fleet.py`): `job_lock URL fleet NAME WORKER FIRST_SLOT_MS
//! SLOTS SLOT_MS JOB_MS AT_MOST_MS AT_LEAST_MS`: fires the job NAME at each of SLOTS slots
//! (wall clock: FIRST_SLOT_MS since the epoch, then every SLOT_MS), each firing late by a
//! jitter of up to a fifth of a slot (a slot it was not up for is not fired); the job pushes
//! `<slot>:<WORKER>` onto the list `NAME:runs` and takes JOB_MS.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use polylock::{Client, JobLockOptions};

#[tokio::main]
async fn main() -> polylock::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let url = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let client = Client::connect(&url).await?;
    if args.get(2).map(String::as_str) == Some("fleet") {
        return fleet(&client, &url, &args[3..]).await;
    }
    let options = JobLockOptions::new(Duration::from_secs(10), Duration::from_secs(1));
    let other_node = Client::connect(&url).await?;
    let job = || async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        "report sent"
    };
    let (first, second) = tokio::join!(
        client.run_job("report", options, job),
        other_node.run_job("report", options, job)
    );
    println!("node 1: {:?}", first?);
    println!("node 2: {:?}", second?);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let late = other_node.run_job("report", options, job).await?;
    println!("node 2, 100 ms later: {late:?}");
    Ok(())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn fleet(client: &Client, url: &str, args: &[String]) -> polylock::Result<()> {
    let number = |i: usize| -> u64 { args[i].parse().expect("a number") };
    let (name, worker) = (args[0].clone(), args[1].clone());
    let (first_slot, slots, slot_ms, job_ms) = (number(2), number(3), number(4), number(5));
    let options = JobLockOptions::new(
        Duration::from_millis(number(6)),
        Duration::from_millis(number(7)),
    );
    let mut records = redis::Client::open(url)
        .and_then(|redis| redis.get_connection())
        .expect("a connection for the records");
    let runs = format!("{name}:runs");
    // A jitter that differs per process and per slot (no random crate needed).
    let seed = u64::from(std::process::id());
    for slot in 0..slots {
        let jitter = (seed.wrapping_mul(7919).wrapping_add(slot * 104_729)) % (slot_ms / 5);
        let fire_at = first_slot + slot * slot_ms + jitter;
        if now_ms() > fire_at + slot_ms / 5 {
            // Not up at that moment (a slow start): a scheduler fires no slot it missed.
            continue;
        }
        tokio::time::sleep(Duration::from_millis(fire_at.saturating_sub(now_ms()))).await;
        client
            .run_job(&name, options, || async {
                redis::cmd("RPUSH")
                    .arg(&runs)
                    .arg(format!("{slot}:{worker}"))
                    .exec(&mut records)
                    .expect("record the run");
                tokio::time::sleep(Duration::from_millis(job_ms)).await;
            })
            .await?;
    }
    Ok(())
}
