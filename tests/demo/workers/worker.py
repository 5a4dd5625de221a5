"""Python worker of `polylock demo` (same protocol as the Rust and Node workers).

Usage: worker.py URL LOCK STOCK_KEY MODE THINK_MS [EXTRA]
  MODE lock, fair or none: the ticket sale (below).
  Other MODEs: the other scenarios (STOCK_KEY is then the scenarios' key PREFIX and EXTRA a JSON
  object of parameters), as described at the top of tests/demo/src/worker/scenarios.rs:
  cache-rebuild(-unlocked), read-write(-unlocked), segmented / global, fencing / fencing-off.

Prints {"event":"ready"} once connected, waits for a `go` line on stdin, then prints
{"event":"sale","wait_ms":W} per ticket and {"event":"done","sold":N} at the end. A purchase
reads the stock, sleeps THINK_MS ("payment") and writes stock-1: not atomic, so only the lock
keeps the count exact. The stock is read and written with a tiny RESP client, so the demo needs
no Redis library besides polylock.
"""

from __future__ import annotations

import json
import random
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


def ready_and_wait_for_go() -> None:
    emit({"event": "ready"})
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("worker.py: no `go` from the demo parent")


def ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


def get_int(redis: Resp, key: str) -> int:
    value = redis.call("GET", key)
    return int(value) if value is not None else 0


# How long a worker waits for another worker's sign before it fails (seconds).
SIGN_TIMEOUT = 30.0


def wait_for(redis: Resp, key: str) -> None:
    deadline = time.monotonic() + SIGN_TIMEOUT
    while redis.call("GET", key) is None:
        if time.monotonic() > deadline:
            raise SystemExit(f"worker.py: {key} did not appear within {SIGN_TIMEOUT} s")
        time.sleep(0.005)


def cache_rebuild(client, redis: Resp, name: str, prefix: str, locked: bool, extra: dict) -> dict:
    cache, db, stop = f"{prefix}:cache", f"{prefix}:db", f"{prefix}:stop"
    database = extra.get("db_ms", 50) / 1000.0
    lock = client.lock(name) if locked else None
    ready_and_wait_for_go()
    reads = 0
    while redis.call("GET", stop) is None:
        if redis.call("GET", cache) is not None:
            reads += 1
            time.sleep(0.001)
            continue
        # A miss: one worker rebuilds, the others wait on the lock and then read the cache.
        started = time.perf_counter()
        if lock is not None:
            lock.acquire()
        waited = ms(time.perf_counter() - started)
        try:
            rebuilt = None
            if redis.call("GET", cache) is None:
                rebuilt = (redis.call("GET", db) or b"").decode()
                time.sleep(database)
                redis.call("SET", cache, rebuilt)
        finally:
            if lock is not None:
                lock.release()
        if rebuilt is not None:
            emit({"event": "rebuild", "value": rebuilt, "wait_ms": waited})
        else:
            reads += 1
            emit({"event": "served", "wait_ms": waited})
    return {"event": "done", "reads": reads}


def read_write(client, redis: Resp, name: str, prefix: str, locked: bool, extra: dict, think: float) -> dict:
    cache, db = f"{prefix}:cache", f"{prefix}:db"
    budget, readers = f"{prefix}:budget", f"{prefix}:readers"
    write_percent = extra.get("write_percent", 20)
    rw = client.read_write_lock(name) if locked else None
    ready_and_wait_for_go()
    operations = 0
    while redis.call("INCRBY", budget, "-1") >= 0:
        operations += 1
        writing = random.randrange(100) < write_percent
        side = None
        if rw is not None:
            side = rw.write_lock() if writing else rw.read_lock()
        started = time.perf_counter()
        if side is not None:
            side.acquire()
        waited = ms(time.perf_counter() - started)
        try:
            if writing:
                value = str(get_int(redis, db) + 1)
                redis.call("SET", db, value)
                time.sleep(think)
                redis.call("SET", cache, value)
                event = {"event": "write", "wait_ms": waited}
            else:
                inside = redis.call("INCRBY", readers, "1")
                cached = redis.call("GET", cache)
                time.sleep(think)
                stored = redis.call("GET", db)
                redis.call("INCRBY", readers, "-1")
                event = {"event": "read", "wait_ms": waited, "inside": inside, "agree": cached == stored}
        finally:
            if side is not None:
                side.release()
        emit(event)
        time.sleep(think)  # gives the other workers a turn
    return {"event": "done", "operations": operations}


