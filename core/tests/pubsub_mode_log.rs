//! The cluster pub/sub mode a client picks is logged at info level with why: sharded where the
//! cluster answers `SPUBLISH`, broadcast where it does not know it (renamed away). Its own test
//! binary: it installs a global log subscriber that records every line.

mod common;

use std::time::Duration;

use polylock::Client;
use polylock_testkit::Cluster;

use common::recorded_logs;

async fn connect(url: &str) -> Client {
    Client::builder(url)
        .connect_timeout(Duration::from_secs(3))
        .connect()
        .await
        .expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chosen_pubsub_mode_and_why_is_logged() {
    recorded_logs(tracing::Level::INFO);
    let sharded = Cluster::start_primaries_with(3, &[]);
    connect(&sharded.url()).await.close();
    let text = recorded_logs(tracing::Level::INFO);
    assert!(
        text.contains(
            "cluster pub/sub mode: sharded (SPUBLISH/SSUBSCRIBE), because the cluster answered SPUBLISH"
        ),
        "{text}"
    );
    assert!(!text.contains("cluster pub/sub mode: broadcast"), "{text}");

    let broadcast = Cluster::start_primaries_with(3, &["--rename-command", "SPUBLISH", ""]);
    connect(&broadcast.url()).await.close();
    let text = recorded_logs(tracing::Level::INFO);
    assert!(
        text.contains(
            "cluster pub/sub mode: broadcast (PUBLISH/SUBSCRIBE), because the cluster does not know SPUBLISH"
        ),
        "{text}"
    );
}
