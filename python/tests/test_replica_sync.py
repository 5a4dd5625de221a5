"""sync_replicas on real servers: a primary with one replica (``--replicaof``), the same with
the replica held still (``CLIENT PAUSE ... ALL`` on a Redis 7 replica also stops it applying and
acknowledging the primary's stream), and a primary whose WAIT is renamed away."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Callable

import pytest

import polylock
from helpers import wait_until
from redis_server import RedisServer, start_redis

StartRedis = Callable[..., RedisServer]

#: A primary sends its first full sync at once, not after the default 5 s wait for more replicas.
PRIMARY = ("--repl-diskless-sync-delay", "0")


@pytest.fixture
def start() -> Iterator[StartRedis]:
    """Starts redis-servers with extra arguments; stops them after the test."""
    started: list[RedisServer] = []

    def start(*extra_args: str) -> RedisServer:
        server = start_redis(extra=extra_args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def replica_of(start: StartRedis, primary: RedisServer) -> RedisServer:
    """A replica of ``primary``, returned once the primary counts it online (so ROLE lists it
    and WAIT waits for it)."""
    replica = start("--replicaof", "127.0.0.1", str(primary.port))
    with primary.client() as redis:
        online = wait_until(
            lambda: redis.info("replication").get("slave0", {}).get("state") == "online", timeout=20
        )
    assert online, f"the replica on port {replica.port} never came online"
    return replica


def exists(server: RedisServer, key: str) -> int:
    with server.client() as redis:
        return int(redis("EXISTS", key))


NOT_SYNCED = (
    "lock '{}' was acquired on the primary, but not all of its 1 replicas acknowledged it within "
    "200 ms, so a failover could hand it to a second holder; it was undone (sync_replicas)"
)


def test_an_acquire_returns_once_the_replica_has_the_lock(start, name):
    primary = start(*PRIMARY)
    replica = replica_of(start, primary)
    with polylock.Client(primary.url, sync_replicas=True) as client:
        lock = client.lock(name)
        assert lock.acquire(timeout=30)
        assert exists(replica, name) == 1
        lock.release()
        assert exists(replica, name) == 0


def test_an_acquire_no_replica_acknowledged_is_undone_with_not_synced_error(start, name):
    primary = start(*PRIMARY)
    replica = replica_of(start, primary)
    with polylock.Client(primary.url, sync_replicas=True, replica_sync_timeout=0.2) as client:
        lock = client.lock(name)
        with replica.client() as redis:
            redis("CLIENT", "PAUSE", 3000, "ALL")
        with pytest.raises(polylock.NotSyncedError) as raised:
            lock.acquire(timeout=0)
        assert str(raised.value) == NOT_SYNCED.format(name)
        assert exists(primary, name) == 0
        assert not lock.owned()


def test_a_primary_without_replicas_confirms_nothing_unless_min_replicas_is_0(start, name):
    """min_replicas (default 1): a primary with no replica cannot give an acquisition the one
    replica it must reach, so the acquisition is undone with NotSyncedError; min_replicas=0
    trusts the primary's count (none: nothing to wait for), in both clients."""
    primary = start(*PRIMARY)
    with polylock.Client(primary.url, sync_replicas=True, replica_sync_timeout=0.2) as client:
        with pytest.raises(polylock.NotSyncedError) as raised:
            client.lock(name).acquire(timeout=0)
        assert str(raised.value) == NOT_SYNCED.format(name)
        assert exists(primary, name) == 0
    with polylock.Client(primary.url, sync_replicas=True, min_replicas=0) as client:
        lock = client.lock(name)
        assert lock.acquire(timeout=0)
        assert exists(primary, name) == 1
        lock.release()

    async def main() -> None:
        options = {"sync_replicas": True, "min_replicas": 0}
        async with await polylock.AsyncClient.connect(primary.url, **options) as client:
            lock = client.lock(name)
            assert await lock.acquire(timeout=0)
            await lock.release()

    asyncio.run(asyncio.wait_for(main(), timeout=60))
    assert exists(primary, name) == 0


@pytest.mark.parametrize("connect", ["constructor", "awaitable"])
def test_the_asyncio_client_takes_the_same_options(start, name, connect):
    primary = start(*PRIMARY)
    replica = replica_of(start, primary)

    async def main() -> None:
        options = {"sync_replicas": True, "replica_sync_timeout": 0.2}
        if connect == "constructor":
            client = polylock.AsyncClient(primary.url, **options)
        else:
            client = await polylock.AsyncClient.connect(primary.url, **options)
        async with client:
            with replica.client() as redis:
                redis("CLIENT", "PAUSE", 3000, "ALL")
            with pytest.raises(polylock.NotSyncedError) as raised:
                await client.lock(name).acquire(timeout=0)
            assert str(raised.value) == NOT_SYNCED.format(name)

    asyncio.run(asyncio.wait_for(main(), timeout=60))
    assert exists(primary, name) == 0


def test_a_server_without_wait_turns_sync_off_and_locks_keep_working(start, name):
    primary = start(*PRIMARY, "--rename-command", "WAIT", "")
    # A replica, so that ROLE counts one and the client does send WAIT (and is refused).
    replica_of(start, primary)
    with polylock.Client(primary.url, sync_replicas=True) as client:
        lock = client.lock(name)
        assert lock.acquire(timeout=0)
        assert exists(primary, name) == 1
        lock.release()
        assert exists(primary, name) == 0
