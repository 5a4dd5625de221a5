"""OpenTelemetry metrics and spans of a polylock client (the extra ``polylock[otel]``).

    from polylock.otel import instrument

    instrumentation = instrument(client)  # the global meter and tracer providers
    ...
    instrumentation.shutdown()

Counters and up-down counters are observable instruments that read :meth:`Client.metrics`
(cumulative values) when a reader collects. The two histograms and the spans come from the
core's metric events, drained at each collection (the SDK runs observable callbacks before it
reads the synchronous instruments, so nothing recorded is late), every second by a daemon
thread, and on :meth:`Instrumentation.flush` and :meth:`Instrumentation.shutdown`. A span keeps
the exact start and duration of what it records; it starts a trace of its own, since it is made
after the fact. Names, units and attributes are the same in every polylock language
(``docs/observability.md``).
"""

from __future__ import annotations

import atexit
import sys
import threading
import weakref
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Callable, Optional, Union, cast

try:
    from opentelemetry import metrics, trace
    from opentelemetry.context import Context
    from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation
    from opentelemetry.trace import Status, StatusCode, Tracer, TracerProvider
except ImportError as missing:
    raise ImportError(
        "polylock.otel needs the OpenTelemetry API: pip install 'polylock[otel]'"
    ) from missing

from ._native import InvalidArgumentError, __version__
from .metrics import BUCKET_BOUNDS_SECONDS, LockMetrics, MetricsSnapshot

if TYPE_CHECKING:
    from ._async import AsyncClient
    from ._native import _MetricEvent
    from ._sync import Client

__all__ = ["Instrumentation", "instrument"]

#: The meter and tracer name.
SCOPE = "polylock"

#: How often the daemon thread drains events into spans and histograms (seconds).
DRAIN_INTERVAL = 1.0

AnyClient = Union["Client", "AsyncClient"]

CLIENT_NAME = "polylock.client.name"
LOCK_NAME = "polylock.lock.name"
LOCK_KIND = "polylock.lock.kind"


def instrument(
    client: AnyClient,
    meter_provider: Optional[MeterProvider] = None,
    tracer_provider: Optional[TracerProvider] = None,
) -> Instrumentation:
    """Exports ``client``'s metrics and spans through ``meter_provider`` and
    ``tracer_provider`` (None: OpenTelemetry's global ones) until the returned
    :class:`Instrumentation` is shut down. A client is instrumented once at a time (a second
    call raises InvalidArgumentError): the events go to one exporter."""
    return Instrumentation(client, meter_provider, tracer_provider)


