//! Waiting without pub/sub: a client in poll mode waits for a lock another client holds, and
//! takes it after the release, without ever subscribing.
//!
//! `cargo run -p polylock --example wait_poll -- redis://127.0.0.1:6379`

use std::time::{Duration, Instant};

use polylock::{AcquireOptions, Client, ClientOptions, WaitMode};

#[tokio::main]
async fn main() -> polylock::Result<()> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let holder = Client::connect(&url).await?;
    let options = ClientOptions {
        wait_mode: WaitMode::Poll {
            min: Duration::from_millis(1),
            max: Duration::from_millis(50),
        },
        ..ClientOptions::default()
    };
    let poller = Client::connect_with(&url, options).await?;

    let held = holder.lock("example:wait-poll")?;
    held.acquire(AcquireOptions::new().no_wait()).await?;
    let waiter = poller.lock("example:wait-poll")?;
    let releasing = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        held.release().await
    });
    let started = Instant::now();
    let acquired = waiter
        .acquire(AcquireOptions::new().wait(Duration::from_secs(10)))
        .await?;
    releasing.await.expect("the release task")?;
    println!(
        "acquired={acquired} after {} ms, subscribed channels: {}",
        started.elapsed().as_millis(),
        poller.subscribed_channels()
    );
    if acquired {
        waiter.release().await?;
    }
    Ok(())
}
