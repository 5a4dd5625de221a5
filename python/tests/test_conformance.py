"""The bad-input table every binding checks (tests/conformance/bad_input.json): Python gives the
same kind (InvalidArgumentError) and the same message as the core and every other binding, for
every call of the table (locks, read-write locks, semaphores, fenced writes)."""

from __future__ import annotations

import asyncio
import json
import math
import socket
import threading
from pathlib import Path
from typing import Any, Optional

import pytest

import polylock

REPO_ROOT = Path(__file__).resolve().parents[2]
TABLE = json.loads((REPO_ROOT / "tests" / "conformance" / "bad_input.json").read_text())
CASES: list[dict[str, Any]] = TABLE["cases"]


def seconds(ms: Any) -> Optional[float]:
    """The table's milliseconds (a number, "NaN" or "Infinity") as Python's seconds."""
    if ms is None:
        return None
    return float(ms) / 1000.0  # float("NaN"), float("Infinity") are those floats


def unreachable_url() -> str:
    """A URL nobody listens on: a connect that dialled it would fail with ConnectionError."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{probe.getsockname()[1]}/0"


def option_value(case: dict[str, Any]) -> Any:
    """A connect case's option: a string `value` or a number `count` as it is, else `ms` in
    seconds."""
    if "value" in case:
        return case["value"]
    if "count" in case:
        return case["count"]
    return seconds(case["ms"])


def case_id(case: dict[str, Any]) -> str:
    return "-".join(f"{k}={v}" for k, v in case.items() if k not in ("kind", "message", "integer_ms"))


def check(raised: pytest.ExceptionInfo[BaseException], case: dict[str, Any]) -> None:
    assert case["kind"] == "InvalidArgument"
    assert type(raised.value) is polylock.InvalidArgumentError
    assert str(raised.value) == case["message"]


def permits(case: dict[str, Any]) -> int:
    """The case's permits; absent means the default (1)."""
    return int(case.get("permits", 1))


def blocking_call(client: polylock.Client, case: dict[str, Any]) -> None:
    """Makes the case's call with the blocking API; it must raise."""
    call = case["call"]
    wait, lease = seconds(case.get("wait_ms")), seconds(case.get("lease_ms"))
    if call == "lock":
        client.lock(case["name"])
    elif call == "acquire":
        lock = client.lock("conformance")
        try:
            lock.acquire(timeout=wait, lease=lease)
        finally:
            assert not lock.owned()
    elif call == "read_write_lock":
        client.read_write_lock(case["name"])
    elif call in ("read_lock_acquire", "write_lock_acquire"):
        rw = client.read_write_lock("conformance")
        lock = rw.read_lock() if call == "read_lock_acquire" else rw.write_lock()
        try:
            lock.acquire(timeout=wait, lease=lease)
        finally:
            assert not lock.owned()
    elif call == "semaphore_acquire":
        client.semaphore("conformance").acquire(permits(case), timeout=wait)
    elif call == "semaphore_release":
        client.semaphore("conformance").release(permits(case))
    elif call == "semaphore_try_set_permits":
        client.semaphore("conformance").try_set_permits(permits(case))
    elif call == "semaphore_add_permits":
        client.semaphore("conformance").add_permits(permits(case))
    elif call == "expirable_semaphore_acquire":
        client.expirable_semaphore("conformance").acquire(timeout=wait, lease=lease)
    elif call == "expirable_semaphore_release":
        client.expirable_semaphore("conformance").release(case["permit_id"])
    elif call == "expirable_semaphore_try_set_permits":
        client.expirable_semaphore("conformance").try_set_permits(permits(case))
    elif call == "fenced_set":
        client.fenced_set(case["key"], "v", case["token"])
    elif call == "fenced_delete":
        client.fenced_delete(case["key"], case["token"])
    else:
        raise AssertionError(f"a call this test does not know: {call}")