class Instrumentation:
    """One client's export to OpenTelemetry (made by :func:`instrument`)."""

    def __init__(
        self,
        client: AnyClient,
        meter_provider: Optional[MeterProvider],
        tracer_provider: Optional[TracerProvider],
    ) -> None:
        with _INSTRUMENTED_LOCK:
            if id(client) in _INSTRUMENTED:
                raise InvalidArgumentError(
                    "this client is instrumented already; shut that Instrumentation down first"
                )
            _INSTRUMENTED.add(id(client))
        try:
            self._start(client, meter_provider, tracer_provider)
        except BaseException:
            with _INSTRUMENTED_LOCK:
                _INSTRUMENTED.discard(id(client))
            raise

    def _start(
        self,
        client: AnyClient,
        meter_provider: Optional[MeterProvider],
        tracer_provider: Optional[TracerProvider],
    ) -> None:
        self._client = client
        self._client_name = client.name
        self._tracer: Tracer = trace.get_tracer(SCOPE, __version__, tracer_provider)
        meter = metrics.get_meter(SCOPE, __version__, meter_provider)
        self._instruments = _instruments_of(meter)
        # One drain at a time: the thread, a collection and flush() may ask at once.
        self._drain_lock = threading.Lock()
        # The snapshot of the current collection and the instruments that read it.
        self._snapshot_lock = threading.Lock()
        self._snapshot: Optional[MetricsSnapshot] = None
        self._served: set[str] = set()
        self._stopped = threading.Event()
        self._closed = False
        client._record_metric_events(True)
        self._instruments.add(self)
        self._thread = threading.Thread(
            target=self._drain_every_second, name="polylock-otel", daemon=True
        )
        self._thread.start()
        atexit.register(self._at_exit)

    def flush(self) -> None:
        """Drains the events recorded so far into spans and histograms now (a reader still
        has to collect, and a span processor to export, for them to leave the process)."""
        self._drain()

    def shutdown(self) -> None:
        """Stops the export: a last drain, then no more events are recorded nor observed.
        Idempotent; the client stays usable."""
        with self._drain_lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self._at_exit)
        self._stopped.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        self._drain(last=True)
        # Also drops what was recorded since that drain, so a later Instrumentation starts empty.
        self._client._record_metric_events(False)
        self._instruments.remove(self)
        with _INSTRUMENTED_LOCK:
            _INSTRUMENTED.discard(id(self._client))

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    # ---- draining events --------------------------------------------------------------------

    def _drain_every_second(self) -> None:
        while not self._stopped.wait(DRAIN_INTERVAL):
            # Past this point Python objects may be half torn down: leave them alone.
            if sys.is_finalizing():
                return
            self._drain()

    def _at_exit(self) -> None:
        # Before the providers' own exit hooks (registered earlier, so run later) export.
        self.shutdown()

    def _drain(self, last: bool = False) -> None:
        with self._drain_lock:
            if self._closed and not last:
                return
            for event in self._client._drain_metric_events():
                self._record(event)

    def _record(self, event: _MetricEvent) -> None:
        kind, lock_name, lock_kind, start_ns, duration_ns, a, b, c = event
        lock: dict[str, Union[str, bool, int]] = {LOCK_NAME: lock_name, LOCK_KIND: lock_kind}
        seconds = duration_ns / 1e9
        if kind == "acquire":
            result = cast(str, a)
            self._instruments.time_in_queue.record(
                seconds,
                {CLIENT_NAME: self._client_name, **lock, "polylock.acquire.result": result},
            )
            attributes = {
                **lock,
                "polylock.acquire.result": result,
                "polylock.acquire.attempts": cast(int, b),
            }
            if c is not None:
                attributes["polylock.acquire.woken_by"] = cast(str, c)
            self._span("polylock.acquire", start_ns, duration_ns, attributes, result == "failed")
        elif kind == "hold":
            lost = cast(bool, a)
            self._instruments.hold_duration.record(
                seconds, {CLIENT_NAME: self._client_name, **lock}
            )
            attributes = {**lock, "polylock.hold.lost": lost}
            self._span("polylock.hold", start_ns, duration_ns, attributes, lost)
        elif kind == "release":
            ok = cast(bool, a)
            attributes = {
                **lock,
                "polylock.release.ok": ok,
                "polylock.release.retries": cast(int, b),
            }
            self._span("polylock.release", start_ns, duration_ns, attributes, not ok)
        elif kind == "renewal":
            ok = cast(bool, a)
            attributes = {**lock, "polylock.renewal.result": "ok" if ok else "failed"}
            self._span("polylock.renewal", start_ns, duration_ns, attributes, not ok)
        # "lost" events: polylock.lock.leases_lost counts them from the snapshot.

    def _span(
        self,
        name: str,
        start_ns: int,
        duration_ns: int,
        attributes: dict[str, Union[str, bool, int]],
        failed: bool,
    ) -> None:
        # An empty context: the span was made after the fact, so whatever span is current now
        # (a caller of flush()) is not its parent.
        span = self._tracer.start_span(name, Context(), attributes=attributes, start_time=start_ns)
        if failed:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=start_ns + duration_ns)

    # ---- observing the snapshot -------------------------------------------------------------

    def _snapshot_for(self, instrument: str) -> MetricsSnapshot:
        """The snapshot of the current collection: an instrument that already read the last
        one starts a new collection, which first drains the events (so the histograms the
        reader reads next have them) and takes a new snapshot. One snapshot per collection,
        whatever order the SDK calls the callbacks in."""
        with self._snapshot_lock:
            if self._snapshot is None or instrument in self._served:
                self._drain()
                self._snapshot = self._client.metrics()
                self._served = set()
            self._served.add(instrument)
            return self._snapshot


