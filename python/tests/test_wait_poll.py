"""Waiting without pub/sub: ``wait_mode="poll"`` passes through to the core, so a waiter under a
Redis user that may not SUBSCRIBE still gets the lock after its release; bad poll options give
the core's InvalidArgumentError and message."""

from __future__ import annotations

import threading
import time

import pytest

import polylock
from redis_server import RedisServer


#: Bad poll options (the client's and a lock's alike) and the core's message for each.
BAD_POLL_OPTIONS = [
    ({"wait_mode": "spin"}, "wait_mode must be 'pubsub' or 'poll', got 'spin'"),
    (
        {"wait_mode": "poll", "poll_min": 0.05, "poll_max": 0.01},
        "poll_max must be at least poll_min (50 ms), got 10 ms",
    ),
    ({"poll_min": 0.005}, "poll_min and poll_max apply only with wait_mode 'poll'"),
]


def no_subscribe_url(redis_server: RedisServer) -> str:
    redis_server.command(
        "ACL", "SETUSER", "nosub_py", "on", ">secret", "~*", "&*", "+@all",
        "-subscribe", "-psubscribe", "-ssubscribe",
    )
    return f"redis://nosub_py:secret@127.0.0.1:{redis_server.port}/0"


def test_a_poll_waiter_denied_subscribe_gets_the_lock_after_the_release(
    redis_server: RedisServer,
) -> None:
    url = no_subscribe_url(redis_server)
    with polylock.Client(redis_server.url) as holder_client, polylock.Client(
        url, wait_mode="poll", poll_min=0.001, poll_max=0.05
    ) as waiter_client:
        holder = holder_client.lock("py-poll")
        assert holder.acquire(timeout=0, lease=60)
        waiter = waiter_client.lock("py-poll")
        # A bounded wait runs out while it is held.
        assert not waiter.acquire(timeout=0.2)
        assert_waiter_gets_it_after_the_release(holder, waiter)


def assert_waiter_gets_it_after_the_release(holder: polylock.Lock, waiter: polylock.Lock) -> None:
    """``holder`` holds the lock with a 60 s lease: ``waiter``, waiting in another thread (locks
    are owned per thread), gets it soon after ``holder`` releases, long before that lease."""
    outcome: list[tuple[bool, float]] = []

    def wait() -> None:
        started = time.monotonic()
        acquired = waiter.acquire(timeout=20)
        outcome.append((acquired, time.monotonic() - started))
        if acquired:
            waiter.release()

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.3)
    holder.release()
    thread.join(30)
    [(acquired, took)] = outcome
    assert acquired
    assert took < 10


def test_the_same_user_in_pubsub_mode_gets_a_permission_error(redis_server: RedisServer) -> None:
    url = no_subscribe_url(redis_server)
    with polylock.Client(redis_server.url) as holder_client, polylock.Client(url) as waiter_client:
        holder = holder_client.lock("py-pubsub")
        assert holder.acquire(timeout=0)
        with pytest.raises(polylock.PermissionError):
            waiter_client.lock("py-pubsub").acquire(timeout=20)


@pytest.mark.parametrize(("options", "message"), BAD_POLL_OPTIONS)
def test_bad_poll_options_give_the_cores_error(
    redis_server: RedisServer, options: dict[str, object], message: str
) -> None:
    with pytest.raises(polylock.InvalidArgumentError) as refused:
        polylock.Client(redis_server.url, **options)  # type: ignore[arg-type]
    assert str(refused.value) == f"invalid argument: {message}"


@pytest.mark.parametrize("kind", ["lock", "fair_lock", "fifo_lock", "fenced_lock"])
def test_a_lock_of_its_own_poll_mode_waits_without_subscribing_on_a_pubsub_client(
    redis_server: RedisServer, kind: str
) -> None:
    """The per-lock wait mode: the same user and client whose pub/sub waiter gets a
    PermissionError above gets the lock by polling when only the lock says "poll"."""
    url = no_subscribe_url(redis_server)
    name = f"py-own-poll-{kind}"
    with polylock.Client(redis_server.url) as holder_client, polylock.Client(url) as waiter_client:
        holder = getattr(holder_client, kind)(name)
        assert holder.acquire(timeout=0, lease=60)
        waiter = getattr(waiter_client, kind)(name, wait_mode="poll", poll_min=0.001, poll_max=0.05)
        assert_waiter_gets_it_after_the_release(holder, waiter)


def test_a_pubsub_lock_on_a_poll_client_fails_each_acquire(redis_server: RedisServer) -> None:
    with polylock.Client(redis_server.url, wait_mode="poll") as client:
        lock = client.lock("py-own-pubsub", wait_mode="pubsub")
        with pytest.raises(polylock.InvalidArgumentError) as refused:
            lock.acquire(timeout=1)
        assert str(refused.value) == (
            "invalid argument: lock 'py-own-pubsub': wait_mode pubsub needs a pub/sub "
            "connection, which a client connected with wait_mode poll does not open"
        )
        # The client's own mode still serves its other locks.
        other = client.lock("py-own-pubsub-other")
        assert other.acquire(timeout=1)
        other.release()


@pytest.mark.parametrize(("options", "message"), BAD_POLL_OPTIONS)
def test_bad_per_lock_poll_options_give_the_cores_error_at_creation(
    redis_server: RedisServer, options: dict[str, object], message: str
) -> None:
    with polylock.Client(redis_server.url) as client:
        with pytest.raises(polylock.InvalidArgumentError) as refused:
            client.lock("py-bad-own-poll", **options)  # type: ignore[arg-type]
    assert str(refused.value) == f"invalid argument: {message}"
