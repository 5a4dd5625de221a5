"""The run-once job lock: `client.job_lock(name, at_most=, at_least=)` and `@client.job(...)`,
sync and asyncio, against a real redis-server."""

from __future__ import annotations

import asyncio
import time

import pytest

import polylock
from helpers import RedisConnection, wait_until


@pytest.fixture
def client(url: str):
    with polylock.Client(url) as client:
        yield client


@pytest.fixture
def other(url: str):
    """Another node."""
    with polylock.Client(url) as other:
        yield other


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, timeout=60))


def pttl(redis_server, name: str) -> int:
    with RedisConnection(redis_server.port) as redis:
        return redis("PTTL", name)


def test_a_held_job_lock_skips_without_waiting(client, other, name):
    hold = client.job_lock(name, at_most=60).try_acquire()
    assert hold is not None and hold.is_held
    calls = []
    started = time.monotonic()
    assert other.job_lock(name, at_most=60).run(calls.append, "ran") is None
    assert calls == []
    # One look, not a wait for the 60 s lease.
    assert time.monotonic() - started < 10
    hold.finish()
    assert not hold.is_held
    assert other.job_lock(name, at_most=60).run(lambda: 7) == 7, "released at once (at_least 0)"


def test_at_least_keeps_the_lock_after_a_fast_job(client, other, redis_server, name):
    assert client.job_lock(name, at_most=10, at_least=2).run(lambda: "fast") == "fast"
    assert 0 < pttl(redis_server, name) <= 2000
    assert other.job_lock(name, at_most=10, at_least=2).run(lambda: "late node") is None
    assert wait_until(lambda: pttl(redis_server, name) == -2, timeout=10)
    assert other.job_lock(name, at_most=10, at_least=2).run(lambda: "next slot") == "next slot"


def test_an_exception_is_raised_after_the_at_least_handling(client, other, redis_server, name):
    def failing():
        raise ValueError("the job failed")

    with pytest.raises(ValueError, match="the job failed"):
        client.job_lock(name, at_most=10, at_least=2).run(failing)
    assert 0 < pttl(redis_server, name) <= 2000, "kept for at_least, not released"
    assert other.job_lock(name, at_most=10).run(lambda: "late") is None


def test_the_decorator_returns_the_result_or_none(client, other, redis_server, name):
    @client.job(name, at_most=10, at_least=1)
    def report(value: int) -> int:
        """Sends the report."""
        return value * 2

    assert report.__doc__ == "Sends the report."
    assert report(21) == 42
    assert report(21) is None, "within at_least of the first run: skipped"
    assert wait_until(lambda: pttl(redis_server, name) == -2, timeout=10)
    assert report(1) == 2

    with pytest.raises(TypeError, match="AsyncClient.job"):

        @client.job(name, at_most=1)
        async def not_for_a_sync_client() -> None: ...


def test_async_job_lock_and_decorator(url, redis_server, name):
    async def scenario():
        async with await polylock.AsyncClient.connect(url) as client:

            @client.job(name, at_most=10, at_least=1)
            async def report(value: int) -> int:
                await asyncio.sleep(0.01)
                return value + 1

            assert await report(1) == 2
            assert await report(1) is None
            hold = await client.job_lock(name + ":2", at_most=10).try_acquire()
            assert hold is not None
            assert await client.job_lock(name + ":2", at_most=10).try_acquire() is None
            await hold.finish()
            assert await client.job_lock(name + ":2", at_most=10).run(asyncio.sleep, 0, "x") == "x"
            with pytest.raises(TypeError, match="Client.job"):

                @client.job(name, at_most=1)
                def not_for_an_async_client() -> None: ...

    run(scenario())
    assert 0 < pttl(redis_server, name) <= 1000


def test_a_late_finish_does_not_touch_the_next_holders_lock(client, other, redis_server, name):
    hold = client.job_lock(name, at_most=0.3, at_least=0.3).try_acquire()
    assert hold is not None
    time.sleep(0.6)
    next_holder = other.lock(name)
    assert next_holder.acquire(blocking=False, lease=60)
    hold.finish()
    assert next_holder.locked()
    assert pttl(redis_server, name) > 50_000, "the next holder's lease was changed"
    next_holder.release()


@pytest.mark.parametrize(
    "at_most, at_least, message",
    [
        (0, 0, "at_most must be from 1 ms to 10 years, got 0 ms"),
        (1, 2, "at_least (2000 ms) must not be longer than at_most (1000 ms)"),
        (-1, 0, "at_most must be a finite number of milliseconds >= 0, got -1000"),
    ],
)
def test_bad_options_raise_the_cores_message(client, name, at_most, at_least, message):
    with pytest.raises(polylock.InvalidArgumentError) as raised:
        client.job_lock(name, at_most=at_most, at_least=at_least)
    assert str(raised.value) == f"invalid argument: {message}"
    with pytest.raises(polylock.InvalidArgumentError):
        client.job(name, at_most=at_most, at_least=at_least)
