"""The Python worker of the history test (see README.md); the same behaviour as the Rust worker
(core/examples/history_worker.rs) and the Node worker (worker.js).

Usage: python/.venv/bin/python tests/history/worker.py <redis-url> <journal-path> <worker-id> [seconds]

The environment variable POLYLOCK_HISTORY_KIND picks the kind of lock: `lock` (the default,
`client.lock`) or `fifo` (`client.fifo_lock`).

Until stdin closes (or `seconds` pass): acquire the lock `history` (watchdog lease 1.5 s,
response timeout 0.5 s, wait bound 10 s), journal `enter`, hold 1-20 ms (one time in 100:
500-1500 ms, so renewals meet the faults too), journal `leave` with the lock's lost flag,
release. Transient errors are journaled and retried; any other acquire error ends the worker
with exit code 3. Each journal line is one os.write() on a file opened with O_APPEND, stamped
with time.monotonic_ns() (CLOCK_MONOTONIC, as in the other workers).
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time

import polylock

LOCK_NAME = "history"
# The kind of lock (set by run.py's --kind): `lock` or `fifo`.
KIND_VARIABLE = "POLYLOCK_HISTORY_KIND"
KINDS = ("lock", "fifo")
WATCHDOG_TIMEOUT = 1.5
RESPONSE_TIMEOUT = 0.5
WAIT_BOUND = 10.0
TRANSIENT = (polylock.ConnectionError, polylock.TimeoutError)


def hold_seconds() -> float:
    """1-20 ms; one section in 100 holds 500-1500 ms, across watchdog renewals (every 0.5 s)."""
    if random.randrange(100) == 0:
        return random.randint(500, 1500) / 1000
    return random.randint(1, 20) / 1000


def kind(error: BaseException) -> str:
    """The core's error kind: LockLostError -> LockLost."""
    name = type(error).__name__
    return name[: -len("Error")] if name.endswith("Error") else name


class Journal:
    def __init__(self, path: str, worker: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.worker = worker

    def write(self, event: str, seq: int, *rest: str) -> None:
        line = " ".join([event, self.worker, str(seq), str(time.monotonic_ns()), *rest]) + "\n"
        data = line.encode()
        if os.write(self.fd, data) != len(data):
            raise OSError("short write to the journal")


def main() -> int:
    if len(sys.argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    url, journal_path, worker = sys.argv[1:4]
    lock_kind = os.environ.get(KIND_VARIABLE, "lock")
    if lock_kind not in KINDS:
        print(f"{worker}: {KIND_VARIABLE} must be one of {KINDS}, not {lock_kind!r}",
              file=sys.stderr)
        return 2
    deadline = time.monotonic() + float(sys.argv[4]) if len(sys.argv) == 5 else None
    journal = Journal(journal_path, worker)

    closed = threading.Event()

    def watch_stdin() -> None:
        while os.read(0, 256):
            pass
        closed.set()

    threading.Thread(target=watch_stdin, daemon=True).start()

    def stop() -> bool:
        return closed.is_set() or (deadline is not None and time.monotonic() >= deadline)

    while True:
        if stop():
            return 0
        try:
            client = polylock.Client(
                url, watchdog_timeout=WATCHDOG_TIMEOUT, response_timeout=RESPONSE_TIMEOUT
            )
            break
        except TRANSIENT as error:
            print(f"{worker}: connect failed, retrying: {error}", file=sys.stderr)
            time.sleep(0.1)

    lock = client.fifo_lock(LOCK_NAME) if lock_kind == "fifo" else client.lock(LOCK_NAME)
    print(f"{worker}: kind {lock_kind}", file=sys.stderr)
    seq = 0
    while not stop():
        seq += 1
        called = time.monotonic_ns()
        try:
            if not lock.acquire(timeout=WAIT_BOUND):
                journal.write("acquire-timeout", seq)
                continue
        except TRANSIENT as error:
            journal.write("acquire-error", seq, kind(error))
            print(f"{worker}: acquire failed: {error}", file=sys.stderr)
            time.sleep(0.05)
            continue
        except polylock.LockError as error:
            journal.write("acquire-error", seq, kind(error))
            print(f"{worker}: acquire failed: {error}", file=sys.stderr)
            return 3
        journal.write("enter", seq, str(called))
        time.sleep(hold_seconds())
        journal.write("leave", seq, f"lost={'true' if lock.lost else 'false'}")
        try:
            lock.release()
        except polylock.LockError as error:
            journal.write("release-error", seq, kind(error))
            print(f"{worker}: release failed: {error}", file=sys.stderr)
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
