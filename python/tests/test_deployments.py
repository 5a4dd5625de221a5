"""The cluster and Sentinel scenarios of core/tests/cluster.rs and sentinel.rs, driven from
Python: a 3-primary cluster with a replica each (exclusion across slots, sharded wake-ups, a
slot migrated while a lock is held and waited on, a primary killed), and Sentinel with
1 primary, 2 replicas and 3 sentinels (a failover while a lock is held and waited on, with
replica sync)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Optional

import pytest

import polylock
from helpers import wait_until
from redis_cluster import RedisCluster
from redis_sentinel import RedisSentinel
from redis_server import has_sharded_pubsub

#: A waiter woken long before this lease would end was woken by a message, not by expiry.
LONG_LEASE = 60.0
#: A lease that outlasts a failover; a hold kept past it was renewed on the new primary.
FAILOVER_WATCHDOG = 6.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    with RedisCluster() as started:
        yield started


class Waiter:
    """A thread that waits for `lock` (its own holder) up to the long lease, then holds it until
    `finish()`, and releases it there."""

    def __init__(self, lock: polylock.Lock) -> None:
        self.lock = lock
        self.acquired: Optional[bool] = None
        self.waited = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        self.acquired = self.lock.acquire(timeout=LONG_LEASE)
        self.waited = time.monotonic() - started
        self._done.wait(LONG_LEASE)
        if self.acquired:
            self.lock.release()

    def outcome(self, timeout: float) -> Optional[bool]:
        wait_until(lambda: self.acquired is not None, timeout)
        return self.acquired

    def finish(self) -> None:
        self._done.set()
        self._thread.join(10)


def channel(name: str) -> str:
    return f"redisson_lock__channel:{{{name}}}"


def waiter_subscriptions(cluster: RedisCluster, port: int, name: str) -> int:
    """The waiters' subscriptions to the lock's channel: on Redis 7+ and Valkey shard
    subscriptions (SSUBSCRIBE) on the node `port` of its slot; on Redis 6.2, which has no
    sharded pub/sub, plain ones (SUBSCRIBE) on any node (broadcast mode)."""
    if has_sharded_pubsub():
        return int(cluster.server(port).command("PUBSUB", "SHARDNUMSUB", channel(name))[1])
    return sum(int(cluster.server(node).command("PUBSUB", "NUMSUB", channel(name))[1])
               for node in cluster.ports())


def exists(server_port: int, cluster: RedisCluster, name: str) -> bool:
    return bool(cluster.server(server_port).command("EXISTS", name))


def names_on_every_primary(cluster: RedisCluster, prefix: str) -> list[str]:
    by_primary: dict[int, str] = {}
    n = 0
    while len(by_primary) < len(cluster.primaries()):
        name = f"{prefix}:{n}"
        by_primary.setdefault(cluster.primary_for_key(name), name)
        n += 1
    return list(by_primary.values())


def test_locks_exclude_across_slots_and_waiters_wake_by_sharded_messages(cluster: RedisCluster) -> None:
    holder = polylock.Client(cluster.url, response_timeout=2)
    contender = polylock.Client(cluster.url, response_timeout=2)
    names = names_on_every_primary(cluster, "py:exclusion")
    held = [holder.lock(name) for name in names]
    for name, lock in zip(names, held):
        assert lock.acquire(blocking=False)
        # On the primary serving its slot: the cluster client routed it there.
        assert exists(cluster.primary_for_key(name), cluster, name)
        assert not contender.lock(name).acquire(blocking=False)

    name = names[0]
    waiter = Waiter(contender.lock(name))
    primary = cluster.primary_for_key(name)
    assert wait_until(lambda: waiter_subscriptions(cluster, primary, name) >= 1, 10), \
        "the waiter never subscribed with SSUBSCRIBE on the slot's primary (SUBSCRIBE on 6.2)"
    assert waiter.acquired is None
    released_at = time.monotonic()
    held[0].release()
    assert waiter.outcome(LONG_LEASE) is True
    assert time.monotonic() - released_at < LONG_LEASE / 2, "woken by expiry, not by the message"
    waiter.finish()
    for lock in held[1:]:
        lock.release()
    holder.close()
    contender.close()


def test_a_slot_migrated_while_held_and_waited_on(cluster: RedisCluster) -> None:
    # A lease long enough for a loaded machine: what is checked is that a renewal lands on the
    # new node, which the test waits for.
    holder = polylock.Client(cluster.url, watchdog_timeout=FAILOVER_WATCHDOG, response_timeout=2)
    contender = polylock.Client(cluster.url, response_timeout=2)
    name = "py:migrating"
    lock = holder.lock(name)
    assert lock.acquire(blocking=False)
    waiter = Waiter(contender.lock(name))
    source = cluster.primary_for_key(name)
    assert wait_until(lambda: waiter_subscriptions(cluster, source, name) >= 1, 10)
    target = next(port for port in cluster.primaries() if port != source)

    cluster.migrate_slot(cluster.slot_for_key(name), target)

    assert exists(target, cluster, name)
    # The TTL only goes down unless a renewal sets it again: seen going up, the hold was renewed
    # on the new node.
    moved_ttl = int(cluster.server(target).command("PTTL", name))
    assert wait_until(lambda: int(cluster.server(target).command("PTTL", name)) > moved_ttl,
                      3 * FAILOVER_WATCHDOG), "no renewal reached the lock on its new node"
    assert not lock.lost
    assert waiter.acquired is None, "the waiter got a lock that is held"
    released_at = time.monotonic()
    lock.release()
    assert waiter.outcome(LONG_LEASE) is True
    assert time.monotonic() - released_at < LONG_LEASE / 2, "woken by expiry, not by the message"
    waiter.finish()
    holder.close()
    contender.close()


def test_a_killed_primary_is_replaced_and_a_replicated_lock_survives(cluster: RedisCluster) -> None:
    # Replica sync: the acquisition returns once the replica has it, so the promotion keeps it.
    # The lease outlasts the failover (the cluster calls a node failed after 2 s).
    holder = polylock.Client(
        cluster.url, watchdog_timeout=FAILOVER_WATCHDOG, response_timeout=2, sync_replicas=True
    )
    contender = polylock.Client(cluster.url, response_timeout=2)
    name = "py:killed-primary"
    lock = holder.lock(name)
    assert lock.acquire(blocking=False)
    primary = cluster.primary_for_key(name)
    replica = cluster.replica_of(primary)

    cluster.kill(primary)

    assert cluster.primary_for_key(name) == replica
    assert exists(replica, cluster, name)
    assert not contender.lock(name).acquire(blocking=False)
    time.sleep(FAILOVER_WATCHDOG + 1)
    assert not lock.lost, "the hold was not renewed on the promoted replica"
    lock.release()
    taken = contender.lock(name)
    assert taken.acquire(timeout=10)
    taken.release()
    holder.close()
    contender.close()


def test_with_replica_sync_a_lock_held_and_waited_on_survives_a_sentinel_failover() -> None:
    with RedisSentinel() as sentinel:
        holder = polylock.Client(
            sentinel.url, watchdog_timeout=FAILOVER_WATCHDOG, response_timeout=2, sync_replicas=True
        )
        contender = polylock.Client(sentinel.url, response_timeout=2, sync_replicas=True)
        name = "py:failover"
        lock = holder.lock(name)
        assert lock.acquire(blocking=False)
        waiter = Waiter(contender.lock(name))
        old = sentinel.primary()
        assert wait_until(
            lambda: int(sentinel.server(old).command("PUBSUB", "NUMSUB", channel(name))[1]) >= 1, 10
        )

        new = sentinel.failover()

        assert new != old
        assert sentinel.server(new).command("EXISTS", name) == 1
        time.sleep(FAILOVER_WATCHDOG + 1)
        assert not lock.lost, "the hold was not renewed on the new primary"
        assert waiter.acquired is None, "a second holder after the failover"
        released_at = time.monotonic()
        lock.release()
        assert waiter.outcome(LONG_LEASE) is True
        assert time.monotonic() - released_at < LONG_LEASE / 2, "woken by expiry, not by the message"
        waiter.finish()
        holder.close()
        contender.close()
