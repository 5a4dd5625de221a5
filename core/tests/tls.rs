//! TLS: a real redis-server serving TLS with certificates made at test time
//! (`tests/tls/make-certs.sh`, through the test kit's `TlsFiles`).

use std::time::Duration;

use polylock::{AcquireOptions, Client, ClientBuilder, ClientOptions, ErrorKind};
use polylock_testkit::{Cluster, RedisServer, SentinelSet, TlsFiles};

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

/// The test's CA given as a file path; a second client given the same CA as PEM text.
#[tokio::test]
async fn a_lock_over_rediss_with_a_private_ca() {
    let files = TlsFiles::make();
    let server = RedisServer::start_tls(&files, "server", false);
    let first = builder(server.tls_url())
        .tls_ca(files.path("ca.crt"))
        .connect()
        .await
        .unwrap();
    let second = builder(server.tls_url())
        .tls_ca(files.read("ca.crt"))
        .connect()
        .await
        .unwrap();
    check_exclusion(&first, &second).await;
}

#[tokio::test]
async fn mutual_tls_with_a_client_certificate() {
    let files = TlsFiles::make();
    let server = RedisServer::start_tls(&files, "server", true);
    let connect = || {
        builder(server.tls_url())
            .tls_ca(files.path("ca.crt"))
            .tls_client_cert(files.path("client.crt"), files.path("client.key"))
            .connect()
    };
    let first = connect().await.unwrap();
    let second = connect().await.unwrap();
    check_exclusion(&first, &second).await;
}

#[tokio::test]
async fn tls_insecure_skips_verification() {
    let files = TlsFiles::make();
    // Signed by a CA the client is not told about.
    let server = RedisServer::start_tls(&files, "server", false);
    let connect = || builder(server.tls_url()).tls_insecure(true).connect();
    let first = connect().await.unwrap();
    let second = connect().await.unwrap();
    check_exclusion(&first, &second).await;
}

async fn connect_error(connecting: ClientBuilder) -> polylock::Error {
    let err = match connecting.connect().await {
        Ok(_) => panic!("connected"),
        Err(err) => err,
    };
    eprintln!("{err}");
    err
}

#[tokio::test]
async fn a_server_signed_by_another_ca_is_not_trusted() {
    let files = TlsFiles::make();
    let server = RedisServer::start_tls(&files, "server", false);
    let err = connect_error(builder(server.tls_url()).tls_ca(files.path("other-ca.crt"))).await;
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(
        err.to_string().contains("certificate is not trusted"),
        "{err}"
    );
    // Without tls_ca only the public roots are trusted.
    let err = connect_error(builder(server.tls_url())).await;
    assert!(
        err.to_string().contains("certificate is not trusted"),
        "{err}"
    );
}

#[tokio::test]
async fn an_expired_server_certificate_is_refused() {
    let files = TlsFiles::make();
    let server = RedisServer::start_tls(&files, "expired", false);
    let err = connect_error(builder(server.tls_url()).tls_ca(files.path("ca.crt"))).await;
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(err.to_string().contains("has expired"), "{err}");
}

#[tokio::test]
async fn a_server_that_wants_a_client_certificate_refuses_one_without() {
    let files = TlsFiles::make();
    let server = RedisServer::start_tls(&files, "server", true);
    let err = connect_error(builder(server.tls_url()).tls_ca(files.path("ca.crt"))).await;
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(err.to_string().contains("client certificate"), "{err}");
}

#[tokio::test]
async fn bad_tls_options_are_invalid_arguments_that_say_which() {
    let files = TlsFiles::make();
    let server = RedisServer::start_tls(&files, "server", false);
    let cases = [
        (
            builder(server.tls_url()).tls_ca("/nonexistent/ca.pem"),
            "tls_ca file '/nonexistent/ca.pem' was not found",
        ),
        (
            builder(server.tls_url()).tls_ca(files.path("server.ext")),
            "holds no PEM certificate",
        ),
        (
            builder(server.tls_url())
                .tls_ca("-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n"),
            "tls_ca (PEM text) is not valid PEM",
        ),
        (
            builder(server.tls_url())
                .tls_client_cert(files.path("client.crt"), files.path("client.crt")),
            "holds no usable PEM private key",
        ),
        (
            builder(server.tls_url())
                .tls_client_cert(files.path("client.key"), files.path("client.key")),
            "tls_cert file",
        ),
        (
            builder(server.url()).tls_ca(files.path("ca.crt")),
            "use rediss://",
        ),
    ];
    for (connecting, expected) in cases {
        let err = connect_error(connecting).await;
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(err.to_string().contains(expected), "{err}");
    }
    let options = ClientOptions {
        tls_cert: Some(files.path("client.crt")),
        ..ClientOptions::default()
    };
    let err = Client::connect_with(&server.tls_url(), options)
        .await
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "invalid argument: tls_cert is set without tls_key: a client certificate needs its private key"
    );
}

