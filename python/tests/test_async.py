"""The asyncio API against a real redis-server."""

from __future__ import annotations

import asyncio
import random
import time
import uuid

import pytest

import polylock
from polylock._shared import task_holder_id
from helpers import hash_count, wait_until


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, timeout=120))


def test_constructor_and_awaitable_connect(url, name):
    async def main() -> None:
        client = polylock.AsyncClient(url, watchdog_timeout=10)
        assert client.watchdog_timeout == 10
        async with await polylock.AsyncClient.connect(url) as other:
            assert other.id != client.id
            assert await other.lock(name).acquire()
        client.close()

    run(main())


def test_awaitable_connect_to_nothing_is_a_connection_error():
    async def main() -> None:
        with pytest.raises(polylock.ConnectionError):
            await polylock.AsyncClient.connect("redis://127.0.0.1:1/0", connect_timeout=1)

    run(main())


def test_tasks_sharing_one_lock_exclude_each_other(url, name):
    counter = {"value": 0, "inside": 0, "max_inside": 0}

    async def work(lock: polylock.AsyncLock, rounds: int) -> None:
        for _ in range(rounds):
            async with lock:
                counter["inside"] += 1
                counter["max_inside"] = max(counter["max_inside"], counter["inside"])
                value = counter["value"]
                await asyncio.sleep(0.002)  # other tasks run here
                counter["value"] = value + 1
                counter["inside"] -= 1

    async def main() -> None:
        async with polylock.AsyncClient(url) as client:
            lock = client.lock(name)
            await asyncio.gather(*(work(lock, 10) for _ in range(5)))
            assert not await lock.locked()

    run(main())
    assert counter["value"] == 50
    assert counter["max_inside"] == 1


def test_task_reentrancy_and_ownership(url, redis, name):
    async def main() -> None:
        async with polylock.AsyncClient(url) as client:
            lock = client.lock(name)
            owner = f"{client.id}:{task_holder_id(asyncio.current_task())}"
            assert await lock.acquire()
            assert await lock.acquire()
            assert lock.hold_count() == 2 and lock.owned()
            assert hash_count(redis, name, owner) == 2

            async def other_task() -> tuple[bool, bool, bool]:
                return lock.owned(), await lock.acquire(blocking=False), await lock.acquire(timeout=0.2)

            assert await asyncio.create_task(other_task()) == (False, False, False)
            await lock.release()
            assert hash_count(redis, name, owner) == 1
            await lock.release()
            assert redis("EXISTS", name) == 0
            with pytest.raises(polylock.NotHeldError):
                await lock.release()

    run(main())


def test_cancelling_a_waiting_task_leaves_no_lock_held(url, redis, name):
    async def main() -> None:
        async with polylock.AsyncClient(url) as client:
            lock = client.lock(name)
            assert await lock.acquire()
            waiter = asyncio.create_task(lock.acquire())
            await asyncio.sleep(0.2)
            assert not waiter.done()
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            await lock.release()
            await asyncio.sleep(0.3)  # a waiter that survived the cancel would take it now
            assert redis("EXISTS", name) == 0
            assert not await lock.locked()

    run(main())


def test_cancelling_at_the_moment_of_release_never_strands_a_lock(url, redis, name):
    """Cancels waiters right around the holder's release, so that some cancellations land just
    as the lock is granted: afterwards the lock must be free whenever nobody claims it."""

    async def main() -> None:
        async with polylock.AsyncClient(url) as client:
            lock = client.lock(name)
            rng = random.Random(7)
            acquired_by_waiter = 0
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
                        acquired_by_waiter += 1
                        # The waiter task holds it; only that task could release it, and it
                        # is finished: its hold is dropped with it. Force it free instead.
                        assert redis("DEL", name) == 1
                except asyncio.CancelledError:
                    pass
                assert await asyncio.to_thread(
                    wait_until, lambda: redis("EXISTS", name) == 0, 5
                ), f"a cancelled acquire left the lock held: {redis('HGETALL', name)}"

    run(main())