class _Instruments:
    """The instruments of one meter, shared by every client instrumented on it: an SDK gives a
    second instrument of a name the callbacks of the first one only."""

    def __init__(self, meter: Meter) -> None:
        self._lock = threading.Lock()
        self._instrumentations: list[Instrumentation] = []
        self.time_in_queue = meter.create_histogram(
            "polylock.lock.acquire.time_in_queue",
            unit="s",
            description="Time from an acquire's call to its end, by result.",
            explicit_bucket_boundaries_advisory=BUCKET_BOUNDS_SECONDS,
        )
        self.hold_duration = meter.create_histogram(
            "polylock.lock.hold.duration",
            unit="s",
            description="Time from an acquire to the release or loss of that hold.",
            explicit_bucket_boundaries_advisory=BUCKET_BOUNDS_SECONDS,
        )
        counter = meter.create_observable_counter
        up_down = meter.create_observable_up_down_counter
        lock_instruments: list[tuple[Callable[..., object], str, str, str, _LockValues]] = [
            (counter, "polylock.lock.acquires", "{acquire}", "Acquires, by result.", _acquires),
            (up_down, "polylock.lock.active_holds", "{hold}", "Holds current now.",
             lambda lock: [(lock.holds, {})]),
            (up_down, "polylock.lock.queued_acquires", "{acquire}", "Acquires waiting now.",
             lambda lock: [(lock.waiters, {})]),
            (counter, "polylock.lock.handoffs", "{handoff}",
             "Acquires handed the lock by its releaser (grant) or woken by a release message.",
             lambda lock: [(lock.handoffs_granted, {"polylock.handoff.type": "grant"}),
                           (lock.handoffs_woken, {"polylock.handoff.type": "message"})]),
            (counter, "polylock.lock.wakeups_found_taken", "{wakeup}",
             "Wake-ups that found the lock taken again.",
             lambda lock: [(lock.wakeups_found_taken, {})]),
            (counter, "polylock.lock.renewals", "{renewal}", "Lease renewals, by result.",
             lambda lock: [(lock.renewals, {"polylock.renewal.result": "ok"}),
                           (lock.renewal_failures, {"polylock.renewal.result": "failed"})]),
            (counter, "polylock.lock.leases_lost", "{lease}", "Holds lost, by reason.",
             lambda lock: [(lock.lost_expired, {"polylock.lost.reason": "expired"}),
                           (lock.lost_taken, {"polylock.lost.reason": "taken"}),
                           (lock.lost_connection, {"polylock.lost.reason": "connection"})]),
            (counter, "polylock.lock.release_failures", "{release}", "Releases that failed.",
             lambda lock: [(lock.release_failures, {})]),
            (counter, "polylock.lock.release_retries", "{release}",
             "Releases retried in the background after the caller's call returned.",
             lambda lock: [(lock.release_retries, {})]),
        ]  # fmt: skip
        for create, name, unit, description, values in lock_instruments:
            create(name, callbacks=[self._lock_callback(name, values)], unit=unit,
                   description=description)  # fmt: skip
        client_instruments: list[tuple[Callable[..., object], str, str, str, _ClientValues]] = [
            (counter, "polylock.client.server_calls", "{call}", "Commands and scripts sent.",
             lambda snapshot: [(snapshot.connection.server_calls, {})]),
            (counter, "polylock.client.server_errors", "{error}", "Failed server calls, by kind.",
             lambda snapshot: [(count, {"error.type": kind})
                               for kind, count in snapshot.connection.server_errors]),
            (up_down, "polylock.client.subscriptions", "{subscription}",
             "Pub/sub channels subscribed now.",
             lambda snapshot: [(snapshot.connection.subscriptions, {})]),
            (counter, "polylock.client.reconnects", "{reconnect}",
             "Reconnects of the command or pub/sub connections.",
             lambda snapshot: [(snapshot.connection.reconnects, {})]),
        ]  # fmt: skip
        for create, name, unit, description, client_values in client_instruments:
            create(name, callbacks=[self._client_callback(name, client_values)], unit=unit,
                   description=description)  # fmt: skip

    def add(self, instrumentation: Instrumentation) -> None:
        with self._lock:
            self._instrumentations.append(instrumentation)

    def remove(self, instrumentation: Instrumentation) -> None:
        with self._lock:
            self._instrumentations.remove(instrumentation)

    def _snapshots(self, instrument: str) -> Iterator[MetricsSnapshot]:
        with self._lock:
            instrumentations = list(self._instrumentations)
        for instrumentation in instrumentations:
            yield instrumentation._snapshot_for(instrument)

    def _lock_callback(
        self, instrument: str, values: _LockValues
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_: CallbackOptions) -> Iterable[Observation]:
            return _summed(
                (value, {CLIENT_NAME: snapshot.client_name, LOCK_NAME: lock.name,
                         LOCK_KIND: lock.kind, **attributes})
                for snapshot in self._snapshots(instrument)
                for lock in snapshot.locks
                for value, attributes in values(lock)
            )  # fmt: skip

        return observe

    def _client_callback(
        self, instrument: str, values: _ClientValues
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_: CallbackOptions) -> Iterable[Observation]:
            return _summed(
                (value, {CLIENT_NAME: snapshot.client_name, **attributes})
                for snapshot in self._snapshots(instrument)
                for value, attributes in values(snapshot)
            )

        return observe


