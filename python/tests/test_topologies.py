"""The test kit's multi-server topologies work, as redis-py's own RedisCluster and Sentinel
clients see them: each is started once and taken through its faults in order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Callable, TypeVar

import pytest
from redis.cluster import ClusterNode as Seed
from redis.cluster import RedisCluster as ClusterClient
from redis.exceptions import ConnectionError
from redis.sentinel import Sentinel

from redis_cluster import PRIMARY, REPLICA, RedisCluster
from redis_sentinel import RedisSentinel
from redis_server import RedisServer, start_many

T = TypeVar("T")


def write_replicated(server: RedisServer, key: str, value: str, replicas: int) -> None:
    """Writes `key` on the primary `server` and waits until `replicas` replicas have it, so
    that a failover right after cannot lose it."""
    with server.client() as redis:
        redis.set(key, value)
        assert redis.execute_command("WAIT", replicas, 5000) == replicas


def retried_once(command: Callable[[], T]) -> T:
    """redis-py's sentinel client fails the first command it sends to a demoted primary
    (ConnectionError "The previous master is now a slave") and asks the sentinels again on the
    next; its own retry reconnects to the same address (redis-py 8.1), so the test retries."""
    try:
        return command()
    except ConnectionError:
        return command()


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    with RedisCluster() as cluster:
        yield cluster


@pytest.fixture(scope="module")
def sentinel() -> Iterator[RedisSentinel]:
    with RedisSentinel() as deployment:
        yield deployment


def test_cluster_serves_through_failover_migration_and_a_killed_primary(cluster: RedisCluster) -> None:
    assert len(cluster.nodes()) == 6
    assert len(cluster.primaries()) == 3 and len(cluster.replicas()) == 3
    assert cluster.url.startswith("redis+cluster://127.0.0.1:") and cluster.url.count(",") == 5
    client = ClusterClient(startup_nodes=[Seed("127.0.0.1", port) for port in cluster.ports()])
    try:
        client.set("{failover}key", "before")
        assert client.get("{failover}key") == b"before"

        # A manual failover: the replica serves the slot; the client follows the MOVED.
        old_primary = cluster.primary_for_key("{failover}key")
        replica = cluster.replica_of(old_primary)
        cluster.failover(replica)
        assert cluster.primary_for_key("{failover}key") == replica
        demoted = next(node for node in cluster.nodes() if node.port == old_primary)
        assert (demoted.role, demoted.primary_port) == (REPLICA, replica)
        assert client.get("{failover}key") == b"before"
        client.set("{failover}key", "after")
        assert cluster.server(replica).command("GET", "{failover}key") == b"after"

        # A live slot migration moves the key; the client still reads it.
        client.set("{moving}key", "moved")
        slot = cluster.slot_for_key("{moving}key")
        source = cluster.primary_for_slot(slot)
        target = next(port for port in cluster.primaries() if port != source)
        cluster.migrate_slot(slot, target)
        assert cluster.primary_for_slot(slot) == target
        assert cluster.server(target).command("GET", "{moving}key") == b"moved"
        assert client.get("{moving}key") == b"moved"

        # A killed primary: its replica takes over with the data; the client finds it.
        doomed = cluster.primary_for_key("{killed}key")
        heir = cluster.replica_of(doomed)
        write_replicated(cluster.server(doomed), "{killed}key", "kept", 1)
        cluster.kill(doomed)
        assert cluster.primary_for_key("{killed}key") == heir
        assert any(node.port == doomed and node.failed for node in cluster.nodes())
        assert client.get("{killed}key") == b"kept"
        client.set("{killed}key", "rewritten")

        # Restarted, the killed node rejoins as a replica of its heir.
        cluster.restart(doomed)
        rejoined = next(node for node in cluster.nodes() if node.port == doomed)
        assert (rejoined.role, rejoined.primary_port) == (REPLICA, heir)
        assert next(node for node in cluster.nodes() if node.port == heir).role == PRIMARY
    finally:
        client.close()


def test_sentinel_follows_a_failover_and_a_killed_primary(sentinel: RedisSentinel) -> None:
    first_primary = sentinel.primary()
    assert len(sentinel.replicas()) == 2 and len(sentinel.sentinels) == 3
    assert sentinel.url.startswith("redis+sentinel://127.0.0.1:")
    assert sentinel.url.endswith(f"/{sentinel.master_name}")
    sentinels = Sentinel(sentinel.sentinel_addresses(), socket_timeout=5)
    client = sentinels.master_for(sentinel.master_name, socket_timeout=5)
    try:
        client.set("key", "before")
        assert client.get("key") == b"before"

        write_replicated(sentinel.server(first_primary), "key", "before", 2)
        second_primary = sentinel.failover()
        assert second_primary != first_primary
        assert first_primary in sentinel.replicas(), "the old primary is a replica now"
        assert sentinel.server(second_primary).info("replication")["role"] == "master"
        assert sentinels.discover_master(sentinel.master_name) == ("127.0.0.1", second_primary)
        assert client.get("key") == b"before"
        retried_once(lambda: client.set("key", "after"))
        assert sentinel.server(second_primary).command("GET", "key") == b"after"

        write_replicated(sentinel.server(second_primary), "key", "after", 2)
        third_primary = sentinel.kill_primary()
        assert third_primary != second_primary
        assert len(sentinel.replicas()) == 1
        assert retried_once(lambda: client.get("key")) == b"after"
        client.set("key", "last")
        assert sentinel.server(third_primary).command("GET", "key") == b"last"
    finally:
        client.close()


def test_start_many_starts_independent_servers() -> None:
    with start_many(3) as group:
        for index, server in enumerate(group.servers):
            server.command("SET", "k", index)
        assert [server.command("GET", "k") for server in group.servers] == [b"0", b"1", b"2"]
