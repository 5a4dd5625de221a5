"""The fenced lock and fenced writes (blocking and asyncio) against a real redis-server.
What every binding does alike (results, errors, Redisson's layout) is in the conformance cases
(tests/conformance/behaviour.json, run by test_conformance_behaviour.py); this file keeps
Python's own: threads and tasks as holders, context managers, units, asyncio."""

from __future__ import annotations

import asyncio
import threading

import pytest

import polylock


@pytest.fixture
def client(url: str):
    with polylock.Client(url) as client:
        yield client


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, timeout=120))


def test_another_thread_and_another_client_take_greater_tokens(client, url, name):
    # Tokens across clients, on reentry, and a plain lock's none: the conformance cases.
    lock = client.fenced_lock(name)
    with lock:
        second = lock.token
        assert isinstance(second, int) and second >= 1
    assert lock.token is None
    tokens: list[int] = []

    def other_thread() -> None:
        with lock:
            assert lock.token is not None
            tokens.append(lock.token)

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join(timeout=30)
    with polylock.Client(url) as other_client:
        other = other_client.fenced_lock(name)
        with other:
            assert other.token is not None
            tokens.append(other.token)
    assert tokens[0] > second and tokens[1] > tokens[0], tokens


def test_a_fenced_lock_excludes_other_threads(client, name):
    lock = client.fenced_lock(name)
    assert lock.acquire(lease=30)
    outcome: list[bool] = []
    thread = threading.Thread(target=lambda: outcome.append(lock.acquire(timeout=0.2)))
    thread.start()
    thread.join(timeout=30)
    assert outcome == [False]
    lock.release()


def test_a_stale_write_is_refused_and_the_value_is_unchanged(client, url, redis, name):
    key = f"{name}:resource"
    lock = client.fenced_lock(name)
    assert lock.acquire()
    old = lock.token
    assert old is not None
    client.fenced_set(key, "from the first holder", old)
    client.fenced_set(key, b"again, same token", old)  # an equal token is accepted
    lock.release()
    with polylock.Client(url) as other_client:
        newer = other_client.fenced_lock(name)
        with newer:
            assert newer.token is not None and newer.token > old
            other_client.fenced_set(key, "from the second holder", newer.token)
    with pytest.raises(polylock.StaleTokenError) as raised:
        client.fenced_set(key, "late write of the first holder", old)
    assert isinstance(raised.value, polylock.LockError)
    assert redis("GET", key) == b"from the second holder"
    with pytest.raises(polylock.StaleTokenError):
        client.fenced_delete(key, old)
    assert redis("GET", key) == b"from the second holder"
    assert client.fenced_delete(key, old + 100) is True
    assert redis("EXISTS", key) == 0
    assert client.fenced_delete(key, old + 100) is False


def test_asyncio_tokens_and_fenced_writes(url, redis, name):
    key = f"{name}:resource"

    async def main() -> None:
        async with await polylock.AsyncClient.connect(url) as client:
            lock = client.fenced_lock(name)
            assert lock.token is None
            assert await lock.acquire()
            first = lock.token
            assert first is not None
            assert await lock.acquire()
            assert lock.token is not None and lock.token > first
            await client.fenced_set(key, "async", lock.token)
            await lock.release()
            await lock.release()
            assert lock.token is None

            async def other_task() -> int:
                async with lock:
                    assert lock.token is not None
                    return lock.token

            later = await asyncio.create_task(other_task())
            assert later > first + 1
            await client.fenced_set(key, b"later", later)
            assert redis("GET", key) == b"later"
            # Stale tokens and keys of another type, through this API too: the conformance cases.

    run(main())
