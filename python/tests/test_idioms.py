"""redis-py idioms: per-lock defaults, owned(), force_unlock(), remaining_lease(), __version__,
and the core's events on the `logging` logger "polylock". Against a real redis-server."""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import math
import threading

import pytest

import polylock
from polylock._shared import thread_holder_id
from helpers import wait_until


@pytest.fixture
def client(url: str):
    with polylock.Client(url) as client:
        yield client


@pytest.fixture
def other(url: str):
    """A second client: another holder."""
    with polylock.Client(url) as other:
        yield other


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, timeout=60))


def test_version_is_the_package_version():
    assert polylock.__version__ == importlib.metadata.version("polylock")
    assert polylock.__version__[0].isdigit()


# ---- per-lock defaults --------------------------------------------------------------------


def test_default_lease_is_used_and_an_explicit_none_takes_the_watchdog(client, redis, name):
    lock = client.lock(name, lease=2.0)
    assert lock.default_lease == 2.0 and lock.default_timeout is None
    assert lock.acquire()
    assert 0 < redis("PTTL", name) <= 2000
    lock.release()
    assert lock.acquire(lease=None)  # explicit: the watchdog lease (30 s)
    assert redis("PTTL", name) > 2000
    lock.release()
    with lock:
        assert 0 < redis("PTTL", name) <= 2000
    assert redis("EXISTS", name) == 0


def test_default_timeout_bounds_acquire_and_with_raises(client, other, name):
    holder = other.lock(name)
    assert holder.acquire(lease=30)
    lock = client.lock(name, timeout=0.2)
    assert lock.default_timeout == pytest.approx(0.2)
    assert lock.acquire() is False
    assert lock.acquire(blocking=False) is False  # one attempt: the default timeout is not an error
    entered = []
    with pytest.raises(polylock.TimeoutError) as raised:
        with lock:
            entered.append(True)
    assert entered == []
    assert isinstance(raised.value, TimeoutError) and isinstance(raised.value, polylock.LockError)
    # The core's message, the same as Rust's lock(), Node's using() and Kotlin's withLock.
    # Then who held it (the holder's client record; test_client_record.py).
    assert str(raised.value).startswith(
        f"lock '{name}' was not acquired within 200 ms: another owner held it all that time (held by '"
    )
    assert not lock.owned()


def test_explicit_timeout_none_waits_past_the_default(client, other, name):
    holder = other.lock(name)
    assert holder.acquire(lease=0.8)  # free again when this lease runs out
    lock = client.lock(name, timeout=0.1)
    assert lock.acquire(timeout=None)  # no bound: outlasts the 0.1 s default
    assert lock.owned()
    lock.release()


def test_explicit_timeout_wins_over_the_default(client, other, name):
    holder = other.lock(name)
    assert holder.acquire(lease=30)
    lock = client.lock(name)  # default: no bound
    assert lock.acquire(timeout=0.1) is False


@pytest.mark.parametrize(
    "kind", ["lock", "fair_lock", "fifo_lock", "fenced_lock", "read_write_lock"]
)
def test_every_factory_takes_defaults(client, redis, name, kind):
    made = getattr(client, kind)(name, timeout=5.0, lease=3.0)
    lock = made.write_lock() if kind == "read_write_lock" else made
    assert (lock.default_timeout, lock.default_lease) == (5.0, 3.0)
    with lock:
        assert lock.owned()
        remaining = lock.remaining_lease()
        assert remaining is not None and 0 < remaining <= 3.0
    assert not lock.owned()


@pytest.mark.parametrize(
    "defaults, message",
    [({"timeout": -1.5}, "wait"), ({"timeout": math.nan}, "wait"), ({"lease": 0}, "lease"),
     ({"lease": math.inf}, "lease")],
)
def test_bad_defaults_are_refused_by_the_factory_with_the_acquire_message(
    client, name, defaults, message
):
    with pytest.raises(polylock.InvalidArgumentError, match=message) as at_factory:
        client.lock(name, **defaults)
    with pytest.raises(polylock.InvalidArgumentError) as at_acquire:
        client.lock(name).acquire(**defaults)
    assert str(at_factory.value) == str(at_acquire.value)


# ---- owned, force_unlock, remaining_lease ---------------------------------------------------


def test_owner_is_the_hash_field_of_the_calling_thread(client, redis, name):
    lock = client.lock(name)
    assert lock.owner == f"{client.id}:{thread_holder_id()}"
    with lock:
        assert redis("HEXISTS", name, lock.owner) == 1
    seen = []
    thread = threading.Thread(target=lambda: seen.append(lock.owner))
    thread.start()
    thread.join()
    assert seen != [lock.owner] and seen[0].startswith(f"{client.id}:")


