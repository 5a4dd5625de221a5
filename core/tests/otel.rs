//! `polylock::otel` (feature `opentelemetry`) read through the real OpenTelemetry SDK: each test
//! drives a lock through an event on a real redis-server, collects with a periodic reader
//! flushed by `force_flush` into the SDK's in-memory exporter, and checks the exported value,
//! unit and attributes. The spans test installs `tracing-opentelemetry` with the SDK's
//! in-memory span exporter and checks the engine's `tracing` spans.

mod common;

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{client_with, raw, RedisServer};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use polylock::metrics::BUCKET_BOUNDS_SECONDS;
use polylock::otel::Instrumentation;
use polylock::{AcquireOptions, Client, Hold};
use polylock_testkit::{FaultProxy, Monitor};
use redis::AsyncCommands;

const CLIENT_NAME: &str = "otel-test-client";

/// One exported data point: its instrument, unit, attributes and value.
#[derive(Clone, Debug)]
struct Point {
    name: String,
    unit: String,
    attributes: BTreeMap<String, String>,
    value: Value,
}

#[derive(Clone, Debug, PartialEq)]
enum Value {
    /// A counter's or up-down counter's value.
    Sum(i128),
    Histogram {
        count: u64,
        sum: f64,
        bounds: Vec<f64>,
    },
}

/// A meter provider whose reader exports into memory when asked, with one client instrumented.
struct Telemetry {
    provider: SdkMeterProvider,
    exporter: InMemoryMetricExporter,
    instrumentation: Option<Instrumentation>,
}

impl Telemetry {
    fn new(client: &Client) -> Telemetry {
        let exporter = InMemoryMetricExporter::default();
        // Never on its own: each `collect` flushes.
        let reader = PeriodicReader::builder(exporter.clone())
            .with_interval(Duration::from_secs(3600))
            .build();
        let provider = SdkMeterProvider::builder().with_reader(reader).build();
        let instrumentation = polylock::otel::instrument(client, &provider.meter("polylock"));
        Telemetry {
            provider,
            exporter,
            instrumentation: Some(instrumentation),
        }
    }

    /// Every point of one collection.
    fn collect(&self) -> Vec<Point> {
        self.exporter.reset();
        self.provider.force_flush().expect("flush the reader");
        let exported = self.exporter.get_finished_metrics().expect("exported");
        let mut points = Vec::new();
        for resource in &exported {
            for scope in resource.scope_metrics() {
                for metric in scope.metrics() {
                    let mut push =
                        |attributes: &mut dyn Iterator<Item = &opentelemetry::KeyValue>,
                         value: Value| {
                            points.push(Point {
                                name: metric.name().to_owned(),
                                unit: metric.unit().to_owned(),
                                attributes: attributes
                                    .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                                    .collect(),
                                value,
                            })
                        };
                    match metric.data() {
                        AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                            for point in sum.data_points() {
                                push(&mut point.attributes(), Value::Sum(point.value().into()));
                            }
                        }
                        AggregatedMetrics::I64(MetricData::Sum(sum)) => {
                            for point in sum.data_points() {
                                push(&mut point.attributes(), Value::Sum(point.value().into()));
                            }
                        }
                        AggregatedMetrics::F64(MetricData::Histogram(histogram)) => {
                            for point in histogram.data_points() {
                                let value = Value::Histogram {
                                    count: point.count(),
                                    sum: point.sum(),
                                    bounds: point.bounds().collect(),
                                };
                                push(&mut point.attributes(), value);
                            }
                        }
                        other => panic!("{}: unexpected data {other:?}", metric.name()),
                    }
                }
            }
        }
        points
    }

    /// Collects until `ready` holds for the points (at most 10 s), then returns them.
    async fn collect_until(&self, what: &str, ready: impl Fn(&[Point]) -> bool) -> Vec<Point> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let points = self.collect();
            if ready(&points) {
                return points;
            }
            assert!(
                Instant::now() < deadline,
                "never exported {what}: {points:#?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The points of `instrument` whose attributes include every pair of `attributes`.
fn matching<'a>(
    points: &'a [Point],
    instrument: &str,
    attributes: &[(&str, &str)],
) -> Vec<&'a Point> {
    points
        .iter()
        .filter(|point| point.name == instrument)
        .filter(|point| {
            attributes
                .iter()
                .all(|(key, value)| point.attributes.get(*key).map(String::as_str) == Some(*value))
        })
        .collect()
}

