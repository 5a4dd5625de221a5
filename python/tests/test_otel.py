"""Metrics and traces: `client.metrics()`, and `polylock.otel` read through the real
OpenTelemetry SDK (InMemoryMetricReader, InMemorySpanExporter). Each instrument is checked
after driving its event for real on a real redis-server (the fault proxy where a failure is
needed); each span with its attributes. Also: the `polylock` logger stays quiet on the hot path."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import polylock
from helpers import wait_until
from redis_server import RedisServer
from polylock.metrics import BUCKET_BOUNDS_SECONDS
from polylock.otel import Instrumentation, instrument

EXIT_SCRIPT = Path(__file__).parent / "fixtures" / "otel_exit.py"


class Otel:
    """A meter provider with an in-memory reader and a tracer provider with an in-memory
    exporter, both of this test only."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def instrument(self, client: Any) -> Instrumentation:
        return instrument(client, self.meter_provider, self.tracer_provider)

    def collect(self) -> dict[str, Any]:
        """One collection: each metric by name (with its unit and data points)."""
        metrics: dict[str, Any] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                assert scope.scope.name == "polylock"
                for metric in scope.metrics:
                    metrics[metric.name] = metric
        return metrics

    def points(self, metric: str, **attributes: object) -> list[Any]:
        """The data points of `metric` whose attributes include `attributes` (dots spelled
        as double underscores: polylock__lock__name)."""
        wanted = {key.replace("__", "."): value for key, value in attributes.items()}
        found = self.collect().get(metric)
        if found is None:
            return []
        return [
            point for point in found.data.data_points
            if all(point.attributes.get(key) == value for key, value in wanted.items())
        ]  # fmt: skip

    def value(self, metric: str, **attributes: object) -> Optional[float]:
        """The value of the one data point of `metric` with `attributes` (None: no point)."""
        points = self.points(metric, **attributes)
        assert len(points) <= 1, points
        return points[0].value if points else None

    def spans(self, name: str, lock: str) -> list[ReadableSpan]:
        return [
            span for span in self.exporter.get_finished_spans()
            if span.name == name and span.attributes.get("polylock.lock.name") == lock
        ]  # fmt: skip

    def close(self) -> None:
        self.meter_provider.shutdown()
        self.tracer_provider.shutdown()


@pytest.fixture
def otel() -> Iterator[Otel]:
    providers = Otel()
    yield providers
    providers.close()


@pytest.fixture
def client(url: str) -> Iterator[polylock.Client]:
    with polylock.Client(url, watchdog_timeout=1.5) as made:
        yield made


@pytest.fixture
def instrumented(otel: Otel, client: polylock.Client) -> Iterator[polylock.Client]:
    with otel.instrument(client):
        yield client


def lock_points(
    otel: Otel, metric: str, name: str, kind: str = "lock", **attributes: object
) -> Optional[float]:
    return otel.value(metric, polylock__lock__name=name, polylock__lock__kind=kind, **attributes)


def hold_in_thread(lock: Any, release: threading.Event) -> threading.Thread:
    """Holds `lock` in another thread (another holder) until `release` is set."""
    held = threading.Event()

    def run() -> None:
        with lock:
            held.set()
            release.wait(30)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert held.wait(10)
    return thread


StartWaiter = Callable[..., threading.Thread]


@pytest.fixture
def start_waiter(redis_server: RedisServer) -> StartWaiter:
    """`start_waiter(client, lock, **acquire)`: a thread that waits for `lock` (then releases
    it), returned once it is asleep, so that the next release must reach it. Asleep: after its
    look listed it, it subscribed and checked that nothing was missed meanwhile, a ZSCORE of its
    place that the client sends (a script's are shown as Lua's). A release before that check
    makes it look again, and take the lock without being woken or granted it."""

    def start(client: polylock.Client, lock: Any, **acquire: Any) -> threading.Thread:
        deadline = time.monotonic() + 10
        with redis_server.client() as connection, connection.monitor() as monitor:
            waiter = threading.Thread(
                target=lambda: lock.acquire(timeout=30, **acquire) and lock.release()
            )
            waiter.start()
            while time.monotonic() < deadline:
                command = monitor.next_command()  # the connection's timeout bounds it
                words = str(command["command"]).split()
                if (
                    command["client_type"] != "lua"
                    and words[0].lower() == "zscore"
                    and f"{{{lock.name}}}" in words[1]
                ):
                    return waiter
        raise AssertionError(f"the waiter of {lock.name!r} never went to sleep")

    return start


