"""Test helpers importable from spawned processes: a tiny RESP client (tests talk to Redis
without redis-py) and the worker functions that run in other processes."""

from __future__ import annotations

import socket
import time
from typing import Optional, Union

Reply = Union[None, int, bytes, str, list["Reply"]]


class RedisError(Exception):
    pass


class Resp:
    """Just enough of RESP2 for tests: send a command, read one reply."""

    def __init__(self, port: int) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self._file = self._sock.makefile("rb")

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def __enter__(self) -> Resp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __call__(self, *args: Union[str, int, bytes]) -> Reply:
        parts = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        out = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
        self._sock.sendall(out)
        return self._read()

    def _read(self) -> Reply:
        line = self._file.readline()
        if not line:
            raise RedisError("connection closed")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            if size < 0:
                return None
            data = self._file.read(size + 2)[:-2]
            return data
        if kind == b"*":
            count = int(rest)
            return None if count < 0 else [self._read() for _ in range(count)]
        raise RedisError(f"unexpected reply {line!r}")


def wait_until(predicate, timeout: float, interval: float = 0.02) -> bool:
    """Polls until `predicate()` is true; False if `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def counter_worker(
    url: str, port: int, lock_name: str, counter_key: str, rounds: int, fair: bool = False
) -> None:
    """Increments a Redis counter non-atomically (GET, pause, SET) under the lock (the fair
    lock when `fair`)."""
    import polylock

    with polylock.Client(url) as client, Resp(port) as redis:
        lock = client.fair_lock(lock_name) if fair else client.lock(lock_name)
        for _ in range(rounds):
            with lock:
                value = int(redis("GET", counter_key) or 0)
                time.sleep(0.002)  # widens the race window a missing lock would expose
                redis("SET", counter_key, value + 1)


def hash_count(redis: Resp, name: str, owner: str) -> Optional[int]:
    value = redis("HGET", name, owner)
    return None if value is None else int(value)  # type: ignore[arg-type]
