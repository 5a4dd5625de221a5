"""The Python test kit's one redis-server launcher: a real server on a free loopback port, in
a directory of its own, without persistence. Used by conftest.py and by install_check.py (which
runs in a venv holding only the installed wheel and redis-py)."""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass
from typing import Optional

import redis.exceptions as redis_errors

from helpers import RedisConnection


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
