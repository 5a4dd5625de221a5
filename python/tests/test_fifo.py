"""The FIFO lock (polylock's own layout: a LIST line and a waiter record per owner) against a
real redis-server: arrival order, waiters that give up leave the line at once, a dead waiter is
skipped once its record lapses, reentrancy, exclusion, the decorator's kind and the lost flag."""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import polylock
from polylock._shared import task_holder_id, thread_holder_id
from helpers import RedisConnection, counter_worker, hash_count, wait_until


def line_key(name: str) -> str:
    return f"polylock_fifo_line:{{{name}}}"


def record_key(name: str, owner: str) -> str:
    return f"polylock_fifo_waiter:{{{name}}}:{owner}"


def channel(name: str, owner: str) -> str:
    return f"polylock_fifo_channel:{{{name}}}:{owner}"


def in_line(redis: RedisConnection, name: str) -> list[str]:
    """The owners waiting in the FIFO line, head first."""
    return [entry.decode() for entry in redis("LRANGE", line_key(name), 0, -1)]


def records(redis: RedisConnection, name: str) -> list[bytes]:
    """The waiter records of `name` that live now."""
    return list(redis.scan_iter(match=f"polylock_fifo_waiter:{{{name}}}:*"))


def listeners(redis: RedisConnection, channel_name: str) -> int:
    return int(redis("PUBSUB", "NUMSUB", channel_name)[1])


def assert_nothing_left(redis: RedisConnection, name: str) -> None:
    assert redis("EXISTS", name, line_key(name)) == 0, (redis("HGETALL", name), in_line(redis, name))
    assert records(redis, name) == []


def test_waiting_threads_get_the_lock_in_arrival_order(url, redis, name):
    with polylock.Client(url) as client:
        lock = client.fifo_lock(name)
        assert lock.acquire()
        order: list[int] = []
        inside = {"now": 0, "max": 0}
        errors: list[BaseException] = []
        owners: dict[int, str] = {}

        def wait_my_turn(index: int) -> None:
            try:
                owners[index] = lock.owner
                assert lock.acquire(timeout=60)
                inside["now"] += 1
                inside["max"] = max(inside["max"], inside["now"])
                order.append(index)
                time.sleep(0.01)
                inside["now"] -= 1
                lock.release()
            except BaseException as error:  # reported by the main thread
                errors.append(error)

        threads = []
        for index in range(10):
            thread = threading.Thread(target=wait_my_turn, args=(index,))
            thread.start()
            threads.append(thread)
            # The next waiter starts only once this one has its place in line.
            assert wait_until(lambda: owners.get(index) in in_line(redis, name), 10), in_line(redis, name)
        assert in_line(redis, name) == [owners[index] for index in range(10)]
        # Each waiter has its record, with a TTL no longer than the queue timeout (10 s).
        for owner in owners.values():
            assert 0 < redis("PTTL", record_key(name, owner)) <= 10_000
        lock.release()
        for thread in threads:
            thread.join(timeout=60)
        assert not errors
        assert order == list(range(10))
        assert inside["max"] == 1
        assert_nothing_left(redis, name)
        metrics = client.metrics().lock(name, "fifo_lock")
        assert metrics is not None and metrics.acquired == 11
        # Each release handed the lock to the next waiter directly.
        assert (metrics.handoffs_granted, metrics.handoffs_woken) == (10, 0)


def test_a_waiter_whose_timeout_runs_out_leaves_the_line_at_once(url, redis, name):
    # With a 60 s queue timeout, a waiter left in line would block the next one a minute.
    with polylock.Client(url, fair_queue_timeout=60) as client:
        lock = client.fifo_lock(name)
        assert lock.acquire()
        results: dict[str, object] = {}

        def acquire(role: str, timeout: float) -> None:
            results[f"{role} owner"] = lock.owner
            started = time.monotonic()
            try:
                results[role] = lock.acquire(timeout=timeout)
                results[f"{role} at"] = time.monotonic()
                results[f"{role} waited"] = time.monotonic() - started
                if results[role]:
                    lock.release()
            except BaseException as error:
                results[role] = error

        impatient = threading.Thread(target=acquire, args=("impatient", 2.0))
        impatient.start()
        assert wait_until(lambda: results.get("impatient owner") in in_line(redis, name), 10)
        impatient_owner = str(results["impatient owner"])
        assert redis("EXISTS", record_key(name, impatient_owner)) == 1
        patient = threading.Thread(target=acquire, args=("patient", 50.0))
        patient.start()
        assert wait_until(lambda: results.get("patient owner") in in_line(redis, name), 10)
        patient_owner = str(results["patient owner"])
        assert in_line(redis, name) == [impatient_owner, patient_owner]

        impatient.join(timeout=30)
        assert results["impatient"] is False
        assert results["impatient waited"] >= 2.0
        # Gone from the line, and its record with it, as soon as its acquire returned.
        assert in_line(redis, name) == [patient_owner]
        assert redis("EXISTS", record_key(name, impatient_owner)) == 0

        released = time.monotonic()
        lock.release()
        patient.join(timeout=60)
        assert results["patient"] is True
        waited = results["patient at"] - released  # type: ignore[operator]
        assert waited < 20, f"the patient waiter got the lock {waited:.1f} s after the release"
        assert_nothing_left(redis, name)


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