/// The value of the one point of `instrument` with `attributes` (None when there is none).
fn sum(points: &[Point], instrument: &str, attributes: &[(&str, &str)]) -> Option<i128> {
    let found = matching(points, instrument, attributes);
    assert!(
        found.len() <= 1,
        "several points of {instrument} {attributes:?}: {found:#?}"
    );
    found.first().map(|point| match point.value {
        Value::Sum(value) => value,
        ref other => panic!("{instrument} is not a sum: {other:?}"),
    })
}

/// A lock instrument's value for lock `name` (plain kind `lock`) with extra attributes.
fn lock_sum(points: &[Point], instrument: &str, name: &str, extra: &[(&str, &str)]) -> i128 {
    let mut attributes = vec![
        ("polylock.client.name", CLIENT_NAME),
        ("polylock.lock.name", name),
        ("polylock.lock.kind", "lock"),
    ];
    attributes.extend_from_slice(extra);
    sum(points, instrument, &attributes)
        .unwrap_or_else(|| panic!("no {instrument} {attributes:?}: {points:#?}"))
}

/// A histogram's (count, sum) for lock `name` with extra attributes.
fn lock_histogram(
    points: &[Point],
    instrument: &str,
    name: &str,
    extra: &[(&str, &str)],
) -> Option<(u64, f64)> {
    let mut attributes = vec![
        ("polylock.client.name", CLIENT_NAME),
        ("polylock.lock.name", name),
        ("polylock.lock.kind", "lock"),
    ];
    attributes.extend_from_slice(extra);
    let found = matching(points, instrument, &attributes);
    assert!(
        found.len() <= 1,
        "several points of {instrument} {attributes:?}"
    );
    found.first().map(|point| match &point.value {
        Value::Histogram { count, sum, bounds } => {
            assert_eq!(
                bounds,
                &BUCKET_BOUNDS_SECONDS.to_vec(),
                "{instrument}'s bucket bounds"
            );
            (*count, *sum)
        }
        other => panic!("{instrument} is not a histogram: {other:?}"),
    })
}

fn unit_of<'a>(points: &'a [Point], instrument: &str) -> &'a str {
    &points
        .iter()
        .find(|point| point.name == instrument)
        .unwrap_or_else(|| panic!("no {instrument}"))
        .unit
}

async fn named_client(url: &str, watchdog: Duration, response: Duration) -> Client {
    let mut options = polylock::ClientOptions {
        name: Some(CLIENT_NAME.to_owned()),
        watchdog_timeout: watchdog,
        response_timeout: response,
        ..polylock::ClientOptions::default()
    };
    options.connect_timeout = Duration::from_secs(2);
    Client::connect_with(url, options)
        .await
        .expect("connect to the test server")
}

async fn client(server: &RedisServer) -> Client {
    named_client(
        &server.url(),
        Duration::from_secs(30),
        Duration::from_secs(2),
    )
    .await
}

