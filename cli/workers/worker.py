"""Python ticket buyer of `polylock demo` (same protocol as the Rust and Node workers).

Usage: worker.py URL LOCK STOCK_KEY MODE THINK_MS   (MODE: lock, fair or none)

Prints {"event":"ready"} once connected, waits for a `go` line on stdin, then prints
{"event":"sale","wait_ms":W} per ticket and {"event":"done","sold":N} at the end. A purchase
reads the stock, sleeps THINK_MS ("payment") and writes stock-1: not atomic, so only the lock
keeps the count exact. The stock is read and written with a tiny RESP client, so the demo needs
no Redis library besides polylock.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from typing import Optional
from urllib.parse import unquote, urlparse

import polylock


class Resp:
    """Just enough of the Redis protocol for GET and SET."""

    def __init__(self, url: str) -> None:
        parsed = urlparse(url)
        if parsed.scheme != "redis":
            raise SystemExit(f"worker.py: only redis:// URLs are supported here, got {parsed.scheme}://")
        self._sock = socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 6379), timeout=10)
        self._file = self._sock.makefile("rb")
        if parsed.password is not None:
            user = unquote(parsed.username) if parsed.username else "default"
            self.call("AUTH", user, unquote(parsed.password))
        database = parsed.path.strip("/")
        if database:
            self.call("SELECT", database)

    def call(self, *args: str) -> Optional[bytes | int]:
        request = [f"*{len(args)}\r\n".encode()]
        for arg in args:
            data = arg.encode()
            request.append(b"$%d\r\n%s\r\n" % (len(data), data))
        self._sock.sendall(b"".join(request))
        line = self._file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest
        if kind == b":":
            return int(rest)
        if kind == b"$":
            length = int(rest)
            if length < 0:
                return None
            return self._file.read(length + 2)[:-2]
        if kind == b"-":
            raise RuntimeError(f"Redis error: {rest.decode()}")
        raise RuntimeError(f"unexpected Redis reply {line!r}")


def emit(event: dict[str, object]) -> None:
    print(json.dumps(event), flush=True)


def main() -> None:
    url, lock_name, stock_key, mode, think_ms = sys.argv[1:6]
    think = int(think_ms) / 1000.0
    client = polylock.Client(url)
    redis = Resp(url)
    if mode == "lock":
        lock = client.lock(lock_name)
    elif mode == "fair":
        lock = client.fair_lock(lock_name)
    else:
        lock = None
    emit({"event": "ready"})
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("worker.py: no `go` from the demo parent")
    sold = 0
    while True:
        started = time.perf_counter()
        if lock is not None:
            lock.acquire()
        waited_ms = (time.perf_counter() - started) * 1000.0
        try:
            stock = int(redis.call("GET", stock_key) or 0)
            if stock > 0:
                time.sleep(think)
                redis.call("SET", stock_key, str(stock - 1))
        finally:
            if lock is not None:
                lock.release()
        if stock <= 0:
            break
        sold += 1
        emit({"event": "sale", "wait_ms": round(waited_ms, 3)})
        time.sleep(think)  # the customer leaves the counter
    emit({"event": "done", "sold": sold})
    client.close()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
