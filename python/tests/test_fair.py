"""The fair lock (Redisson RFairLock layout) against a real redis-server: arrival order,
waiters that give up leave the queue at once, reentrancy, exclusion and the lost flag."""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import threading
import time

import pytest

import polylock
from polylock._shared import task_holder_id, thread_holder_id
from helpers import RedisConnection, counter_worker, hash_count, wait_until


def queue_key(name: str) -> str:
    return f"redisson_lock_queue:{{{name}}}"


def timeouts_key(name: str) -> str:
    return f"redisson_lock_timeout:{{{name}}}"


def queued(redis: RedisConnection, name: str) -> list[str]:
    """The owners waiting in the fair queue, head first."""
    return [entry.decode() for entry in redis("LRANGE", queue_key(name), 0, -1)]


def test_waiting_threads_get_the_lock_in_arrival_order(url, redis, name):
    with polylock.Client(url) as client:
        lock = client.fair_lock(name)
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
            # The next waiter starts only once this one has its place in the queue.
            assert wait_until(lambda: owners.get(index) in queued(redis, name), 10), queued(redis, name)
        assert queued(redis, name) == [owners[index] for index in range(10)]
        lock.release()
        for thread in threads:
            thread.join(timeout=60)
        assert not errors
        assert order == list(range(10))
        assert inside["max"] == 1
        assert redis("EXISTS", name, queue_key(name), timeouts_key(name)) == 0


def test_a_waiter_whose_timeout_runs_out_leaves_the_queue_at_once(url, redis, name):
    # With a 60 s queue timeout, a waiter left in the queue would block the next one a minute.
    with polylock.Client(url, fair_queue_timeout=60) as client:
        lock = client.fair_lock(name)
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
        assert wait_until(lambda: results.get("impatient owner") in queued(redis, name), 10)
        impatient_owner = results["impatient owner"]
        patient = threading.Thread(target=acquire, args=("patient", 50.0))
        patient.start()
        assert wait_until(lambda: results.get("patient owner") in queued(redis, name), 10)
        patient_owner = results["patient owner"]
        assert queued(redis, name) == [impatient_owner, patient_owner]

        impatient.join(timeout=30)
        assert results["impatient"] is False
        assert results["impatient waited"] >= 2.0
        # Gone from the queue and its deadlines as soon as its acquire returned.
        assert queued(redis, name) == [patient_owner]
        assert redis("ZSCORE", timeouts_key(name), impatient_owner) is None

        released = time.monotonic()
        lock.release()
        patient.join(timeout=60)
        assert results["patient"] is True
        waited = results["patient at"] - released  # type: ignore[operator]
        assert waited < 20, f"the patient waiter got the lock {waited:.1f} s after the release"
        assert redis("EXISTS", name, queue_key(name), timeouts_key(name)) == 0


def test_a_cancelled_task_leaves_the_queue_at_once(url, redis, name):
    async def main() -> None:
        async with polylock.AsyncClient(url, fair_queue_timeout=60) as client:
            lock = client.fair_lock(name)
            assert await lock.acquire()

            async def in_queue(owner: str) -> bool:
                return await asyncio.to_thread(
                    wait_until, lambda: owner in queued(redis, name), 10
                )

            cancelled = asyncio.create_task(lock.acquire())
            cancelled_owner = f"{client.id}:{task_holder_id(cancelled)}"
            assert await in_queue(cancelled_owner)

            async def acquire_and_release() -> float:
                assert await lock.acquire(timeout=50)
                acquired = time.monotonic()
                await lock.release()
                return acquired

            patient = asyncio.create_task(acquire_and_release())
            patient_owner = f"{client.id}:{task_holder_id(patient)}"
            assert await in_queue(patient_owner)
            assert queued(redis, name) == [cancelled_owner, patient_owner]

            cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            assert await asyncio.to_thread(
                wait_until, lambda: queued(redis, name) == [patient_owner], 5
            ), queued(redis, name)
            assert redis("ZSCORE", timeouts_key(name), cancelled_owner) is None

            released = time.monotonic()
            await lock.release()
            acquired = await asyncio.wait_for(patient, timeout=60)
            waited = acquired - released
            assert waited < 20, f"the patient waiter got the lock {waited:.1f} s after the release"
            assert redis("EXISTS", name, queue_key(name), timeouts_key(name)) == 0

    asyncio.run(asyncio.wait_for(main(), timeout=120))