def segmented(client, redis: Resp, name: str, prefix: str, global_lock: bool, extra: dict, think: float) -> dict:
    segments = max(int(extra.get("segments", 4)), 1)
    if global_lock:
        locks = [client.lock(name)]
    else:
        locks = [client.lock(f"{name}:{segment}") for segment in range(segments)]
    ready_and_wait_for_go()
    left = list(range(segments))
    sold = 0
    while left:
        at = random.randrange(len(left))
        segment = left[at]
        lock = locks[min(segment, len(locks) - 1)]
        key = f"{prefix}:{segment}"
        started = time.perf_counter()
        lock.acquire()
        waited = ms(time.perf_counter() - started)
        try:
            stock = get_int(redis, key)
            if stock > 0:
                time.sleep(think)
                redis.call("SET", key, str(stock - 1))
        finally:
            lock.release()
        if stock > 0:
            sold += 1
            emit({"event": "sale", "wait_ms": waited, "segment": segment})
        else:
            left[at] = left[-1]
            left.pop()
    return {"event": "done", "sold": sold}


def write_value(client, redis: Resp, fenced: bool, key: str, who: str, token) -> bool:
    """Writes KEY = WHO with fenced_set and the token (False when refused), or a plain SET."""
    if not fenced:
        redis.call("SET", key, who)
        return True
    if token is None:
        raise SystemExit("worker.py: the fenced lock gave no token")
    try:
        client.fenced_set(key, who, token)
        return True
    except polylock.StaleTokenError:
        return False


def fencing(client, redis: Resp, name: str, prefix: str, fenced: bool, extra: dict) -> dict:
    role = extra.get("role")
    lease = extra.get("lease_ms", 200) / 1000.0
    lock = client.fenced_lock(name) if fenced else client.lock(name)
    value_key = f"{prefix}:value"
    ready_and_wait_for_go()
    if role == "slow":
        if not lock.acquire(timeout=SIGN_TIMEOUT, lease=lease):
            raise SystemExit("worker.py: the slow worker never got the lock")
        token = lock.token if fenced else None
        redis.call("SET", f"{prefix}:slow-holds", "1")
        emit({"event": "acquired", "role": "slow", "token": token})
        # A pause (a GC, a stalled VM) longer than the lease: the lock expires meanwhile.
        time.sleep(lease * 3)
        wait_for(redis, f"{prefix}:fast-wrote")
        accepted = write_value(client, redis, fenced, value_key, "slow", token)
        emit({"event": "late_write", "token": token, "accepted": accepted})
        try:
            lock.release()  # the hold is gone (its lease ran out): the release says so
        except (polylock.LockLostError, polylock.NotHeldError):
            pass
        return {"event": "done", "role": "slow"}
    if role == "fast":
        wait_for(redis, f"{prefix}:slow-holds")
        started = time.perf_counter()
        if not lock.acquire(timeout=SIGN_TIMEOUT):
            raise SystemExit("worker.py: the fast worker never got the lock")
        waited = ms(time.perf_counter() - started)
        token = lock.token if fenced else None
        try:
            write_value(client, redis, fenced, value_key, "fast", token)
        finally:
            redis.call("SET", f"{prefix}:fast-wrote", "1")
            lock.release()
        emit({"event": "write", "role": "fast", "token": token, "wait_ms": waited})
        return {"event": "done", "role": "fast"}
    raise SystemExit(f"worker.py: unknown fencing role {role!r}")


def scenario(client, redis: Resp, name: str, prefix: str, mode: str, think: float, extra: dict) -> None:
    if mode in ("cache-rebuild", "cache-rebuild-unlocked"):
        done = cache_rebuild(client, redis, name, prefix, mode == "cache-rebuild", extra)
    elif mode in ("read-write", "read-write-unlocked"):
        done = read_write(client, redis, name, prefix, mode == "read-write", extra, think)
    elif mode in ("segmented", "global"):
        done = segmented(client, redis, name, prefix, mode == "global", extra, think)
    elif mode in ("fencing", "fencing-off"):
        done = fencing(client, redis, name, prefix, mode == "fencing", extra)
    else:
        raise SystemExit(f"worker.py: unknown mode {mode!r}")
    emit(done)
    client.close()


def main() -> None:
    url, lock_name, stock_key, mode, think_ms = sys.argv[1:6]
    extra = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
    think = int(think_ms) / 1000.0
    client = polylock.Client(url)
    redis = Resp(url)
    if mode == "lock":
        lock = client.lock(lock_name)
    elif mode == "fair":
        lock = client.fair_lock(lock_name)
    elif mode == "none":
        lock = None
    else:
        scenario(client, redis, lock_name, stock_key, mode, think, extra)
        return
    ready_and_wait_for_go()
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
