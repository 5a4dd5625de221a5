//! The behaviour cases every binding runs (tests/conformance/behaviour.json, whose "about"
//! describes the format), run on the core itself: each step's call on its handle, its result or
//! its error kind and message. The bindings' runners do the same through their own APIs.

use std::collections::HashMap;
use std::time::Duration;

use polylock::options::{lease_from_millis, wait_from_millis};
use polylock::{
    AcquireOptions, Client, CountDownLatch, Error, ExpirableSemaphore, Lock, ReadWriteLock,
    Semaphore,
};
use serde_json::{json, Value};

enum Handle {
    Lock(Lock),
    Semaphore(Semaphore),
    Expirable(ExpirableSemaphore),
    Latch(CountDownLatch),
}

/// One case's clients, handles and saved results.
struct Run {
    case: String,
    /// A plain connection for the `redis` steps, which look at what the calls wrote.
    redis: redis::aio::MultiplexedConnection,
    clients: HashMap<String, Client>,
    handles: HashMap<String, Handle>,
    saved: HashMap<String, Value>,
}

impl Run {
    async fn open(url: &str, case: &Value) -> Run {
        let name = case["name"].as_str().unwrap().to_owned();
        let mut clients = HashMap::new();
        for client in case["clients"].as_array().unwrap() {
            let connected = Client::connect(url).await.unwrap();
            clients.insert(client.as_str().unwrap().to_owned(), connected);
        }
        // One read-write lock per client and name: its read and write locks are one holder.
        let mut read_write: HashMap<(String, String), ReadWriteLock> = HashMap::new();
        let mut handles = HashMap::new();
        for (id, handle) in case["handles"].as_object().unwrap() {
            let client_name = handle["client"].as_str().unwrap();
            let client = &clients[client_name];
            let key = format!("{name}/{}", handle["name"].as_str().unwrap());
            let mut rw = || {
                read_write
                    .entry((client_name.to_owned(), key.clone()))
                    .or_insert_with(|| client.read_write_lock(&key).unwrap())
                    .clone()
            };
            let opened = match handle["kind"].as_str().unwrap() {
                "lock" => Handle::Lock(client.lock(&key).unwrap()),
                "fair_lock" => Handle::Lock(client.fair_lock(&key).unwrap()),
                "fifo_lock" => Handle::Lock(client.fifo_lock(&key).unwrap()),
                "fenced_lock" => Handle::Lock(client.fenced_lock(&key).unwrap()),
                "read_lock" => Handle::Lock(rw().read_lock()),
                "write_lock" => Handle::Lock(rw().write_lock()),
                "semaphore" => Handle::Semaphore(client.semaphore(&key).unwrap()),
                "expirable_semaphore" => {
                    Handle::Expirable(client.expirable_semaphore(&key).unwrap())
                }
                "count_down_latch" => Handle::Latch(client.count_down_latch(&key).unwrap()),
                other => panic!("unknown kind {other}"),
            };
            handles.insert(id.clone(), opened);
        }
        let redis = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        Run {
            case: name,
            redis,
            clients,
            handles,
            saved: HashMap::new(),
        }
    }

    /// The step's argument `name`, a saved result where it is `$x`.
    fn arg(&self, step: &Value, name: &str) -> Value {
        match &step["args"][name] {
            Value::String(text) if text.starts_with('$') => self.saved[&text[1..]].clone(),
            other => other.clone(),
        }
    }

    fn ms(&self, step: &Value, name: &str) -> Option<f64> {
        self.arg(step, name).as_f64()
    }

    fn int(&self, step: &Value, name: &str) -> i64 {
        self.arg(step, name).as_i64().unwrap()
    }

    fn acquire_options(&self, step: &Value) -> Result<AcquireOptions, Error> {
        Ok(AcquireOptions {
            wait: wait_from_millis(self.ms(step, "wait_ms"))?,
            lease: lease_from_millis(self.ms(step, "lease_ms"))?,
        })
    }

