"""Faults seen through the Python binding: an acquire whose outcome is unknown (the server
paused past the response timeout) leaves no lock behind, and closing a client ends the waits
and holds made through it at once."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Optional

import pytest

import polylock
from helpers import wait_until

PAUSE_S = 3.0
LEASE_S = 30.0


def pause_server(redis) -> float:
    """Pauses every client of the server for PAUSE_S; returns when the pause ends (monotonic).

    Acquire first once with the client under test: its acquire script is then in the server's
    cache, so the paused attempt is one EVALSHA that runs (and takes the lock) when the pause
    ends. A first attempt would get NOSCRIPT there instead and never take the lock, and the
    test could not fail.
    """
    redis("CLIENT", "PAUSE", int(PAUSE_S * 1000), "ALL")  # an error reply raises
    return time.monotonic() + PAUSE_S


def assert_no_lock_left(url: str, redis, name: str, pause_ends: float) -> None:
    """After the pause the server runs the attempt the client gave up on; the core must undo it
    (before the fix the key stayed for the whole 30 s lease)."""
    time.sleep(max(0.0, pause_ends - time.monotonic()) + 0.2)
    assert wait_until(lambda: redis("EXISTS", name) == 0, timeout=5), (
        f"the abandoned acquire still holds {name}: PTTL {redis('PTTL', name)} ms"
    )
    with polylock.Client(url) as other:
        lock = other.lock(name)
        assert lock.acquire(timeout=5) is True
        lock.release()


@pytest.mark.parametrize("timeout", [0, 0.5])
def test_an_acquire_that_times_out_while_redis_is_paused_leaves_no_lock(url, redis, name, timeout):
    with polylock.Client(url, response_timeout=1.0) as client:
        lock = client.lock(name)
        assert lock.acquire(timeout=5)  # loads the acquire script (see pause_server)
        lock.release()
        pause_ends = pause_server(redis)
        started = time.monotonic()
        outcome: Optional[bool] = None
        try:
            outcome = lock.acquire(timeout=timeout, lease=LEASE_S)
        except polylock.TimeoutError:
            pass
        assert outcome in (None, False), "acquired while the server was paused"
        assert time.monotonic() - started < PAUSE_S, "the acquire waited for the pause to end"
        assert not lock.owned()
        assert_no_lock_left(url, redis, name, pause_ends)
        assert not lock.owned()


def test_an_async_acquire_that_times_out_while_redis_is_paused_leaves_no_lock(url, redis, name):
    async def main() -> None:
        async with await polylock.AsyncClient.connect(url, response_timeout=1.0) as client:
            lock = client.lock(name)
            assert await lock.acquire(timeout=5)  # loads the acquire script (see pause_server)
            await lock.release()
            pause_ends = pause_server(redis)
            started = time.monotonic()
            outcome: Optional[bool] = None
            try:
                outcome = await lock.acquire(timeout=0, lease=LEASE_S)
            except polylock.TimeoutError:
                pass
            assert outcome in (None, False), "acquired while the server was paused"
            assert time.monotonic() - started < PAUSE_S, "the acquire waited for the pause to end"
            assert not lock.owned()
            # The client stays open while the server comes back, so the core can clean up.
            await asyncio.to_thread(assert_no_lock_left, url, redis, name, pause_ends)

    asyncio.run(asyncio.wait_for(main(), timeout=60))


def test_close_ends_a_waiting_acquire_at_once_and_marks_holds_lost(url, redis, name):
    client = polylock.Client(url)
    lock = client.lock(name)
    lost: list[BaseException] = []
    told = threading.Event()

    def on_lost(error: BaseException) -> None:
        lost.append(error)
        told.set()

    lock.on_lost(on_lost)
    assert lock.acquire()
    waiting = threading.Event()
    outcome: dict[str, object] = {}

    def waiter() -> None:
        waiting.set()
        started = time.monotonic()
        try:
            outcome["result"] = lock.acquire(timeout=30)
        except BaseException as error:  # checked by the test thread
            outcome["error"] = error
        outcome["waited"] = time.monotonic() - started

    thread = threading.Thread(target=waiter)
    thread.start()
    assert waiting.wait(timeout=5)
    time.sleep(0.5)  # the waiter is subscribed and waiting for the release
    assert "result" not in outcome and "error" not in outcome
    assert client.close() == [name]
    thread.join(timeout=10)
    assert not thread.is_alive(), "the waiter was not woken by close()"

    error = outcome.get("error")
    assert isinstance(error, polylock.ConnectionError), outcome
    assert "the client is closed" in str(error), str(error)
    assert outcome["waited"] < 5, outcome  # at once, far from its 30 s bound
    assert lock.owned() is False
    assert lock.lost is True
    assert told.wait(timeout=5), "the lost callback was not called"
    assert isinstance(lost[0], polylock.LockLostError)
    assert "closed" in str(lost[0])
    # close() does not release: the key stays until its lease ends.
    assert redis("EXISTS", name) == 1
    redis("DEL", name)


def test_close_ends_a_waiting_task_at_once_and_marks_holds_lost(url, redis, name):
    async def main() -> None:
        client = await polylock.AsyncClient.connect(url)
        lock = client.lock(name)
        told = threading.Event()
        lock.on_lost(lambda error: told.set())
        assert await lock.acquire()

        async def waiter() -> float:
            started = time.monotonic()
            with pytest.raises(polylock.ConnectionError, match="the client is closed"):
                await lock.acquire(timeout=30)
            return time.monotonic() - started

        waiting = asyncio.create_task(waiter())
        await asyncio.sleep(0.5)
        assert not waiting.done()
        assert client.close() == [name]
        assert await asyncio.wait_for(waiting, timeout=10) < 5
        assert lock.owned() is False
        assert lock.lost is True
        assert await asyncio.to_thread(told.wait, 5), "the lost callback was not called"
        redis("DEL", name)

    asyncio.run(asyncio.wait_for(main(), timeout=60))
