"""The FIFO lock (polylock's own layout: a LIST line and a waiter record per owner) against a
real redis-server, what only it is tested for here: a waiter that times out or only tries once
leaves nothing behind, a dead waiter is skipped once its record lapses, it excludes a plain lock
of the name, async tasks in arrival order and the decorator's kind. What it shares with the
fair lock (arrival order, waiters that give up leave the line at once, reentrancy, exclusion,
the lost flag, bad names) runs on both kinds in test_queued_locks.py."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import polylock
from polylock._shared import task_holder_id
from helpers import RedisConnection, wait_until
from queued_kinds import assert_fifo_nothing_left as assert_nothing_left
from queued_kinds import in_line, line_key, record_key, records


def channel(name: str, owner: str) -> str:
    return f"polylock_fifo_channel:{{{name}}}:{owner}"


def listeners(redis: RedisConnection, channel_name: str) -> int:
    return int(redis("PUBSUB", "NUMSUB", channel_name)[1])


def test_a_lone_waiter_that_times_out_leaves_nothing_behind(url, redis, name):
    with polylock.Client(url, fair_queue_timeout=60) as client, polylock.Client(url) as other:
        holder = other.fifo_lock(name)
        assert holder.acquire()
        lock = client.fifo_lock(name)
        assert lock.acquire(timeout=0.5) is False
        # Still held by the other client; nobody in line, no record left for 60 s.
        assert redis("EXISTS", name) == 1
        assert redis("EXISTS", line_key(name)) == 0
        assert records(redis, name) == []
        holder.release()
        assert_nothing_left(redis, name)


def test_a_single_try_takes_no_place_in_line(url, redis, name):
    with polylock.Client(url) as client, polylock.Client(url) as other:
        holder = other.fifo_lock(name)
        assert holder.acquire()
        lock = client.fifo_lock(name)
        assert lock.acquire(blocking=False) is False
        assert redis("EXISTS", line_key(name)) == 0
        assert records(redis, name) == []
        holder.release()
        assert lock.acquire(blocking=False) is True
        lock.release()
        assert_nothing_left(redis, name)


WAITER_SCRIPT = textwrap.dedent(
    """
    import sys
    import polylock

    url, name = sys.argv[1:3]
    client = polylock.Client(url, fair_queue_timeout=1)
    lock = client.fifo_lock(name)
    print(lock.owner, flush=True)
    lock.acquire(timeout=120, lease=60)
    print("acquired", flush=True)
    """
)


def test_a_killed_waiter_is_skipped_after_the_queue_timeout(url, redis, name):
    """A waiter whose process died keeps its place only until its record lapses (the queue
    timeout, 1 s here): the next waiter then gets the lock, not after the 60 s lease the dead
    one asked for."""
    with polylock.Client(url) as holder_client, polylock.Client(url, fair_queue_timeout=1) as client:
        holder = holder_client.fifo_lock(name)
        assert holder.acquire(lease=60)
        dead = subprocess.Popen(
            [sys.executable, "-c", WAITER_SCRIPT, url, name],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        alive = threading.Thread()
        try:
            assert dead.stdout is not None
            dead_owner = dead.stdout.readline().strip()
            assert dead_owner, dead.stderr.read() if dead.stderr else ""
            assert wait_until(lambda: dead_owner in in_line(redis, name), 10), in_line(redis, name)
            assert wait_until(lambda: listeners(redis, channel(name, dead_owner)) == 1, 10)

            lock = client.fifo_lock(name)
            result: dict[str, object] = {}

            def wait_behind() -> None:
                result["owner"] = lock.owner
                try:
                    result["acquired"] = lock.acquire(timeout=60)
                    result["at"] = time.monotonic()
                    if result["acquired"]:
                        lock.release()
                except BaseException as error:  # reported by the main thread
                    result["acquired"] = error

            alive = threading.Thread(target=wait_behind)
            alive.start()
            assert wait_until(lambda: result.get("owner") in in_line(redis, name), 10)
            alive_owner = str(result["owner"])
            # Both live waiters keep their places across several queue timeouts: their looks
            # renew their records.
            time.sleep(2.5)
            assert in_line(redis, name) == [dead_owner, alive_owner]
            assert redis("EXISTS", record_key(name, dead_owner), record_key(name, alive_owner)) == 2

            dead.send_signal(signal.SIGKILL)
            assert dead.wait(timeout=10) == -signal.SIGKILL
            # The server saw its connections close (so no grant can reach it); its record may
            # still live for up to the queue timeout.
            assert wait_until(lambda: listeners(redis, channel(name, dead_owner)) == 0, 10)
            released = time.monotonic()
            holder.release()
            alive.join(timeout=90)
            assert not alive.is_alive()
            assert result["acquired"] is True, result
            waited = result["at"] - released  # type: ignore[operator]
            assert waited < 10, f"the next waiter got the lock {waited:.1f} s after the release"
            assert dead_owner not in in_line(redis, name)
            assert redis("EXISTS", record_key(name, dead_owner)) == 0
            assert_nothing_left(redis, name)
        finally:
            if dead.poll() is None:
                dead.kill()
                dead.wait()
            if dead.stdout is not None:
                dead.stdout.close()
            if dead.stderr is not None:
                dead.stderr.close()
            if alive.ident is not None:
                alive.join(timeout=90)


def test_the_fifo_lock_and_a_plain_lock_of_the_name_exclude_each_other(url, redis, name):
    with polylock.Client(url) as client, polylock.Client(url) as other:
        plain = other.lock(name)
        fifo = client.fifo_lock(name)
        assert plain.acquire()
        assert fifo.acquire(blocking=False) is False
        result: dict[str, object] = {}

        def wait_for_it() -> None:
            result["acquired"] = fifo.acquire(timeout=30)
            result["held plain"] = plain.locked()
            fifo.release()

        thread = threading.Thread(target=wait_for_it)
        thread.start()
        assert wait_until(lambda: len(in_line(redis, name)) == 1, 10)
        time.sleep(0.3)
        assert "acquired" not in result  # waits while the plain lock is held
        plain.release()
        thread.join(timeout=60)
        assert result.get("acquired") is True
        assert result["held plain"] is True  # it held the very hash of the name

        assert fifo.acquire()
        assert plain.acquire(blocking=False) is False
        fifo.release()
        assert plain.acquire(blocking=False) is True
        plain.release()
        assert_nothing_left(redis, name)


def test_async_tasks_get_the_fifo_lock_in_arrival_order(url, redis, name):
    async def main() -> None:
        async with await polylock.AsyncClient.connect(url) as client:
            lock = client.fifo_lock(name)
            assert await lock.acquire()
            order: list[int] = []

            async def wait_my_turn(index: int) -> None:
                assert await lock.acquire(timeout=60)
                order.append(index)
                await asyncio.sleep(0.01)
                await lock.release()

            tasks = []
            for index in range(5):
                task = asyncio.create_task(wait_my_turn(index))
                tasks.append(task)
                owner = f"{client.id}:{task_holder_id(task)}"
                assert await asyncio.to_thread(
                    wait_until, lambda: owner in in_line(redis, name), 10
                ), in_line(redis, name)
            await lock.release()
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
            assert order == list(range(5))
            assert_nothing_left(redis, name)

    asyncio.run(asyncio.wait_for(main(), timeout=120))


def test_locked_with_the_fifo_kind_runs_under_the_fifo_lock(url, redis, name):
    with polylock.Client(url) as client:
        calls: list[int] = []

        @client.locked(name, timeout=30, kind="fifo_lock")
        def critical() -> str:
            calls.append(redis("EXISTS", name))  # runs holding the lock
            return "done"

        # Held by a FIFO lock of the name: the decorated call waits in the FIFO line.
        holder = client.fifo_lock(name)
        assert holder.acquire()
        results: list[object] = []
        thread = threading.Thread(target=lambda: results.append(critical()))
        thread.start()
        assert wait_until(lambda: len(in_line(redis, name)) == 1, 10), in_line(redis, name)
        assert results == []
        holder.release()
        thread.join(timeout=60)
        assert results == ["done"]
        assert critical() == "done"
        assert calls == [1, 1]
        assert_nothing_left(redis, name)
        metrics = client.metrics().lock(name, "fifo_lock")
        assert metrics is not None and metrics.acquired == 3


def test_async_locked_with_the_fifo_kind(url, redis, name):
    async def main() -> None:
        async with await polylock.AsyncClient.connect(url) as client:
            holder = client.fifo_lock(name)

            @client.locked(name, timeout=30, kind="fifo_lock")
            async def critical() -> int:
                return int(redis("EXISTS", name))

            assert await holder.acquire()
            call = asyncio.create_task(critical())
            assert await asyncio.to_thread(
                wait_until, lambda: len(in_line(redis, name)) == 1, 10
            ), in_line(redis, name)
            assert not call.done()
            await holder.release()
            assert await asyncio.wait_for(call, timeout=60) == 1
            assert_nothing_left(redis, name)

    asyncio.run(asyncio.wait_for(main(), timeout=60))


def test_a_bad_kind_names_every_kind_including_fifo_lock(url, name):
    expected = "kind must be 'lock', 'fair_lock', 'fifo_lock' or 'fenced_lock', not 'semaphore'"
    with polylock.Client(url) as client:
        with pytest.raises(polylock.InvalidArgumentError) as raised:
            client.locked(name, kind="semaphore")  # type: ignore[arg-type]
        assert str(raised.value) == expected
    with polylock.AsyncClient(url) as aclient:
        with pytest.raises(polylock.InvalidArgumentError) as raised:
            aclient.locked(name, kind="semaphore")  # type: ignore[arg-type]
        assert str(raised.value) == expected
