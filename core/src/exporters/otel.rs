//! OpenTelemetry metrics of one client (feature `opentelemetry`): [`instrument`] registers the
//! instruments of `docs/observability.md` on a [`Meter`].
//!
//! Counters and up-down counters are observable: their callbacks read [`Client::metrics`] (the
//! cumulative counts the core keeps anyway). The two histograms are synchronous and are fed with
//! the client's buffered [`MetricEvent`]s from inside those callbacks: an SDK runs every
//! observable callback of a collection before it reads the synchronous instruments, so each
//! collection exports every acquire and hold that ended before it. Spans are not made here: the
//! engine opens `tracing` spans, which `tracing-opentelemetry` turns into OpenTelemetry spans.

use std::sync::{Arc, Mutex, MutexGuard};

use opentelemetry::metrics::{AsyncInstrument, AsyncInstrumentBuilder, Histogram, Meter};
use opentelemetry::KeyValue;

use crate::metrics::{
    EventDetail, LockMetrics, MetricEvent, MetricsSnapshot, BUCKET_BOUNDS_SECONDS,
};
use crate::Client;

const CLIENT_NAME: &str = "polylock.client.name";
const LOCK_NAME: &str = "polylock.lock.name";
const LOCK_KIND: &str = "polylock.lock.kind";
const ACQUIRE_RESULT: &str = "polylock.acquire.result";
const HANDOFF_TYPE: &str = "polylock.handoff.type";
const RENEWAL_RESULT: &str = "polylock.renewal.result";
const LOST_REASON: &str = "polylock.lost.reason";
const ERROR_TYPE: &str = "error.type";

/// Registers every polylock instrument for `client` on `meter`, and has the client buffer its
/// metric events for the histograms until the returned [`Instrumentation`] is shut down or
/// dropped. Use one instrumentation per client: a second one would share the events.
///
/// ```no_run
/// # async fn demo() -> polylock::Result<()> {
/// use opentelemetry::metrics::MeterProvider as _;
/// # let provider = opentelemetry::metrics::noop::NoopMeterProvider::new();
/// let client = polylock::Client::connect("redis://127.0.0.1:6379/0").await?;
/// let instrumentation = polylock::otel::instrument(&client, &provider.meter("polylock"));
/// // ... the provider's reader collects polylock.* instruments ...
/// instrumentation.shutdown();
/// # Ok(()) }
/// ```
pub fn instrument(client: &Client, meter: &Meter) -> Instrumentation {
    let source = Arc::new(Source {
        client: Mutex::new(Some(client.clone())),
        time_in_queue: seconds_histogram(
            meter,
            "polylock.lock.acquire.time_in_queue",
            "Time from an acquire's call to its end, by result",
        ),
        hold_duration: seconds_histogram(
            meter,
            "polylock.lock.hold.duration",
            "Time from an acquire to the release or loss of that hold",
        ),
    });
    client.record_metric_events(true);
    acquire_instruments(meter, &source);
    lease_and_release_instruments(meter, &source);
    connection_instruments(meter, &source);
    Instrumentation { source }
}

/// A histogram of durations in seconds, in the buckets of `BUCKET_BOUNDS_SECONDS`.
fn seconds_histogram(
    meter: &Meter,
    name: &'static str,
    description: &'static str,
) -> Histogram<f64> {
    meter
        .f64_histogram(name)
        .with_unit("s")
        .with_description(description)
        .with_boundaries(BUCKET_BOUNDS_SECONDS.to_vec())
        .build()
}

/// The per-lock instruments of acquiring: results, holds and waiters now, hand-offs, wake-ups.
fn acquire_instruments(meter: &Meter, source: &Arc<Source>) {
    lock_counter(
        meter,
        source,
        "polylock.lock.acquires",
        "{acquire}",
        "Acquires by result",
        |lock| {
            [
                ("acquired", lock.acquired),
                ("timed_out", lock.timed_out),
                ("cancelled", lock.cancelled),
                ("failed", lock.failed),
            ]
            .map(|(result, count)| (count, Some(KeyValue::new(ACQUIRE_RESULT, result))))
            .to_vec()
        },
    );
    lock_up_down_counter(
        meter,
        source,
        "polylock.lock.active_holds",
        "{hold}",
        "Holds current now",
        |lock| lock.holds,
    );
    lock_up_down_counter(
        meter,
        source,
        "polylock.lock.queued_acquires",
        "{acquire}",
        "Acquires waiting now",
        |lock| lock.waiters,
    );
    lock_counter(
        meter,
        source,
        "polylock.lock.handoffs",
        "{handoff}",
        "Acquires given the lock by its releaser (grant) or woken by its release message (message)",
        |lock| {
            vec![
                (
                    lock.handoffs_granted,
                    Some(KeyValue::new(HANDOFF_TYPE, "grant")),
                ),
                (
                    lock.handoffs_woken,
                    Some(KeyValue::new(HANDOFF_TYPE, "message")),
                ),
            ]
        },
    );
    lock_counter(
        meter,
        source,
        "polylock.lock.wakeups_found_taken",
        "{wakeup}",
        "Wake-ups of a waiting acquire that found the lock taken again",
        |lock| vec![(lock.wakeups_found_taken, None)],
    );
}

