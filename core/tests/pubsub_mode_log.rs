//! The cluster pub/sub mode a client picks is logged at info level with why: sharded where the
//! cluster answers `SPUBLISH`, broadcast where it does not know it (renamed away). Its own test
//! binary: it installs a global log subscriber that records every line.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use polylock::Client;
use polylock_testkit::Cluster;

/// Every log line written so far.
#[derive(Clone, Default)]
struct Recorded(Arc<Mutex<Vec<u8>>>);

impl Write for Recorded {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Recorded {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

async fn connect(url: &str) -> Client {
    Client::builder(url)
        .connect_timeout(Duration::from_secs(3))
        .connect()
        .await
        .expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chosen_pubsub_mode_and_why_is_logged() {
    let recorded = Recorded::default();
    let writer = recorded.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();

    let sharded = Cluster::start_primaries_with(3, &[]);
    connect(&sharded.url()).await.close();
    let text = recorded.text();
    assert!(
        text.contains(
            "cluster pub/sub mode: sharded (SPUBLISH/SSUBSCRIBE), because the cluster answered SPUBLISH"
        ),
        "{text}"
    );
    assert!(!text.contains("cluster pub/sub mode: broadcast"), "{text}");

    let broadcast = Cluster::start_primaries_with(3, &["--rename-command", "SPUBLISH", ""]);
    connect(&broadcast.url()).await.close();
    let text = recorded.text();
    assert!(
        text.contains(
            "cluster pub/sub mode: broadcast (PUBLISH/SUBSCRIBE), because the cluster does not know SPUBLISH"
        ),
        "{text}"
    );
}