def test_lost_notification_for_a_task(url, redis, name):
    async def main() -> None:
        async with polylock.AsyncClient(url, watchdog_timeout=1.5) as client:
            lock = client.lock(name)
            loop = asyncio.get_running_loop()
            lost = loop.create_future()
            lock.on_lost(lambda error: loop.call_soon_threadsafe(lost.set_result, error))
            assert await lock.acquire()
            redis("DEL", name)
            error = await asyncio.wait_for(lost, timeout=10)
            assert isinstance(error, polylock.LockLostError)
            assert lock.lost
            with pytest.raises(polylock.LockLostError):
                await lock.release()

    run(main())


def test_async_watchdog_and_wakeup(url, redis, name):
    async def main() -> None:
        async with polylock.AsyncClient(url, watchdog_timeout=1.5) as client:
            holder = client.lock(name)
            assert await holder.acquire()
            for _ in range(12):  # 3 s, twice the lease
                await asyncio.sleep(0.25)
                assert redis("PTTL", name) > 0 and not holder.lost
            await holder.release()

            holding = asyncio.Event()

            async def hold_briefly() -> None:
                assert await holder.acquire(lease=60)
                holding.set()
                await asyncio.sleep(0.2)
                await holder.release()

            hold_task = asyncio.create_task(hold_briefly())
            await holding.wait()
            started = time.monotonic()
            assert await client.lock(name).acquire(timeout=55)
            waited = time.monotonic() - started
            await hold_task
            assert waited < 10, "woken by the lease expiry, not by the release message"

    run(main())


def test_async_lock_outside_a_task_is_an_error(url, name):
    client = polylock.AsyncClient(url)
    lock = client.lock(name)
    with pytest.raises(RuntimeError):
        lock._handle()
    client.close()


def test_async_lock_collected_while_held_warns_and_releases(url, redis, name):
    import gc

    async def main() -> None:
        async with polylock.AsyncClient(url) as client:
            lock = client.lock(name)
            assert await lock.acquire()
            assert redis("EXISTS", name) == 1
            with pytest.warns(ResourceWarning, match=name):
                del lock
                gc.collect()
            assert await asyncio.to_thread(wait_until, lambda: redis("EXISTS", name) == 0, 5)

    run(main())


def test_a_task_keeps_its_handle_while_it_lives_and_drops_it_when_collected(url, name):
    """A live task keeps one handle across holds (none is made per hold); tasks that ended and
    were collected leave no handle behind, however many there were."""
    import gc

    async def main() -> None:
        async with polylock.AsyncClient(url) as client:
            lock = client.lock(name)
            assert await lock.acquire()
            first = lock._handle()
            await lock.release()
            assert await lock.acquire()
            assert lock._handle() is first
            await lock.release()

            async def once() -> None:
                async with lock:
                    pass

            await asyncio.gather(*(once() for _ in range(200)))
            # One turn of the loop lets go of gather's own future, which lists the tasks.
            await asyncio.sleep(0)
            gc.collect()
            # Only the running task's handle is left.
            assert list(lock._holders._handles.values()) == [first]

    run(main())


def test_calls_of_many_tasks_through_the_cores_threads_all_settle(url):
    # A client made by the constructor sends its calls through the core's threads, whose
    # outcomes ring one bell for the loop (python/src/asyncio.rs): a ring lost in a race between
    # a runtime thread and the loop's callback left every task waiting for good.
    async def main() -> list[int]:
        with polylock.AsyncClient(url) as client:
            async def worker(index: int) -> int:
                lock = client.lock(f"bell:{uuid.uuid4().hex[:8]}:{index}")
                for _ in range(150):
                    assert await lock.acquire()
                    await lock.release()
                return 150

            return await asyncio.gather(*(worker(index) for index in range(64)))

    assert run(main()) == [150] * 64
