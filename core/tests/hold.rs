//! The one hold abstraction, used generically: the same function, written once over
//! `impl Hold`, run over a lock, a multi-lock, a red-lock and a semaphore's permits against
//! real redis-servers. It checks what every hold promises: defaults, exclusion, the scoped
//! acquire's `Timeout`, `NotHeld`, a waiter woken by a guard's release, a dropped guard
//! releasing in the background.

mod common;

use std::time::{Duration, Instant};

use common::*;
use polylock::{AcquireOptions, ErrorKind, Guard, Hold, MultiLock, RedLock};

/// How long a waiter may wait: it must be woken long before this.
const LONG_WAIT: Duration = Duration::from_secs(60);

/// `holder` and `contender` are two handles on the same thing (two owners); neither holds it.
async fn holds_like_every_hold<H: Hold>(holder: H, contender: H) {
    let holder = holder
        .with_defaults(AcquireOptions::new().no_wait())
        .unwrap();
    assert_eq!(holder.defaults().wait, Some(Duration::ZERO));
    let name = holder.name().to_owned();

    assert!(!holder.is_held() && !holder.is_lost(), "{name}");
    assert_eq!(holder.hold_count(), 0, "{name}");
    let err = holder.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld, "{name}: {err}");

    let guard: Guard<H> = holder.lock().await.unwrap();
    assert!(guard.is_held() && !guard.is_lost(), "{name}");
    assert_eq!(holder.hold_count(), 1, "{name}");
    assert!(!*holder.lost_receiver().borrow(), "{name}");

    // Held: the contender gets nothing, and its scoped acquire fails with the shared message.
    assert!(contender.try_lock().await.unwrap().is_none(), "{name}");
    let err = contender
        .acquire_or_fail(AcquireOptions::new().no_wait())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{name}: {err}");
    assert!(err.to_string().contains(&name), "{err}");

    // A waiter is woken by the guard's release, long before its wait would end.
    let waiter = {
        let contender = contender.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let guard = contender
                .try_lock_with(AcquireOptions::new().wait(LONG_WAIT))
                .await;
            (guard, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    guard.release().await.unwrap();
    assert!(!holder.is_held(), "{name}");
    let (taken, waited) = waiter.await.unwrap();
    let taken = taken.unwrap().expect("the waiter takes it once released");
    assert!(waited < LONG_WAIT / 2, "{name}: woken after {waited:?}");
    assert_eq!(contender.hold_count(), 1, "{name}");

    // The holder's defaults make one attempt: the scoped acquire fails at once.
    let err = holder.lock().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{name}: {err}");

    // A dropped guard releases in the background.
    drop(taken);
    let again = holder
        .try_lock_with(AcquireOptions::new().wait(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("released by the dropped guard");
    assert_eq!(contender.hold_count(), 0, "{name}");
    again.release().await.unwrap();
    assert_eq!(holder.hold_count(), 0, "{name}");
}

/// The former name of a lock's guard still names the same type (docs/rust.md says so).
#[allow(deprecated)]
fn _former_guard_name(guard: Guard<polylock::Lock>) -> polylock::LockGuard {
    guard
}

#[tokio::test]
async fn a_lock_is_a_hold() {
    let server = RedisServer::start();
    let client = client(&server).await;
    holds_like_every_hold(
        client.lock("hold:lock").unwrap(),
        client.lock("hold:lock").unwrap(),
    )
    .await;
}

#[tokio::test]
async fn a_multi_lock_and_a_red_lock_are_holds() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let mut clients = Vec::new();
    for server in &servers {
        clients.push(client(server).await);
    }
    let locks = |name: &str| -> Vec<polylock::Lock> {
        clients.iter().map(|c| c.lock(name).unwrap()).collect()
    };
    holds_like_every_hold(
        MultiLock::new(locks("hold:multi")).unwrap(),
        MultiLock::new(locks("hold:multi")).unwrap(),
    )
    .await;
    holds_like_every_hold(
        RedLock::new(locks("hold:red")).unwrap(),
        RedLock::new(locks("hold:red")).unwrap(),
    )
    .await;
}

#[tokio::test]
async fn a_semaphores_permits_are_a_hold() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let semaphore = client.semaphore("hold:permits").unwrap();
    assert!(semaphore.try_set_permits(3).await.unwrap());
    // Two of the three permits each: one holder at a time.
    holds_like_every_hold(semaphore.permits(2).unwrap(), semaphore.permits(2).unwrap()).await;
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);
}

#[tokio::test]
async fn a_semaphores_permits_take_no_lease_and_a_count_in_bounds() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let semaphore = client.semaphore("hold:bad").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    for permits in [0, -1, polylock::MAX_PERMITS + 1] {
        let err = semaphore.permits(permits).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    }
    let permits = semaphore.permits(1).unwrap();
    let lease = AcquireOptions::new().lease(Duration::from_secs(5));
    let err = permits.acquire(lease).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let err = permits.clone().with_defaults(lease).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    // Nothing was taken by the refused acquire.
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    assert!(!permits.is_held());
}
