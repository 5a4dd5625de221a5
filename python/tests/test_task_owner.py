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


def _wait_until_os_thread_ended(thread) -> None:
    """`join()` returns before the OS thread is gone; glibc gives its stack (and so its ident)
    to a new thread only after that. Wait for the kernel to drop its task (Linux), or a moment."""
    import os
    import time

    task = f"/proc/self/task/{thread.native_id}"
    deadline = time.monotonic() + 5
    if not os.path.isdir("/proc/self/task"):
        time.sleep(0.05)
        return
    while os.path.exists(task) and time.monotonic() < deadline:
        time.sleep(0.001)


def test_a_thread_with_an_ended_threads_ident_gets_another_owner(url, name):
    """Threads too: the OS gives a later thread an ended thread's ident. A thread that ended
    holding the lock leaves its hold behind; a later thread with its ident must not find that
    hold its own (re-enter it, release it)."""
    import threading

    with polylock.Client(url) as client:
        # The next thread usually gets the ended one's ident (glibc reuses the newest freed
        # stack); a miss caches another thread's stack in front, so each try is a new pair.
        for attempt in range(20):
            lock = client.lock(f"{name}:{attempt}")
            idents: list[int] = []
            seen: list[int] = []

            def leave_held() -> None:
                idents.append(threading.get_ident())
                assert lock.acquire()

            def look() -> None:
                idents.append(threading.get_ident())
                seen.append(lock.hold_count())

            first = threading.Thread(target=leave_held)
            first.start()
            first.join()
            _wait_until_os_thread_ended(first)
            later = threading.Thread(target=look)
            later.start()
            later.join()
            _wait_until_os_thread_ended(later)
            if idents[1] == idents[0]:
                break
            lock.force_unlock()
        assert idents[1] == idents[0], "no thread got the ended thread's ident: nothing was checked"
        assert seen[0] == 0, "a later thread found the ended thread's hold its own"
        assert lock.locked(), "the ended thread's hold is still there"
        lock.force_unlock()
