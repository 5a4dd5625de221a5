"""Across processes and languages: spawned workers, Ctrl-C, fork, and the Rust peer."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import polylock
from helpers import RedisConnection, counter_worker, wait_for_child, wait_until


def test_spawned_processes_exclude_each_other(redis_server, name):
    context = multiprocessing.get_context("spawn")
    counter_key = f"{name}:counter"
    workers, rounds = 3, 15
    processes = [
        context.Process(
            target=counter_worker,
            args=(redis_server.url, redis_server.port, name, counter_key, rounds),
        )
        for _ in range(workers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [process.exitcode for process in processes] == [0] * workers
    with RedisConnection(redis_server.port) as redis:
        assert int(redis("GET", counter_key)) == workers * rounds
        assert redis("EXISTS", name) == 0


CTRL_C_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    import polylock

    # Python's own Ctrl-C handler, as in a terminal: one started with SIGINT ignored (a
    # background job of a shell without job control) would otherwise never raise.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    url, name = sys.argv[1], sys.argv[2]
    holder_client = polylock.Client(url)
    holder = holder_client.lock(name)
    assert holder.acquire(lease=30)
    waiter = polylock.Client(url).lock(name)

    sent = []
    def interrupt():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)
    threading.Timer(0.5, interrupt).start()
    try:
        waiter.acquire()  # no bound: only Ctrl-C ends it
        print("acquired", flush=True)
    except KeyboardInterrupt:
        print(f"interrupted {time.monotonic() - sent[0]:.3f}", flush=True)
    print(f"waiter holds {waiter.hold_count()} {waiter.owned()}", flush=True)
    holder.release()
    time.sleep(0.5)  # a waiter the interrupt left behind would take the lock now
    print(f"locked after release {waiter.locked()}", flush=True)
    """
)


def test_ctrl_c_interrupts_a_blocking_acquire(url, redis, name):
    result = subprocess.run(
        [sys.executable, "-c", CTRL_C_SCRIPT, url, name],
        capture_output=True, text=True, timeout=60,
    )
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stderr
    assert lines[0].startswith("interrupted "), result.stdout + result.stderr
    assert float(lines[0].split()[1]) < 2.0  # slices of 0.1 s; an unbounded wait never ends
    assert lines[1] == "waiter holds 0 False"
    assert lines[2] == "locked after release False"
    assert redis("EXISTS", name) == 0


