"""The count-down latch (blocking and asyncio) against a real redis-server: a waiter woken by
another client's count down long before its timeout, bounded waits, and the core's errors for
bad input. What every binding does alike (results, errors, Redisson's layout) is in the conformance cases
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


def test_a_wait_ends_false_at_its_timeout(client, name):
    latch = client.count_down_latch(name)
    assert latch.name == name
    assert latch.try_set_count(1)
    started = time.monotonic()
    assert latch.await_zero(0.3) is False
    assert time.monotonic() - started >= 0.3


def test_a_waiter_wakes_when_another_client_counts_down(client, url, name):
    assert client.count_down_latch(name).try_set_count(1)
    result: dict[str, object] = {}

    def wait() -> None:
        started = time.monotonic()
        result["reached"] = client.count_down_latch(name).await_zero(60)
        result["waited"] = time.monotonic() - started

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.3)
    with polylock.Client(url) as other:
        other.count_down_latch(name).count_down()
    waiter.join(60)
    assert result["reached"] is True
    assert result["waited"] < 30


def test_asyncio_waiters_wake_on_the_zero(url, name):
    async def main() -> None:
        async with await polylock.AsyncClient.connect(url) as client:
            latch = client.count_down_latch(name)
            assert await latch.try_set_count(2) is True
            assert await latch.try_set_count(2) is False
            waiters = [asyncio.create_task(latch.await_zero(60)) for _ in range(2)]
            await asyncio.sleep(0.3)
            await latch.count_down()
            assert await latch.count() == 1
            await latch.count_down()
            assert await asyncio.wait_for(asyncio.gather(*waiters), 30) == [True, True]
            assert await latch.count() == 0
            assert await latch.delete() is False

    asyncio.run(main())


@pytest.mark.parametrize("count", [0, -1, 2**53])
def test_a_bad_count_is_the_cores_invalid_argument(client, name, count):
    with pytest.raises(polylock.InvalidArgumentError) as raised:
        client.count_down_latch(name).try_set_count(count)
    assert str(raised.value) == f"invalid argument: count must be from 1 to 9007199254740991, got {count}"


@pytest.mark.parametrize("timeout", [-1, float("nan"), float("inf")])
def test_a_bad_timeout_is_the_cores_invalid_argument(client, name, timeout):
    with pytest.raises(polylock.InvalidArgumentError, match="timeout must be a finite number"):
        client.count_down_latch(name).await_zero(timeout)

