"""The Python test kit's one redis-server launcher: a real server on a free loopback port, in
a directory of its own, without persistence. Used by conftest.py and by install_check.py (which
runs in a venv holding only the installed wheel and redis-py)."""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass
from typing import Optional, Sequence

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

    def stop(self) -> None:
        """Kills the server at once: nothing is persisted, and a primary asked to shut down
        would first wait for its replicas."""
        self.process.kill()
        self.process.wait()


def start_redis(
    directory: str, port: Optional[int] = None, extra_args: Sequence[str] = ()
) -> RedisServer:
    """A redis-server in `directory`, on a free port, or on `port` (to restart one in place),
    with `extra_args` (`--option value ...`) after the test kit's own."""
    wanted = port
    for _ in range(5):
        port = wanted or free_port()
        process = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning", *extra_args],
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
