"""Leader election (client.election) through the Python binding, against a real redis-server:
campaign, resign, terms, proclaim, leader(), observe (sync iterator, async iterator), the lost
signal when the leader is cut off by the fault proxy, and a CLIENT KILL the leader survives."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Optional

import pytest

import polylock
from helpers import wait_until

LONG_LEASE = 60.0
SHORT_LEASE = 1.5


def test_campaign_resign_and_terms(url, name):
    with polylock.Client(url, watchdog_timeout=LONG_LEASE, name="py-a") as alice, polylock.Client(
        url, watchdog_timeout=LONG_LEASE, name="py-b"
    ) as bob:
        election = alice.election(name)
        assert election.leader() is None
        first = election.campaign("a:1")
        assert first is not None and first.is_leader() and not first.lost.is_set()
        assert election.leader() == polylock.Leader("a:1", first.term, first.owner, "py-a")
        # Another candidate of the same client does not lead while alice does.
        assert election.campaign("again", timeout=0) is None

        won: list[Optional[polylock.Leadership]] = []
        waiting = threading.Thread(target=lambda: won.append(bob.election(name).campaign("b:1")))
        waiting.start()
        time.sleep(0.2)
        assert not won
        with first:
            first.proclaim("a:2")
            assert election.leader().value == "a:2"  # type: ignore[union-attr]
        # Leaving the block resigned: bob is woken long before the 60 s lease.
        assert first.lost.wait(5) and not first.is_leader()
        waiting.join(timeout=20)
        second = won[0]
        assert second is not None and second.term > first.term
        with pytest.raises(polylock.LockLostError):
            first.proclaim("late")
        leader = election.leader()
        assert leader is not None and (leader.value, leader.client_name) == ("b:1", "py-b")
        second.resign()
        second.resign()
        assert election.leader() is None


def test_observe_yields_leader_changes(url, name):
    with polylock.Client(url, watchdog_timeout=LONG_LEASE) as client:
        election = client.election(name)
        changes = election.observe(timeout=10)
        assert next(changes) is None
        leadership = election.campaign("x")
        assert leadership is not None
        seen = next(changes)
        assert seen is not None and (seen.value, seen.term) == ("x", leadership.term)
        leadership.proclaim("y")
        assert next(changes).value == "y"  # type: ignore[union-attr]
        leadership.resign()
        assert next(changes) is None
        # Without a change the iteration ends once its timeout passes.
        assert list(election.observe(timeout=0.3))[1:] == []


def test_a_cut_off_leader_is_told_it_lost(fault_proxy, url, name):
    with polylock.Client(
        fault_proxy.url, watchdog_timeout=SHORT_LEASE, response_timeout=10
    ) as cut, polylock.Client(url, watchdog_timeout=LONG_LEASE) as other:
        leadership = cut.election(name).campaign("cut")
        assert leadership is not None
        fault_proxy.blackhole()
        started = time.monotonic()
        assert leadership.lost.wait(SHORT_LEASE + 5), "the lost signal never fired"
        assert time.monotonic() - started < SHORT_LEASE + 5
        assert leadership.lost.is_set() and not leadership.is_leader()
        with pytest.raises(polylock.LockLostError):
            leadership.proclaim("still me")
        nxt = other.election(name).campaign("other", timeout=SHORT_LEASE + 5)
        assert nxt is not None and nxt.term > leadership.term
        nxt.resign()


def test_a_killed_connection_keeps_the_leadership(url, redis, name):
    """CLIENT KILL drops the leader's connections; the client reconnects, its lease is renewed,
    and it still leads and can proclaim."""
    with polylock.Client(url, watchdog_timeout=SHORT_LEASE) as client:
        leadership = client.election(name).campaign("kept")
        assert leadership is not None
        # Its command and pub/sub connections (the latter counts as normal while it has no
        # channel).
        assert redis("CLIENT", "KILL", "TYPE", "normal") >= 1
        time.sleep(SHORT_LEASE * 2)
        assert leadership.is_leader() and not leadership.lost.is_set()
        leadership.proclaim("still kept")
        assert client.election(name).leader().value == "still kept"  # type: ignore[union-attr]
        leadership.resign()


def test_asyncio_election(url, name):
    async def main() -> None:
        async with await polylock.AsyncClient.connect(url, watchdog_timeout=LONG_LEASE) as client:
            election = client.election(name)
            changes = election.observe()
            assert await changes.__anext__() is None
            leadership = await election.campaign("async")
            assert leadership is not None
            seen = await asyncio.wait_for(changes.__anext__(), 10)
            assert seen is not None and seen.term == leadership.term
            # A cancelled campaign leaves nothing held.
            waiting = asyncio.create_task(election.campaign("waiter"))
            await asyncio.sleep(0.2)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await leadership.proclaim("async 2")
            assert (await election.leader()).value == "async 2"  # type: ignore[union-attr]
            lost = asyncio.create_task(leadership.lost.wait())
            async with leadership:
                pass
            assert await asyncio.wait_for(lost, 5)
            assert await asyncio.wait_for(changes.__anext__(), 10) is None
            nxt = await election.campaign("next", timeout=5)
            assert nxt is not None and nxt.term > leadership.term
            await nxt.resign()
            await changes.aclose()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_bad_name_is_invalid_argument(url):
    with polylock.Client(url) as client:
        with pytest.raises(polylock.InvalidArgumentError):
            client.election("")
