//! Throughput and server CPU of a contended lock: `workers` clients (each its own connections,
//! as separate processes would have) take turns on one lock, each critical section a GET, a
//! 1 ms sleep and a SET of a counter. Prints, per kind, critical sections per second, the
//! server's CPU per critical section (INFO cpu), and whether the counter lost an increment.
//! Run it against a server of its own and compare two builds side by side, alternating. A
//! measuring tool, not a test.
//!
//! Usage: `contended_cost <redis-url> [workers] [seconds]` (default 8 workers, 5 s per kind).

use std::sync::Arc;
use std::time::{Duration, Instant};

use polylock::{AcquireOptions, Client};

#[path = "common/server_work.rs"]
mod server_work;

use server_work::server_cpu;

#[tokio::main]
async fn main() -> polylock::Result<()> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .expect("usage: contended_cost <redis-url> [workers] [seconds]");
    let workers: usize = args.next().map_or(8, |n| n.parse().expect("workers"));
    let seconds: u64 = args.next().map_or(5, |n| n.parse().expect("seconds"));
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for kind in ["plain", "fair", "fifo"] {
        let name = format!("contended:{kind}");
        let counter = format!("contended:{kind}:counter");
        let _: () = redis::cmd("DEL")
            .arg(&counter)
            .query_async(&mut con)
            .await
            .unwrap();
        let mut clients = Vec::new();
        for _ in 0..workers {
            clients.push(Client::connect(&url).await?);
        }
        let cpu_before = server_cpu(&mut con).await;
        let started = Instant::now();
        let until = started + Duration::from_secs(seconds);
        let mut tasks = Vec::new();
        for client in &clients {
            let lock = Arc::new(match kind {
                "plain" => client.lock(&name)?,
                "fair" => client.fair_lock(&name)?,
                _ => client.fifo_lock(&name)?,
            });
            let mut data = redis::Client::open(url.as_str())
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let counter = counter.clone();
            tasks.push(tokio::spawn(async move {
                let mut sections = 0u64;
                while Instant::now() < until {
                    assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
                    let value: Option<i64> = redis::cmd("GET")
                        .arg(&counter)
                        .query_async(&mut data)
                        .await
                        .unwrap();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let _: () = redis::cmd("SET")
                        .arg(&counter)
                        .arg(value.unwrap_or(0) + 1)
                        .query_async(&mut data)
                        .await
                        .unwrap();
                    lock.release().await.unwrap();
                    sections += 1;
                }
                sections
            }));
        }
        let mut sections = 0;
        for task in tasks {
            sections += task.await.unwrap();
        }
        let elapsed = started.elapsed();
        let cpu_after = server_cpu(&mut con).await;
        let counted: Option<u64> = redis::cmd("GET")
            .arg(&counter)
            .query_async(&mut con)
            .await
            .unwrap();
        println!(
            "{kind}: {:.0} sections/s, {:.2} us server CPU per section, {}",
            sections as f64 / elapsed.as_secs_f64(),
            (cpu_after - cpu_before) * 1e6 / sections as f64,
            if counted == Some(sections) {
                "no increment lost"
            } else {
                "INCREMENTS LOST"
            }
        );
        for client in clients {
            client.close();
        }
    }
    Ok(())
}
