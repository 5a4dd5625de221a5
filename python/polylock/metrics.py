"""What the locks of one client did so far: :meth:`polylock.Client.metrics` returns a
:class:`MetricsSnapshot`. Counted once in the Rust core, the same in every polylock language;
the fields are the core's (``docs/observability.md`` maps them to OpenTelemetry instruments)."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any

#: The upper bounds (inclusive, seconds) of every duration histogram's buckets; a histogram has
#: one more count, for the durations past the last bound.
BUCKET_BOUNDS_SECONDS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0,
)  # fmt: skip

#: The lock name under which names beyond ``metrics_max_lock_names`` are counted.
OTHER_LOCKS = "_other"


@dataclass(frozen=True)
class Histogram:
    """Durations recorded: how many, their sum (seconds), and how many fell in each bucket of
    ``bounds`` (not cumulative; the last count is for those past the last bound)."""

    count: int
    sum_seconds: float
    bucket_counts: tuple[int, ...]
    bounds: tuple[float, ...] = BUCKET_BOUNDS_SECONDS


@dataclass(frozen=True)
class LockMetrics:
    """The counters of one lock name and kind (``lock``, ``fair_lock``, ``fifo_lock``,
    ``fenced_lock``, ``read_write_lock``, ``semaphore``, ``expirable_semaphore``, ``multi_lock``,
    ``red_lock``)."""

    name: str
    kind: str
    #: Acquires by how they ended.
    acquired: int
    timed_out: int
    cancelled: int
    failed: int
    #: From an acquire's call to its end, every result.
    wait_time: Histogram
    #: From an acquire to the release or loss of that hold.
    hold_time: Histogram
    #: Holds and waiting acquires now.
    holds: int
    waiters: int
    #: Acquires handed the lock by its releaser / woken by a release message.
    handoffs_granted: int
    handoffs_woken: int
    #: Wake-ups that found the lock taken again.
    wakeups_found_taken: int
    renewals: int
    renewal_failures: int
    #: Holds lost: lease ran out, another owner had it, server unreachable in time.
    lost_expired: int
    lost_taken: int
    lost_connection: int
    release_failures: int
    #: Releases retried in the background after the caller's call returned.
    release_retries: int


@dataclass(frozen=True)
class ConnectionMetrics:
    """The client's server calls, failed calls by error kind, pub/sub channels subscribed now,
    and reconnects."""

    server_calls: int
    server_errors: tuple[tuple[str, int], ...]
    subscriptions: int
    reconnects: int


@dataclass(frozen=True)
class MetricsSnapshot:
    """Everything one client counted since it was made: one :class:`LockMetrics` per lock name
    and kind used (in first-use order), the connection's counters, and the metric events an
    exporter did not drain in time (``events_dropped``)."""

    client_name: str
    locks: tuple[LockMetrics, ...]
    connection: ConnectionMetrics
    events_dropped: int

    def lock(self, name: str, kind: str = "lock") -> LockMetrics | None:
        """The counters of lock ``name`` of ``kind``, or None when it was not used."""
        return next((lock for lock in self.locks if lock.name == name and lock.kind == kind), None)


def _histogram(native: Mapping[str, Any]) -> Histogram:
    return Histogram(native["count"], native["sum_seconds"], tuple(native["bucket_counts"]))


def snapshot_from_native(native: Mapping[str, Any]) -> MetricsSnapshot:
    """The dataclasses of ``_native.Client.metrics()``'s dicts."""
    locks = tuple(
        LockMetrics(
            **{
                **lock,
                "wait_time": _histogram(lock["wait_time"]),
                "hold_time": _histogram(lock["hold_time"]),
            }
        )
        for lock in native["locks"]
    )
    connection = native["connection"]
    return MetricsSnapshot(
        client_name=native["client_name"],
        locks=locks,
        connection=ConnectionMetrics(
            server_calls=connection["server_calls"],
            server_errors=tuple((kind, count) for kind, count in connection["server_errors"]),
            subscriptions=connection["subscriptions"],
            reconnects=connection["reconnects"],
        ),
        events_dropped=native["events_dropped"],
    )
