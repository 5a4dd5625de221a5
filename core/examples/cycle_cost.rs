//! Server CPU per uncontended lock cycle (acquire and release of a free lock), per kind: the
//! server's `used_cpu_sys + used_cpu_user` (INFO cpu) over `cycles` cycles, in microseconds per
//! cycle, and the commands per cycle (INFO commandstats). Run it against a server of its own
//! and compare two builds side by side, alternating, on the same server binary. A measuring
//! tool, not a test.
//!
//! Usage: `cycle_cost <redis-url> [cycles]` (default 20,000).

use std::time::Instant;

use polylock::{AcquireOptions, Client};

#[path = "common/server_work.rs"]
mod server_work;

/// The server's CPU seconds so far and its commands so far (scripts' inner calls included).
async fn server_work(con: &mut redis::aio::MultiplexedConnection) -> (f64, u64) {
    (
        server_work::server_cpu(con).await,
        server_work::server_commands(con).await,
    )
}

#[tokio::main]
async fn main() -> polylock::Result<()> {
    let mut args = std::env::args().skip(1);
    let url = args.next().expect("usage: cycle_cost <redis-url> [cycles]");
    let cycles: u64 = args.next().map_or(20_000, |n| n.parse().expect("cycles"));
    let client = Client::connect(&url).await?;
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let kinds = [
        ("plain", client.lock("cost:plain")?),
        ("fair", client.fair_lock("cost:fair")?),
        ("fifo", client.fifo_lock("cost:fifo")?),
    ];
    for (kind, lock) in &kinds {
        // Scripts loaded first.
        assert!(lock.acquire(AcquireOptions::new()).await?);
        lock.release().await?;
        let (cpu_before, commands_before) = server_work(&mut con).await;
        let started = Instant::now();
        for _ in 0..cycles {
            assert!(lock.acquire(AcquireOptions::new()).await?);
            lock.release().await?;
        }
        let elapsed = started.elapsed();
        let (cpu_after, commands_after) = server_work(&mut con).await;
        // The two INFO calls of the reading itself are left out; CONFIG and the like are not sent.
        println!(
            "{kind}: {:.2} us server CPU per cycle, {:.2} commands per cycle, {:.0} cycles/s",
            (cpu_after - cpu_before) * 1e6 / cycles as f64,
            (commands_after - commands_before) as f64 / cycles as f64,
            cycles as f64 / elapsed.as_secs_f64()
        );
    }
    client.close();
    Ok(())
}
