"""The compiled core binding. Use the public API in ``polylock`` instead."""

import asyncio
import builtins
from collections.abc import Callable
from typing import Final, Literal, NoReturn, TypedDict, final

from typing_extensions import Unpack

__all__ = [
    "__version__",
    "DEFAULT",
    "UseDefault",
    "Client",
    "LockHandle",
    "Acquisition",
    "GroupHandle",
    "SemaphoreHandle",
    "ExpirableSemaphoreHandle",
    "ElectionHandle",
    "LeadershipHandle",
    "ObserverHandle",
    "LockError",
    "NotHeldError",
    "LockLostError",
    "InvalidArgumentError",
    "WrongTypeError",
    "ConnectionError",
    "TimeoutError",
    "RedisError",
    "StaleTokenError",
    "NotSyncedError",
    "PermissionError",
    "JobLockHandle",
    "JobHoldHandle",
    "CountDownLatchHandle",
]

__version__: Final[str]

@final
class UseDefault:
    """The type of :data:`DEFAULT`."""

DEFAULT: Final[UseDefault]
"""An ``acquire`` argument left out: the lock's own default applies."""

class LockError(Exception):
    """Base class of every polylock error."""

class NotHeldError(LockError, RuntimeError):
    """Released a lock the caller does not hold."""

class LockLostError(LockError):
    """The lease ran out, or the key was deleted or taken, while the lock was held."""

class InvalidArgumentError(LockError, ValueError):
    """A bad argument, rejected before any I/O."""

class WrongTypeError(LockError):
    """The lock's name holds a Redis key that is not a lock."""

class ConnectionError(LockError, builtins.ConnectionError):
    """Redis could not be reached, the connection broke, or the client is closed or was made
    before a fork."""

class TimeoutError(LockError, builtins.TimeoutError):
    """Redis did not answer within the response timeout."""

class RedisError(LockError):
    """Redis answered with an unexpected error."""

class StaleTokenError(LockError):
    """A fenced write was refused: its token is lower than one already applied to the key."""

class NotSyncedError(LockError):
    """With sync_replicas: no replica acknowledged an acquisition within the timeout (it was undone)."""

class PermissionError(LockError, builtins.PermissionError):
    """The Redis user may not run a command polylock needs, or use a key or channel of the lock (ACL)."""

class _ClientOptions(TypedDict, total=False):
    """The keyword options of ``Client`` and ``Client.connect_async``: not a runtime class."""

    watchdog_timeout: float | None
    connect_timeout: float | None
    response_timeout: float | None
    fair_queue_timeout: float | None
    sync_replicas: bool
    replica_sync_timeout: float | None
    min_replicas: int | None
    tls_ca: str | None
    tls_cert: str | None
    tls_key: str | None
    tls_insecure: bool
    name: str | None
    metrics: bool
    metrics_max_lock_names: int | None
    key_prefix: str | None
    wait_mode: Literal["pubsub", "poll"] | None
    poll_min: float | None
    poll_max: float | None

#: A metric event: (event, lock_name, lock_kind, start_unix_nanos, duration_nanos, a, b, c) with
#: event "acquire" (a: result, b: attempts, c: woken_by or None), "hold" (a: lost), "release"
#: (a: ok, b: retries), "renewal" (a: ok) or "lost" (a: reason); unused fields are None.
_MetricEvent = tuple[str, str, str, int, int, object, object, object]

class _LockMetricsDict(TypedDict):
    name: str
    kind: str
    acquired: int
    timed_out: int
    cancelled: int
    failed: int
    wait_time: _HistogramDict
    hold_time: _HistogramDict
    holds: int
    waiters: int
    handoffs_granted: int
    handoffs_woken: int
    wakeups_found_taken: int
    renewals: int
    renewal_failures: int
    lost_expired: int
    lost_taken: int
    lost_connection: int
    release_failures: int
    release_retries: int

class _HistogramDict(TypedDict):
    count: int
    sum_seconds: float
    bucket_counts: list[int]

