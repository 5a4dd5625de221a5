"""An asyncio task's lock owner is its own for the process's life: a later task that CPython
puts at a collected task's address must not inherit the collected task's owner string (the dead
task's background release or undo would then take off the new task's level, and the new
task's release would fail with LockLostError)."""

from __future__ import annotations

import asyncio
import gc

import polylock


def test_a_task_at_a_collected_tasks_address_gets_another_owner(url, redis, name):
    async def main() -> None:
        async with polylock.AsyncClient(url) as client:
            lock = client.lock(name)
            addresses: list[int] = []
            owners: list[str] = []

            async def hold() -> None:
                assert await lock.acquire()
                try:
                    fields = [f.decode() if isinstance(f, bytes) else f for f in redis("HKEYS", name)]
                    # The owner's field; polylock's own fields beside it (docs/PROTOCOL.md) left out.
                    (owner,) = [field for field in fields if not field.startswith("polylock:")]
                    owners.append(owner)
                    addresses.append(id(asyncio.current_task()))
                finally:
                    await lock.release()

            for _ in range(200):
                task = asyncio.create_task(hold())
                await task
                del task
                gc.collect()
            # Addresses do come back (so the test checks something), and no owner does.
            assert len(set(addresses)) < 200, "no task address came back: nothing was checked"
            assert len(set(owners)) == 200, f"{200 - len(set(owners))} tasks had a collected task's owner"

    asyncio.run(asyncio.wait_for(main(), timeout=60))
