//! Shared helpers for the core's behaviour tests: a real redis-server per test, clients with
//! short timeouts, and a raw connection to look at what the lock wrote.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use polylock::Client;
pub use polylock_testkit::RedisServer;
use redis::AsyncCommands;

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

pub async fn client(server: &RedisServer) -> Client {
    client_with_watchdog(server, Duration::from_secs(30)).await
}

pub async fn client_with_watchdog(server: &RedisServer, watchdog: Duration) -> Client {
    Client::builder(server.url())
        .watchdog_timeout(watchdog)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connect to the test server")
}

pub async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

pub async fn exists(con: &mut redis::aio::MultiplexedConnection, key: &str) -> bool {
    con.exists(key).await.unwrap()
}

pub async fn hget(
    con: &mut redis::aio::MultiplexedConnection,
    key: &str,
    field: &str,
) -> Option<i64> {
    con.hget(key, field).await.unwrap()
}

/// Polls `check` every 10 ms until it holds or `limit` passes; true if it held.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The `peer` example (cargo test builds examples): target/<profile>/examples/peer.
pub fn peer_binary() -> std::path::PathBuf {
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let peer = deps.parent().unwrap().join("examples").join("peer");
    assert!(
        peer.exists(),
        "{} is missing: run `cargo build --example peer`",
        peer.display()
    );
    peer
}