# ---- client.metrics() and the options -------------------------------------------------------


def test_metrics_snapshot_counts_acquires_holds_and_waits(client, name):
    lock = client.lock(name)
    with lock:
        during = client.metrics().lock(name)
        assert during is not None and during.holds == 1
    assert lock.acquire(timeout=0)  # free now: one attempt takes it
    lock.release()
    snapshot = client.metrics()
    assert isinstance(snapshot, polylock.MetricsSnapshot)
    assert snapshot.client_name == client.name
    metrics = snapshot.lock(name)
    assert isinstance(metrics, polylock.LockMetrics)
    assert (metrics.name, metrics.kind) == (name, "lock")
    assert metrics.acquired == 2
    assert metrics.holds == 0 and metrics.waiters == 0
    assert isinstance(metrics.wait_time, polylock.Histogram)
    assert metrics.wait_time.count == 2 and metrics.hold_time.count == 2
    assert metrics.hold_time.bounds == BUCKET_BOUNDS_SECONDS
    assert len(metrics.hold_time.bucket_counts) == len(BUCKET_BOUNDS_SECONDS) + 1
    assert sum(metrics.hold_time.bucket_counts) == 2
    assert isinstance(snapshot.connection, polylock.ConnectionMetrics)
    assert snapshot.connection.server_calls >= 4
    with pytest.raises(AttributeError):
        snapshot.events_dropped = 1  # type: ignore[misc]  # frozen


def test_every_kind_is_counted_under_its_kind(client, name):
    with client.fair_lock(f"{name}:fair"):
        pass
    with client.fifo_lock(f"{name}:fifo"):
        pass
    with client.fenced_lock(f"{name}:fenced"):
        pass
    with client.read_write_lock(f"{name}:rw").write_lock():
        pass
    semaphore = client.semaphore(f"{name}:semaphore")
    semaphore.try_set_permits(1)
    with semaphore:
        pass
    expirable = client.expirable_semaphore(f"{name}:expirable")
    expirable.try_set_permits(1)
    permit = expirable.acquire(timeout=5)
    assert permit is not None
    expirable.release(permit)
    counted = {(lock.name, lock.kind): lock.acquired for lock in client.metrics().locks}
    assert counted == {
        (f"{name}:fair", "fair_lock"): 1,
        (f"{name}:fifo", "fifo_lock"): 1,
        (f"{name}:fenced", "fenced_lock"): 1,
        (f"{name}:rw", "read_write_lock"): 1,
        (f"{name}:semaphore", "semaphore"): 1,
        (f"{name}:expirable", "expirable_semaphore"): 1,
    }


def test_metrics_off_counts_nothing(url, name):
    with polylock.Client(url, metrics=False) as client:
        with client.lock(name):
            pass
        snapshot = client.metrics()
        assert all(lock.acquired == 0 and lock.hold_time.count == 0 for lock in snapshot.locks)
        assert snapshot.connection.server_calls == 0


def test_lock_names_past_the_limit_fold_into_other(url, name):
    with polylock.Client(url, metrics_max_lock_names=1) as client:
        for suffix in ("a", "b", "c"):
            with client.lock(f"{name}:{suffix}"):
                pass
        snapshot = client.metrics()
        assert [(lock.name, lock.acquired) for lock in snapshot.locks] == [
            (f"{name}:a", 1),
            (polylock.metrics.OTHER_LOCKS, 2),
        ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "metrics_max_lock_names must be a whole number from 1 to"),
        (1.5, "metrics_max_lock_names must be a whole number from 1 to"),
    ],
)
def test_bad_metrics_options_are_the_cores_errors(url, value, message):
    with pytest.raises(polylock.InvalidArgumentError, match=message):
        polylock.Client(url, metrics_max_lock_names=value)


def test_async_client_has_name_and_metrics(url, name):
    async def main() -> None:
        async with await polylock.AsyncClient.connect(url) as client:
            async with client.lock(name):
                pass
            metrics = client.metrics().lock(name)
            assert metrics is not None and metrics.acquired == 1
            assert client.name == client.metrics().client_name

    asyncio.run(main())


# ---- every instrument, through the SDK ------------------------------------------------------


