//! What a client leaves behind: tasks on the core's runtime. Its own test binary with one
//! test, so no other test's tasks share the runtime being counted.

mod common;

use polylock::AcquireOptions;
use std::time::Duration;

use common::*;

fn alive_tasks() -> usize {
    polylock::runtime().metrics().num_alive_tasks()
}

async fn settled(limit: Duration, at_most: usize) -> bool {
    eventually(limit, || std::future::ready(alive_tasks() <= at_most)).await
}

#[tokio::test]
async fn tasks_follow_the_holds_of_now_not_past_acquisitions_or_clients() {
    let server = RedisServer::start();
    let baseline = alive_tasks();

    // A client runs a fixed set of tasks (connection drivers, pub/sub, upkeep).
    let first = client(&server).await;
    let lock = first.lock("tasks").unwrap();
    assert!(lock
        .acquire(AcquireOptions::new().lease(Duration::from_secs(3600)))
        .await
        .unwrap());
    lock.release().await.unwrap();
    assert!(settled(Duration::from_secs(2), baseline + 16).await);
    let with_client = alive_tasks();

    // 2000 fixed-lease acquisitions of an hour each: no task per acquisition stays behind.
    for _ in 0..2000 {
        assert!(lock
            .acquire(AcquireOptions::new().lease(Duration::from_secs(3600)))
            .await
            .unwrap());
        lock.release().await.unwrap();
    }
    assert!(
        settled(Duration::from_secs(2), with_client).await,
        "{} tasks alive after 2000 fixed-lease acquisitions, {with_client} before",
        alive_tasks()
    );

    // Closed and dropped clients leave no task behind.
    drop(lock);
    first.close();
    drop(first);
    for _ in 0..5 {
        let client = client(&server).await;
        let lock = client.lock("tasks").unwrap();
        assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
        lock.release().await.unwrap();
        client.close();
    }
    assert!(
        settled(Duration::from_secs(5), baseline).await,
        "{} tasks alive after closing every client, {baseline} before",
        alive_tasks()
    );
}
