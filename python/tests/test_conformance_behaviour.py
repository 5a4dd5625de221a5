"""The behaviour cases every binding runs (tests/conformance/behaviour.json, whose "about"
describes the format), through Python's blocking API and its asyncio API, each on a
redis-server of its own: each step's call, its result, or its error class and message (the
core's). Milliseconds in the file are seconds here."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

import polylock
from helpers import RedisConnection
from redis_server import RedisServer, start_redis

REPO_ROOT = Path(__file__).resolve().parents[2]
CASES: list[dict[str, Any]] = json.loads(
    (REPO_ROOT / "tests" / "conformance" / "behaviour.json").read_text()
)["cases"]


def seconds(ms: Optional[float]) -> Optional[float]:
    return None if ms is None else ms / 1000.0


def timing(args: dict[str, Any]) -> dict[str, Any]:
    """`wait_ms` and `lease_ms` as acquire's keywords; one left out is not passed (the default:
    no bound, the watchdog's lease)."""
    keywords = {}
    if "wait_ms" in args:
        keywords["timeout"] = seconds(args["wait_ms"])
    if "lease_ms" in args:
        keywords["lease"] = seconds(args["lease_ms"])
    return keywords


def milliseconds(value: Optional[float]) -> Optional[float]:
    return None if value is None else value * 1000.0


# Each call of the file: (what it does on the handle, given the step's args; how the result
# becomes the file's unit). A result may be awaitable (the asyncio API): the runner awaits it.
Call = tuple[Callable[[Any, dict[str, Any]], Any], Callable[[Any], Any]]
same: Callable[[Any], Any] = lambda value: value
LOCK_CALLS: dict[str, Call] = {
    "acquire": (lambda lock, args: lock.acquire(**timing(args)), same),
    "release": (lambda lock, args: lock.release(), same),
    "is_locked": (lambda lock, args: lock.locked(), same),
    "is_held": (lambda lock, args: lock.owned(), same),
    "hold_count": (lambda lock, args: lock.hold_count(), same),
    "force_unlock": (lambda lock, args: lock.force_unlock(), same),
    "token": (lambda lock, args: lock.token, same),
    "remaining_lease": (lambda lock, args: lock.remaining_lease(), milliseconds),
}
PERMIT_COUNTER_CALLS: dict[str, Call] = {
    "try_set_permits": (lambda semaphore, args: semaphore.try_set_permits(args["permits"]), same),
    "add_permits": (lambda semaphore, args: semaphore.add_permits(args["permits"]), same),
    "available_permits": (lambda semaphore, args: semaphore.available_permits(), same),
}
SEMAPHORE_CALLS: dict[str, Call] = {
    **PERMIT_COUNTER_CALLS,
    "acquire": (
        lambda semaphore, args: semaphore.acquire(args.get("permits", 1), **timing(args)),
        same,
    ),
    "release": (lambda semaphore, args: semaphore.release(args.get("permits", 1)), same),
}
EXPIRABLE_SEMAPHORE_CALLS: dict[str, Call] = {
    **PERMIT_COUNTER_CALLS,
    "acquire": (lambda semaphore, args: semaphore.acquire(**timing(args)), same),
    "release": (lambda semaphore, args: semaphore.release(args["permit_id"]), same),
    "held_permits": (lambda semaphore, args: semaphore.held_permits(), same),
}
LATCH_CALLS: dict[str, Call] = {
    "try_set_count": (lambda latch, args: latch.try_set_count(args["count"]), same),
    "count_down": (lambda latch, args: latch.count_down(), same),
    "count": (lambda latch, args: latch.count(), same),
    "await_zero": (lambda latch, args: latch.await_zero(seconds(args["timeout_ms"])), same),
    "delete": (lambda latch, args: latch.delete(), same),
}
CLIENT_CALLS: dict[str, Call] = {
    "fenced_set": (lambda client, args: client.fenced_set(args["key"], args["value"], args["token"]), same),
    "fenced_delete": (lambda client, args: client.fenced_delete(args["key"], args["token"]), same),
}
KINDS: dict[str, tuple[Callable[[Any, str], Any], dict[str, Call]]] = {
    "lock": (lambda client, name: client.lock(name), LOCK_CALLS),
    "fair_lock": (lambda client, name: client.fair_lock(name), LOCK_CALLS),
    "fifo_lock": (lambda client, name: client.fifo_lock(name), LOCK_CALLS),
    "fenced_lock": (lambda client, name: client.fenced_lock(name), LOCK_CALLS),
    # Python's holder is the thread (or task): one client's read and write locks are one holder.
    "read_lock": (lambda client, name: client.read_write_lock(name).read_lock(), LOCK_CALLS),
    "write_lock": (lambda client, name: client.read_write_lock(name).write_lock(), LOCK_CALLS),
    "semaphore": (lambda client, name: client.semaphore(name), SEMAPHORE_CALLS),
    "expirable_semaphore": (lambda client, name: client.expirable_semaphore(name), EXPIRABLE_SEMAPHORE_CALLS),
    "count_down_latch": (lambda client, name: client.count_down_latch(name), LATCH_CALLS),
}


