//! TLS: a real redis-server serving TLS with certificates made at test time
//! (`tests/tls/make-certs.sh`, through the test kit's `TlsFiles`).

use std::time::Duration;

use polylock::{AcquireOptions, Client, ClientBuilder, ClientOptions, ErrorKind};
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