    /// A `redis` step's command, its reply as JSON.
    async fn command(&self, step: &Value) -> Value {
        let words = step["args"]["command"].as_array().unwrap();
        let mut command = redis::cmd(&self.message(words[0].as_str().unwrap()));
        for word in &words[1..] {
            command.arg(self.message(word.as_str().unwrap()));
        }
        let reply: redis::Value = command.query_async(&mut self.redis.clone()).await.unwrap();
        fn json(reply: redis::Value) -> Value {
            match reply {
                redis::Value::Nil => Value::Null,
                redis::Value::Int(number) => json!(number),
                redis::Value::BulkString(bytes) => json!(String::from_utf8(bytes).unwrap()),
                redis::Value::SimpleString(text) => json!(text),
                redis::Value::Okay => json!("OK"),
                redis::Value::Array(items) => Value::Array(items.into_iter().map(json).collect()),
                other => panic!("a reply this runner does not convert: {other:?}"),
            }
        }
        json(reply)
    }

    async fn call(&self, step: &Value) -> Result<Value, Error> {
        let on = step["on"].as_str().unwrap();
        let call = step["call"].as_str().unwrap();
        if on == "redis" {
            return Ok(self.command(step).await);
        }
        if let Some(client) = self.clients.get(on) {
            let key = format!("{}/{}", self.case, self.arg(step, "key").as_str().unwrap());
            let token = self.int(step, "token");
            return match call {
                "fenced_set" => {
                    let value = self.arg(step, "value");
                    client
                        .fenced_set(&key, value.as_str().unwrap(), token)
                        .await?;
                    Ok(Value::Null)
                }
                "fenced_delete" => Ok(json!(client.fenced_delete(&key, token).await?)),
                other => panic!("unknown client call {other}"),
            };
        }
        let permits = || self.arg(step, "permits").as_i64().unwrap_or(1);
        Ok(match (&self.handles[on], call) {
            (Handle::Lock(lock), "acquire") => {
                json!(lock.acquire(self.acquire_options(step)?).await?)
            }
            (Handle::Lock(lock), "release") => json!(lock.release().await?),
            (Handle::Lock(lock), "is_locked") => json!(lock.is_locked().await?),
            (Handle::Lock(lock), "is_held") => json!(lock.is_held()),
            (Handle::Lock(lock), "hold_count") => json!(lock.hold_count()),
            (Handle::Lock(lock), "force_unlock") => json!(lock.force_unlock().await?),
            (Handle::Lock(lock), "token") => json!(lock.token()),
            (Handle::Lock(lock), "remaining_lease") => {
                json!(lock
                    .remaining_lease()
                    .await?
                    .map(|lease| lease.as_millis() as u64))
            }
            (Handle::Semaphore(semaphore), "try_set_permits") => {
                json!(semaphore.try_set_permits(self.int(step, "permits")).await?)
            }
            (Handle::Semaphore(semaphore), "add_permits") => {
                json!(semaphore.add_permits(self.int(step, "permits")).await?)
            }
            (Handle::Semaphore(semaphore), "acquire") => {
                let wait = wait_from_millis(self.ms(step, "wait_ms"))?;
                json!(semaphore.acquire(permits(), wait).await?)
            }
            (Handle::Semaphore(semaphore), "release") => json!(semaphore.release(permits()).await?),
            (Handle::Semaphore(semaphore), "available_permits") => {
                json!(semaphore.available_permits().await?)
            }
            (Handle::Expirable(semaphore), "try_set_permits") => {
                json!(semaphore.try_set_permits(self.int(step, "permits")).await?)
            }
            (Handle::Expirable(semaphore), "add_permits") => {
                json!(semaphore.add_permits(self.int(step, "permits")).await?)
            }
            (Handle::Expirable(semaphore), "acquire") => {
                json!(semaphore.acquire(self.acquire_options(step)?).await?)
            }
            (Handle::Expirable(semaphore), "release") => {
                let permit = self.arg(step, "permit_id");
                json!(semaphore.release(permit.as_str().unwrap()).await?)
            }
            (Handle::Expirable(semaphore), "available_permits") => {
                json!(semaphore.available_permits().await?)
            }
            (Handle::Expirable(semaphore), "held_permits") => json!(semaphore.held_permits()),
            (Handle::Latch(latch), "try_set_count") => {
                json!(latch.try_set_count(self.int(step, "count")).await?)
            }
            (Handle::Latch(latch), "count_down") => json!(latch.count_down().await?),
            (Handle::Latch(latch), "count") => json!(latch.count().await?),
            (Handle::Latch(latch), "await_zero") => {
                let timeout = Duration::from_millis(self.int(step, "timeout_ms") as u64);
                json!(latch.await_zero(timeout).await?)
            }
            (Handle::Latch(latch), "delete") => json!(latch.delete().await?),
            (_, other) => panic!("{on} has no call {other}"),
        })
    }