_LockValues = Callable[[LockMetrics], list[tuple[int, dict[str, str]]]]
_ClientValues = Callable[[MetricsSnapshot], list[tuple[int, dict[str, str]]]]


def _summed(values: Iterable[tuple[int, dict[str, str]]]) -> list[Observation]:
    """One observation per attribute set: clients of one name (the default is host:pid) add
    up, where an SDK would keep only the last of equal attribute sets."""
    sums: dict[tuple[tuple[str, str], ...], int] = {}
    for value, attributes in values:
        key = tuple(sorted(attributes.items()))
        sums[key] = sums.get(key, 0) + value
    return [Observation(value, dict(key)) for key, value in sums.items()]


def _acquires(lock: LockMetrics) -> list[tuple[int, dict[str, str]]]:
    return [
        (lock.acquired, {"polylock.acquire.result": "acquired"}),
        (lock.timed_out, {"polylock.acquire.result": "timed_out"}),
        (lock.cancelled, {"polylock.acquire.result": "cancelled"}),
        (lock.failed, {"polylock.acquire.result": "failed"}),
    ]


# The instruments of each meter, made once: a meter gives a second instrument of a name the
# first one's callbacks, so a later Instrumentation joins the existing _Instruments.
_METERS: weakref.WeakKeyDictionary[Meter, _Instruments] = weakref.WeakKeyDictionary()
_METERS_LOCK = threading.Lock()

# The ids of the clients instrumented now (each Instrumentation keeps its client alive).
_INSTRUMENTED: set[int] = set()
_INSTRUMENTED_LOCK = threading.Lock()


def _instruments_of(meter: Meter) -> _Instruments:
    with _METERS_LOCK:
        instruments = _METERS.get(meter)
        if instruments is None:
            instruments = _METERS[meter] = _Instruments(meter)
        return instruments
