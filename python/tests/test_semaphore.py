"""The semaphore and the expirable semaphore (blocking and asyncio) against a real
redis-server: permits conserved under concurrency, waiters woken by releases, the permit of a
killed holder coming back (expirable) or not (plain), bad types.
What every binding does alike (results, errors, Redisson's layout) is in the conformance cases
(tests/conformance/behaviour.json, run by test_conformance_behaviour.py); this file keeps
Python's own: threads and tasks as holders, context managers, units, asyncio."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import polylock
from helpers import wait_until


@pytest.fixture
def client(url: str):
    with polylock.Client(url) as client:
        yield client


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, timeout=120))


PERMIT_ID = re.compile(r"[0-9a-f]{32}")


# ---- the semaphore ----


def test_permits_take_pythons_units_and_no_bound(client, name):
    # Setting, adding, taking and giving back permits: the conformance cases.
    semaphore = client.semaphore(name)
    assert semaphore.name == name
    assert semaphore.try_set_permits(3) is True
    assert semaphore.acquire(2, timeout=0.2) is True
    assert semaphore.acquire(2, timeout=0.2) is False
    assert semaphore.acquire(permits=1, timeout=-1) is True  # threading's "no bound"
    with pytest.raises(polylock.InvalidArgumentError):
        semaphore.release(0)


def test_with_takes_one_permit_and_gives_it_back(client, name):
    semaphore = client.semaphore(name)
    assert semaphore.try_set_permits(2)
    with semaphore as entered:
        assert entered is semaphore
        assert semaphore.available_permits() == 1
        with semaphore:
            assert semaphore.available_permits() == 0
    assert semaphore.available_permits() == 2
    with pytest.raises(RuntimeError):
        with semaphore:
            raise RuntimeError("the permit is given back all the same")
    assert semaphore.available_permits() == 2


def test_permits_are_conserved_under_concurrent_threads(client, url, name):
    permits, workers, rounds = 3, 6, 15
    assert client.semaphore(name).try_set_permits(permits)
    inside = 0
    most_inside = 0
    mutex = threading.Lock()
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        nonlocal inside, most_inside
        try:
            # Half the threads share this client's semaphore object, half have a client each.
            own = polylock.Client(url) if index % 2 else None
            semaphore = (own or client).semaphore(name)
            for round_ in range(rounds):
                taken = 1 + (index + round_) % 2
                assert semaphore.acquire(taken, timeout=60)
                with mutex:
                    inside += taken
                    most_inside = max(most_inside, inside)
                time.sleep(0.002)  # widens the window an over-granted permit would expose
                with mutex:
                    inside -= taken
                semaphore.release(taken)
            if own is not None:
                own.close()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert 1 <= most_inside <= permits
    assert client.semaphore(name).available_permits() == permits


def test_a_waiter_is_woken_by_the_release_not_by_polling(client, url, name):
    semaphore = client.semaphore(name)
    assert semaphore.try_set_permits(1)
    assert semaphore.acquire()
    outcome: list[float] = []
    waiting = threading.Event()

    def wait_for_a_permit() -> None:
        with polylock.Client(url) as other_client:
            other = other_client.semaphore(name)
            waiting.set()
            begin = time.monotonic()
            if other.acquire(timeout=55):
                outcome.append(time.monotonic() - begin)

    thread = threading.Thread(target=wait_for_a_permit)
    thread.start()
    assert waiting.wait(timeout=10)
    time.sleep(0.3)  # lets the waiter start waiting
    assert thread.is_alive() and not outcome
    released = time.monotonic()
    semaphore.release()
    thread.join(timeout=60)
    assert len(outcome) == 1
    assert time.monotonic() - released < 10, "woken by the timeout, not by the release"
    assert semaphore.available_permits() == 0


# ---- the expirable semaphore ----


def test_an_expirable_permit_whose_lease_runs_out_comes_back(client, name):
    # Ids, their release (also by another client) and held_permits: the conformance cases.
    semaphore = client.expirable_semaphore(name)
    assert semaphore.try_set_permits(2)
    # A fixed lease (seconds) runs out: the permit comes back and its release says it was lost.
    short = semaphore.acquire(lease=0.2)
    assert short is not None
    assert wait_until(lambda: semaphore.available_permits() == 2, timeout=10)
    with pytest.raises(polylock.LockLostError):
        semaphore.release(short)
    with pytest.raises(polylock.InvalidArgumentError):
        semaphore.release("not-a-permit")


def test_expired_permits_leave_the_handle(client, url, name):
    """A permit whose fixed lease ran out leaves held_permits (the core drops it: no list of
    its own here), and its release says it was lost without giving back another's permit."""
    semaphore = client.expirable_semaphore(name)
    assert semaphore.try_set_permits(50)
    permits = [semaphore.acquire(timeout=0, lease=0.3) for _ in range(50)]
    assert all(permit is not None for permit in permits)
    leases_end = time.monotonic() + 0.3
    assert wait_until(lambda: semaphore.available_permits() == 50, timeout=10)
    # The client ends each lease by its own clock, no later than the server: seconds suffice.
    assert wait_until(
        lambda: semaphore.held_permits() == [], timeout=max(leases_end + 3 - time.monotonic(), 0)
    ), f"{len(semaphore.held_permits())} expired permits still held"
    with polylock.Client(url) as other_client:
        taker = other_client.expirable_semaphore(name)
        taken = [taker.acquire(timeout=0, lease=60) for _ in range(50)]
        assert all(permit is not None for permit in taken)
        with pytest.raises(polylock.LockLostError):
            semaphore.release(permits[0])
        with pytest.raises(polylock.NotHeldError):
            semaphore.release(permits[0])
        assert taker.available_permits() == 0
        assert len(taker.held_permits()) == 50


