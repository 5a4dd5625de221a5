"""polylock: distributed locks on Redis, compatible with Redisson (the Java client).

A lock taken here excludes a Redisson, Rust, Node, Kotlin or Swift polylock lock of the same name.

    import polylock

    with polylock.Client("redis://127.0.0.1:6379/0") as client:
        with client.lock("orders:42"):
            ...  # critical section; the lease is renewed while held
"""

from ._native import (
    DEFAULT,
    ConnectionError,
    InvalidArgumentError,
    LockError,
    LockLostError,
    NotHeldError,
    NotSyncedError,
    PermissionError,
    RedisError,
    StaleTokenError,
    TimeoutError,
    WrongTypeError,
    __version__,
)
from ._async import (
    AsyncClient,
    AsyncExpirableSemaphore,
    AsyncLock,
    AsyncReadWriteLock,
    AsyncSemaphore,
)
from ._job import AsyncJobHold, AsyncJobLock, JobHold, JobLock
from ._multi import AsyncMultiLock, AsyncRedLock, MultiLock, RedLock
from ._sync import Client, ExpirableSemaphore, Lock, ReadWriteLock, Semaphore
from .metrics import ConnectionMetrics, Histogram, LockMetrics, MetricsSnapshot
from ._election import (
    AsyncElection,
    AsyncLeadership,
    AsyncLostSignal,
    Election,
    Leader,
    Leadership,
    LostSignal,
)
from ._async import AsyncCountDownLatch
from ._sync import CountDownLatch

__all__ = [
    "DEFAULT",
    "AsyncClient",
    "AsyncExpirableSemaphore",
    "AsyncLock",
    "AsyncMultiLock",
    "AsyncRedLock",
    "AsyncReadWriteLock",
    "AsyncSemaphore",
    "Client",
    "ConnectionError",
    "ConnectionMetrics",
    "ExpirableSemaphore",
    "Histogram",
    "InvalidArgumentError",
    "Lock",
    "LockError",
    "LockLostError",
    "LockMetrics",
    "MetricsSnapshot",
    "MultiLock",
    "NotHeldError",
    "NotSyncedError",
    "PermissionError",
    "ReadWriteLock",
    "RedLock",
    "RedisError",
    "Semaphore",
    "StaleTokenError",
    "TimeoutError",
    "WrongTypeError",
    "__version__",
    "AsyncJobHold",
    "AsyncJobLock",
    "JobHold",
    "JobLock",
    "AsyncElection",
    "AsyncLeadership",
    "AsyncLostSignal",
    "Election",
    "Leader",
    "Leadership",
    "LostSignal",
    "AsyncCountDownLatch",
    "CountDownLatch",
]
