//! A count-down latch: the main task waits until three workers, each with its own client as
//! if in its own process, have counted down.
//!
//! Usage: `latch [redis-url]` (default redis://127.0.0.1:6379). Prints `opened` once the
//! latch reached zero.

use std::time::Duration;

use polylock::Client;

#[tokio::main]
async fn main() -> polylock::Result<()> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let client = Client::connect(&url).await?;
    let latch = client.count_down_latch("example:workers-ready")?;
    // Open (no count) unless a previous run was cut short: start from a fresh count.
    latch.delete().await?;
    assert!(latch.try_set_count(3).await?);

    for worker in 1..=3u64 {
        let url = url.clone();
        tokio::spawn(async move {
            let client: Client = Client::connect(&url).await?;
            tokio::time::sleep(Duration::from_millis(100 * worker)).await;
            // Print before counting down: the last count down lets main print `opened` and
            // exit, which may end this task before a later print.
            println!("worker {worker} ready");
            client
                .count_down_latch("example:workers-ready")?
                .count_down()
                .await?;
            Ok::<(), polylock::Error>(())
        });
    }

    if latch.await_zero(Duration::from_secs(30)).await? {
        println!("opened");
    } else {
        println!("still {} to go after 30 s", latch.count().await?);
        std::process::exit(1);
    }
    Ok(())
}
