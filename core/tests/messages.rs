//! The engine's messages name a handle by its kind and by its name as the user gave it: a
//! semaphore is a semaphore, a read lock a read lock, and a client's key prefix stays out.

mod common;

use std::time::Duration;

use common::*;
use polylock::{AcquireOptions, Client, ErrorKind, Hold};

#[tokio::test]
async fn a_semaphore_and_a_read_lock_are_called_what_they_are() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();

    let read = client.read_write_lock("report").unwrap().read_lock();
    let err = read.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    assert!(
        err.message()
            .starts_with("read lock 'report' is not held by this owner"),
        "{err}"
    );

    // A scoped hold of permits that are all taken: the semaphore's own words.
    let semaphore = client.semaphore("permits").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    assert!(semaphore.acquire(1, Some(Duration::ZERO)).await.unwrap());
    let one = semaphore.permits(1).unwrap();
    let err = one
        .acquire_or_fail(AcquireOptions::new().wait(Duration::from_millis(50)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(
        err.message(),
        "1 permits of semaphore 'permits' were not acquired within 50 ms: other holders kept \
         them all that time"
    );

    client.close();
    let err = semaphore
        .acquire(1, Some(Duration::ZERO))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection);
    assert_eq!(err.message(), "semaphore 'permits': the client is closed");
}

#[tokio::test]
async fn a_lease_that_ran_out_under_a_key_prefix_names_the_lock_without_it() {
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .key_prefix("app:")
        .connect()
        .await
        .unwrap();
    let lock = client.lock("orders:1").unwrap();
    let lease = AcquireOptions::new().lease(Duration::from_millis(200));
    assert!(lock.acquire(lease).await.unwrap());
    // The watchdog reports the fixed lease's end; wait for it (bounded), then read its error.
    let mut lost = lock.lost_receiver();
    tokio::time::timeout(Duration::from_secs(30), lost.wait_for(|lost| *lost))
        .await
        .expect("the lease's end was never reported")
        .unwrap();
    let err = lock.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost);
    assert!(
        err.message()
            .starts_with("lock 'orders:1' was lost: its fixed lease of 200ms ran out while held"),
        "{err}"
    );
}
