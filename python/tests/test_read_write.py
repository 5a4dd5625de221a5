"""The read-write lock (blocking and asyncio) against a real redis-server.
What every binding does alike (results, errors, Redisson's layout) is in the conformance cases
(tests/conformance/behaviour.json, run by test_conformance_behaviour.py); this file keeps
Python's own: threads and tasks as holders, context managers, units, asyncio."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import polylock


@pytest.fixture
def client(url: str):
    with polylock.Client(url) as client:
        yield client


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, timeout=120))


def in_thread(function):
    """Runs `function` in another thread and returns its result (or raises its error)."""
    outcome: list[object] = []
    errors: list[BaseException] = []

    def body() -> None:
        try:
            outcome.append(function())
        except BaseException as error:  # handed to the test's thread
            errors.append(error)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    if errors:
        raise errors[0]
    return outcome[0]


def test_the_handles_are_locks_and_the_same_on_every_call(client, name):
    rw = client.read_write_lock(name)
    assert rw.name == name
    assert isinstance(rw.read_lock(), polylock.Lock)
    assert isinstance(rw.write_lock(), polylock.Lock)
    assert rw.read_lock() is rw.read_lock()
    assert rw.write_lock() is rw.write_lock()


def test_readers_share_and_a_writer_excludes_them(client, url, name):
    rw = client.read_write_lock(name)
    assert rw.read_lock().acquire()
    # Another thread and another client read at the same time.
    assert in_thread(lambda: rw.read_lock().acquire(timeout=5)) is True
    with polylock.Client(url) as other_client:
        other = other_client.read_write_lock(name)
        assert other.read_lock().acquire(timeout=5)
        # ... but a writer waits for every reader.
        assert in_thread(lambda: other.write_lock().acquire(timeout=0.3)) is False
        other.read_lock().release()
    rw.read_lock().release()
    assert rw.read_lock().locked()  # the other thread's read hold is left
    assert in_thread(lambda: rw.write_lock().acquire(timeout=0.3)) is False

    # A writer excludes readers and other writers.
    with polylock.Client(url) as writer_client:
        writer = writer_client.read_write_lock(f"{name}:2")
        assert writer.write_lock().acquire()
        reader = client.read_write_lock(f"{name}:2")
        assert reader.read_lock().acquire(timeout=0.3) is False
        assert reader.write_lock().acquire(timeout=0.3) is False
        assert not reader.read_lock().owned()
        writer.write_lock().release()
        assert reader.read_lock().acquire(timeout=5)
        reader.read_lock().release()


def test_a_write_release_wakes_waiting_readers_long_before_the_lease(client, url, name):
    rw = client.read_write_lock(name)
    assert rw.write_lock().acquire(lease=60)
    waited: list[float] = []
    errors: list[BaseException] = []
    started = threading.Barrier(4)

    def reader() -> None:
        try:
            with polylock.Client(url) as reader_client:
                read = reader_client.read_write_lock(name).read_lock()
                started.wait(timeout=10)
                begin = time.monotonic()
                assert read.acquire(timeout=55)
                waited.append(time.monotonic() - begin)
                read.release()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    started.wait(timeout=10)
    time.sleep(0.3)  # lets the readers start waiting
    rw.write_lock().release()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert len(waited) == 3
    assert max(waited) < 10, f"woken after {waited}: by expiry, not by the release message"


def test_asyncio_readers_writers_and_downgrade(url, redis, name):
    async def main() -> None:
        async with await polylock.AsyncClient.connect(url) as client:
            rw = client.read_write_lock(name)
            assert isinstance(rw.read_lock(), polylock.AsyncLock)
            assert rw.read_lock() is rw.read_lock()

            async def read_in_another_task(timeout: float) -> bool:
                acquired = await rw.read_lock().acquire(timeout=timeout)
                if acquired:
                    await rw.read_lock().release()
                return acquired

            async def write_in_another_task(timeout: float) -> bool:
                acquired = await rw.write_lock().acquire(timeout=timeout)
                if acquired:
                    await rw.write_lock().release()
                return acquired

            async with rw.read_lock():
                assert await asyncio.create_task(read_in_another_task(5))
                assert not await asyncio.create_task(write_in_another_task(0.3))
            async with rw.write_lock():
                assert not await asyncio.create_task(read_in_another_task(0.3))
                async with rw.write_lock():
                    assert rw.write_lock().hold_count() == 2
                assert await rw.read_lock().acquire(blocking=False)  # downgrade
            assert rw.read_lock().owned() and not rw.write_lock().owned()
            assert await asyncio.create_task(read_in_another_task(5))
            assert not await asyncio.create_task(write_in_another_task(0.3))
            await rw.read_lock().release()
            assert await asyncio.create_task(write_in_another_task(5))

            # A write release wakes a waiting reader at once.
            assert await rw.write_lock().acquire(lease=60)
            waiter = asyncio.create_task(read_in_another_task(55))
            await asyncio.sleep(0.3)
            assert not waiter.done()
            begin = time.monotonic()
            await rw.write_lock().release()
            assert await waiter
            assert time.monotonic() - begin < 10

            redis("SET", f"{name}:string", "x")
            wrong = client.read_write_lock(f"{name}:string")
            for lock in (wrong.read_lock(), wrong.write_lock()):
                with pytest.raises(polylock.WrongTypeError):
                    await lock.acquire(blocking=False)

    run(main())
