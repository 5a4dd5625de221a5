//! The bad-input table every binding checks (tests/conformance/bad_input.json) holds for the
//! core itself: the same kind and message come from the core's one validation.

use std::time::Duration;

use polylock::options::{
    lease_from_millis, option_from_millis, wait_from_millis, ClientOptionsInMillis,
};
use polylock::{AcquireOptions, ClientOptions, Error};
use serde_json::Value;

fn millis(value: &Value) -> Option<f64> {
    match value {
        Value::Null => None,
        Value::String(text) => Some(text.parse().expect("NaN or Infinity")),
        number => number.as_f64(),
    }
}

fn option(name: &str, value: Duration) -> ClientOptions {
    let mut options = ClientOptions::default();
    match name {
        "watchdog_timeout" => options.watchdog_timeout = value,
        "connect_timeout" => options.connect_timeout = value,
        "response_timeout" => options.response_timeout = value,
        "fair_queue_timeout" => options.fair_queue_timeout = value,
        "replica_sync_timeout" => options.replica_sync_timeout = value,
        other => panic!("unknown option {other}"),
    }
    options
}

async fn outcome(case: &Value) -> Result<(), Error> {
    match case["call"].as_str().unwrap() {
        "lock" => {
            // Names are checked before any I/O: an unreachable URL is never dialled.
            let server = polylock_testkit::RedisServer::start();
            let client = polylock::Client::connect(&server.url()).await?;
            client.lock(case["name"].as_str().unwrap()).map(drop)
        }
        "acquire" => {
            let wait = wait_from_millis(millis(&case["wait_ms"]))?;
            let lease = lease_from_millis(millis(&case["lease_ms"]))?;
            let server = polylock_testkit::RedisServer::start();
            let client = polylock::Client::connect(&server.url()).await?;
            client
                .lock("bad-input")?
                .acquire(AcquireOptions { wait, lease })
                .await
                .map(drop)
        }
        "read_write_lock" => {
            let server = polylock_testkit::RedisServer::start();
            let client = polylock::Client::connect(&server.url()).await?;
            client
                .read_write_lock(case["name"].as_str().unwrap())
                .map(drop)
        }
        "connect" if case["option"] == "key_prefix" => {
            let options = ClientOptions {
                key_prefix: Some(case["value"].as_str().unwrap().to_owned()),
                ..ClientOptions::default()
            };
            polylock::Client::connect_with("redis://127.0.0.1:1", options)
                .await
                .map(drop)
        }
        "connect" if case["option"] == "min_replicas" => {
            // A count, not milliseconds: the bindings' conversion checks it.
            let options = ClientOptionsInMillis {
                min_replicas: case["count"].as_f64(),
                ..ClientOptionsInMillis::default()
            }
            .into_options()?;
            polylock::Client::connect_with("redis://127.0.0.1:1", options)
                .await
                .map(drop)
        }
        "connect" => {
            let name = case["option"].as_str().unwrap();
            let value = option_from_millis(name, millis(&case["ms"]).unwrap())?;
            polylock::Client::connect_with("redis://127.0.0.1:1", option(name, value))
                .await
                .map(drop)
        }
        kind_call => {
            let server = polylock_testkit::RedisServer::start();
            let client = polylock::Client::connect(&server.url()).await?;
            let outcome = kind_outcome(&client, kind_call, case).await;
            let mut con = redis::Client::open(server.url())
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            // Every key but the client record (written at connect).
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg("*")
                .query_async(&mut con)
                .await
                .unwrap();
            let keys = keys
                .iter()
                .filter(|key| !key.starts_with(polylock::keys::CLIENT_RECORD_PREFIX))
                .count();
            assert_eq!(keys, 0, "{case}: bad input wrote nothing");
            outcome
        }
    }
}

