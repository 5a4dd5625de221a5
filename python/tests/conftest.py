"""A real redis-server per test session, on a free loopback port, without persistence."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest
import redis.exceptions as redis_errors

from faults import FaultProxy
from helpers import RedisConnection

REPO_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class RedisServer:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> RedisConnection:
        return RedisConnection(self.port)


def start_redis(directory: str, port: Optional[int] = None) -> RedisServer:
    """A redis-server in `directory`, on a free port, or on `port` (to restart one in place)."""
    wanted = port
    for _ in range(5):
        port = wanted or free_port()
        process = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"],
            cwd=directory, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with RedisConnection(port, timeout=1) as redis:
                    if redis.ping():
                        return RedisServer(port, process)
            except (redis_errors.ConnectionError, redis_errors.TimeoutError):  # not up yet
                time.sleep(0.02)
        process.kill()
        process.wait()
    raise RuntimeError("redis-server did not start; is it installed?")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    directory = tempfile.mkdtemp(prefix="polylock-py-redis-")
    server = start_redis(directory)
    try:
        yield server
    finally:
        server.process.terminate()
        try:
            server.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()
        shutil.rmtree(directory, ignore_errors=True)


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
