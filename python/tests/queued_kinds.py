"""The two lock kinds that serve their waiters in arrival order, as the tests see them in Redis:
the fair lock (Redisson RFairLock layout: queue LIST `redisson_lock_queue:{name}` and the
waiters' deadlines in the ZSET `redisson_lock_timeout:{name}`) and the FIFO lock (polylock's own
layout: line LIST `polylock_fifo_line:{name}` and a record key per waiter,
`polylock_fifo_waiter:{name}:<owner>`). test_queued_locks.py runs the behaviours they share on
both through `KINDS`; test_fair.py and test_fifo.py use the keys for what only one kind does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from helpers import RedisConnection


def queue_key(name: str) -> str:
    """The fair lock's queue of waiting owners."""
    return f"redisson_lock_queue:{{{name}}}"


def timeouts_key(name: str) -> str:
    """The fair lock's ZSET of waiters' deadlines."""
    return f"redisson_lock_timeout:{{{name}}}"


def line_key(name: str) -> str:
    """The FIFO lock's line of waiting owners."""
    return f"polylock_fifo_line:{{{name}}}"


def record_key(name: str, owner: str) -> str:
    """The FIFO lock's record of one waiter, whose TTL is the queue timeout."""
    return f"polylock_fifo_waiter:{{{name}}}:{owner}"


def listed(redis: RedisConnection, key: str) -> list[str]:
    return [entry.decode() for entry in redis("LRANGE", key, 0, -1)]


def queued(redis: RedisConnection, name: str) -> list[str]:
    """The owners waiting in the fair queue, head first."""
    return listed(redis, queue_key(name))


def in_line(redis: RedisConnection, name: str) -> list[str]:
    """The owners waiting in the FIFO line, head first."""
    return listed(redis, line_key(name))


def records(redis: RedisConnection, name: str) -> list[bytes]:
    """The FIFO waiter records of `name` that live now."""
    return list(redis.scan_iter(match=f"polylock_fifo_waiter:{{{name}}}:*"))


def assert_fair_nothing_left(redis: RedisConnection, name: str) -> None:
    assert redis("EXISTS", name, queue_key(name), timeouts_key(name)) == 0


def assert_fifo_nothing_left(redis: RedisConnection, name: str) -> None:
    assert redis("EXISTS", name, line_key(name)) == 0, (redis("HGETALL", name), in_line(redis, name))
    assert records(redis, name) == []


@dataclass(frozen=True)
class QueuedKind:
    """One kind of lock whose waiters stand in a LIST, served in arrival order."""

    #: The clients' method that makes such a lock, also its kind in `client.metrics()` and in
    #: `client.locked(kind=...)`: "fair_lock" or "fifo_lock".
    method: str
    #: The key of the LIST of waiting owners, head first, for a lock name.
    waiters_key: Callable[[str], str]
    #: Whether the kind keeps a waiter's own entry (fair: its deadline in the timeouts ZSET;
    #: FIFO: its record key): `(redis, name, owner)`.
    has_waiter_entry: Callable[[RedisConnection, str, str], bool]
    #: Asserts that no key of the name is left (the lock, the waiters' LIST and entries).
    assert_nothing_left: Callable[[RedisConnection, str], None]

    def __str__(self) -> str:
        return self.method

    def lock(self, client: Any, name: str, **options: Any) -> Any:
        """`client.fair_lock(name, ...)` or `client.fifo_lock(name, ...)`, sync or async client."""
        return getattr(client, self.method)(name, **options)

    def waiting(self, redis: RedisConnection, name: str) -> list[str]:
        """The owners waiting for `name`, head first."""
        return listed(redis, self.waiters_key(name))


FAIR = QueuedKind(
    method="fair_lock",
    waiters_key=queue_key,
    has_waiter_entry=lambda redis, name, owner: redis("ZSCORE", timeouts_key(name), owner) is not None,
    assert_nothing_left=assert_fair_nothing_left,
)

FIFO = QueuedKind(
    method="fifo_lock",
    waiters_key=line_key,
    has_waiter_entry=lambda redis, name, owner: redis("EXISTS", record_key(name, owner)) == 1,
    assert_nothing_left=assert_fifo_nothing_left,
)

KINDS = (FAIR, FIFO)