// ---- acquires, holds, time in queue, hold duration, server calls ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_and_its_hold_are_exported_with_units_and_attributes() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let telemetry = Telemetry::new(&client);
    let lock = client.lock("otel-a").unwrap();

    let guard = lock.lock().await.unwrap();
    let points = telemetry.collect();
    assert_eq!(
        lock_sum(
            &points,
            "polylock.lock.acquires",
            "otel-a",
            &[("polylock.acquire.result", "acquired")]
        ),
        1
    );
    for result in ["timed_out", "cancelled", "failed"] {
        assert_eq!(
            lock_sum(
                &points,
                "polylock.lock.acquires",
                "otel-a",
                &[("polylock.acquire.result", result)]
            ),
            0
        );
    }
    assert_eq!(
        lock_sum(&points, "polylock.lock.active_holds", "otel-a", &[]),
        1
    );
    assert_eq!(
        lock_sum(&points, "polylock.lock.queued_acquires", "otel-a", &[]),
        0
    );
    let (count, _) = lock_histogram(
        &points,
        "polylock.lock.acquire.time_in_queue",
        "otel-a",
        &[("polylock.acquire.result", "acquired")],
    )
    .expect("the acquire's time in queue");
    assert_eq!(count, 1);
    assert!(
        lock_histogram(&points, "polylock.lock.hold.duration", "otel-a", &[]).is_none(),
        "a hold still held has no duration yet"
    );
    let calls = sum(
        &points,
        "polylock.client.server_calls",
        &[("polylock.client.name", CLIENT_NAME)],
    )
    .unwrap();
    assert!(calls >= 1, "server calls: {calls}");

    tokio::time::sleep(Duration::from_millis(100)).await;
    guard.release().await.unwrap();
    let points = telemetry.collect();
    assert_eq!(
        lock_sum(&points, "polylock.lock.active_holds", "otel-a", &[]),
        0
    );
    let (count, seconds) = lock_histogram(&points, "polylock.lock.hold.duration", "otel-a", &[])
        .expect("the hold's duration");
    assert_eq!(count, 1);
    assert!(
        seconds >= 0.1,
        "held at least the 100 ms slept, exported {seconds} s"
    );
    // Cumulative: the acquire is still counted, its histogram point still there.
    assert_eq!(
        lock_sum(
            &points,
            "polylock.lock.acquires",
            "otel-a",
            &[("polylock.acquire.result", "acquired")]
        ),
        1
    );
    assert_eq!(
        lock_histogram(
            &points,
            "polylock.lock.acquire.time_in_queue",
            "otel-a",
            &[("polylock.acquire.result", "acquired")]
        )
        .unwrap()
        .0,
        1
    );

    let units = [
        ("polylock.lock.acquires", "{acquire}"),
        ("polylock.lock.acquire.time_in_queue", "s"),
        ("polylock.lock.active_holds", "{hold}"),
        ("polylock.lock.hold.duration", "s"),
        ("polylock.lock.queued_acquires", "{acquire}"),
        ("polylock.lock.handoffs", "{handoff}"),
        ("polylock.lock.wakeups_found_taken", "{wakeup}"),
        ("polylock.lock.renewals", "{renewal}"),
        ("polylock.lock.leases_lost", "{lease}"),
        ("polylock.lock.release_failures", "{release}"),
        ("polylock.lock.release_retries", "{release}"),
        ("polylock.client.server_calls", "{call}"),
        ("polylock.client.subscriptions", "{subscription}"),
        ("polylock.client.reconnects", "{reconnect}"),
    ];
    for (instrument, unit) in units {
        assert_eq!(unit_of(&points, instrument), unit, "{instrument}'s unit");
    }
    // Every point names the client; the client's own instruments name no lock.
    assert!(points
        .iter()
        .all(|point| point.attributes["polylock.client.name"] == CLIENT_NAME));
    for point in points
        .iter()
        .filter(|point| point.name.starts_with("polylock.client."))
    {
        assert!(
            !point.attributes.contains_key("polylock.lock.name"),
            "{point:?}"
        );
    }
}