async def settled(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def as_written(template: str, case: str, handles: dict[str, Any], saved: dict[str, Any]) -> str:
    """A message or a `redis` step's word as the file writes it: `{case}` is the case's name,
    `{owner:h}` handle h's owner, `{$x}` the result saved as x."""
    message = template.replace("{case}", case)
    for id, (handle, calls) in handles.items():
        if calls is LOCK_CALLS:
            message = message.replace(f"{{owner:{id}}}", handle.owner)
    for name, value in saved.items():
        message = message.replace(f"{{${name}}}", str(value))
    return message


def matches(expected: Any, actual: Any, saved: dict[str, Any]) -> bool:
    """Whether `actual` is what `expected` (a value or a matcher) asks for."""
    if not isinstance(expected, dict):
        # A value: equal, and a boolean only where one is expected (True is no count of 1).
        return actual == expected and isinstance(actual, bool) == isinstance(expected, bool)
    ((matcher, operand),) = expected.items()
    value = lambda operand: saved[operand[1:]] if isinstance(operand, str) else operand
    if matcher == "between":
        return actual is not None and value(operand[0]) <= actual <= value(operand[1])
    if matcher == "at_least":
        return actual is not None and actual >= value(operand)
    if matcher == "greater_than":
        return actual is not None and actual > value(operand)
    if matcher == "matches":
        return isinstance(actual, str) and re.search(operand, actual) is not None
    if matcher == "length":
        return len(actual) == operand
    raise AssertionError(f"unknown matcher {matcher}")


def reply(value: Any) -> Any:
    """A redis-py reply as the file writes it: bytes as text, lists of them too, OK as "OK"."""
    if value is True:
        return "OK"
    if isinstance(value, bytes):
        return value.decode()
    return [reply(item) for item in value] if isinstance(value, list) else value


async def run_case(case: dict[str, Any], connect: Callable[[], Any], redis: RedisConnection) -> None:
    prefix = case["name"] + "/"
    clients = {name: await settled(connect()) for name in case["clients"]}
    try:
        handles = {
            id: (KINDS[handle["kind"]][0](clients[handle["client"]], prefix + handle["name"]), KINDS[handle["kind"]][1])
            for id, handle in case["handles"].items()
        }
        handles.update({name: (client, CLIENT_CALLS) for name, client in clients.items()})
        look = lambda _, args: reply(redis(*(as_written(word, case["name"], handles, saved) for word in args["command"])))
        handles["redis"] = (None, {"command": (look, same)})
        saved: dict[str, Any] = {}
        for index, step in enumerate(case["steps"]):
            at = f"{case['name']} step {index}: {step}"
            args = {key: saved[value[1:]] if isinstance(value, str) and value.startswith("$") else value for key, value in step.get("args", {}).items()}
            if "key" in args:
                args["key"] = prefix + args["key"]
            target, calls = handles[step["on"]]
            make, convert = calls[step["call"]]
            if "error" in step:
                with pytest.raises(polylock.LockError) as raised:
                    await settled(make(target, args))
                kind, message = step["error"]["kind"], step["error"]["message"]
                assert type(raised.value) is getattr(polylock, kind + "Error"), at
                assert str(raised.value) == as_written(message, case["name"], handles, saved), at
                continue
            actual = convert(await settled(make(target, args)))
            assert matches(step["result"], actual, saved), f"{at}: got {actual!r}"
            if "save" in step:
                saved[step["save"]] = actual
    finally:
        for client in clients.values():
            await settled(client.close())


@pytest.fixture(scope="module", params=["blocking", "asyncio"])
def api(request: pytest.FixtureRequest) -> Iterator[tuple[str, RedisServer]]:
    """Each API on a redis-server of its own: the cases' names are fresh on each."""
    server = start_redis()
    try:
        yield request.param, server
    finally:
        server.close()


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_behaviour_case(case: dict[str, Any], api: tuple[str, RedisServer]) -> None:
    kind, server = api
    url = server.url
    if kind == "blocking":
        connect: Callable[[], Any] = lambda: polylock.Client(url)
    else:
        connect = lambda: polylock.AsyncClient.connect(url)
    with server.client() as redis:
        asyncio.run(asyncio.wait_for(run_case(case, connect, redis), timeout=60))