    /// Whether `actual` is what `expected` (a value or a matcher) asks for.
    fn matches(&self, expected: &Value, actual: &Value) -> bool {
        let number = |value: &Value| self.saved_or(value).as_f64().unwrap();
        match expected {
            Value::Object(matcher) => {
                let (kind, operand) = matcher.iter().next().unwrap();
                match kind.as_str() {
                    "between" => {
                        let actual = actual.as_f64().unwrap_or(f64::NAN);
                        number(&operand[0]) <= actual && actual <= number(&operand[1])
                    }
                    "at_least" => actual.as_f64().is_some_and(|n| n >= number(operand)),
                    "greater_than" => actual.as_f64().is_some_and(|n| n > number(operand)),
                    "matches" => actual.as_str().is_some_and(|text| {
                        let pattern = operand.as_str().unwrap();
                        // The one pattern the file uses: a permit id of 32 hexadecimal digits.
                        assert_eq!(
                            pattern, "^[0-9a-f]{32}$",
                            "a pattern this runner does not know"
                        );
                        text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit())
                    }),
                    "length" => {
                        actual.as_array().map(Vec::len) == operand.as_u64().map(|n| n as usize)
                    }
                    other => panic!("unknown matcher {other}"),
                }
            }
            Value::Number(_) => actual.as_f64() == expected.as_f64(),
            other => actual == other,
        }
    }

    fn saved_or(&self, value: &Value) -> Value {
        match value {
            Value::String(text) if text.starts_with('$') => self.saved[&text[1..]].clone(),
            other => other.clone(),
        }
    }

    /// A message or a `redis` step's word as the file writes it: `{case}` is the case's name,
    /// `{owner:h}` handle h's owner, `{$x}` the result saved as x.
    fn message(&self, template: &str) -> String {
        let mut message = template.replace("{case}", &self.case);
        for (id, handle) in &self.handles {
            if let Handle::Lock(lock) = handle {
                message = message.replace(&format!("{{owner:{id}}}"), lock.owner());
            }
        }
        for (name, value) in &self.saved {
            let value = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            message = message.replace(&format!("{{${name}}}"), &value);
        }
        message
    }

    /// Runs the steps in order; the first one that does not do what the file says is the error.
    async fn steps(&mut self, case: &Value) -> Result<(), String> {
        for (index, step) in case["steps"].as_array().unwrap().iter().enumerate() {
            let at = format!("{} step {index}: {step}", self.case);
            match (&step["error"], self.call(step).await) {
                (Value::Null, Ok(actual)) if self.matches(&step["result"], &actual) => {
                    if let Some(name) = step["save"].as_str() {
                        self.saved.insert(name.to_owned(), actual);
                    }
                }
                (Value::Null, Ok(actual)) => return Err(format!("{at}: got {actual}")),
                (Value::Null, Err(err)) => return Err(format!("{at}: {:?}: {err}", err.kind())),
                (expected, Ok(actual)) => {
                    return Err(format!("{at}: got {actual}, not {expected}"))
                }
                (expected, Err(err)) => {
                    let message = self.message(expected["message"].as_str().unwrap());
                    let kind = format!("{:?}", err.kind());
                    if kind != expected["kind"] || err.to_string() != message {
                        return Err(format!("{at}: got {kind}: {err}"));
                    }
                }
            }
        }
        Ok(())
    }
}

#[tokio::test]
async fn every_behaviour_case_holds_for_the_core() {
    let file: Value =
        serde_json::from_str(include_str!("../../tests/conformance/behaviour.json")).unwrap();
    let server = polylock_testkit::RedisServer::start();
    let mut failures = Vec::new();
    for case in file["cases"].as_array().unwrap() {
        let mut run = Run::open(&server.url(), case).await;
        if let Err(failure) = run.steps(case).await {
            failures.push(failure);
        }
        for client in run.clients.values() {
            client.close();
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