// ---- a wait that runs out, waiting acquires, subscriptions, hand-offs ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_are_exported_as_queued_timed_out_and_handed_off() {
    let server = RedisServer::start();
    let holder = common::client(&server).await;
    let client = client(&server).await;
    let telemetry = Telemetry::new(&client);
    let held = holder.lock("otel-wait").unwrap().lock().await.unwrap();

    let lock = client.lock("otel-wait").unwrap();
    let options = AcquireOptions::new().wait(Duration::from_millis(200));
    assert!(lock.try_lock_with(options).await.unwrap().is_none());
    let points = telemetry.collect();
    assert_eq!(
        lock_sum(
            &points,
            "polylock.lock.acquires",
            "otel-wait",
            &[("polylock.acquire.result", "timed_out")]
        ),
        1
    );
    let (count, seconds) = lock_histogram(
        &points,
        "polylock.lock.acquire.time_in_queue",
        "otel-wait",
        &[("polylock.acquire.result", "timed_out")],
    )
    .expect("the timed-out acquire's time in queue");
    assert_eq!(count, 1);
    assert!(
        seconds >= 0.2,
        "waited the 200 ms it was given, exported {seconds} s"
    );
    assert_eq!(
        lock_sum(&points, "polylock.lock.queued_acquires", "otel-wait", &[]),
        0
    );

    let monitor = Monitor::start(&server);
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await }
    });
    // Queued from its call on; subscribed to the lock's channel a moment later.
    telemetry
        .collect_until(
            "a queued acquire listening on the lock's channel",
            |points| {
                sum(
                    points,
                    "polylock.lock.queued_acquires",
                    &[("polylock.lock.name", "otel-wait")],
                ) == Some(1)
                    && sum(
                        points,
                        "polylock.client.subscriptions",
                        &[("polylock.client.name", CLIENT_NAME)],
                    )
                    .is_some_and(|subscriptions| subscriptions >= 1)
            },
        )
        .await;

    // Released only once the waiter waits on the server (listed, its grant entry written, its
    // own channel subscribed) and is asleep (`Monitor::waiter_asleep`). Released before that,
    // the waiter looks again and takes the lock granted to it before the grant's message is
    // read, which is neither hand-off, and the test would not be testing one.
    let con = raw(&server).await;
    let owner = lock.owner().to_owned();
    assert!(
        common::eventually(Duration::from_secs(10), || {
            let mut con = con.clone();
            let owner = owner.clone();
            let asleep = monitor.waiter_asleep(0, &owner);
            async move {
                let listed: Option<f64> = con
                    .zscore("polylock_lock_waiters:{otel-wait}", &owner)
                    .await
                    .unwrap();
                let granted: bool = con
                    .hexists("polylock_lock_grants:{otel-wait}", &owner)
                    .await
                    .unwrap();
                let (_, subscribers): (String, i64) = redis::cmd("PUBSUB")
                    .arg("NUMSUB")
                    .arg(format!("polylock_lock_told:{{otel-wait}}:{owner}"))
                    .query_async(&mut con)
                    .await
                    .unwrap();
                listed.is_some() && granted && subscribers >= 1 && asleep
            }
        })
        .await,
        "the waiter waits on the server"
    );
    held.release().await.unwrap();
    // Kept until the end: a dropped guard would release it in the background.
    let _guard = waiter.await.unwrap().unwrap();
    let points = telemetry.collect();
    assert_eq!(
        lock_sum(&points, "polylock.lock.queued_acquires", "otel-wait", &[]),
        0
    );
    assert_eq!(
        lock_sum(&points, "polylock.lock.active_holds", "otel-wait", &[]),
        1
    );
    assert_eq!(
        lock_sum(
            &points,
            "polylock.lock.acquires",
            "otel-wait",
            &[("polylock.acquire.result", "acquired")]
        ),
        1
    );
    let snapshot = client.metrics();
    let stats = snapshot
        .locks
        .iter()
        .find(|lock| lock.name == "otel-wait")
        .unwrap();
    let granted = lock_sum(
        &points,
        "polylock.lock.handoffs",
        "otel-wait",
        &[("polylock.handoff.type", "grant")],
    );
    let woken = lock_sum(
        &points,
        "polylock.lock.handoffs",
        "otel-wait",
        &[("polylock.handoff.type", "message")],
    );
    assert_eq!(
        (granted, woken),
        (1, 0),
        "the release granted the lock to the waiter"
    );
    assert_eq!(
        (granted, woken),
        (stats.handoffs_granted.into(), stats.handoffs_woken.into())
    );
}