/// The calls on the other lock kinds, all on the name "conformance".
async fn kind_outcome(client: &polylock::Client, call: &str, case: &Value) -> Result<(), Error> {
    let permits = case["permits"].as_i64().unwrap_or(1);
    let wait = || wait_from_millis(millis(&case["wait_ms"]));
    let lease = || lease_from_millis(millis(&case["lease_ms"]));
    let token = || case["token"].as_i64().unwrap();
    let key = || case["key"].as_str().unwrap();
    match call {
        "read_lock_acquire" => {
            let lock = client.read_write_lock("conformance")?.read_lock();
            lock.acquire(AcquireOptions {
                wait: wait()?,
                lease: lease()?,
            })
            .await
            .map(drop)
        }
        "write_lock_acquire" => {
            let lock = client.read_write_lock("conformance")?.write_lock();
            lock.acquire(AcquireOptions {
                wait: wait()?,
                lease: lease()?,
            })
            .await
            .map(drop)
        }
        "semaphore_acquire" => {
            let semaphore = client.semaphore("conformance")?;
            semaphore.acquire(permits, wait()?).await.map(drop)
        }
        "semaphore_release" => client.semaphore("conformance")?.release(permits).await,
        "semaphore_try_set_permits" => client
            .semaphore("conformance")?
            .try_set_permits(permits)
            .await
            .map(drop),
        "semaphore_add_permits" => client.semaphore("conformance")?.add_permits(permits).await,
        "expirable_semaphore_acquire" => client
            .expirable_semaphore("conformance")?
            .acquire(AcquireOptions {
                wait: wait()?,
                lease: lease()?,
            })
            .await
            .map(drop),
        "expirable_semaphore_release" => {
            let semaphore = client.expirable_semaphore("conformance")?;
            semaphore.release(case["permit_id"].as_str().unwrap()).await
        }
        "expirable_semaphore_try_set_permits" => client
            .expirable_semaphore("conformance")?
            .try_set_permits(permits)
            .await
            .map(drop),
        "fenced_set" => client.fenced_set(key(), "v", token()).await,
        "fenced_delete" => client.fenced_delete(key(), token()).await.map(drop),
        other => panic!("unknown call {other}"),
    }
}

#[tokio::test]
async fn every_bad_input_gives_the_kind_and_message_of_the_table() {
    let table: Value = serde_json::from_str(include_str!("../../tests/conformance/bad_input.json"))
        .expect("the table is JSON");
    for case in table["cases"].as_array().unwrap() {
        let err = outcome(case).await.expect_err(&case.to_string());
        assert_eq!(
            format!("{:?}", err.kind()),
            case["kind"].as_str().unwrap(),
            "{case}"
        );
        assert_eq!(err.to_string(), case["message"].as_str().unwrap(), "{case}");
    }
}

/// A Rust caller passing durations gets the same message as a binding passing milliseconds.
#[tokio::test]
async fn durations_and_milliseconds_give_one_message() {
    let table: Value = serde_json::from_str(include_str!("../../tests/conformance/bad_input.json"))
        .expect("the table is JSON");
    let server = polylock_testkit::RedisServer::start();
    let client = polylock::Client::connect(&server.url()).await.unwrap();
    let lock = client.lock("bad-input").unwrap();
    let mut compared = 0;
    for case in table["cases"].as_array().unwrap() {
        let as_duration = |field: &str| {
            millis(&case[field])
                .filter(|ms| ms.is_finite() && *ms >= 0.0)
                .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        };
        let (wait, lease) = (as_duration("wait_ms"), as_duration("lease_ms"));
        if case["call"] != "acquire" || (wait.is_none() && lease.is_none()) {
            continue;
        }
        let err = lock
            .acquire(AcquireOptions { wait, lease })
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), case["message"].as_str().unwrap(), "{case}");
        compared += 1;
    }
    assert!(compared >= 3, "{compared}");
}

#[tokio::test]
async fn an_infinite_wait_is_no_bound() {
    assert_eq!(wait_from_millis(Some(f64::INFINITY)).unwrap(), None);
}