def test_instruments_have_the_spec_names_and_units(otel, instrumented, name):
    with instrumented.lock(name):
        pass
    metrics = otel.collect()
    units = {metric: metrics[metric].unit for metric in metrics}
    assert units == {
        "polylock.lock.acquires": "{acquire}",
        "polylock.lock.acquire.time_in_queue": "s",
        "polylock.lock.active_holds": "{hold}",
        "polylock.lock.hold.duration": "s",
        "polylock.lock.queued_acquires": "{acquire}",
        "polylock.lock.handoffs": "{handoff}",
        "polylock.lock.wakeups_found_taken": "{wakeup}",
        "polylock.lock.renewals": "{renewal}",
        "polylock.lock.leases_lost": "{lease}",
        "polylock.lock.release_failures": "{release}",
        "polylock.lock.release_retries": "{release}",
        "polylock.client.server_calls": "{call}",
        "polylock.client.subscriptions": "{subscription}",
        "polylock.client.reconnects": "{reconnect}",
        # server_errors has no data point until a call fails
    }
    for point in otel.points("polylock.lock.acquires"):
        assert point.attributes["polylock.client.name"] == instrumented.name


def test_acquires_and_time_in_queue_by_result(otel, instrumented, redis, name):
    lock = instrumented.lock(name)
    with lock:
        pass
    release = threading.Event()
    holder = hold_in_thread(lock, release)
    assert lock.acquire(timeout=0.2) is False
    release.set()
    holder.join(10)
    redis("SET", f"{name}:string", "not a lock")
    with pytest.raises(polylock.WrongTypeError):
        instrumented.lock(f"{name}:string").acquire(timeout=1)

    result = "polylock.acquire.result"
    assert lock_points(otel, "polylock.lock.acquires", name, **{result: "acquired"}) == 2
    assert lock_points(otel, "polylock.lock.acquires", name, **{result: "timed_out"}) == 1
    assert lock_points(otel, "polylock.lock.acquires", f"{name}:string", **{result: "failed"}) == 1
    waits = otel.points("polylock.lock.acquire.time_in_queue", polylock__lock__name=name)
    by_result = {point.attributes[result]: point for point in waits}
    assert by_result["acquired"].count == 2
    assert by_result["timed_out"].count == 1
    assert by_result["timed_out"].sum >= 0.2  # it waited its whole timeout
    assert list(by_result["timed_out"].explicit_bounds) == list(BUCKET_BOUNDS_SECONDS)
    for point in waits:
        assert point.attributes["polylock.client.name"] == instrumented.name


def test_a_cancelled_acquire_of_an_async_client(otel, url, name):
    """Also: instrument() works with an AsyncClient."""

    async def main() -> None:
        async with await polylock.AsyncClient.connect(url) as client:
            instrumentation = otel.instrument(client)
            release = threading.Event()
            with polylock.Client(url) as other:
                holder = hold_in_thread(other.lock(name), release)
                waiting = asyncio.ensure_future(client.lock(name).acquire(timeout=30))
                queued = asyncio.to_thread(
                    wait_until,
                    lambda: lock_points(otel, "polylock.lock.queued_acquires", name) == 1,
                    10,
                )
                assert await queued, "the acquire never queued"
                waiting.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiting
                release.set()
                holder.join(10)
            result = {"polylock.acquire.result": "cancelled"}

            # The cancellation reaches the core when the runtime drops the acquire's future,
            # which may be just after `await` raised: wait for it to be counted, then drain
            # its event (flush) for the histogram.
            def counted() -> bool:
                instrumentation.flush()
                return lock_points(otel, "polylock.lock.acquires", name, **result) == 1

            assert wait_until(counted, 10), "the cancellation was never counted"
            waits = otel.points(
                "polylock.lock.acquire.time_in_queue", polylock__lock__name=name, **result
            )
            assert [point.count for point in waits] == [1]
            instrumentation.shutdown()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_active_holds_queued_acquires_subscriptions_and_hold_duration(
    otel, instrumented, name, start_waiter
):
    lock = instrumented.lock(name)
    release = threading.Event()
    holder = hold_in_thread(lock, release)
    waiter = start_waiter(instrumented, lock)
    assert lock_points(otel, "polylock.lock.active_holds", name) == 1
    assert lock_points(otel, "polylock.lock.queued_acquires", name) == 1
    assert otel.value("polylock.client.subscriptions") >= 1
    time.sleep(0.1)
    release.set()
    holder.join(10)
    waiter.join(10)
    assert lock_points(otel, "polylock.lock.active_holds", name) == 0
    assert lock_points(otel, "polylock.lock.queued_acquires", name) == 0
    [holds] = otel.points("polylock.lock.hold.duration", polylock__lock__name=name)
    assert holds.count == 2
    assert holds.sum >= 0.1  # the first hold lasted past the waiter's arrival
    assert list(holds.explicit_bounds) == list(BUCKET_BOUNDS_SECONDS)