// ---- a cancelled acquire ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_acquire_is_exported_as_cancelled() {
    let server = RedisServer::start();
    let holder = common::client(&server).await;
    let client = client(&server).await;
    let telemetry = Telemetry::new(&client);
    let _held = holder.lock("otel-cancel").unwrap().lock().await.unwrap();

    let lock = client.lock("otel-cancel").unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(200), lock.lock())
            .await
            .is_err()
    );
    let points = telemetry
        .collect_until("a cancelled acquire", |points| {
            sum(
                points,
                "polylock.lock.acquires",
                &[
                    ("polylock.lock.name", "otel-cancel"),
                    ("polylock.acquire.result", "cancelled"),
                ],
            ) == Some(1)
        })
        .await;
    assert_eq!(
        lock_sum(&points, "polylock.lock.queued_acquires", "otel-cancel", &[]),
        0
    );
    assert_eq!(
        lock_histogram(
            &points,
            "polylock.lock.acquire.time_in_queue",
            "otel-cancel",
            &[("polylock.acquire.result", "cancelled")]
        )
        .unwrap()
        .0,
        1
    );
}

// ---- a failed acquire and the server's error ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_acquire_and_its_server_error_are_exported() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let telemetry = Telemetry::new(&client);
    // A string where the lock's hash should be: the acquire script fails with WRONGTYPE.
    let mut con = raw(&server).await;
    let _: () = con.set("otel-wrongtype", "not a lock").await.unwrap();

    let lock = client.lock("otel-wrongtype").unwrap();
    lock.lock().await.expect_err("a lock on a string key fails");
    let points = telemetry.collect();
    assert_eq!(
        lock_sum(
            &points,
            "polylock.lock.acquires",
            "otel-wrongtype",
            &[("polylock.acquire.result", "failed")]
        ),
        1
    );
    assert_eq!(
        lock_sum(&points, "polylock.lock.active_holds", "otel-wrongtype", &[]),
        0
    );
    let errors: Vec<_> = matching(
        &points,
        "polylock.client.server_errors",
        &[("polylock.client.name", CLIENT_NAME)],
    );
    assert!(!errors.is_empty(), "no server error exported: {points:#?}");
    assert_eq!(unit_of(&points, "polylock.client.server_errors"), "{error}");
    let exported: Vec<(String, i128)> = errors
        .iter()
        .map(|point| {
            (
                point.attributes["error.type"].clone(),
                match point.value {
                    Value::Sum(value) => value,
                    _ => unreachable!(),
                },
            )
        })
        .collect();
    let counted: Vec<(String, i128)> = client
        .metrics()
        .connection
        .server_errors
        .into_iter()
        .map(|(kind, count)| (kind, count.into()))
        .collect();
    let mut exported_sorted = exported.clone();
    exported_sorted.sort();
    assert_eq!(
        exported_sorted, counted,
        "error.type and count per error kind"
    );
}

// ---- a wake-up that finds the lock taken ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wakeup_that_finds_the_lock_taken_is_exported() {
    let server = RedisServer::start();
    let holder = common::client(&server).await;
    let client = client(&server).await;
    let telemetry = Telemetry::new(&client);
    let held = holder.lock("otel-wake").unwrap().lock().await.unwrap();
    let lock = client.lock("otel-wake").unwrap();
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await }
    });
    telemetry
        .collect_until("a queued acquire", |points| {
            sum(
                points,
                "polylock.lock.queued_acquires",
                &[("polylock.lock.name", "otel-wake")],
            ) == Some(1)
        })
        .await;
    // An "unlocked" message while the lock is still held: the waiter wakes, tries, finds it taken.
    let mut con = raw(&server).await;
    let channel = polylock::keys::lock_channel("otel-wake");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let _: i64 = con.publish(&channel, 0).await.unwrap();
        let points = telemetry.collect();
        if lock_sum(
            &points,
            "polylock.lock.wakeups_found_taken",
            "otel-wake",
            &[],
        ) >= 1
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no wake-up found the lock taken: {points:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    held.release().await.unwrap();
    waiter.await.unwrap().unwrap().release().await.unwrap();
}