/// A waiter blocked on a lock held through `first` is woken by its release (not by the end of
/// a 60 s lease).
async fn check_wake_up(first: &Client, second: &Client, name: &str) {
    let long = Duration::from_secs(60);
    let mine = first.lock(name).unwrap();
    assert!(mine.acquire(AcquireOptions::new().no_wait()).await.unwrap());
    let theirs = second.lock(name).unwrap();
    let waiting = tokio::spawn({
        let theirs = theirs.clone();
        async move { theirs.acquire(AcquireOptions::new().wait(long)).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "the lock is held");
    let released = std::time::Instant::now();
    mine.release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap());
    assert!(
        released.elapsed() < long / 4,
        "the waiter was woken by the release"
    );
    theirs.release().await.unwrap();
}

/// Client certificate and test CA for `url`.
fn mutual_tls(url: String, files: &TlsFiles) -> ClientBuilder {
    builder(url)
        .tls_ca(files.path("ca.crt"))
        .tls_client_cert(files.path("client.crt"), files.path("client.key"))
}

/// What a deployment requiring client certificates says to a wrong CA and to a client without
/// a certificate: connection errors that say why, as on one server.
async fn check_refusals(url: String, files: &TlsFiles) {
    let err = connect_error(
        builder(url.clone())
            .tls_ca(files.path("other-ca.crt"))
            .tls_client_cert(files.path("client.crt"), files.path("client.key")),
    )
    .await;
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(
        err.to_string().contains("certificate is not trusted"),
        "{err}"
    );
    let err = connect_error(builder(url).tls_ca(files.path("ca.crt"))).await;
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(err.to_string().contains("client certificate"), "{err}");
}

/// A 3-primary cluster serving only TLS to clients (cluster bus and replication too), with
/// client certificates required: locks, a waiter woken across the cluster's connections, and
/// the typed refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_mutual_tls() {
    let files = TlsFiles::make();
    let cluster = Cluster::start_tls(3, 0, &files, true);
    let first = mutual_tls(cluster.tls_url(), &files)
        .connect()
        .await
        .unwrap();
    let second = mutual_tls(cluster.tls_url(), &files)
        .connect()
        .await
        .unwrap();
    check_exclusion(&first, &second).await;
    // Names on several slots, so on several primaries.
    for name in ["tls:cluster:a", "tls:cluster:b", "tls:cluster:c"] {
        check_wake_up(&first, &second, name).await;
    }
    check_refusals(cluster.tls_url(), &files).await;
}

/// A primary, a replica and three sentinels, all serving TLS with client certificates
/// required (`rediss+sentinel://` asks the sentinels over TLS too): locks, a wake-up, the
/// typed refusals, and a failover followed over TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_over_mutual_tls() {
    let files = TlsFiles::make();
    let set = SentinelSet::start_tls(1, 3, &files, true);
    let url = set.tls_url();
    assert!(url.starts_with("rediss+sentinel://"), "{url}");
    let first = mutual_tls(url.clone(), &files).connect().await.unwrap();
    let second = mutual_tls(url.clone(), &files).connect().await.unwrap();
    check_exclusion(&first, &second).await;
    check_wake_up(&first, &second, "tls:sentinel").await;
    check_refusals(url, &files).await;

    let old = set.primary_port();
    let new = tokio::task::block_in_place(|| set.failover());
    assert_ne!(old, new);
    // The clients follow the sentinels' word to the new primary, over TLS (until the old
    // primary is demoted a lock may still land there).
    let lock = first.lock("tls:sentinel:after").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(true) = lock.acquire(AcquireOptions::new().no_wait()).await {
            let exists = set.server(new).command(&["EXISTS", "tls:sentinel:after"]);
            if exists.as_deref() == Some(":1") {
                break;
            }
            let _ = lock.release().await;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no lock on the new primary after the failover"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    lock.release().await.unwrap();
    check_wake_up(&first, &second, "tls:sentinel").await;
}
