"""Waiting without pub/sub: ``wait_mode="poll"`` passes through to the core, so a waiter under a
Redis user that may not SUBSCRIBE still gets the lock after its release; bad poll options give
the core's InvalidArgumentError and message."""

from __future__ import annotations

import threading
import time

import pytest

import polylock
from redis_server import RedisServer


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
        # Locks are owned per thread: the waiter takes and gives it back on its own.
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
        # Woken by looking, long before the holder's 60 s lease.
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


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"wait_mode": "spin"}, "wait_mode must be 'pubsub' or 'poll', got 'spin'"),
        (
            {"wait_mode": "poll", "poll_min": 0.05, "poll_max": 0.01},
            "poll_max must be at least poll_min (50 ms), got 10 ms",
        ),
        ({"poll_min": 0.005}, "poll_min and poll_max apply only with wait_mode 'poll'"),
    ],
)
def test_bad_poll_options_give_the_cores_error(
    redis_server: RedisServer, options: dict[str, object], message: str
) -> None:
    with pytest.raises(polylock.InvalidArgumentError) as refused:
        polylock.Client(redis_server.url, **options)  # type: ignore[arg-type]
    assert str(refused.value) == f"invalid argument: {message}"