def test_an_expirable_waiter_is_woken_by_the_release(client, url, name):
    semaphore = client.expirable_semaphore(name)
    assert semaphore.try_set_permits(1)
    held = semaphore.acquire()
    assert held is not None
    outcome: list[str] = []

    def wait_for_a_permit() -> None:
        with polylock.Client(url) as other_client:
            other = other_client.expirable_semaphore(name)
            permit = other.acquire(timeout=55)
            if permit is not None:
                outcome.append(permit)
                other.release(permit)

    thread = threading.Thread(target=wait_for_a_permit)
    thread.start()
    time.sleep(0.3)  # lets the waiter start waiting
    assert thread.is_alive()
    released = time.monotonic()
    semaphore.release(held)
    thread.join(timeout=60)
    assert len(outcome) == 1 and outcome[0] != held
    assert time.monotonic() - released < 10, "woken by the timeout, not by the release"


HOLDER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import polylock

    url, plain_name, expirable_name, lease = sys.argv[1:5]
    client = polylock.Client(url, watchdog_timeout=2)
    assert client.semaphore(plain_name).acquire(timeout=10)
    expirable = client.expirable_semaphore(expirable_name)
    permit = expirable.acquire(timeout=10, lease=None if lease == "watchdog" else float(lease))
    assert permit is not None
    print("holding", flush=True)
    time.sleep(600)
    """
)


@pytest.mark.parametrize("lease", ["1.5", "watchdog"])
def test_a_killed_holders_expirable_permit_comes_back_and_a_plain_one_does_not(
    client, url, name, lease
):
    plain = client.semaphore(f"{name}:plain")
    expirable = client.expirable_semaphore(f"{name}:expirable")
    assert plain.try_set_permits(1)
    assert expirable.try_set_permits(1)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER_SCRIPT, url, plain.name, expirable.name, lease],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line == "holding\n", line + (holder.stderr.read() if holder.stderr else "")
        assert plain.available_permits() == 0
        assert expirable.available_permits() == 0
        if lease == "watchdog":
            # Renewed while the holder lives: still taken after the watchdog timeout (2 s).
            time.sleep(3)
            assert expirable.available_permits() == 0
            assert expirable.acquire(timeout=0) is None
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        killed = time.monotonic()
        assert wait_until(lambda: expirable.available_permits() == 1, timeout=30)
        back_after = time.monotonic() - killed
        assert back_after < 20
        permit = expirable.acquire(timeout=0)
        assert permit is not None
        expirable.release(permit)
        # The plain semaphore's permit died with its holder.
        assert plain.available_permits() == 0
        assert plain.acquire(timeout=0.5) is False
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


# ---- asyncio ----


def test_asyncio_semaphore_conservation_wakeup_and_cancel(url, name):
    async def main() -> None:
        async with await polylock.AsyncClient.connect(url) as client:
            semaphore = client.semaphore(name)
            assert await semaphore.try_set_permits(2)
            assert await semaphore.try_set_permits(2) is False
            inside = 0
            most_inside = 0

            async def worker(index: int) -> None:
                nonlocal inside, most_inside
                for round_ in range(10):
                    taken = 1 + (index + round_) % 2
                    assert await semaphore.acquire(taken, timeout=60)
                    inside += taken
                    most_inside = max(most_inside, inside)
                    await asyncio.sleep(0.002)
                    inside -= taken
                    await semaphore.release(taken)

            await asyncio.gather(*(worker(index) for index in range(6)))
            assert 1 <= most_inside <= 2
            assert await semaphore.available_permits() == 2

            async with semaphore as entered:
                assert entered is semaphore
                assert await semaphore.available_permits() == 1
            assert await semaphore.available_permits() == 2

            # A waiter is woken by a release.
            assert await semaphore.acquire(2)
            waiter = asyncio.create_task(semaphore.acquire(1, timeout=55))
            await asyncio.sleep(0.3)
            assert not waiter.done()
            released = time.monotonic()
            await semaphore.release()
            assert await waiter
            assert time.monotonic() - released < 10
            assert await semaphore.available_permits() == 0

            # A cancelled waiter takes nothing.
            waiter = asyncio.create_task(semaphore.acquire(1))
            await asyncio.sleep(0.2)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            await semaphore.release(2)
            await asyncio.sleep(0.3)  # a waiter that survived the cancel would take one now
            assert await semaphore.available_permits() == 2

            await semaphore.add_permits(-2)
            assert await semaphore.acquire(timeout=0) is False
            with pytest.raises(polylock.InvalidArgumentError):
                await semaphore.acquire(0)

    run(main())


def test_asyncio_expirable_semaphore(url, name):
    async def main() -> None:
        async with await polylock.AsyncClient.connect(url) as client:
            semaphore = client.expirable_semaphore(name)
            assert await semaphore.try_set_permits(1)
            permit = await semaphore.acquire()
            assert permit is not None and PERMIT_ID.fullmatch(permit)
            assert semaphore.held_permits() == [permit]
            assert await semaphore.acquire(timeout=0) is None
            waiter = asyncio.create_task(semaphore.acquire(timeout=55, lease=30))
            await asyncio.sleep(0.3)
            assert not waiter.done()
            released = time.monotonic()
            await semaphore.release(permit)
            second = await waiter
            assert second is not None and second != permit
            assert time.monotonic() - released < 10
            with pytest.raises(polylock.NotHeldError):
                await semaphore.release(permit)
            await semaphore.release(second)
            assert await semaphore.available_permits() == 1

            # A cancelled waiter takes nothing.
            held = await semaphore.acquire()
            assert held is not None
            waiter = asyncio.create_task(semaphore.acquire())
            await asyncio.sleep(0.2)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            await semaphore.release(held)
            await asyncio.sleep(0.3)  # a waiter that survived the cancel would take it now
            assert await semaphore.available_permits() == 1
            await semaphore.add_permits(1)
            assert await semaphore.available_permits() == 2

    run(main())