def test_handoffs_granted_by_a_release(otel, instrumented, name, start_waiter):
    lock = instrumented.lock(name)
    release = threading.Event()
    holder = hold_in_thread(lock, release)
    waiter = start_waiter(instrumented, lock)
    release.set()
    holder.join(10)
    waiter.join(10)
    grants = lock_points(otel, "polylock.lock.handoffs", name, **{"polylock.handoff.type": "grant"})
    assert grants == 1


def test_handoffs_woken_by_a_release_message(otel, instrumented, name, start_waiter):
    """A waiter with a fixed lease is not granted the lock: the release message wakes it and
    it takes the lock itself."""
    lock = instrumented.lock(name)
    release = threading.Event()
    holder = hold_in_thread(lock, release)
    waiter = start_waiter(instrumented, lock, lease=30)
    release.set()
    holder.join(10)
    waiter.join(10)
    handoffs = {"polylock.handoff.type": "message"}
    assert lock_points(otel, "polylock.lock.handoffs", name, **handoffs) == 1
    assert (
        lock_points(otel, "polylock.lock.handoffs", name, **{"polylock.handoff.type": "grant"}) == 0
    )


def test_a_wakeup_that_finds_the_lock_taken(
    otel, instrumented, redis, url, name, start_waiter
):
    """An unlock message while the lock is still held (as a Redisson client's release racing
    a new acquire would leave it): the woken waiter finds it taken and waits again."""
    with polylock.Client(url) as other:
        release = threading.Event()
        holder = hold_in_thread(other.lock(name), release)
        lock = instrumented.lock(name)
        # A fixed lease: woken by the lock's channel, not granted.
        waiter = start_waiter(instrumented, lock, lease=30)
        assert redis("PUBLISH", f"redisson_lock__channel:{{{name}}}", "0") >= 1
        assert wait_until(
            lambda: instrumented.metrics().lock(name).wakeups_found_taken >= 1, timeout=10
        )
        assert lock_points(otel, "polylock.lock.wakeups_found_taken", name) >= 1
        release.set()
        holder.join(10)
        waiter.join(10)


def test_renewals_ok_and_failed(otel, session_fault_proxy, fault_proxy, name):
    with polylock.Client(fault_proxy.url, watchdog_timeout=1.5, response_timeout=0.3) as client:
        with otel.instrument(client):
            lock = client.lock(name)
            assert lock.acquire()
            assert wait_until(lambda: client.metrics().lock(name).renewals >= 1, timeout=10)
            fault_proxy.delay(1000)  # past the response timeout: the next renewal fails
            assert wait_until(lambda: client.metrics().lock(name).renewal_failures >= 1, timeout=10)
            fault_proxy.pass_through()
            ok = lock_points(
                otel, "polylock.lock.renewals", name, **{"polylock.renewal.result": "ok"}
            )
            failed = lock_points(
                otel, "polylock.lock.renewals", name, **{"polylock.renewal.result": "failed"}
            )
            assert ok >= 1 and failed >= 1
            errors = otel.points("polylock.client.server_errors", **{"error.type": "timeout"})
            assert errors and errors[0].value >= 1


def test_leases_lost_expired_taken_and_connection(
    otel, instrumented, redis, session_fault_proxy, fault_proxy, name
):
    # expired: a fixed lease runs out while held
    expiring = instrumented.lock(f"{name}:expired")
    assert expiring.acquire(lease=0.3)
    assert wait_until(lambda: expiring.lost, timeout=10)
    # taken: the key is deleted (and taken by another owner) under a watchdog hold
    taken = instrumented.lock(f"{name}:taken")
    assert taken.acquire()
    redis("DEL", f"{name}:taken")
    assert wait_until(lambda: taken.lost, timeout=10)
    reason = "polylock.lost.reason"
    assert (
        lock_points(otel, "polylock.lock.leases_lost", f"{name}:expired", **{reason: "expired"})
        == 1
    )
    assert lock_points(otel, "polylock.lock.leases_lost", f"{name}:taken", **{reason: "taken"}) == 1
    # connection: the server cannot be reached until the lease ends
    with polylock.Client(fault_proxy.url, watchdog_timeout=1.5, response_timeout=0.3) as client:
        with otel.instrument(client):
            cut_off = client.lock(f"{name}:connection")
            assert cut_off.acquire()
            fault_proxy.blackhole()
            assert wait_until(lambda: cut_off.lost, timeout=15)
            fault_proxy.pass_through()
            lost = lock_points(
                otel, "polylock.lock.leases_lost", f"{name}:connection", **{reason: "connection"}
            )
            assert lost == 1