def test_fair_lock_reentrancy_matches_the_redis_hash_count(url, redis, name):
    with polylock.Client(url) as client:
        lock = client.fair_lock(name)
        owner = f"{client.id}:{thread_holder_id()}"
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
        assert redis("EXISTS", name, queue_key(name), timeouts_key(name)) == 0
        assert not lock.locked()
        with pytest.raises(polylock.NotHeldError):
            lock.release()


def test_async_fair_lock_reentrancy(url, redis, name):
    async def main() -> None:
        async with polylock.AsyncClient(url) as client:
            lock = client.fair_lock(name)
            owner = f"{client.id}:{task_holder_id(asyncio.current_task())}"
            async with lock:
                assert await lock.acquire()
                assert hash_count(redis, name, owner) == 2
                assert await asyncio.create_task(lock.acquire(blocking=False)) is False
                await lock.release()
                assert hash_count(redis, name, owner) == 1
            assert redis("EXISTS", name) == 0

    asyncio.run(asyncio.wait_for(main(), timeout=60))


def test_spawned_processes_exclude_each_other_with_the_fair_lock(redis_server, name):
    context = multiprocessing.get_context("spawn")
    counter_key = f"{name}:counter"
    workers, rounds = 3, 15
    processes = [
        context.Process(
            target=counter_worker,
            args=(redis_server.url, redis_server.port, name, counter_key, rounds),
            kwargs={"fair": True},
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
        assert redis("EXISTS", name, queue_key(name), timeouts_key(name)) == 0


def test_fair_lock_is_lost_when_its_key_is_deleted(url, redis, name):
    with polylock.Client(url, watchdog_timeout=1.5) as client:
        lock = client.fair_lock(name)
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


def test_fair_lock_bad_names_and_options(url):
    with polylock.Client(url) as client:
        with pytest.raises(polylock.InvalidArgumentError, match="empty"):
            client.fair_lock("")
        with pytest.raises(polylock.InvalidArgumentError):
            client.fair_lock("x" * 5000)
    for bad in (0, -1, float("nan"), float("inf"), 0.001):
        with pytest.raises(polylock.InvalidArgumentError) as raised:
            polylock.Client(url, fair_queue_timeout=bad)
        assert isinstance(raised.value, ValueError)
        assert "fair" in str(raised.value)


def test_cancelling_a_fair_waiter_at_the_moment_of_release_never_strands_a_lock(url, redis, name):
    """As the test of the same name in test_async.py, on the fair lock: some cancellations land
    just as the head waiter is granted the lock, which must be free whenever nobody claims it."""

    async def main() -> None:
        async with polylock.AsyncClient(url) as client:
            lock = client.fair_lock(name)
            rng = random.Random(11)
            for _ in range(100):
                holding = asyncio.Event()

                async def hold() -> None:
                    assert await lock.acquire()
                    holding.set()
                    await asyncio.sleep(0.01)
                    await lock.release()

                holder = asyncio.create_task(hold())
                await holding.wait()
                waiter = asyncio.create_task(lock.acquire())
                await asyncio.sleep(0.01 + rng.uniform(0, 0.004))
                waiter.cancel()
                await holder
                try:
                    if await waiter:
                        # Only the finished waiter task could release it; force it free.
                        assert redis("DEL", name) == 1
                except asyncio.CancelledError:
                    pass
                assert await asyncio.to_thread(
                    wait_until, lambda: redis("EXISTS", name) == 0, 5
                ), f"a cancelled acquire left the lock held: {redis('HGETALL', name)}"
            # Nobody is left waiting either.
            assert redis("EXISTS", queue_key(name), timeouts_key(name)) == 0

    asyncio.run(asyncio.wait_for(main(), timeout=120))
