"""The blocking API against a real redis-server."""

from __future__ import annotations

import gc
import math
import socket
import threading
import time

import pytest

import polylock
from polylock._shared import thread_holder_id
from helpers import RedisConnection, hash_count, wait_until


@pytest.fixture
def client(url: str):
    with polylock.Client(url) as client:
        yield client


def owner_of(client: polylock.Client) -> str:
    return f"{client.id}:{thread_holder_id()}"


def test_threads_sharing_one_lock_exclude_each_other(client, redis_server, name):
    lock = client.lock(name)
    counter_key = f"{name}:counter"
    threads_count, rounds = 4, 15
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with RedisConnection(redis_server.port) as redis:
                for _ in range(rounds):
                    with lock:
                        assert lock.owned() and lock.hold_count() == 1
                        value = int(redis("GET", counter_key) or 0)
                        time.sleep(0.002)
                        redis("SET", counter_key, value + 1)
                    assert not lock.owned()
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    with RedisConnection(redis_server.port) as redis:
        assert int(redis("GET", counter_key)) == threads_count * rounds
        assert redis("EXISTS", name) == 0


def test_a_held_lock_excludes_another_thread_of_the_same_lock_object(client, name):
    lock = client.lock(name)
    assert lock.acquire()
    seen: dict[str, object] = {}

    def other() -> None:
        seen["owned"] = lock.owned()
        seen["try"] = lock.acquire(blocking=False)
        seen["bounded"] = lock.acquire(timeout=0.2)
        try:
            lock.release()
        except polylock.NotHeldError as error:
            seen["release"] = error

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(timeout=30)
    assert seen["owned"] is False
    assert seen["try"] is False
    assert seen["bounded"] is False
    assert isinstance(seen["release"], RuntimeError)
    assert lock.owned()
    lock.release()
    assert not lock.locked()


def test_reentrancy_matches_the_redis_hash_count(client, redis, name):
    lock = client.lock(name)
    owner = owner_of(client)
    for level in range(1, 4):
        assert lock.acquire()
        assert lock.hold_count() == level
        assert hash_count(redis, name, owner) == level
    # Another Lock object of the same name, same thread: the same owner, so it re-enters.
    same_thread = client.lock(name)
    assert same_thread.acquire(blocking=False)
    assert hash_count(redis, name, owner) == 4
    same_thread.release()
    for level in range(2, -1, -1):
        lock.release()
        assert lock.hold_count() == level
    assert redis("EXISTS", name) == 0
    assert not lock.owned()
    with pytest.raises(polylock.NotHeldError):
        lock.release()


def test_fixed_lease_expires_and_reports_lost(client, redis, name):
    lock = client.lock(name)
    assert lock.acquire(lease=0.5)
    assert 0 < redis("PTTL", name) <= 500
    assert wait_until(lambda: lock.lost, timeout=5)
    # The client counts the lease from when it sent the acquire, so it reports the loss no
    # later than the server's expiry, which may come a moment after it.
    assert wait_until(lambda: redis("EXISTS", name) == 0, timeout=5)
    assert not lock.owned()
    with pytest.raises(polylock.LockLostError):
        lock.release()


def test_watchdog_keeps_a_lock_alive_past_its_lease(url, redis, name):
    with polylock.Client(url, watchdog_timeout=1.5) as client:
        lock = client.lock(name)
        assert lock.acquire()
        deadline = time.monotonic() + 4.5  # three times the lease
        while time.monotonic() < deadline:
            assert not lock.lost
            assert redis("PTTL", name) > 0
            time.sleep(0.25)
        assert lock.owned()
        lock.release()
        assert redis("EXISTS", name) == 0


def test_lost_notification_when_the_key_is_deleted(url, redis, name):
    with polylock.Client(url, watchdog_timeout=1.5) as client:
        lock = client.lock(name)
        called = threading.Event()
        received: list[object] = []
        threads: list[int] = []

        def on_lost(error: polylock.LockLostError) -> None:
            received.append(error)
            threads.append(thread_holder_id())
            called.set()

        lock.on_lost(on_lost)
        assert lock.acquire()
        assert not lock.lost
        assert redis("DEL", name) == 1
        assert called.wait(timeout=10)
        assert lock.lost
        assert not lock.owned()
        assert len(received) == 1 and isinstance(received[0], polylock.LockLostError)
        assert threads[0] != thread_holder_id()
        with pytest.raises(polylock.LockLostError):
            lock.release()