def test_release_failures_and_retries(otel, session_fault_proxy, fault_proxy, redis, name):
    """A release that cannot reach the server fails for the caller and goes on in the
    background."""
    with polylock.Client(fault_proxy.url, response_timeout=0.3) as client, otel.instrument(client):
        lock = client.lock(name)
        assert lock.acquire(lease=30)
        fault_proxy.refuse_for(1.2)
        with pytest.raises((polylock.TimeoutError, polylock.ConnectionError)):
            lock.release()
        assert lock_points(otel, "polylock.lock.release_failures", name) == 1
        assert lock_points(otel, "polylock.lock.release_retries", name) == 1
        assert wait_until(lambda: redis("EXISTS", name) == 0, timeout=10)
        otel.collect()
    [release] = otel.spans("polylock.release", name)
    assert release.attributes["polylock.release.ok"] is False
    assert release.status.status_code.name == "ERROR"


def test_server_calls_errors_and_reconnects(otel, instrumented, redis, name, start_waiter):
    with instrumented.lock(name):
        pass
    assert otel.value("polylock.client.server_calls") >= 2
    redis("SET", f"{name}:string", "not a lock")
    with pytest.raises(polylock.WrongTypeError):
        instrumented.lock(f"{name}:string").acquire(timeout=1)
    assert otel.value("polylock.client.server_errors", **{"error.type": "wrong_type"}) == 1
    # A waiter puts the pub/sub connection in pub/sub mode; killing it makes the client
    # reconnect.
    lock = instrumented.lock(name)
    release = threading.Event()
    holder = hold_in_thread(lock, release)
    waiter = start_waiter(instrumented, lock)
    assert otel.value("polylock.client.reconnects") == 0
    assert redis("CLIENT", "KILL", "TYPE", "pubsub") >= 1
    assert wait_until(lambda: instrumented.metrics().connection.reconnects >= 1, timeout=10)
    assert otel.value("polylock.client.reconnects") >= 1
    release.set()
    holder.join(10)
    waiter.join(10)


# ---- spans ----------------------------------------------------------------------------------


def test_spans_of_acquire_hold_release_and_renewal(otel, url, name):
    with (
        polylock.Client(url, watchdog_timeout=1.5) as client,
        otel.instrument(client) as instrumentation,
    ):
        lock = client.lock(name)
        started = time.time_ns()
        assert lock.acquire()
        assert wait_until(lambda: client.metrics().lock(name).renewals >= 1, timeout=10)
        lock.release()
        finished = time.time_ns()
        # Flushed inside a caller's span: the events' spans are not made its children.
        with otel.tracer_provider.get_tracer("caller").start_as_current_span("caller"):
            instrumentation.flush()
        [acquire] = otel.spans("polylock.acquire", name)
        [hold] = otel.spans("polylock.hold", name)
        [release] = otel.spans("polylock.release", name)
        renewals = otel.spans("polylock.renewal", name)
    assert dict(acquire.attributes) == {
        "polylock.lock.name": name,
        "polylock.lock.kind": "lock",
        "polylock.acquire.result": "acquired",
        "polylock.acquire.attempts": 1,
    }
    assert dict(hold.attributes) == {
        "polylock.lock.name": name,
        "polylock.lock.kind": "lock",
        "polylock.hold.lost": False,
    }
    assert dict(release.attributes) == {
        "polylock.lock.name": name,
        "polylock.lock.kind": "lock",
        "polylock.release.ok": True,
        "polylock.release.retries": 0,
    }
    assert renewals and dict(renewals[0].attributes) == {
        "polylock.lock.name": name,
        "polylock.lock.kind": "lock",
        "polylock.renewal.result": "ok",
    }
    # The times of the events, not of the drain: in the order they happened, the hold lasting
    # past its first renewal (a third of the 1.5 s lease in).
    assert started <= acquire.start_time <= acquire.end_time
    assert acquire.start_time <= hold.start_time <= renewals[0].start_time
    assert renewals[0].end_time <= release.start_time <= release.end_time
    assert hold.end_time - hold.start_time >= 400_000_000
    assert release.end_time < finished
    assert acquire.parent is None and acquire.context.trace_id != hold.context.trace_id
    assert acquire.instrumentation_scope.name == "polylock"


