"""A real redis-server per test session, on a free loopback port, without persistence."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from faults import FaultProxy
from helpers import RedisConnection
from redis_server import RedisServer, start_many, start_redis

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = start_redis()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def three_servers() -> Iterator[list[RedisServer]]:
    """Three independent redis-servers (for MultiLock and RedLock); a test may kill one."""
    with start_many(3) as group:
        yield group.servers


@pytest.fixture
def redis(redis_server: RedisServer) -> Iterator[RedisConnection]:
    with redis_server.client() as connection:
        yield connection


@pytest.fixture(scope="session")
def session_fault_proxy(redis_server: RedisServer) -> Iterator[FaultProxy]:
    with FaultProxy(redis_server.port) as proxy:
        yield proxy


@pytest.fixture
def fault_proxy(session_fault_proxy: FaultProxy) -> Iterator[FaultProxy]:
    """A fault-injecting proxy in front of the session's redis-server (shared by the tests,
    so it passes traffic again after each one)."""
    yield session_fault_proxy
    session_fault_proxy.pass_through()


@pytest.fixture
def url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def name() -> str:
    """A lock name no other test uses."""
    return f"test:{uuid.uuid4().hex[:12]}"


@pytest.fixture
def peer_binary() -> Path:
    path = REPO_ROOT / "target" / "debug" / "examples" / "peer"
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} is missing: run `cargo build --example peer` (make test-python does)")
    return path