async def asyncio_call(client: polylock.AsyncClient, case: dict[str, Any]) -> None:
    """Makes the case's call with the asyncio API; it must raise."""
    call = case["call"]
    wait, lease = seconds(case.get("wait_ms")), seconds(case.get("lease_ms"))
    if call == "lock":
        client.lock(case["name"])
    elif call == "acquire":
        lock = client.lock("conformance")
        try:
            await lock.acquire(timeout=wait, lease=lease)
        finally:
            assert not lock.owned()
    elif call == "read_write_lock":
        client.read_write_lock(case["name"])
    elif call in ("read_lock_acquire", "write_lock_acquire"):
        rw = client.read_write_lock("conformance")
        lock = rw.read_lock() if call == "read_lock_acquire" else rw.write_lock()
        try:
            await lock.acquire(timeout=wait, lease=lease)
        finally:
            assert not lock.owned()
    elif call == "semaphore_acquire":
        await client.semaphore("conformance").acquire(permits(case), timeout=wait)
    elif call == "semaphore_release":
        await client.semaphore("conformance").release(permits(case))
    elif call == "semaphore_try_set_permits":
        await client.semaphore("conformance").try_set_permits(permits(case))
    elif call == "semaphore_add_permits":
        await client.semaphore("conformance").add_permits(permits(case))
    elif call == "expirable_semaphore_acquire":
        await client.expirable_semaphore("conformance").acquire(timeout=wait, lease=lease)
    elif call == "expirable_semaphore_release":
        await client.expirable_semaphore("conformance").release(case["permit_id"])
    elif call == "expirable_semaphore_try_set_permits":
        await client.expirable_semaphore("conformance").try_set_permits(permits(case))
    elif call == "fenced_set":
        await client.fenced_set(case["key"], "v", case["token"])
    elif call == "fenced_delete":
        await client.fenced_delete(case["key"], case["token"])
    else:
        raise AssertionError(f"a call this test does not know: {call}")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_blocking_api_gives_the_tables_error(case, url):
    call = case["call"]
    if call == "connect":
        with pytest.raises(polylock.LockError) as raised:
            polylock.Client(unreachable_url(), **{case["option"]: option_value(case)})
        check(raised, case)
        return
    with polylock.Client(url) as client:
        with pytest.raises(polylock.LockError) as raised:
            blocking_call(client, case)
        check(raised, case)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_asyncio_api_gives_the_tables_error(case, url):
    async def main() -> None:
        call = case["call"]
        if call == "connect":
            with pytest.raises(polylock.LockError) as raised:
                await polylock.AsyncClient.connect(unreachable_url(), **{case["option"]: option_value(case)})
            check(raised, case)
            return
        async with await polylock.AsyncClient.connect(url) as client:
            with pytest.raises(polylock.LockError) as raised:
                await asyncio_call(client, case)
            check(raised, case)

    asyncio.run(asyncio.wait_for(main(), timeout=60))


def test_an_infinite_timeout_waits_without_bound(url, redis, name):
    with polylock.Client(url) as client:
        lock = client.lock(name)
        assert lock.acquire(timeout=math.inf) is True
        assert redis("PTTL", name) > 0
        outcome: list[bool] = []

        def wait_without_bound() -> None:
            outcome.append(lock.acquire(timeout=math.inf))
            lock.release()

        waiter = threading.Thread(target=wait_without_bound)
        waiter.start()
        waiter.join(timeout=0.5)
        assert waiter.is_alive() and not outcome, "an infinite wait is not one attempt"
        lock.release()
        waiter.join(timeout=10)
        assert outcome == [True]
        assert lock.acquire(timeout=-1) is True  # threading's "no bound"
        lock.release()

    async def main() -> None:
        async with await polylock.AsyncClient.connect(url) as client:
            lock = client.lock(name)
            assert await lock.acquire(timeout=math.inf) is True
            await lock.release()

    asyncio.run(asyncio.wait_for(main(), timeout=60))


@pytest.mark.parametrize("timeout", [0, 1, math.inf, math.nan])
def test_a_non_blocking_call_takes_no_timeout(url, name, timeout):
    with polylock.Client(url) as client:
        lock = client.lock(name)
        with pytest.raises(polylock.InvalidArgumentError) as raised:
            lock.acquire(blocking=False, timeout=timeout)
        assert isinstance(raised.value, ValueError)
        assert str(raised.value) == "invalid argument: can't specify a timeout for a non-blocking call"
        assert lock.acquire(blocking=False, timeout=-1) is True
        lock.release()


def test_the_table_writes_nothing_to_redis(url, redis):
    """Every case is refused before any I/O: no key of the names the calls use exists."""
    with polylock.Client(url) as client:
        for case in CASES:
            if case["call"] != "connect":
                with pytest.raises(polylock.InvalidArgumentError):
                    blocking_call(client, case)
    assert redis("KEYS", "*conformance*") == []
    assert redis("EXISTS", "k", "polylock_fence:{k}") == 0


def test_a_value_that_is_not_a_number_is_pythons_type_error(url, name):
    with polylock.Client(url) as client:
        with pytest.raises(TypeError):
            client.lock(name).acquire(timeout="5")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        polylock.Client(url, watchdog_timeout="30")  # type: ignore[arg-type]