def test_a_woken_acquire_span_says_how(otel, instrumented, name, start_waiter):
    lock = instrumented.lock(name)
    release = threading.Event()
    holder = hold_in_thread(lock, release)
    waiter = start_waiter(instrumented, lock)
    release.set()
    holder.join(10)
    waiter.join(10)
    otel.collect()  # a collection drains the events too
    woken = [
        span
        for span in otel.spans("polylock.acquire", name)
        if "polylock.acquire.woken_by" in span.attributes
    ]
    assert [span.attributes["polylock.acquire.woken_by"] for span in woken] == ["grant"]


def test_the_drain_thread_makes_spans_without_flush(otel, instrumented, name):
    with instrumented.lock(name):
        pass
    assert wait_until(lambda: len(otel.spans("polylock.hold", name)) == 1, timeout=5)


def test_one_instrumentation_per_client_and_shutdown_stops_it(otel, client, name):
    instrumentation = otel.instrument(client)
    with pytest.raises(polylock.InvalidArgumentError, match="instrumented already"):
        otel.instrument(client)
    instrumentation.shutdown()
    instrumentation.shutdown()  # idempotent
    with client.lock(name):
        pass
    assert (
        lock_points(otel, "polylock.lock.acquires", name, **{"polylock.acquire.result": "acquired"})
        is None
    )
    assert otel.spans("polylock.acquire", name) == []
    with otel.instrument(client):  # again, after the shutdown
        with client.lock(name):
            pass
    assert otel.spans("polylock.acquire", name) != []


def test_two_clients_on_one_meter_provider(otel, url, name):
    """The second client's instruments are the first one's (an SDK keeps the callbacks of the
    first instrument of a name): both clients are observed."""
    with polylock.Client(url) as first, polylock.Client(url) as second:
        with otel.instrument(first), otel.instrument(second):
            for client in (first, second):
                with client.lock(name):
                    pass
            acquired = otel.points(
                "polylock.lock.acquires",
                polylock__lock__name=name,
                **{"polylock.acquire.result": "acquired"},
            )
            # Clients of one name (the default host:pid) add up under it.
            assert sum(point.value for point in acquired) == 2
            assert {point.attributes["polylock.client.name"] for point in acquired} == {
                first.name,
                second.name,
            }


def test_global_providers_and_exit_without_shutdown(url, name):
    """instrument() given no providers uses OpenTelemetry's global ones. An instrumented client
    left open at exit: the atexit hook drains the last events into spans (exported before the
    tracer provider's own exit hook) and the drain thread leaves Python alone while it
    finalizes."""
    for _ in range(8):
        result = subprocess.run(
            [sys.executable, str(EXIT_SCRIPT), url, name],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert "Fatal Python error" not in result.stderr and "Traceback" not in result.stderr, (
            result.stderr
        )
        assert "acquires 1\n" in result.stdout, result.stdout
        assert f"span polylock.hold {name}:last\n" in result.stdout, result.stdout


def test_without_opentelemetry_the_import_says_what_to_install():
    """polylock itself needs no OpenTelemetry; polylock.otel names the extra."""
    blocked = "import sys; sys.modules['opentelemetry'] = None; import polylock; "
    result = subprocess.run(
        [sys.executable, "-c", blocked + "polylock.Client; import polylock.otel"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    message = "polylock.otel needs the OpenTelemetry API: pip install 'polylock[otel]'"
    assert f"ImportError: {message}" in result.stderr, result.stderr


# ---- logging --------------------------------------------------------------------------------


def test_the_hot_path_logs_nothing_even_at_debug(client, name, caplog, start_waiter):
    """Acquires, hand-offs and releases log nothing on the `polylock` logger, even at DEBUG
    (nor do the core's tracing spans). A lost lease's warning, logged after them through the
    same queue, shows that nothing earlier is still on its way."""
    caplog.set_level(logging.DEBUG, logger="polylock")
    lock = client.lock(name)
    for _ in range(20):
        with lock:
            pass
    release = threading.Event()
    holder = hold_in_thread(lock, release)
    waiter = start_waiter(client, lock)
    release.set()
    holder.join(10)
    waiter.join(10)
    marker = client.lock(f"{name}:lost")
    assert marker.acquire(lease=0.2)

    def records() -> list[logging.LogRecord]:
        return [record for record in caplog.records if record.name == "polylock"]

    assert wait_until(lambda: any(r.levelno == logging.WARNING for r in records()), timeout=10)
    assert [(r.levelname, r.getMessage()) for r in records() if r.levelno < logging.WARNING] == []