@contextlib.contextmanager
def pythons_ctrl_c_handler():
    """Python's own SIGINT handler, as in a terminal, for the duration: interrupt_main does
    nothing while SIGINT is ignored, as in pytest started as a background job of a shell
    without job control."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_in_the_main_thread_of_pytest_too(url, redis, name):
    """Same, in this process: the interrupt comes from a timer via _thread.interrupt_main."""
    import _thread

    with pythons_ctrl_c_handler(), polylock.Client(url) as client:
        holder_ready = threading.Event()
        release_holder = threading.Event()

        def hold() -> None:
            lock = client.lock(name)
            lock.acquire()
            holder_ready.set()
            release_holder.wait(30)
            lock.release()

        holder_thread = threading.Thread(target=hold)
        holder_thread.start()
        assert holder_ready.wait(10)
        waiter = client.lock(name)
        timer = threading.Timer(0.3, _thread.interrupt_main)
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            waiter.acquire(timeout=30)
        assert waiter.hold_count() == 0
        release_holder.set()
        holder_thread.join(10)
        time.sleep(0.3)
        assert redis("EXISTS", name) == 0


FORK_CHILD_EXIT_OK = 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_fork_child_gets_a_clear_error_and_can_start_afresh(url, redis, name):
    client = polylock.Client(url)
    parent_lock = client.lock(name)
    assert parent_lock.acquire()  # the parent's runtime has threads and a held lock now
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report through the pipe, never return into pytest
        code = 1
        try:
            messages = []
            try:
                client.lock(f"{name}:child").acquire(timeout=1)
                messages.append("inherited client acquired")
            except polylock.ConnectionError as error:
                messages.append(f"inherited client: {error}")
            with polylock.Client(url) as fresh:
                lock = fresh.lock(f"{name}:child")
                messages.append(f"fresh acquire {lock.acquire(timeout=5)}")
                lock.release()
                messages.append(f"parent's lock busy {not fresh.lock(name).acquire(blocking=False)}")

            import asyncio

            async def use_async() -> bool:
                async with await polylock.AsyncClient.connect(url) as aclient:
                    alock = aclient.lock(f"{name}:child-async")
                    acquired = await alock.acquire(timeout=5)
                    await alock.release()
                    return acquired

            messages.append(f"async acquire {asyncio.run(use_async())}")
            os.write(write_end, "\n".join(messages).encode())
            code = FORK_CHILD_EXIT_OK
        finally:
            os._exit(code)
    os.close(write_end)
    status = wait_for_child(pid)
    with os.fdopen(read_end) as pipe:
        report = pipe.read().splitlines()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == FORK_CHILD_EXIT_OK, report
    assert "before a fork" in report[0], report
    assert report[1:] == ["fresh acquire True", "parent's lock busy True", "async acquire True"]
    # The parent's client is unaffected.
    assert parent_lock.owned()
    parent_lock.release()
    assert redis("EXISTS", name) == 0
    client.close()


FORKED_WORKERS = 6
FORKED_LEASE = 10.0  # the children's watchdog lease: a stall that waits one out is obvious
FORKED_CONTENTION = 3.0  # seconds each child keeps taking the lock
FORKED_ROUNDS = 2000  # and at most this many times


def forked_contender(url: str, name: str, results: "multiprocessing.Queue[object]") -> None:
    """Takes the lock `name` with 1 ms holds until FORKED_CONTENTION passes; reports its
    client's id, how many rounds it made and its longest wait (a timeout counts as one lease)."""
    try:
        with polylock.Client(url, watchdog_timeout=FORKED_LEASE) as client:
            lock = client.lock(name)
            longest, rounds = 0.0, 0
            deadline = time.monotonic() + FORKED_CONTENTION
            while time.monotonic() < deadline and rounds < FORKED_ROUNDS:
                started = time.monotonic()
                acquired = lock.acquire(timeout=FORKED_LEASE)
                longest = max(longest, time.monotonic() - started)
                if not acquired:
                    break
                time.sleep(0.001)
                lock.release()
                rounds += 1
            results.put((client.id, rounds, longest))
    except BaseException as error:  # reported, so the parent fails with the reason
        results.put(("error", 0, repr(error)))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_forked_workers_after_the_parent_used_polylock_hand_the_lock_on_promptly(
    url, redis, name
):
    """gunicorn --preload, Celery prefork, multiprocessing's 'fork': the parent took a lock
    before forking, so each child starts from a copy of its memory. The children's own clients
    must still make ids no other child makes: two waiters under one request id take each
    other's grants, and the lock then passes on only when an unrenewed lease runs out."""
    with polylock.Client(url) as parent_client:
        parent_lock = parent_client.lock(f"{name}:parent")
        assert parent_lock.acquire(timeout=5)
        parent_lock.release()
        context = multiprocessing.get_context("fork")
        results = context.Queue()
        children = [
            context.Process(target=forked_contender, args=(url, name, results))
            for _ in range(FORKED_WORKERS)
        ]
        for child in children:
            child.start()
        # Meanwhile: the requests the waiters are listed under, each owner's its own.
        grants_key = f"polylock_lock_grants:{{{name}}}"  # core/src/foundation/keys.rs lock_grants
        shared_requests: list[dict[bytes, bytes]] = []
        reports = []
        deadline = time.monotonic() + FORKED_CONTENTION + 3 * FORKED_LEASE
        while len(reports) < FORKED_WORKERS and time.monotonic() < deadline:
            grants = redis("HGETALL", grants_key)
            # An entry is `<request>:<look>:<lease ms>` (docs/PROTOCOL.md): compare requests.
            requests = {entry.split(b":")[0] for entry in grants.values()}
            if len(requests) < len(grants):
                shared_requests.append(grants)
            with contextlib.suppress(Exception):
                reports.append(results.get(timeout=0.02))
        for child in children:
            child.join(timeout=max(1.0, deadline - time.monotonic()))
            if child.is_alive():
                child.kill()
        assert [child.exitcode for child in children] == [0] * FORKED_WORKERS, reports
    assert len(reports) == FORKED_WORKERS, reports
    assert not [report for report in reports if report[0] == "error"], reports
    client_ids = [report[0] for report in reports]
    assert len(set(client_ids)) == FORKED_WORKERS, client_ids
    assert parent_client.id not in client_ids
    assert shared_requests == [], shared_requests[:3]
    assert all(rounds > 0 for _, rounds, _ in reports), reports
    # Each wait is a few holds of 1 ms; the stall waits out a lease (and a timeout is one).
    longest = max(wait for _, _, wait in reports)
    assert longest < FORKED_LEASE / 4, reports
    assert redis("EXISTS", name) == 0