/// The per-lock instruments of holding: renewals, leases lost, failed and retried releases.
fn lease_and_release_instruments(meter: &Meter, source: &Arc<Source>) {
    lock_counter(
        meter,
        source,
        "polylock.lock.renewals",
        "{renewal}",
        "Lease renewals by result",
        |lock| {
            vec![
                (lock.renewals, Some(KeyValue::new(RENEWAL_RESULT, "ok"))),
                (
                    lock.renewal_failures,
                    Some(KeyValue::new(RENEWAL_RESULT, "failed")),
                ),
            ]
        },
    );
    lock_counter(
        meter,
        source,
        "polylock.lock.leases_lost",
        "{lease}",
        "Holds lost, by reason",
        |lock| {
            [
                ("expired", lock.lost_expired),
                ("taken", lock.lost_taken),
                ("connection", lock.lost_connection),
            ]
            .map(|(reason, count)| (count, Some(KeyValue::new(LOST_REASON, reason))))
            .to_vec()
        },
    );
    lock_counter(
        meter,
        source,
        "polylock.lock.release_failures",
        "{release}",
        "Releases that ended with an error",
        |lock| vec![(lock.release_failures, None)],
    );
    lock_counter(
        meter,
        source,
        "polylock.lock.release_retries",
        "{release}",
        "Releases retried in the background after the caller's call returned",
        |lock| vec![(lock.release_retries, None)],
    );
}

/// The client's instruments of its connections: calls, errors, subscriptions, reconnects.
fn connection_instruments(meter: &Meter, source: &Arc<Source>) {
    observing(
        meter.u64_observable_counter("polylock.client.server_calls"),
        source,
        "{call}",
        "Commands and scripts sent to the server",
        |observer, snapshot| {
            observer.observe(snapshot.connection.server_calls, &[client_name(snapshot)])
        },
    )
    .build();
    observing(
        meter.u64_observable_counter("polylock.client.server_errors"),
        source,
        "{error}",
        "Failed server calls by error kind",
        |observer, snapshot| {
            for (kind, count) in &snapshot.connection.server_errors {
                let attributes = [
                    client_name(snapshot),
                    KeyValue::new(ERROR_TYPE, kind.clone()),
                ];
                observer.observe(*count, &attributes);
            }
        },
    )
    .build();
    observing(
        meter.i64_observable_up_down_counter("polylock.client.subscriptions"),
        source,
        "{subscription}",
        "Pub/sub channels subscribed now",
        |observer, snapshot| {
            observer.observe(snapshot.connection.subscriptions, &[client_name(snapshot)])
        },
    )
    .build();
    observing(
        meter.u64_observable_counter("polylock.client.reconnects"),
        source,
        "{reconnect}",
        "Reconnects of the command or pub/sub connections",
        |observer, snapshot| {
            observer.observe(snapshot.connection.reconnects, &[client_name(snapshot)])
        },
    )
    .build();
}

/// Keeps a client's instruments reporting; [`Instrumentation::shutdown`] (or drop) stops them.
///
/// The meter provider keeps the callbacks (OpenTelemetry has no way to unregister them), but
/// after shutdown they report nothing, hold no reference to the client and the client no longer
/// buffers events.
pub struct Instrumentation {
    source: Arc<Source>,
}

impl Instrumentation {
    /// Stops reporting and buffering events (what dropping it does).
    pub fn shutdown(self) {}
}

impl Drop for Instrumentation {
    fn drop(&mut self) {
        if let Some(client) = locked(&self.source.client).take() {
            client.record_metric_events(false);
        }
    }
}

impl std::fmt::Debug for Instrumentation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let client = locked(&self.source.client)
            .as_ref()
            .map(|c| c.name().to_owned());
        f.debug_struct("Instrumentation")
            .field("client", &client)
            .finish()
    }
}

