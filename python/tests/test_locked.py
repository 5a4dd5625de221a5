"""`@client.locked(name, ...)` (sync) and `@async_client.locked(name, ...)` (asyncio): a function
that runs under a lock, as python-redis-lock users expect. Against a real redis-server."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import polylock


@pytest.fixture
def client(url: str):
    with polylock.Client(url) as client:
        yield client


@pytest.fixture
def holder(url: str):
    """Another client, holding the lock in the timeout tests."""
    with polylock.Client(url, name="locked-holder") as holder:
        yield holder


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, timeout=60))


class Inside:
    """Counts the callers inside a decorated function at once, and the most ever seen."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self.calls = 0
        self._mutex = threading.Lock()

    def enter(self) -> None:
        with self._mutex:
            self.now += 1
            self.calls += 1
            self.most = max(self.most, self.now)

    def leave(self) -> None:
        with self._mutex:
            self.now -= 1


def expected_timeout_message(name: str) -> str:
    # The core's message, as a timed-out `with client.lock(name, timeout=0.2)` gives it.
    return f"lock '{name}' was not acquired within 200 ms: another owner held it all that time (held by 'locked-holder'"


# ---- sync ----------------------------------------------------------------------------------


def test_sync_calls_from_threads_never_overlap(client, name):
    inside = Inside()

    @client.locked(name)
    def critical() -> None:
        inside.enter()
        time.sleep(0.02)  # a window another caller would enter without the lock
        inside.leave()

    def caller() -> None:
        for _ in range(5):
            critical()

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert inside.calls == 20
    assert inside.most == 1


@pytest.mark.parametrize("kind", ["lock", "fair_lock", "fifo_lock", "fenced_lock"])
def test_sync_result_and_exception_pass_through_and_the_lock_is_released(client, redis, name, kind):
    @client.locked(name, kind=kind)
    def divide(a: int, b: int) -> float:
        """Divides."""
        assert redis("EXISTS", name) == 1  # runs holding the lock
        return a / b

    assert divide.__name__ == "divide" and divide.__doc__ == "Divides."
    assert divide(6, b=3) == 2
    assert redis("EXISTS", name) == 0
    with pytest.raises(ZeroDivisionError):
        divide(1, 0)
    assert redis("EXISTS", name) == 0  # released after the exception
    assert divide(1, 1) == 1


def test_sync_held_lock_times_out_with_the_core_error_naming_the_holder(client, holder, name):
    held = holder.lock(name)
    assert held.acquire(lease=30)
    ran = []

    @client.locked(name, timeout=0.2)
    def critical() -> None:
        ran.append(True)

    with pytest.raises(polylock.TimeoutError) as raised:
        critical()
    assert str(raised.value).startswith(expected_timeout_message(name))
    assert ran == []
    held.release()
    critical()
    assert ran == [True]


def test_sync_decorator_refuses_a_coroutine_function_and_bad_values(client, name):
    with pytest.raises(TypeError, match="AsyncClient.locked"):

        @client.locked(name)
        async def coroutine() -> None:
            pass

    with pytest.raises(polylock.InvalidArgumentError):
        client.locked(name, timeout=-5)
    with pytest.raises(polylock.InvalidArgumentError, match="kind must be"):
        client.locked(name, kind="semaphore")


# ---- asyncio -------------------------------------------------------------------------------


def test_async_calls_from_tasks_never_overlap(url, name):
    inside = Inside()

    async def main() -> None:
        client = await polylock.AsyncClient.connect(url)

        @client.locked(name)
        async def critical() -> None:
            inside.enter()
            await asyncio.sleep(0.02)  # a window another task would enter without the lock
            inside.leave()

        async def caller() -> None:
            for _ in range(5):
                await critical()

        await asyncio.gather(*(caller() for _ in range(4)))
        client.close()

    run(main())
    assert inside.calls == 20
    assert inside.most == 1


@pytest.mark.parametrize("kind", ["lock", "fair_lock", "fifo_lock", "fenced_lock"])
def test_async_result_and_exception_pass_through_and_the_lock_is_released(url, redis, name, kind):
    async def main() -> None:
        client = await polylock.AsyncClient.connect(url)

        @client.locked(name, kind=kind)
        async def divide(a: int, b: int) -> float:
            """Divides."""
            assert redis("EXISTS", name) == 1
            return a / b

        assert divide.__name__ == "divide" and divide.__doc__ == "Divides."
        assert await divide(6, b=3) == 2
        assert redis("EXISTS", name) == 0
        with pytest.raises(ZeroDivisionError):
            await divide(1, 0)
        assert redis("EXISTS", name) == 0
        assert await divide(1, 1) == 1
        client.close()

    run(main())


def test_async_held_lock_times_out_with_the_core_error_naming_the_holder(url, holder, name):
    held = holder.lock(name)
    assert held.acquire(lease=30)
    ran = []

    async def main() -> None:
        client = await polylock.AsyncClient.connect(url)

        @client.locked(name, timeout=0.2)
        async def critical() -> None:
            ran.append(True)

        with pytest.raises(polylock.TimeoutError) as raised:
            await critical()
        assert str(raised.value).startswith(expected_timeout_message(name))
        assert ran == []
        client.close()

    run(main())
    held.release()


def test_async_decorator_refuses_a_plain_function(url, name):
    with polylock.AsyncClient(url) as client:
        with pytest.raises(TypeError, match="Client.locked"):

            @client.locked(name)
            def plain() -> None:
                pass


# ---- typing --------------------------------------------------------------------------------


def test_mypy_sees_the_decorated_functions_signature(tmp_path: Path):
    # ParamSpec: a decorated function keeps its parameters and result for type checkers.
    usage = tmp_path / "usage.py"
    usage.write_text(
        textwrap.dedent(
            """
            from typing import Any, Coroutine
            from typing_extensions import assert_type
            import polylock

            client = polylock.Client("redis://127.0.0.1:1")
            @client.locked("n", timeout=1.0, kind="fair_lock")
            def divide(a: int, *, b: int) -> float:
                return a / b
            assert_type(divide(1, b=2), float)

            aclient = polylock.AsyncClient("redis://127.0.0.1:1")
            @aclient.locked("n", kind="fifo_lock")
            async def name(a: int) -> str:
                return str(a)
            pending = name(1)
            _ = assert_type(pending, Coroutine[Any, Any, str])
            pending.close()
            divide("1", b=2)
            """
        )
    )
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(usage)],
        capture_output=True,
        text=True,
    )
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and 'Argument 1 to "divide" has incompatible type "str"' in errors[0], checked.stdout