// ---- renewals ok, then a lease lost because another owner took it ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_and_a_lease_lost_to_another_owner_are_exported() {
    let server = RedisServer::start();
    let client = named_client(
        &server.url(),
        Duration::from_millis(600),
        Duration::from_secs(2),
    )
    .await;
    let telemetry = Telemetry::new(&client);
    let lock = client.lock("otel-renew").unwrap();
    let guard = lock.lock().await.unwrap();
    telemetry
        .collect_until("a renewal", |points| {
            sum(
                points,
                "polylock.lock.renewals",
                &[
                    ("polylock.lock.name", "otel-renew"),
                    ("polylock.renewal.result", "ok"),
                ],
            )
            .is_some_and(|renewals| renewals >= 1)
        })
        .await;

    // Another owner's hash in its place: the next renewal finds the lease taken.
    let mut con = raw(&server).await;
    let _: () = redis::pipe()
        .atomic()
        .del("otel-renew")
        .hset("otel-renew", "someone-else:1", 1)
        .pexpire("otel-renew", 30_000)
        .query_async(&mut con)
        .await
        .unwrap();
    let points = telemetry
        .collect_until("a lease lost to another owner", |points| {
            sum(
                points,
                "polylock.lock.leases_lost",
                &[
                    ("polylock.lock.name", "otel-renew"),
                    ("polylock.lost.reason", "taken"),
                ],
            ) == Some(1)
        })
        .await;
    assert_eq!(unit_of(&points, "polylock.lock.leases_lost"), "{lease}");
    assert_eq!(
        lock_sum(
            &points,
            "polylock.lock.leases_lost",
            "otel-renew",
            &[("polylock.lost.reason", "expired")]
        ),
        0
    );
    assert_eq!(
        lock_sum(
            &points,
            "polylock.lock.leases_lost",
            "otel-renew",
            &[("polylock.lost.reason", "connection")]
        ),
        0
    );
    assert_eq!(
        lock_sum(&points, "polylock.lock.active_holds", "otel-renew", &[]),
        0
    );
    assert_eq!(
        lock_histogram(&points, "polylock.lock.hold.duration", "otel-renew", &[])
            .unwrap()
            .0,
        1
    );
    assert!(lock.is_lost());
    drop(guard);
}

// ---- a fixed lease that runs out ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_runs_out_is_exported_as_expired() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let telemetry = Telemetry::new(&client);
    let lock = client.lock("otel-expire").unwrap();
    let options = AcquireOptions::new().lease(Duration::from_millis(200));
    let _guard = lock.try_lock_with(options).await.unwrap().expect("free");
    let points = telemetry
        .collect_until("a lease lost to its end", |points| {
            sum(
                points,
                "polylock.lock.leases_lost",
                &[
                    ("polylock.lock.name", "otel-expire"),
                    ("polylock.lost.reason", "expired"),
                ],
            ) == Some(1)
        })
        .await;
    assert_eq!(
        lock_sum(&points, "polylock.lock.active_holds", "otel-expire", &[]),
        0
    );
}

