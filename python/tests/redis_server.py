"""The Python test kit's redis-server launcher: a thin wrapper over the test kit's one launcher
for every language, the Rust binary `polylock-testkit` (`up single|cluster|sentinel --json`,
see docs/testing.md). It starts the servers on free loopback ports and prints them as one JSON
line; `kill`, `stop`, `start`, `restart` lines go to its stdin, and closing its stdin (also when
this process dies) stops every server and removes their files. Used by conftest.py, by
install_check.py (which runs in a venv holding only the installed wheel and redis-py), and by
the multi-server topologies (redis_cluster.py, redis_sentinel.py). The launcher runs
POLYLOCK_REDIS_SERVER (the server matrix points it at Redis 6.2, 8.2 or Valkey 8.1), else
redis-server from PATH."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Callable, Optional, TypeVar

import redis.exceptions as redis_errors

from helpers import RedisConnection

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parents[2]
# Built by the test build (`cargo build -p polylock-testkit --bins`), as the fault proxy is.
LAUNCHER = REPO_ROOT / "target" / "debug" / "polylock-testkit"

# The server binary the launcher runs, and the redis-cli that creates clusters.
SERVER_PROGRAM = os.environ.get("POLYLOCK_REDIS_SERVER", "redis-server")
CLI_PROGRAM = os.environ.get("POLYLOCK_REDIS_CLI", "redis-cli")


def server_build() -> tuple[str, tuple[int, ...]]:
    """("redis", (7, 0, 15)) or ("valkey", (8, 1, 8)): what SERVER_PROGRAM --version says."""
    line = subprocess.run([SERVER_PROGRAM, "--version"], capture_output=True, text=True, check=True).stdout
    version = next(word for word in line.split() if word.startswith("v="))[2:]
    return line.split()[0].lower(), tuple(int(part) for part in version.split("."))


def has_sharded_pubsub() -> bool:
    """SSUBSCRIBE/SPUBLISH came with Redis 7.0 (every Valkey has them); without them a cluster
    client publishes with plain PUBLISH, which reaches every node (broadcast mode)."""
    name, version = server_build()
    return name == "valkey" or version >= (7, 0, 0)


# How long a topology wait (cluster agreement, a failover, sentinel discovery) may take. A
# Sentinel whose timer saw the process stall (a loaded machine) enters TILT mode and does
# nothing for 30 s, a forced failover included: the bound leaves room for one TILT.
WAIT_TIMEOUT = 90.0


class NotYet(Exception):
    """Raised by a `wait_for` check: the state is not reached yet; the message says what was seen."""


def wait_for(what: str, check: Callable[[], T]) -> T:
    """Calls `check` every 50 ms until it returns instead of raising NotYet (or a redis-py
    error: a node may be restarting), for at most WAIT_TIMEOUT; then fails with `what` it was
    waiting for and what it last saw."""
    deadline = time.monotonic() + WAIT_TIMEOUT
    while True:
        try:
            return check()
        except (NotYet, redis_errors.RedisError) as seen:
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"gave up after {WAIT_TIMEOUT:.0f} s waiting for {what}; last saw: {seen}"
                ) from None
        time.sleep(0.05)


class Deployment:
    """One `polylock-testkit up ...` process and the servers it started: `servers` (data nodes,
    in the launcher's order) and `sentinels`. `stop()` (or leaving the `with` block) closes its
    stdin, on which it stops every server and removes their files."""

    def __init__(self, *arguments: str) -> None:
        if not LAUNCHER.exists():
            raise RuntimeError(
                f"{LAUNCHER} is missing: run `cargo build -p polylock-testkit --bins` (make test-python does)"
            )
        self._process = subprocess.Popen(
            [str(LAUNCHER), "up", *arguments, "--json"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        first = self._stdout.readline()
        if not first:
            self._process.wait()
            raise RuntimeError(f"polylock-testkit up {' '.join(arguments)} failed (exit {self._process.returncode})")
        self.description: dict[str, Any] = json.loads(first)
        self.servers: list[RedisServer] = []
        self.sentinels: list[RedisServer] = []
        for node in self.description["nodes"]:
            server = RedisServer(self, node)
            (self.sentinels if node["role"] == "sentinel" else self.servers).append(server)

    @property
    def _stdin(self) -> IO[str]:
        assert self._process.stdin is not None
        return self._process.stdin

    @property
    def _stdout(self) -> IO[str]:
        assert self._process.stdout is not None
        return self._process.stdout

    @property
    def url(self) -> str:
        return str(self.description["url"])

    def control(self, line: str) -> dict[str, Any]:
        """Sends one control line (`kill node0`, `restart 6379`, `status`); its JSON reply."""
        if self._process.poll() is not None:
            raise RuntimeError(f"polylock-testkit exited ({self._process.returncode})")
        self._stdin.write(line + "\n")
        self._stdin.flush()
        reply: dict[str, Any] = json.loads(self._stdout.readline() or "null") or {}
        if not reply.get("ok"):
            raise RuntimeError(f"polylock-testkit: {line}: {reply.get('error', 'no reply')}")
        return reply

    def stop(self) -> None:
        if self._process.stdin is not None and not self._process.stdin.closed:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()

    def __enter__(self) -> Deployment:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class RedisServer:
    """One server of a deployment: its ports, commands over redis-py, and `kill`/`restart`
    through the launcher."""

    def __init__(self, deployment: Deployment, node: dict[str, Any]) -> None:
        self.deployment = deployment
        self.name: str = node["name"]
        self.port: int = node["port"]
        # The port it also serves TLS on (`start_redis_tls`, a cluster with TLS).
        self.tls_port: Optional[int] = node["tls_port"]
        self.pid: Optional[int] = node["pid"]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def tls_url(self) -> str:
        assert self.tls_port is not None, "not started with start_redis_tls"
        return f"rediss://127.0.0.1:{self.tls_port}/0"

    def client(self) -> RedisConnection:
        return RedisConnection(self.port)

    def command(self, *args: Any) -> Any:
        """One command on a new connection (5 s timeout); the reply as redis-py gives it."""
        with RedisConnection(self.port, timeout=5) as redis:
            return redis.execute_command(*args)

    def info(self, section: str) -> dict[str, str]:
        """The `field:value` lines of `INFO <section>`, as text."""
        with RedisConnection(self.port, timeout=5) as redis:
            redis.set_response_callback("INFO", lambda reply, **options: reply)  # the raw text
            text = redis.execute_command("INFO", section)
        lines = (line.split(":", 1) for line in text.decode().splitlines() if ":" in line)
        return {name: value for name, value in lines}

    def is_running(self) -> bool:
        return self.pid is not None

    def kill(self) -> None:
        """Kills the server at once, as a crash would."""
        self.pid = self.deployment.control(f"kill {self.name}")["node"]["pid"]

    def restart(self) -> None:
        """Kills the server and starts it again on its port with its arguments (its data is
        gone unless its config keeps some, as a cluster node's nodes.conf)."""
        self.pid = self.deployment.control(f"restart {self.name}")["node"]["pid"]

    def close(self) -> None:
        """Stops every server of its deployment (for a server of its own: this one)."""
        self.deployment.stop()


def server_arguments(extra: Sequence[str]) -> list[str]:
    """`extra` server arguments as the launcher takes them (`--arg=--maxmemory`, `--arg=1mb`)."""
    return [f"--arg={argument}" for argument in extra]


def start_redis(extra: Sequence[str] = ()) -> RedisServer:
    """A redis-server of its own on a free port, with extra `--option value` arguments; stop it
    with `close()`."""
    return Deployment("single", *server_arguments(extra)).servers[0]


# The one generator of test certificates, shared with the Rust and Node test kits.
MAKE_CERTS = REPO_ROOT / "tests" / "tls" / "make-certs.sh"


def make_tls_files(directory: str) -> str:
    """Test certificates (a CA, a server certificate for 127.0.0.1/localhost, a client
    certificate, an expired one, another CA) made with openssl into `directory`; see
    tests/tls/make-certs.sh for the file names."""
    subprocess.run(["sh", str(MAKE_CERTS), directory], check=True)
    return directory


def tls_arguments(tls_files: str, auth_clients: bool) -> list[str]:
    """The launcher's options for TLS with the certificates of `tls_files`."""
    return ["--tls", f"--tls-dir={tls_files}", *(["--auth-clients"] if auth_clients else [])]


def start_redis_tls(
    tls_files: str, cert: str = "server", auth_clients: bool = False, extra: Sequence[str] = (),
) -> RedisServer:
    """A redis-server (as `start_redis`) that also serves TLS on a free port (`tls_url`) with
    the certificate `cert` of `tls_files`, trusting its CA for client certificates, which it
    requires when `auth_clients`, with `extra` arguments. Its own outgoing TLS connections
    (cluster bus, replication) present the client certificate. The plain port stays open for
    the kit's own checks."""
    arguments = [*tls_arguments(tls_files, auth_clients), f"--cert={cert}", *server_arguments(extra)]
    return Deployment("single", *arguments).servers[0]


def start_many(count: int) -> Deployment:
    """`count` independent servers (e.g. for a RedLock over 3 or 5 masters), in `.servers`."""
    return Deployment("single", f"--count={count}")