class _ConnectionMetricsDict(TypedDict):
    server_calls: int
    server_errors: list[tuple[str, int]]
    subscriptions: int
    reconnects: int

class _MetricsSnapshotDict(TypedDict):
    """``Client.metrics()``: the core's snapshot as dicts (``polylock.metrics`` makes the
    dataclasses): not a runtime class."""

    client_name: str
    locks: list[_LockMetricsDict]
    connection: _ConnectionMetricsDict
    events_dropped: int

@final
class Client:
    def __new__(cls, url: str, **options: Unpack[_ClientOptions]) -> Client: ...
    @staticmethod
    def connect_async(url: str, **options: Unpack[_ClientOptions]) -> asyncio.Future[Client]: ...
    def lock_handle(
        self,
        kind: str,
        name: str,
        holder_id: int,
        timeout: float | None = None,
        lease: float | None = None,
        wait_mode: str | None = None,
        poll_min: float | None = None,
        poll_max: float | None = None,
    ) -> LockHandle: ...
    def semaphore(self, name: str) -> SemaphoreHandle: ...
    def expirable_semaphore(self, name: str) -> ExpirableSemaphoreHandle: ...
    def fenced_set(self, key: str, value: bytes, token: int) -> None: ...
    def fenced_delete(self, key: str, token: int) -> bool: ...
    def fenced_set_async(self, key: str, value: bytes, token: int) -> asyncio.Future[None]: ...
    def fenced_delete_async(self, key: str, token: int) -> asyncio.Future[bool]: ...
    def close(self) -> list[str]: ...
    def shutdown_async(self) -> asyncio.Future[list[str]]: ...
    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def watchdog_timeout(self) -> float: ...
    def metrics(self) -> _MetricsSnapshotDict: ...
    def record_metric_events(self, on: bool) -> None: ...
    def drain_metric_events(self) -> list[_MetricEvent]: ...
    def job_lock(self, name: str, at_most: float, at_least: float) -> JobLockHandle: ...
    def election(self, name: str) -> ElectionHandle: ...

    def count_down_latch(self, name: str) -> CountDownLatchHandle: ...

class _Hold:
    """What every hold offers (a lock, a group of locks): not a runtime class."""

    @property
    def name(self) -> str: ...
    @property
    def default_timeout(self) -> float | None: ...
    def acquire(
        self,
        blocking: bool = True,
        timeout: float | None | UseDefault = ...,
        lease: float | None | UseDefault = ...,
    ) -> bool: ...
    def release(self) -> None: ...
    def acquire_async(
        self,
        blocking: bool = True,
        timeout: float | None | UseDefault = ...,
        lease: float | None | UseDefault = ...,
    ) -> asyncio.Future[Acquisition]: ...
    def release_async(self) -> asyncio.Future[None]: ...
    def is_held(self) -> bool: ...
    def hold_count(self) -> int: ...
    @property
    def lost(self) -> bool: ...
    def on_lost(self, callback: Callable[[LockLostError], object]) -> None: ...
    def raise_not_acquired(self, timeout: float) -> NoReturn: ...
    def raise_not_acquired_async(self, timeout: float) -> asyncio.Future[NoReturn]: ...

@final
class LockHandle(_Hold):
    @property
    def owner(self) -> str: ...
    @property
    def default_lease(self) -> float | None: ...
    def locked(self) -> bool: ...
    def force_unlock(self) -> bool: ...
    def remaining_lease(self) -> float | None: ...
    def locked_async(self) -> asyncio.Future[bool]: ...
    def force_unlock_async(self) -> asyncio.Future[bool]: ...
    def remaining_lease_async(self) -> asyncio.Future[float | None]: ...
    @property
    def token(self) -> int | None: ...

@final
class GroupHandle(_Hold):
    def __new__(
        cls,
        kind: str,
        handles: list[LockHandle],
        timeout: float | None = None,
        lease: float | None = None,
    ) -> GroupHandle: ...
    @property
    def quorum(self) -> int: ...

@final
class Acquisition:
    def claim(self) -> bool: ...
    @property
    def permit_id(self) -> str | None: ...
    def abandon(self) -> None: ...

