//! The count-down latch (Redisson RCountDownLatch layout) against a real redis-server: the
//! count as Redisson stores it and the messages it publishes, waiters woken by another client's
//! count down, bounded waits, bad input, and a waiter whose pub/sub connection is cut.

mod common;

use std::time::{Duration, Instant};

use common::*;
use futures_util::StreamExt;
use polylock::{ErrorKind, MAX_LATCH_COUNT};
use redis::AsyncCommands;

const LONG: Duration = Duration::from_secs(60);

/// How many clients the server has subscribed to `channel` (a waiter's subscription is
/// confirmed once this counts it).
async fn listeners(con: &mut redis::aio::MultiplexedConnection, channel: &str) -> i64 {
    let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(con)
        .await
        .unwrap();
    counts[0].1
}

async fn wait_for_listeners(server: &RedisServer, channel: &str, wanted: i64) {
    let con = raw(server).await;
    assert!(
        eventually(Duration::from_secs(20), || {
            let mut con = con.clone();
            async move { listeners(&mut con, channel).await == wanted }
        })
        .await,
        "nobody subscribed to {channel}"
    );
}

#[tokio::test]
async fn the_count_is_a_plain_string_set_once_and_counted_down_to_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    let latch = client.count_down_latch("latch:basic").unwrap();
    assert_eq!(latch.count().await.unwrap(), 0, "never set: open");

    assert!(latch.try_set_count(2).await.unwrap());
    assert!(!latch.try_set_count(5).await.unwrap(), "a count is set");
    let stored: Option<String> = con.get("latch:basic").await.unwrap();
    assert_eq!(stored.as_deref(), Some("2"));
    assert_eq!(latch.count().await.unwrap(), 2);

    latch.count_down().await.unwrap();
    assert_eq!(latch.count().await.unwrap(), 1);
    latch.count_down().await.unwrap();
    assert_eq!(latch.count().await.unwrap(), 0);
    assert!(!exists(&mut con, "latch:basic").await, "open: no key");
    // Counting down an open latch leaves it open (no key, no negative count).
    latch.count_down().await.unwrap();
    assert!(!exists(&mut con, "latch:basic").await);
    assert_eq!(latch.count().await.unwrap(), 0);
    assert!(latch.await_zero(Duration::ZERO).await.unwrap());
    // Open again: it can be set again.
    assert!(latch.try_set_count(1).await.unwrap());
    assert_eq!(latch.count().await.unwrap(), 1);
}

/// The messages on `redisson_countdownlatch__channel__{name}`, as Redisson's
/// `CountDownLatchPubSub` reads them: `1` a new count (or a delete), `0` zero reached.
async fn next(messages: &mut (impl futures_util::Stream<Item = redis::Msg> + Unpin)) -> String {
    let message = tokio::time::timeout(Duration::from_secs(10), messages.next())
        .await
        .expect("no message")
        .unwrap();
    message.get_payload().unwrap()
}

#[tokio::test]
async fn messages_are_redissons() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let latch = client.count_down_latch("latch:messages").unwrap();
    let mut pubsub = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    pubsub
        .subscribe("redisson_countdownlatch__channel__{latch:messages}")
        .await
        .unwrap();
    let mut messages = pubsub.into_on_message();
    assert!(latch.try_set_count(2).await.unwrap());
    assert_eq!(next(&mut messages).await, "1");
    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    assert_eq!(
        next(&mut messages).await,
        "0",
        "only the count down that reached zero publishes"
    );
    assert!(latch.try_set_count(3).await.unwrap());
    assert_eq!(next(&mut messages).await, "1");
    assert!(latch.delete().await.unwrap());
    assert_eq!(
        next(&mut messages).await,
        "1",
        "a delete tells waiters to look"
    );
    assert!(!latch.delete().await.unwrap(), "nothing left to delete");
}

#[tokio::test]
async fn a_wait_ends_false_at_its_timeout() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let latch = client.count_down_latch("latch:timeout").unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    assert!(!latch.await_zero(Duration::ZERO).await.unwrap());
    let started = Instant::now();
    assert!(!latch.await_zero(Duration::from_millis(300)).await.unwrap());
    assert!(started.elapsed() >= Duration::from_millis(300));
    let left = eventually(Duration::from_secs(20), || {
        let channels = client.subscribed_channels();
        async move { channels == 0 }
    });
    assert!(left.await, "the waiter did not leave its channel");
}

/// Waiters of another client (two on one channel) wake on the zero message, long before their
/// 60 s timeout; the count downs that do not reach zero wake nobody for good.
#[tokio::test]
async fn waiters_wake_when_another_client_counts_down_to_zero() {
    let server = RedisServer::start();
    let waiting = client(&server).await;
    let counting = client(&server).await;
    let latch = counting.count_down_latch("latch:wake").unwrap();
    assert!(latch.try_set_count(2).await.unwrap());
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let latch = waiting.count_down_latch("latch:wake").unwrap();
            tokio::spawn(async move {
                let started = Instant::now();
                (latch.await_zero(LONG).await.unwrap(), started.elapsed())
            })
        })
        .collect();
    wait_for_listeners(&server, "redisson_countdownlatch__channel__{latch:wake}", 1).await;
    latch.count_down().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        waiters.iter().all(|waiter| !waiter.is_finished()),
        "count 1 is not zero"
    );
    latch.count_down().await.unwrap();
    for waiter in waiters {
        let (reached, waited) = waiter.await.unwrap();
        assert!(reached);
        assert!(waited < Duration::from_secs(30), "woke after {waited:?}");
    }
}

