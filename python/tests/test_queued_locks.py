"""What the fair lock and the FIFO lock both do, against a real redis-server, each test once per
kind (queued_kinds.py): arrival order, waiters that give up leave the queue at once,
reentrancy, exclusion across processes, the lost flag and bad names. What only one kind does
is in test_fair.py and test_fifo.py."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time

import pytest

import polylock
from polylock._shared import task_holder_id, thread_holder_id
from helpers import RedisConnection, counter_worker, hash_count, wait_until
from queued_kinds import FIFO, KINDS, QueuedKind, record_key

each_kind = pytest.mark.parametrize("kind", KINDS, ids=str)


@each_kind
def test_waiting_threads_get_the_lock_in_arrival_order(kind: QueuedKind, url, redis, name):
    with polylock.Client(url) as client:
        lock = kind.lock(client, name)
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
            assert wait_until(
                lambda: owners.get(index) in kind.waiting(redis, name), 10
            ), kind.waiting(redis, name)
        assert kind.waiting(redis, name) == [owners[index] for index in range(10)]
        if kind is FIFO:
            # Each waiter has its record, with a TTL no longer than the queue timeout (10 s).
            for owner in owners.values():
                assert 0 < redis("PTTL", record_key(name, owner)) <= 10_000
        lock.release()
        for thread in threads:
            thread.join(timeout=60)
        assert not errors
        assert order == list(range(10))
        assert inside["max"] == 1
        kind.assert_nothing_left(redis, name)
        metrics = client.metrics().lock(name, kind.method)
        assert metrics is not None and metrics.acquired == 11
        if kind is FIFO:
            # Each release handed the lock to the next waiter directly.
            assert (metrics.handoffs_granted, metrics.handoffs_woken) == (10, 0)


@each_kind
def test_a_waiter_whose_timeout_runs_out_leaves_the_queue_at_once(kind: QueuedKind, url, redis, name):
    # With a 60 s queue timeout, a waiter left in the queue would block the next one a minute.
    with polylock.Client(url, fair_queue_timeout=60) as client:
        lock = kind.lock(client, name)
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
        assert wait_until(lambda: results.get("impatient owner") in kind.waiting(redis, name), 10)
        impatient_owner = str(results["impatient owner"])
        assert kind.has_waiter_entry(redis, name, impatient_owner)
        patient = threading.Thread(target=acquire, args=("patient", 50.0))
        patient.start()
        assert wait_until(lambda: results.get("patient owner") in kind.waiting(redis, name), 10)
        patient_owner = str(results["patient owner"])
        assert kind.waiting(redis, name) == [impatient_owner, patient_owner]

        impatient.join(timeout=30)
        assert results["impatient"] is False
        assert results["impatient waited"] >= 2.0
        # Gone from the queue, and its entry (fair: deadline; FIFO: record) with it, as soon
        # as its acquire returned.
        assert kind.waiting(redis, name) == [patient_owner]
        assert not kind.has_waiter_entry(redis, name, impatient_owner)

        released = time.monotonic()
        lock.release()
        patient.join(timeout=60)
        assert results["patient"] is True
        waited = results["patient at"] - released  # type: ignore[operator]
        assert waited < 20, f"the patient waiter got the lock {waited:.1f} s after the release"
        kind.assert_nothing_left(redis, name)


@each_kind
def test_a_cancelled_task_leaves_the_queue_at_once(kind: QueuedKind, url, redis, name):
    async def main() -> None:
        async with polylock.AsyncClient(url, fair_queue_timeout=60) as client:
            lock = kind.lock(client, name)
            assert await lock.acquire()

            async def in_queue(owner: str) -> bool:
                return await asyncio.to_thread(
                    wait_until, lambda: owner in kind.waiting(redis, name), 10
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
            assert kind.waiting(redis, name) == [cancelled_owner, patient_owner]

            cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            assert await asyncio.to_thread(
                wait_until, lambda: kind.waiting(redis, name) == [patient_owner], 5
            ), kind.waiting(redis, name)
            assert not kind.has_waiter_entry(redis, name, cancelled_owner)

            released = time.monotonic()
            await lock.release()
            acquired = await asyncio.wait_for(patient, timeout=60)
            waited = acquired - released
            assert waited < 20, f"the patient waiter got the lock {waited:.1f} s after the release"
            kind.assert_nothing_left(redis, name)

    asyncio.run(asyncio.wait_for(main(), timeout=120))


@each_kind
def test_reentrancy_matches_the_redis_hash_count(kind: QueuedKind, url, redis, name):
    with polylock.Client(url) as client:
        lock = kind.lock(client, name)
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
        kind.assert_nothing_left(redis, name)
        assert not lock.locked()
        with pytest.raises(polylock.NotHeldError):
            lock.release()


@each_kind
def test_async_reentrancy(kind: QueuedKind, url, redis, name):
    async def main() -> None:
        async with polylock.AsyncClient(url) as client:
            lock = kind.lock(client, name)
            owner = f"{client.id}:{task_holder_id(asyncio.current_task())}"
            async with lock:
                assert await lock.acquire()
                assert hash_count(redis, name, owner) == 2
                assert await asyncio.create_task(lock.acquire(blocking=False)) is False
                await lock.release()
                assert hash_count(redis, name, owner) == 1
            kind.assert_nothing_left(redis, name)
            metrics = client.metrics().lock(name, kind.method)
            assert metrics is not None and metrics.acquired == 2

    asyncio.run(asyncio.wait_for(main(), timeout=60))


@each_kind
def test_spawned_processes_exclude_each_other(kind: QueuedKind, redis_server, name):
    context = multiprocessing.get_context("spawn")
    counter_key = f"{name}:counter"
    workers, rounds = 3, 15
    processes = [
        context.Process(
            target=counter_worker,
            args=(redis_server.url, redis_server.port, name, counter_key, rounds),
            kwargs={"kind": kind.method},
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
        kind.assert_nothing_left(redis, name)


@each_kind
def test_lock_is_lost_when_its_key_is_deleted(kind: QueuedKind, url, redis, name):
    with polylock.Client(url, watchdog_timeout=1.5) as client:
        lock = kind.lock(client, name)
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


@each_kind
def test_bad_names_and_lease(kind: QueuedKind, url):
    with polylock.Client(url) as client:
        with pytest.raises(polylock.InvalidArgumentError, match="empty"):
            kind.lock(client, "")
        with pytest.raises(polylock.InvalidArgumentError):
            kind.lock(client, "x" * 5000)
        with pytest.raises(polylock.InvalidArgumentError, match="lease"):
            kind.lock(client, "n", lease=0)