class _PermitCounter:
    """What every semaphore offers: not a runtime class."""

    @property
    def name(self) -> str: ...
    def try_set_permits(self, permits: int) -> bool: ...
    def add_permits(self, permits: int) -> None: ...
    def available_permits(self) -> int: ...
    def try_set_permits_async(self, permits: int) -> asyncio.Future[bool]: ...
    def add_permits_async(self, permits: int) -> asyncio.Future[None]: ...
    def available_permits_async(self) -> asyncio.Future[int]: ...

@final
class SemaphoreHandle(_PermitCounter):
    def acquire(self, permits: int, timeout: float | None) -> bool: ...
    def release(self, permits: int) -> None: ...
    def acquire_async(self, permits: int, timeout: float | None) -> asyncio.Future[Acquisition]: ...
    def release_async(self, permits: int) -> asyncio.Future[None]: ...

@final
class ExpirableSemaphoreHandle(_PermitCounter):
    def acquire(self, timeout: float | None, lease: float | None) -> str | None: ...
    def release(self, permit_id: str) -> None: ...
    def held_permits(self) -> list[str]: ...
    def acquire_async(
        self, timeout: float | None, lease: float | None
    ) -> asyncio.Future[Acquisition]: ...
    def release_async(self, permit_id: str) -> asyncio.Future[None]: ...

_LeaderTuple = tuple[str, int, str, str]

@final
class ElectionHandle:
    @property
    def name(self) -> str: ...
    def campaign(self, value: str, timeout: float | None = None) -> LeadershipHandle | None: ...
    def campaign_async(
        self, value: str, timeout: float | None = None
    ) -> asyncio.Future[LeadershipHandle | None]: ...
    def leader(self) -> _LeaderTuple | None: ...
    def leader_async(self) -> asyncio.Future[_LeaderTuple | None]: ...
    def observe(self) -> ObserverHandle: ...
    def observe_async(self) -> asyncio.Future[ObserverHandle]: ...

@final
class LeadershipHandle:
    @property
    def term(self) -> int: ...
    @property
    def value(self) -> str: ...
    @property
    def owner(self) -> str: ...
    def is_leader(self) -> bool: ...
    def is_lost(self) -> bool: ...
    def proclaim(self, value: str) -> None: ...
    def proclaim_async(self, value: str) -> asyncio.Future[None]: ...
    def resign(self) -> None: ...
    def resign_async(self) -> asyncio.Future[None]: ...
    def wait_lost(self, timeout: float | None = None) -> bool: ...
    def wait_lost_async(self) -> asyncio.Future[bool]: ...

@final
class ObserverHandle:
    def next(self, timeout: float | None = None) -> tuple[bool, _LeaderTuple | None]: ...
    def next_async(self) -> asyncio.Future[_LeaderTuple | None]: ...

@final
class JobLockHandle:
    @property
    def name(self) -> str: ...
    @property
    def at_most(self) -> float: ...
    @property
    def at_least(self) -> float: ...
    def try_acquire(self) -> JobHoldHandle | None: ...
    def try_acquire_async(self) -> asyncio.Future[JobHoldHandle | None]: ...

@final
class JobHoldHandle:
    @property
    def is_held(self) -> bool: ...
    def finish(self) -> None: ...
    def finish_async(self) -> asyncio.Future[None]: ...

@final
class CountDownLatchHandle:
    @property
    def name(self) -> str: ...
    def try_set_count(self, count: int) -> bool: ...
    def count_down(self) -> None: ...
    def count(self) -> int: ...
    def await_zero(self, timeout: float) -> bool: ...
    def delete(self) -> bool: ...
    def try_set_count_async(self, count: int) -> asyncio.Future[bool]: ...
    def count_down_async(self) -> asyncio.Future[None]: ...
    def count_async(self) -> asyncio.Future[int]: ...
    def await_zero_async(self, timeout: float) -> asyncio.Future[bool]: ...
    def delete_async(self) -> asyncio.Future[bool]: ...