def test_waiter_is_woken_by_the_release_long_before_the_lease(url, client, name):
    holding = threading.Event()
    errors: list[BaseException] = []

    def hold_briefly() -> None:
        try:
            holder = client.lock(name)
            assert holder.acquire(lease=60)
            holding.set()
            time.sleep(0.2)
            holder.release()
        except BaseException as error:
            errors.append(error)
            holding.set()

    thread = threading.Thread(target=hold_briefly)
    thread.start()
    assert holding.wait(timeout=10)
    with polylock.Client(url) as other_client:
        waiter = other_client.lock(name)
        started = time.monotonic()
        assert waiter.acquire(timeout=55)
        waited = time.monotonic() - started
        assert waited < 10, f"woken after {waited:.1f} s: by expiry, not by the release message"
        waiter.release()
    thread.join(timeout=10)
    assert not errors


def test_bounded_wait_returns_false(client, url, name):
    holder = client.lock(name)
    assert holder.acquire()
    with polylock.Client(url) as other_client:
        waiter = other_client.lock(name)
        started = time.monotonic()
        assert waiter.acquire(timeout=0.3) is False
        assert time.monotonic() - started >= 0.3
        assert waiter.acquire(blocking=False) is False
        assert waiter.hold_count() == 0
    holder.release()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"timeout": -0.5},
        {"timeout": math.nan},
        {"lease": 0},
        {"lease": -1},
        {"lease": math.nan},
        {"lease": math.inf},
        {"blocking": False, "timeout": 1},
    ],
)
def test_bad_acquire_arguments(client, name, kwargs):
    lock = client.lock(name)
    with pytest.raises(polylock.InvalidArgumentError) as raised:
        lock.acquire(**kwargs)
    assert isinstance(raised.value, ValueError)
    assert lock.hold_count() == 0
    assert not lock.locked()


def test_bad_names_and_options(client, url):
    with pytest.raises(polylock.InvalidArgumentError, match="empty"):
        client.lock("")
    with pytest.raises(polylock.InvalidArgumentError):
        client.lock("x" * 5000)
    with pytest.raises(ValueError):
        polylock.Client(url, watchdog_timeout=0)
    with pytest.raises(polylock.InvalidArgumentError):
        polylock.Client(url, connect_timeout=-1)
    with pytest.raises(polylock.InvalidArgumentError):
        polylock.Client("not a url")


def test_a_string_key_of_the_same_name_is_wrong_type(client, redis, name):
    redis("SET", name, "not a lock")
    lock = client.lock(name)
    with pytest.raises(polylock.WrongTypeError) as raised:
        lock.acquire(timeout=1)
    assert isinstance(raised.value, polylock.LockError)
    assert redis("GET", name) == b"not a lock"


def test_unreachable_server_is_a_connection_error():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(polylock.ConnectionError) as raised:
        polylock.Client(f"redis://127.0.0.1:{port}/0", connect_timeout=1)
    assert isinstance(raised.value, ConnectionError)


def test_silent_server_fails_within_the_connect_timeout():
    with socket.socket() as silent:  # accepts TCP connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(polylock.ConnectionError):
            polylock.Client(f"redis://127.0.0.1:{port}/0", connect_timeout=1)
        assert time.monotonic() - started < 4


def test_closed_client_refuses_work_and_names_held_locks(url, name):
    client = polylock.Client(url)
    lock = client.lock(name)
    assert lock.acquire(lease=5)
    assert client.close() == [name]
    with pytest.raises(polylock.ConnectionError, match="closed"):
        lock.acquire()


def test_collected_while_held_warns_and_releases(client, redis, name):
    lock = client.lock(name)
    assert lock.acquire()
    assert redis("EXISTS", name) == 1
    with pytest.warns(ResourceWarning, match=name):
        del lock
        gc.collect()
    assert wait_until(lambda: redis("EXISTS", name) == 0, timeout=5)


def test_lock_is_a_context_manager_and_client_too(url, redis, name):
    with polylock.Client(url) as client:
        with client.lock(name) as lock:
            assert lock.owned()
            assert redis("EXISTS", name) == 1
        assert redis("EXISTS", name) == 0
        assert not lock.owned()