#[tokio::test]
async fn a_delete_opens_the_latch_for_its_waiters() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let other = common::client(&server).await;
    let latch = client.count_down_latch("latch:delete").unwrap();
    assert!(latch.try_set_count(7).await.unwrap());
    let waiter = {
        let latch = other.count_down_latch("latch:delete").unwrap();
        tokio::spawn(async move { latch.await_zero(LONG).await.unwrap() })
    };
    wait_for_listeners(
        &server,
        "redisson_countdownlatch__channel__{latch:delete}",
        1,
    )
    .await;
    assert!(latch.delete().await.unwrap());
    let woke = tokio::time::timeout(Duration::from_secs(30), waiter).await;
    assert!(woke.expect("the waiter slept through the delete").unwrap());
}

/// The waiter's pub/sub connection is cut (CLIENT KILL) twice: after the first cut the count
/// is 1 and the wake-up of the reconnect must not end the wait; the second cut loses the zero
/// message itself, and the wait must still end true, long before its timeout.
#[tokio::test]
async fn a_cut_subscription_neither_ends_the_wait_early_nor_hangs_it() {
    let server = RedisServer::start();
    let waiting = client(&server).await;
    let counting = client(&server).await;
    let channel = "redisson_countdownlatch__channel__{latch:cut}";
    let latch = counting.count_down_latch("latch:cut").unwrap();
    assert!(latch.try_set_count(2).await.unwrap());
    let waiter = {
        let latch = waiting.count_down_latch("latch:cut").unwrap();
        tokio::spawn(async move {
            let started = Instant::now();
            (latch.await_zero(LONG).await.unwrap(), started.elapsed())
        })
    };
    wait_for_listeners(&server, channel, 1).await;
    assert!(server.kill_clients("pubsub") >= 1);
    latch.count_down().await.unwrap();
    let con = raw(&server).await;
    // Until the waiter is subscribed again, or gone (the bug).
    eventually(Duration::from_secs(20), || {
        let mut con = con.clone();
        let gone = waiter.is_finished();
        async move { gone || listeners(&mut con, channel).await == 1 }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "woken by the reconnect at count 1");

    assert!(server.kill_clients("pubsub") >= 1);
    // Sent while the waiter has no subscription: its zero message is lost.
    latch.count_down().await.unwrap();
    let (reached, waited) = waiter.await.unwrap();
    assert!(reached);
    assert!(waited < Duration::from_secs(30), "woke after {waited:?}");
}

#[tokio::test]
async fn bad_input_is_an_invalid_argument_before_any_io() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let latch = client.count_down_latch("latch:bad").unwrap();
    for count in [0, -1, MAX_LATCH_COUNT + 1] {
        let err = latch.try_set_count(count).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert_eq!(
            err.to_string(),
            format!("invalid argument: count must be from 1 to 9007199254740991, got {count}")
        );
    }
    assert!(latch.try_set_count(MAX_LATCH_COUNT).await.unwrap());
    let err = latch
        .await_zero(polylock::MAX_DURATION + Duration::from_secs(1))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    for millis in [f64::NAN, -1.0, f64::INFINITY] {
        let err = polylock::latch_timeout_from_millis(millis).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{millis}");
        assert!(err.to_string().contains("timeout must be"), "{err}");
    }
    assert_eq!(
        polylock::latch_timeout_from_millis(1500.0).unwrap(),
        Duration::from_millis(1500)
    );
    assert_eq!(
        client.count_down_latch("").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[tokio::test]
async fn a_key_that_is_no_count_is_a_wrong_type() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut con = raw(&server).await;
    let _: () = con.hset("latch:hash", "f", "v").await.unwrap();
    let _: () = con.set("latch:text", "many").await.unwrap();
    for name in ["latch:hash", "latch:text"] {
        let latch = client.count_down_latch(name).unwrap();
        let err = latch.count().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{name}: {err}");
        let err = latch.await_zero(LONG).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{name}: {err}");
    }
}

/// The `latch` example (cargo test builds examples) runs against a launched server.
#[test]
fn the_example_opens_the_latch() {
    let server = RedisServer::start();
    let example = peer_binary().with_file_name("latch");
    let output = std::process::Command::new(&example)
        .arg(server.url())
        .output()
        .unwrap_or_else(|err| panic!("{}: {err}", example.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        stdout
            .lines()
            .filter(|line| line.ends_with(" ready"))
            .count(),
        3
    );
    assert_eq!(stdout.lines().last(), Some("opened"));
}