def test_fifo_lock_reentrancy_matches_the_redis_hash_count(url, redis, name):
    with polylock.Client(url) as client:
        lock = client.fifo_lock(name)
        owner = f"{client.id}:{thread_holder_id()}"
        assert lock.owner == owner
        assert lock.acquire()
        assert lock.acquire(blocking=False)
        with lock:
            assert lock.hold_count() == 3
            assert hash_count(redis, name, owner) == 3
        assert hash_count(redis, name, owner) == 2

        seen: dict[str, object] = {}

        def other_thread() -> None:
            seen["held"] = lock.owned()
            seen["try"] = lock.acquire(blocking=False)

        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(timeout=30)
        assert seen == {"held": False, "try": False}

        lock.release()
        assert hash_count(redis, name, owner) == 1 and lock.locked()
        lock.release()
        assert_nothing_left(redis, name)
        assert not lock.locked()
        with pytest.raises(polylock.NotHeldError):
            lock.release()


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


def test_a_cancelled_task_leaves_the_line_at_once(url, redis, name):
    async def main() -> None:
        async with polylock.AsyncClient(url, fair_queue_timeout=60) as client:
            lock = client.fifo_lock(name)
            assert await lock.acquire()

            async def is_in_line(owner: str) -> bool:
                return await asyncio.to_thread(
                    wait_until, lambda: owner in in_line(redis, name), 10
                )

            cancelled = asyncio.create_task(lock.acquire())
            cancelled_owner = f"{client.id}:{task_holder_id(cancelled)}"
            assert await is_in_line(cancelled_owner)

            async def acquire_and_release() -> float:
                assert await lock.acquire(timeout=50)
                acquired = time.monotonic()
                await lock.release()
                return acquired

            patient = asyncio.create_task(acquire_and_release())
            patient_owner = f"{client.id}:{task_holder_id(patient)}"
            assert await is_in_line(patient_owner)
            assert in_line(redis, name) == [cancelled_owner, patient_owner]

            cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            assert await asyncio.to_thread(
                wait_until, lambda: in_line(redis, name) == [patient_owner], 5
            ), in_line(redis, name)
            assert redis("EXISTS", record_key(name, cancelled_owner)) == 0

            released = time.monotonic()
            await lock.release()
            acquired = await asyncio.wait_for(patient, timeout=60)
            waited = acquired - released
            assert waited < 20, f"the patient waiter got the lock {waited:.1f} s after the release"
            assert_nothing_left(redis, name)

    asyncio.run(asyncio.wait_for(main(), timeout=120))


def test_async_fifo_lock_reentrancy(url, redis, name):
    async def main() -> None:
        async with polylock.AsyncClient(url) as client:
            lock = client.fifo_lock(name)
            owner = f"{client.id}:{task_holder_id(asyncio.current_task())}"
            async with lock:
                assert await lock.acquire()
                assert hash_count(redis, name, owner) == 2
                assert await asyncio.create_task(lock.acquire(blocking=False)) is False
                await lock.release()
                assert hash_count(redis, name, owner) == 1
            assert_nothing_left(redis, name)
            metrics = client.metrics().lock(name, "fifo_lock")
            assert metrics is not None and metrics.acquired == 2

    asyncio.run(asyncio.wait_for(main(), timeout=60))


def test_spawned_processes_exclude_each_other_with_the_fifo_lock(redis_server, name):
    context = multiprocessing.get_context("spawn")
    counter_key = f"{name}:counter"
    workers, rounds = 3, 15
    processes = [
        context.Process(
            target=counter_worker,
            args=(redis_server.url, redis_server.port, name, counter_key, rounds),
            kwargs={"fifo": True},
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
        assert_nothing_left(redis, name)


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


def test_fifo_lock_is_lost_when_its_key_is_deleted(url, redis, name):
    with polylock.Client(url, watchdog_timeout=1.5) as client:
        lock = client.fifo_lock(name)
        called = threading.Event()
        received: list[object] = []
        lock.on_lost(lambda error: (received.append(error), called.set()))
        assert lock.acquire()
        assert not lock.lost
        assert redis("DEL", name) == 1
        assert called.wait(timeout=10)
        assert lock.lost and not lock.owned()
        assert isinstance(received[0], polylock.LockLostError)
        with pytest.raises(polylock.LockLostError):
            lock.release()
        # The name is free again, and a new acquisition clears the flag.
        assert lock.acquire(timeout=5)
        assert not lock.lost
        lock.release()


def test_fifo_lock_bad_names(url):
    with polylock.Client(url) as client:
        with pytest.raises(polylock.InvalidArgumentError, match="empty"):
            client.fifo_lock("")
        with pytest.raises(polylock.InvalidArgumentError):
            client.fifo_lock("x" * 5000)
        with pytest.raises(polylock.InvalidArgumentError, match="lease"):
            client.fifo_lock("n", lease=0)
