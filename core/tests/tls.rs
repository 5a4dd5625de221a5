//! TLS: a real redis-server serving TLS with certificates made at test time
//! (`tests/tls/make-certs.sh`, through the test kit's `TlsFiles`).

use std::time::Duration;

use polylock::{AcquireOptions, Client, ClientBuilder};
use polylock_testkit::{RedisServer, TlsFiles};

fn builder(url: String) -> ClientBuilder {
    Client::builder(url)
        .connect_timeout(Duration::from_secs(3))
        .response_timeout(Duration::from_secs(3))
}

/// Takes a lock through `first` and checks that `second` cannot take it until it is released.
async fn check_exclusion(first: &Client, second: &Client) {
    let mine = first.lock("tls:orders").unwrap();
    let theirs = second.lock("tls:orders").unwrap();
    assert!(mine.acquire(AcquireOptions::new().no_wait()).await.unwrap());
    assert!(!theirs
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    mine.release().await.unwrap();
    assert!(theirs
        .acquire(AcquireOptions::new().wait(Duration::from_secs(2)))
        .await
        .unwrap());
    theirs.release().await.unwrap();
}

/// `#insecure` in the URL (no verification) was the one way to reach a TLS server without
/// options; it used to panic inside rustls (no CryptoProvider).
#[tokio::test]
async fn a_lock_over_rediss_with_the_insecure_url_flag() {
    let files = TlsFiles::make();
    let server = RedisServer::start_tls(&files, "server", false);
    let url = format!("{}/#insecure", server.tls_url());
    let first = builder(url.clone()).connect().await.unwrap();
    let second = builder(url).connect().await.unwrap();
    check_exclusion(&first, &second).await;
}
