"""The fair lock (Redisson RFairLock layout) against a real redis-server, what only it is
tested for here: the client's fair_queue_timeout option and cancellations at the moment of a
hand-over. What it shares with the FIFO lock (arrival order, waiters that give up leave the
queue at once, reentrancy, exclusion, the lost flag, bad names) runs on both kinds in
test_queued_locks.py."""

from __future__ import annotations

import asyncio
import random

import pytest

import polylock
from helpers import wait_until
from queued_kinds import queue_key, timeouts_key


def test_bad_fair_queue_timeouts_are_refused(url):
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