INHERITED_SCRIPT = textwrap.dedent(
    """
    import gc, os, sys, time
    import polylock

    url, name = sys.argv[1], sys.argv[2]
    client = polylock.Client(url)
    held = client.lock(name)
    assert held.acquire()
    kept = client.lock(name + ":kept")  # left to the child's interpreter exit to drop
    assert kept.acquire()
    pid = os.fork()
    if pid == 0:
        for attempt in (held.release, held.force_unlock, kept.release):
            started = time.monotonic()
            try:
                attempt()
                outcome = "done"
            except polylock.ConnectionError as error:
                outcome = "refused" if "before a fork" in str(error) else repr(error)
            print(f"child {attempt.__name__} {outcome} {time.monotonic() - started:.3f}", flush=True)
        started = time.monotonic()
        del held
        gc.collect()
        print(f"child dropped {time.monotonic() - started:.3f}", flush=True)
        sys.exit(0)  # a normal exit: the interpreter drops `client` and `kept`
    _, status = os.waitpid(pid, 0)
    time.sleep(0.5)  # a release the child sent anyway would have landed by now
    print(f"parent child-exit {os.waitstatus_to_exitcode(status)}", flush=True)
    print(f"parent locked {held.locked()} {kept.locked()}", flush=True)
    held.release()
    kept.release()
    print(f"parent released {held.locked()} {kept.locked()}", flush=True)
    client.close()
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_a_forked_child_leaves_its_parents_locks_alone(url, redis, name):
    """A child forked while its parent holds locks (gunicorn --preload with a module-level
    client) cannot release them, force-unlock them or have them released when it drops the
    inherited objects or exits: they are the parent's, and its watchdog still renews them."""
    result = subprocess.run(
        [sys.executable, "-c", INHERITED_SCRIPT, url, name],
        capture_output=True, text=True, timeout=60,
    )
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stdout + result.stderr
    child = [line.split() for line in lines if line.startswith("child ")]
    assert [words[1:3] for words in child[:3]] == [
        ["release", "refused"], ["force_unlock", "refused"], ["release", "refused"]
    ], result.stdout + result.stderr
    # Refused at once, not after a timeout against connections nobody serves here.
    assert all(float(words[3]) < 1.0 for words in child[:3]), result.stdout
    assert child[3][:2] == ["child", "dropped"] and float(child[3][2]) < 1.0, result.stdout
    assert "parent child-exit 0" in lines, result.stdout + result.stderr
    assert "parent locked True True" in lines, result.stdout + result.stderr
    assert "parent released False False" in lines, result.stdout + result.stderr
    assert redis("EXISTS", name, f"{name}:kept") == 0
    # Nor does the child claim to release them (the core's warnings reach stderr).
    assert "releasing in the background" not in result.stderr, result.stderr


class Peer:
    """The Rust example holder (core/examples/peer.rs), driven line by line."""

    def __init__(self, binary: Path, url: str) -> None:
        self.process = subprocess.Popen(
            [str(binary), url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        ready = self._line()
        assert ready.startswith("ready "), ready

    def _line(self) -> str:
        assert self.process.stdout is not None
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.process.stdout.readline()))
        reader.start()
        reader.join(30)
        if not result:
            self.process.kill()
            raise AssertionError("peer did not answer within 30 s")
        return result[0].strip()

    def __call__(self, command: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self._line()

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.write("quit\n")
            self.process.stdin.close()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def test_python_and_rust_holders_exclude_each_other(peer_binary, url, redis, name):
    peer = Peer(peer_binary, url)
    try:
        with polylock.Client(url) as client:
            lock = client.lock(name)
            # Python holds: Rust cannot take it, then can once Python releases.
            assert lock.acquire()
            assert peer(f"acquire {name} 0 -") == "ok false"
            assert peer(f"acquire {name} 200 -") == "ok false"
            lock.release()
            assert peer(f"acquire {name} 2000 -") == "ok true"
            # Rust holds: Python cannot take it, then is woken by Rust's release.
            assert lock.acquire(blocking=False) is False
            assert lock.acquire(timeout=0.2) is False
            result: list[object] = []
            release_now = threading.Event()

            def wait_then_hold() -> None:
                result.append(lock.acquire(timeout=20))
                release_now.wait(30)
                if lock.owned():
                    lock.release()

            waiter = threading.Thread(target=wait_then_hold)
            waiter.start()
            time.sleep(0.3)
            assert peer(f"release {name}") == "ok"
            assert wait_until(lambda: result == [True], timeout=20), result
            assert peer(f"is_locked {name}") == "ok true"
            assert peer(f"acquire {name} 0 -") == "ok false"
            release_now.set()
            waiter.join(30)
            assert peer(f"acquire {name} 2000 -") == "ok true"
            assert lock.locked()
            assert peer(f"release {name}") == "ok"
            assert redis("EXISTS", name) == 0
    finally:
        peer.close()