def test_owned_is_per_thread(client, name):
    lock = client.lock(name)
    assert not lock.owned()
    with lock:
        assert lock.owned()
        seen = []
        thread = threading.Thread(target=lambda: seen.append(lock.owned()))
        thread.start()
        thread.join()
        assert seen == [False]
    assert not lock.owned()


def test_force_unlock_deletes_another_holders_lock(client, other, redis, name):
    holder = other.lock(name)
    assert holder.acquire()
    lock = client.lock(name)
    assert lock.force_unlock() is True
    assert redis("EXISTS", name) == 0
    assert lock.acquire(timeout=5)
    lock.release()
    assert lock.force_unlock() is False
    with pytest.raises(polylock.LockLostError):
        holder.release()  # its hold was taken away


def test_remaining_lease(client, redis, name):
    lock = client.lock(name)
    assert lock.remaining_lease() is None
    assert lock.acquire(lease=5)
    remaining = lock.remaining_lease()
    assert remaining is not None and 0 < remaining <= 5
    lock.release()
    redis("HSET", name, "someone:1", 1)  # a lock hash written without an expiry
    assert lock.remaining_lease() == math.inf
    assert lock.locked()


def test_async_idioms(url, redis, name):
    async def main() -> None:
        async with await polylock.AsyncClient.connect(url) as client:
            holder = polylock.Client(url)
            try:
                held = holder.lock(name)
                assert held.acquire(lease=30)
                lock = client.lock(name, timeout=0.2, lease=4.0)
                assert await lock.acquire() is False
                entered = []
                with pytest.raises(polylock.TimeoutError):
                    async with lock:
                        entered.append(True)
                assert entered == []
                remaining = await lock.remaining_lease()
                assert remaining is not None and 4 < remaining <= 30
                assert await lock.force_unlock() is True
                assert await lock.remaining_lease() is None
                async with lock:
                    assert lock.owned()
                    assert redis("HEXISTS", name, lock.owner) == 1
                    remaining = await lock.remaining_lease()
                    assert remaining is not None and 0 < remaining <= 4.0
                assert not lock.owned()
                assert await lock.acquire(lease=None)  # explicit: the watchdog lease
                assert redis("PTTL", name) > 4000
                await lock.release()
                assert await lock.force_unlock() is False
            finally:
                holder.close()

    run(main())


def test_async_factories_take_defaults(url, name):
    async def main() -> None:
        async with await polylock.AsyncClient.connect(url) as client:
            for lock in (client.fair_lock(name, timeout=1.0, lease=2.0),
                         client.fifo_lock(f"{name}:fifo", timeout=1.0, lease=2.0),
                         client.fenced_lock(f"{name}:f", timeout=1.0, lease=2.0),
                         client.read_write_lock(f"{name}:rw", timeout=1.0, lease=2.0).read_lock()):
                assert (lock.default_timeout, lock.default_lease) == (1.0, 2.0)
                async with lock:
                    remaining = await lock.remaining_lease()
                    assert remaining is not None and 0 < remaining <= 2.0
            with pytest.raises(polylock.InvalidArgumentError):
                client.lock(name, lease=0)

    run(main())


# ---- logging ------------------------------------------------------------------------------


def lost_warnings(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [
        record for record in caplog.records
        if record.name == "polylock" and record.levelno == logging.WARNING
        and "lock lost" in record.getMessage() and name in record.getMessage()
    ]


def test_a_lost_lease_is_a_warning_on_the_polylock_logger(client, name, caplog):
    caplog.set_level(logging.WARNING, logger="polylock")
    lock = client.lock(name, lease=0.1)
    assert lock.acquire()
    assert wait_until(lambda: lock.lost, timeout=5)
    assert wait_until(lambda: lost_warnings(caplog, name), timeout=5)


def test_a_log_handler_may_call_back_into_polylock(client, name, caplog):
    """The handler runs on polylock's delivery thread with the GIL; calling the core from there
    (which releases the GIL and waits on the runtime) must not deadlock."""
    lock = client.lock(name, lease=0.1)
    answers: list[object] = []

    class Asking(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if name in record.getMessage():
                answers.append(lock.remaining_lease())

    handler = Asking(level=logging.WARNING)
    logger = logging.getLogger("polylock")
    logger.addHandler(handler)
    caplog.set_level(logging.WARNING, logger="polylock")
    try:
        assert lock.acquire()
        assert wait_until(lambda: answers, timeout=5)
        # The call from the handler came back (no deadlock) with the server's view of the lease:
        # gone, or the last moment of it (the client declares the loss at the earliest moment the
        # lease can have ended, counted from when it sent the acquire, so the server may expire
        # the key a millisecond later); never a renewed lease.
        assert answers[0] is None or answers[0] < 0.05, answers
    finally:
        logger.removeHandler(handler)

