"""Test helpers importable from spawned processes: a redis-py connection called like
`redis("HGET", key, field)`, and the worker functions that run in other processes."""

from __future__ import annotations

import time
from typing import Any, Optional, Union

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry


class RedisConnection(redis.Redis):
    """redis-py's client for one loopback port, without retries (a test sees every failure).

    Calling it runs one command: `connection("HGET", key, field)`. Replies are redis-py's:
    bytes for bulk strings, int, None for nil, True for OK, float for ZSCORE, a list of bytes
    for LRANGE, a dict for HGETALL."""

    def __init__(self, port: int, timeout: float = 10) -> None:
        super().__init__(
            host="127.0.0.1",
            port=port,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
        )

    def __call__(self, *args: Union[str, int, float, bytes]) -> Any:
        return self.execute_command(*args)


def wait_until(predicate, timeout: float, interval: float = 0.02) -> bool:
    """Polls until `predicate()` is true; False if `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def wait_for_child(pid: int, timeout: float = 60) -> int:
    """The wait status of the forked child `pid`; kills it and raises AssertionError when it
    has not exited within `timeout` seconds."""
    import os
    import signal

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        finished, status = os.waitpid(pid, os.WNOHANG)
        if finished:
            return status
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError("the forked child hung")


def counter_worker(
    url: str,
    port: int,
    lock_name: str,
    counter_key: str,
    rounds: int,
    kind: str = "lock",
) -> None:
    """Increments a Redis counter non-atomically (GET, pause, SET) under the lock of `kind`,
    the client's method that makes it ("lock", "fair_lock" or "fifo_lock")."""
    import polylock

    with polylock.Client(url) as client, RedisConnection(port) as redis:
        lock = getattr(client, kind)(lock_name)
        for _ in range(rounds):
            with lock:
                value = int(redis("GET", counter_key) or 0)
                time.sleep(0.002)  # widens the race window a missing lock would expose
                redis("SET", counter_key, value + 1)


def hash_count(redis: RedisConnection, name: str, owner: str) -> Optional[int]:
    value = redis("HGET", name, owner)
    return None if value is None else int(value)
