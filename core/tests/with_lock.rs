//! `Client::with_lock(name, options, f)`: a future run under a lock, against a real redis-server.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use polylock::{AcquireOptions, ClientOptions, ErrorKind};

#[tokio::test]
async fn concurrent_calls_never_overlap() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    let callers: Vec<_> = (0..4)
        .map(|_| {
            let (client, inside, most, calls) =
                (client.clone(), inside.clone(), most.clone(), calls.clone());
            tokio::spawn(async move {
                for _ in 0..5 {
                    client
                        .with_lock("with-lock:overlap", AcquireOptions::new(), || async {
                            most.fetch_max(
                                inside.fetch_add(1, Ordering::SeqCst) + 1,
                                Ordering::SeqCst,
                            );
                            calls.fetch_add(1, Ordering::SeqCst);
                            // A window another caller would enter without the lock.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            inside.fetch_sub(1, Ordering::SeqCst);
                        })
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.unwrap();
    }
    assert_eq!(calls.load(Ordering::SeqCst), 20);
    assert_eq!(most.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_output_and_an_error_pass_through_and_the_lock_is_released() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let probe = client.lock("with-lock:through").unwrap();
    let output = client
        .with_lock("with-lock:through", AcquireOptions::new(), || async {
            assert!(probe.is_locked().await.unwrap(), "runs holding the lock");
            42
        })
        .await
        .unwrap();
    assert_eq!(output, 42);
    assert!(!probe.is_locked().await.unwrap());
    let failed: Result<(), &str> = client
        .with_lock("with-lock:through", AcquireOptions::new(), || async {
            Err("failed")
        })
        .await
        .unwrap();
    assert_eq!(failed, Err("failed"));
    assert!(
        !probe.is_locked().await.unwrap(),
        "released after the error"
    );
}

#[tokio::test]
async fn a_held_lock_makes_a_short_wait_fail_with_timeout_naming_the_holder() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let options = ClientOptions {
        name: Some("with-lock-holder".to_owned()),
        ..ClientOptions::default()
    };
    let holder_client = polylock::Client::connect_with(&server.url(), options)
        .await
        .unwrap();
    let holder = holder_client.lock("with-lock:held").unwrap();
    assert!(holder
        .acquire(AcquireOptions::new().lease(Duration::from_secs(30)))
        .await
        .unwrap());
    let mut ran = false;
    let error = client
        .with_lock(
            "with-lock:held",
            AcquireOptions::new().wait(Duration::from_millis(200)),
            || async { ran = true },
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Timeout);
    let message = error.to_string();
    assert!(
        message.starts_with(
            "lock 'with-lock:held' was not acquired within 200 ms: another owner held it all that time (held by 'with-lock-holder'"
        ),
        "{message}"
    );
    assert!(!ran);
    holder.release().await.unwrap();
}
