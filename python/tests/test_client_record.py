"""Who holds it: the ``name`` option is recorded on the server (the client record,
``polylock:client:<client-id>``), and a ``with`` block whose default timeout runs out names
the holder in the core's message, the same text as Rust, Node and Kotlin. Against a real
redis-server."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket

import pytest

import polylock
from helpers import wait_until


def listed(redis, client_id: str) -> bool:
    """Whether the client's record lists a hold (written about a second after it began)."""
    holds = redis("HGET", f"polylock:client:{client_id}", "holds")
    return bool(holds) and json.loads(holds) != []


def holder_message(name: str, wait_ms: int, holder: str) -> re.Pattern[str]:
    """The core's message for a timed-out scoped acquire of `name` held by this process's
    client named `holder` (its hold age varies)."""
    return re.compile(
        re.escape(
            f"lock '{name}' was not acquired within {wait_ms} ms: another owner held it all that time "
            f"(held by '{holder}', pid {os.getpid()} on {socket.gethostname()}, for "
        )
        + r"\d+\.\d s\)"
    )


def test_the_name_option_is_recorded_and_read_back(url, redis):
    with polylock.Client(url, name="worker-7") as client:
        assert client.name == "worker-7"
        record = f"polylock:client:{client.id}"
        assert redis("HGET", record, "name") == b"worker-7"
        assert redis("HGET", record, "pid") == str(os.getpid()).encode()
    with polylock.Client(url) as unnamed:
        assert unnamed.name == f"{socket.gethostname()}:{os.getpid()}"
    with pytest.raises(polylock.InvalidArgumentError):
        polylock.Client(url, name=" ")


def test_a_timed_out_with_names_the_holder(url, redis, name):
    with polylock.Client(url, name="worker-7") as holder, polylock.Client(url) as waiter:
        held = holder.lock(name)
        assert held.acquire()
        assert wait_until(lambda: listed(redis, holder.id), timeout=5)
        lock = waiter.lock(name, timeout=0.25)
        with pytest.raises(polylock.TimeoutError) as raised:
            with lock:
                pytest.fail("the block ran")
        assert holder_message(name, 250, "worker-7").fullmatch(str(raised.value)), str(raised.value)
        held.release()


def test_a_timed_out_async_with_names_the_holder(url, redis, name):
    async def scenario() -> str:
        holder = await polylock.AsyncClient.connect(url, name="async-holder")
        waiter = await polylock.AsyncClient.connect(url)
        try:
            held = holder.lock(name)
            assert await held.acquire()
            assert await asyncio.to_thread(wait_until, lambda: listed(redis, holder.id), 5)
            with pytest.raises(polylock.TimeoutError) as raised:
                async with waiter.lock(name, timeout=0.25):
                    pytest.fail("the block ran")
            await held.release()
            return str(raised.value)
        finally:
            holder.close()
            waiter.close()

    message = asyncio.run(asyncio.wait_for(scenario(), timeout=60))
    assert holder_message(name, 250, "async-holder").fullmatch(message), message


def test_an_owner_without_a_record_is_named_by_its_owner_string(url, redis, name):
    stranger = "5f3e1c2a-0000-4000-8000-000000000001:1"
    redis("HSET", name, stranger, 1)
    redis("PEXPIRE", name, 60_000)
    with polylock.Client(url) as waiter:
        with pytest.raises(polylock.TimeoutError) as raised:
            with waiter.lock(name, timeout=0.1):
                pytest.fail("the block ran")
    assert str(raised.value) == (
        f"lock '{name}' was not acquired within 100 ms: another owner held it all that time "
        f"(held by owner {stranger}, no polylock client record)"
    )


def test_a_process_that_closes_its_client_and_exits_leaves_no_record(url, redis):
    """``close`` waits for the record's DEL: it used to go in the background and die with the
    process, leaving the record for a watchdog lease."""
    import subprocess
    import sys

    script = ("import sys, polylock\n"
              "client = polylock.Client(sys.argv[1])\n"
              "print(client.id, flush=True)\n"
              "client.close()\n"
              "import os; os._exit(0)\n")
    ran = subprocess.run([sys.executable, "-c", script, url], capture_output=True, text=True,
                         timeout=60, check=True)
    client_id = ran.stdout.strip()
    assert client_id, ran.stderr
    assert redis("EXISTS", f"polylock:client:{client_id}") == 0


def test_aclose_awaits_the_records_deletion(url, redis):
    async def main() -> str:
        client = polylock.AsyncClient(url)
        record = f"polylock:client:{client.id}"
        assert redis("EXISTS", record) == 1
        assert await client.aclose() == []
        return record

    record = asyncio.run(main())
    assert redis("EXISTS", record) == 0
