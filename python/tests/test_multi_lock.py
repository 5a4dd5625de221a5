"""MultiLock and RedLock over three independent redis-servers, one killed while held."""

from __future__ import annotations

import asyncio
import threading

import pytest

import polylock
from helpers import wait_until
from redis_server import RedisServer


def clients(servers: list[RedisServer], watchdog: float = 30) -> list[polylock.Client]:
    return [
        polylock.Client(server.url, watchdog_timeout=watchdog, response_timeout=2)
        for server in servers
    ]


def holders(servers: list[RedisServer], name: str) -> list[int]:
    """How many owners hold `name` on each server: the lock hash's fields, polylock's own
    (`polylock:level:*`, `polylock:waiters`; docs/PROTOCOL.md) left out."""
    counts = []
    for server in servers:
        with server.client() as redis:
            fields = [f.decode() if isinstance(f, bytes) else f for f in redis("HKEYS", name)]
            counts.append(sum(1 for field in fields if not field.startswith("polylock:")))
    return counts


def test_a_multi_lock_takes_all_or_none(three_servers: list[RedisServer], name: str) -> None:
    cs = clients(three_servers)
    multi = polylock.MultiLock([c.lock(name) for c in cs])
    other = cs[1].lock(name)
    result: list[bool] = []
    worker = threading.Thread(target=lambda: result.append(other.acquire(blocking=False)))
    worker.start()
    worker.join()
    assert result == [True]
    assert not multi.acquire(timeout=0.3)
    assert holders(three_servers, name) == [0, 1, 0]
    with pytest.raises(polylock.NotHeldError):
        multi.release()
    # The other owner (a thread that has ended) gives it up.
    assert other.force_unlock()
    with multi:
        assert multi.owned() and multi.hold_count() == 1
        assert holders(three_servers, name) == [1, 1, 1]
        assert all(lock.owned() for lock in multi.locks)
    assert holders(three_servers, name) == [0, 0, 0]
    for c in cs:
        c.close()


def test_a_server_killed_mid_hold_loses_the_multi_lock_but_not_the_red_lock(
    three_servers: list[RedisServer], name: str
) -> None:
    cs = clients(three_servers, watchdog=0.6)
    red = polylock.RedLock([c.lock(name + ":red") for c in cs])
    multi = polylock.MultiLock([c.lock(name + ":multi") for c in cs])
    assert red.quorum == 2 and multi.quorum == 3
    lost: list[polylock.LockLostError] = []
    multi.on_lost(lost.append)
    assert red.acquire(timeout=2) and multi.acquire(timeout=2)
    three_servers[2].kill()
    assert wait_until(lambda: multi.lost, timeout=10)
    assert wait_until(lambda: len(lost) == 1, timeout=5)
    assert str(lost[0]).startswith(f"multi-lock '{name}:multi' was lost")
    assert red.owned() and not red.lost
    red.release()
    with pytest.raises(polylock.LockLostError):
        multi.release()
    assert holders(three_servers[:2], name + ":red") == [0, 0]
    assert holders(three_servers[:2], name + ":multi") == [0, 0]
    for c in cs:
        c.close()


def test_a_red_lock_acquires_with_one_server_down_and_waits_in_a_with_block(
    three_servers: list[RedisServer], name: str
) -> None:
    cs = clients(three_servers)
    three_servers[0].kill()
    red = polylock.RedLock([c.lock(name) for c in cs], timeout=0.5)
    with red:
        assert holders(three_servers[1:], name) == [1, 1]
        other = polylock.RedLock([c.lock(name) for c in cs], timeout=0.3)
        failed: list[BaseException] = []

        def contend() -> None:
            try:
                with other:
                    pass
            except polylock.TimeoutError as err:
                failed.append(err)

        worker = threading.Thread(target=contend)
        worker.start()
        worker.join()
        # Then who held it, lock by lock (the holders' client records).
        assert str(failed[0]).startswith(
            f"lock '{name}' was not acquired within 300 ms: another owner held it all that time"
            f" ('{name}' held by '"
        )
    assert holders(three_servers[1:], name) == [0, 0]
    for c in cs:
        c.close()


def test_bad_groups_raise_the_cores_error(url: str, name: str) -> None:
    client = polylock.Client(url)
    with pytest.raises(polylock.InvalidArgumentError) as empty:
        polylock.MultiLock([])
    assert str(empty.value) == "invalid argument: a multi-lock needs at least one lock, got none"
    lock = client.lock(name)
    with pytest.raises(polylock.InvalidArgumentError) as twice:
        polylock.RedLock([lock, lock])
    assert str(twice.value) == (
        f"invalid argument: a red-lock takes each lock once, but lock '{name}' of one client "
        "is given twice (it would wait for itself)"
    )
    with pytest.raises(TypeError):
        polylock.MultiLock([object()])  # type: ignore[list-item]
    client.close()


def test_async_red_lock_over_three_servers(three_servers: list[RedisServer], name: str) -> None:
    async def main() -> None:
        cs = [polylock.AsyncClient(s.url, response_timeout=2) for s in three_servers]
        red = polylock.AsyncRedLock([c.lock(name) for c in cs])
        async with red:
            assert red.owned()
            assert holders(three_servers, name) == [1, 1, 1]
            other = polylock.AsyncRedLock([c.lock(name) for c in cs])
            assert not await asyncio.create_task(other.acquire(timeout=0.2))
        assert holders(three_servers, name) == [0, 0, 0]
        for c in cs:
            c.close()

    asyncio.run(main())
