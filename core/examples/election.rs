//! Leader election: two candidates of one service campaign on the election `reports`; the
//! leader writes under its term with `fenced_set`, resigns, and the other candidate leads with
//! a higher term, while the old term's late write is refused.
//!
//! Usage: `election [redis-url]` (default redis://127.0.0.1:6379).

use std::time::Duration;

use polylock::{Client, ErrorKind};

/// Runs the example against `url` (the election test runs it against a server of its own).
pub async fn run(url: &str) -> polylock::Result<()> {
    let first = Client::connect(url).await?;
    let second = Client::connect(url).await?;
    let election = first.election("reports")?;
    let observer = second.election("reports")?.observe().await?;
    println!("leader now: {:?}", observer.next().await?);

    // Wait (here at most 10 s) until this candidate leads, announcing where it serves.
    let leadership = election
        .campaign("10.0.0.1:8080", Some(Duration::from_secs(10)))
        .await?
        .expect("nobody else campaigns");
    println!("leading with term {}", leadership.term());
    println!("observed: {:?}", observer.next().await?);
    // Writes a resource checks by term: a later leader's term refuses this one's.
    first
        .fenced_set("reports:owner", "10.0.0.1", leadership.term())
        .await?;

    let contender = second.election("reports")?;
    let waiting = tokio::spawn(async move { contender.campaign("10.0.0.2:8080", None).await });
    leadership.resign().await?;
    let next = waiting
        .await
        .expect("campaign task")?
        .expect("unbounded wait");
    println!("next leader's term {} > {}", next.term(), leadership.term());
    second
        .fenced_set("reports:owner", "10.0.0.2", next.term())
        .await?;
    let late = first
        .fenced_set("reports:owner", "10.0.0.1 again", leadership.term())
        .await;
    assert_eq!(late.unwrap_err().kind(), ErrorKind::StaleToken);
    println!("the old term's write was refused");
    println!("leader: {:?}", second.election("reports")?.leader().await?);
    next.resign().await?;
    Ok(())
}

#[allow(dead_code)] // included by the election test as a module, where main is not called
#[tokio::main]
async fn main() -> polylock::Result<()> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    run(&url).await
}