// ---- an unreachable server: failed renewals, a lease lost to the connection, a release that
// fails and is retried in the background, reconnects ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_is_exported_as_failed_renewals_lost_leases_release_failures_and_reconnects(
) {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = named_client(
        &proxy.url(),
        Duration::from_millis(900),
        Duration::from_millis(200),
    )
    .await;
    let telemetry = Telemetry::new(&client);

    // A hold whose renewals cannot reach the server until its lease has ended.
    let lost = client.lock("otel-cut").unwrap();
    let _lost_guard = lost.lock().await.unwrap();
    proxy.refuse_for(Duration::from_millis(2500));
    let points = telemetry
        .collect_until("a lease lost to the connection", |points| {
            sum(
                points,
                "polylock.lock.leases_lost",
                &[
                    ("polylock.lock.name", "otel-cut"),
                    ("polylock.lost.reason", "connection"),
                ],
            ) == Some(1)
        })
        .await;
    assert!(
        lock_sum(
            &points,
            "polylock.lock.renewals",
            "otel-cut",
            &[("polylock.renewal.result", "failed")]
        ) >= 1
    );
    let points = telemetry
        .collect_until("a reconnect", |points| {
            sum(
                points,
                "polylock.client.reconnects",
                &[("polylock.client.name", CLIENT_NAME)],
            )
            .is_some_and(|n| n >= 1)
        })
        .await;
    assert_eq!(
        unit_of(&points, "polylock.client.reconnects"),
        "{reconnect}"
    );

    // A release refused by the connection: it fails for the caller and goes on in the background.
    let released = client.lock("otel-release").unwrap();
    assert!(released.acquire(AcquireOptions::new()).await.unwrap());
    proxy.refuse_for(Duration::from_millis(1000));
    released
        .release()
        .await
        .expect_err("the server cannot be reached");
    let points = telemetry
        .collect_until("a failed release retried in the background", |points| {
            sum(
                points,
                "polylock.lock.release_failures",
                &[("polylock.lock.name", "otel-release")],
            ) == Some(1)
                && sum(
                    points,
                    "polylock.lock.release_retries",
                    &[("polylock.lock.name", "otel-release")],
                )
                .is_some_and(|n| n >= 1)
        })
        .await;
    assert_eq!(
        lock_sum(&points, "polylock.lock.active_holds", "otel-release", &[]),
        0
    );
}

// ---- names beyond the cardinality limit ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_beyond_the_limit_are_exported_as_other() {
    let server = RedisServer::start();
    let options = polylock::ClientOptions {
        name: Some(CLIENT_NAME.to_owned()),
        metrics_max_lock_names: 1,
        ..polylock::ClientOptions::default()
    };
    let client = Client::connect_with(&server.url(), options).await.unwrap();
    let telemetry = Telemetry::new(&client);
    for name in ["otel-first", "otel-second", "otel-third"] {
        client
            .lock(name)
            .unwrap()
            .lock()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    let points = telemetry.collect();
    assert_eq!(
        lock_sum(
            &points,
            "polylock.lock.acquires",
            "otel-first",
            &[("polylock.acquire.result", "acquired")]
        ),
        1
    );
    assert_eq!(
        lock_sum(
            &points,
            "polylock.lock.acquires",
            "_other",
            &[("polylock.acquire.result", "acquired")]
        ),
        2
    );
    assert_eq!(
        lock_histogram(&points, "polylock.lock.hold.duration", "_other", &[])
            .unwrap()
            .0,
        2
    );
    assert!(matching(
        &points,
        "polylock.lock.acquires",
        &[("polylock.lock.name", "otel-second")]
    )
    .is_empty());
}

// ---- shutdown ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_shutdown_nothing_is_exported_nor_buffered() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut telemetry = Telemetry::new(&client);
    client
        .lock("otel-off")
        .unwrap()
        .lock()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    assert!(!telemetry.collect().is_empty());

    telemetry.instrumentation.take().unwrap().shutdown();
    client
        .lock("otel-off")
        .unwrap()
        .lock()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    assert!(
        client.drain_metric_events().is_empty(),
        "events buffered after shutdown"
    );
    let points = telemetry.collect();
    assert!(
        points
            .iter()
            .all(|point| !matches!(point.value, Value::Sum(_))),
        "observable instruments still report after shutdown: {points:#?}"
    );
    // Counting goes on for `client.metrics()`.
    let snapshot = client.metrics();
    assert_eq!(snapshot.locks[0].acquired, 2);
}

