"""A Redis user without a permission polylock needs (tests/conformance/permission.json): Python
raises polylock.PermissionError with the core's message, the same in every language."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest

import polylock
from redis_server import RedisServer

CASE = json.loads(
    (Path(__file__).resolve().parents[2] / "tests" / "conformance" / "permission.json").read_text()
)


def test_a_user_without_a_permission_gets_a_permission_error(redis_server: RedisServer) -> None:
    redis_server.command("ACL", "SETUSER", "conformance_py", "on", ">secret", *CASE["user_rule"])
    url = f"redis://conformance_py:secret@127.0.0.1:{redis_server.port}/0"
    with polylock.Client(url) as client:
        lock = client.lock(CASE["lock"])
        with pytest.raises(polylock.PermissionError) as refused:
            lock.acquire(timeout=0)
    assert str(refused.value) == CASE["message"]
    assert isinstance(refused.value, polylock.LockError)
    assert isinstance(refused.value, builtins.PermissionError)
    assert CASE["kind"] == "Permission"