/// What every callback reads: the client (none after shutdown) and the histograms its events feed.
struct Source {
    client: Mutex<Option<Client>>,
    time_in_queue: Histogram<f64>,
    hold_duration: Histogram<f64>,
}

impl Source {
    /// The client's counters now, after moving its buffered events into the histograms (every
    /// callback does so: whichever runs first in a collection takes them). None after shutdown.
    fn collect(&self) -> Option<MetricsSnapshot> {
        let client = locked(&self.client).clone()?;
        for event in client.drain_metric_events() {
            self.record(client.name(), &event);
        }
        Some(client.metrics())
    }

    fn record(&self, client_name: &str, event: &MetricEvent) {
        let seconds = event.duration.as_secs_f64();
        let lock = [
            KeyValue::new(CLIENT_NAME, client_name.to_owned()),
            KeyValue::new(LOCK_NAME, event.lock_name.clone()),
            KeyValue::new(LOCK_KIND, event.lock_kind.clone()),
        ];
        match &event.detail {
            EventDetail::Acquire { result, .. } => {
                let [client, name, kind] = lock;
                let attributes = [
                    client,
                    name,
                    kind,
                    KeyValue::new(ACQUIRE_RESULT, result.as_str()),
                ];
                self.time_in_queue.record(seconds, &attributes);
            }
            EventDetail::Hold { .. } => self.hold_duration.record(seconds, &lock),
            // Counted by the observable counters; their spans come from `tracing`.
            EventDetail::Release { .. }
            | EventDetail::Renewal { .. }
            | EventDetail::Lost { .. } => {}
        }
    }
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn client_name(snapshot: &MetricsSnapshot) -> KeyValue {
    KeyValue::new(CLIENT_NAME, snapshot.client_name.clone())
}

fn lock_attributes(snapshot: &MetricsSnapshot, lock: &LockMetrics) -> [KeyValue; 3] {
    [
        client_name(snapshot),
        KeyValue::new(LOCK_NAME, lock.name.clone()),
        KeyValue::new(LOCK_KIND, lock.kind.clone()),
    ]
}

/// Observes, per lock, the values `read` gives (each with its extra attribute, if any).
fn observe_locks<T: Copy>(
    observer: &dyn AsyncInstrument<T>,
    snapshot: &MetricsSnapshot,
    read: &impl Fn(&LockMetrics) -> Vec<(T, Option<KeyValue>)>,
) {
    for lock in &snapshot.locks {
        let attributes = lock_attributes(snapshot, lock);
        for (value, extra) in read(lock) {
            match extra {
                Some(extra) => {
                    let [client, name, kind] = attributes.clone();
                    observer.observe(value, &[client, name, kind, extra]);
                }
                None => observer.observe(value, &attributes),
            }
        }
    }
}

/// `builder` with a callback handing `observe` the client's counters (none after shutdown).
fn observing<'a, I, T: 'static>(
    builder: AsyncInstrumentBuilder<'a, I, T>,
    source: &Arc<Source>,
    unit: &'static str,
    description: &'static str,
    observe: impl Fn(&dyn AsyncInstrument<T>, &MetricsSnapshot) + Send + Sync + 'static,
) -> AsyncInstrumentBuilder<'a, I, T> {
    let source = source.clone();
    builder
        .with_unit(unit)
        .with_description(description)
        .with_callback(move |observer| {
            if let Some(snapshot) = source.collect() {
                observe(observer, &snapshot);
            }
        })
}

/// Registers a per-lock counter of the counts `read` gives, each with its extra attribute.
fn lock_counter(
    meter: &Meter,
    source: &Arc<Source>,
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    read: impl Fn(&LockMetrics) -> Vec<(u64, Option<KeyValue>)> + Send + Sync + 'static,
) {
    observing(
        meter.u64_observable_counter(name),
        source,
        unit,
        description,
        move |observer, snapshot| observe_locks(observer, snapshot, &read),
    )
    .build();
}

/// Registers a per-lock up-down counter of the value `read` gives.
fn lock_up_down_counter(
    meter: &Meter,
    source: &Arc<Source>,
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    read: impl Fn(&LockMetrics) -> i64 + Send + Sync + 'static,
) {
    observing(
        meter.i64_observable_up_down_counter(name),
        source,
        unit,
        description,
        move |observer, snapshot| {
            observe_locks(observer, snapshot, &|lock| vec![(read(lock), None)])
        },
    )
    .build();
}