// ---- spans, through tracing-opentelemetry ----

/// The process's span exporter: `tracing` has one global subscriber, so every test shares it
/// and picks its own spans by lock name.
fn spans() -> &'static InMemorySpanExporter {
    static EXPORTER: OnceLock<InMemorySpanExporter> = OnceLock::new();
    EXPORTER.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(
                tracing_subscriber::filter::Targets::new()
                    .with_target("polylock", tracing::Level::TRACE),
            )
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("polylock")));
        tracing::subscriber::set_global_default(subscriber).expect("the only global subscriber");
        exporter
    })
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

/// The finished spans named `name` of lock `lock`.
fn finished(name: &str, lock: &str) -> Vec<SpanData> {
    spans()
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .filter(|span| {
            span.name == name && attribute(span, "polylock.lock.name").as_deref() == Some(lock)
        })
        .collect()
}

async fn finished_until(name: &str, lock: &str) -> Vec<SpanData> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = finished(name, lock);
        if !found.is_empty() {
            return found;
        }
        assert!(Instant::now() < deadline, "no {name} span of {lock}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_hold_release_and_renewal_spans_carry_their_attributes() {
    spans();
    let server = RedisServer::start();
    let holder = client_with(
        &server.url(),
        Duration::from_secs(30),
        Duration::from_secs(2),
    )
    .await;
    let client = named_client(
        &server.url(),
        Duration::from_millis(600),
        Duration::from_secs(2),
    )
    .await;
    let held = holder.lock("otel-spans").unwrap().lock().await.unwrap();
    let lock = client.lock("otel-spans").unwrap();
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released_at = std::time::SystemTime::now();
    held.release().await.unwrap();
    let guard = waiter.await.unwrap().unwrap();
    // Held across at least one renewal (every third of the 600 ms lease).
    finished_until("polylock.renewal", "otel-spans").await;
    guard.release().await.unwrap();

    let acquires = finished_until("polylock.acquire", "otel-spans").await;
    let waited = acquires
        .iter()
        .find(|span| attribute(span, "polylock.acquire.woken_by").is_some())
        .unwrap_or_else(|| panic!("no acquire span says how it was woken: {acquires:#?}"));
    assert_eq!(
        attribute(waited, "polylock.lock.kind").as_deref(),
        Some("lock")
    );
    assert_eq!(
        attribute(waited, "polylock.acquire.result").as_deref(),
        Some("acquired")
    );
    let woken_by = attribute(waited, "polylock.acquire.woken_by").unwrap();
    assert!(
        ["grant", "message", "poll"].contains(&woken_by.as_str()),
        "{woken_by}"
    );
    let attempts: i64 = attribute(waited, "polylock.acquire.attempts")
        .unwrap()
        .parse()
        .unwrap();
    assert!(attempts >= 1);
    // The span covers the wait: it began before the holder let go and ended after. (Not a
    // fixed 200 ms: the spawned waiter may start its span a moment after the test's sleep began.)
    assert!(
        waited.start_time < released_at && waited.end_time >= released_at,
        "the span lasts the wait: {:?} to {:?}, released at {released_at:?}",
        waited.start_time,
        waited.end_time
    );

    let holds = finished_until("polylock.hold", "otel-spans").await;
    assert!(holds
        .iter()
        .any(|span| attribute(span, "polylock.hold.lost").as_deref() == Some("false")));
    let releases = finished_until("polylock.release", "otel-spans").await;
    assert!(releases
        .iter()
        .any(
            |span| attribute(span, "polylock.release.ok").as_deref() == Some("true")
                && attribute(span, "polylock.release.retries").as_deref() == Some("0")
        ));
    let renewals = finished("polylock.renewal", "otel-spans");
    assert!(renewals
        .iter()
        .any(|span| attribute(span, "polylock.renewal.result").as_deref() == Some("ok")));
}
