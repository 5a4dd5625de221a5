"""The Python test kit's one redis-server launcher: a real server on a free loopback port, in
a directory of its own, without persistence. Used by conftest.py, by install_check.py (which
runs in a venv holding only the installed wheel and redis-py), and by the multi-server
topologies built of such servers (redis_cluster.py, redis_sentinel.py). The binary is
POLYLOCK_REDIS_SERVER (the server matrix points it at Redis 6.2, 8.2 or Valkey 8.1), else
redis-server from PATH; a sentinel is that binary with --sentinel."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

import redis.exceptions as redis_errors

from helpers import RedisConnection

T = TypeVar("T")

# The server binary every launcher runs, and the redis-cli that creates clusters.
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


# How long a topology wait (cluster agreement, a failover, sentinel discovery) may take.
WAIT_TIMEOUT = 30.0


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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class RedisServer:
    port: int
    process: subprocess.Popen[bytes]
    directory: str = ""
    # Everything after `redis-server` but the port, for `restart`.
    arguments: list[str] = field(default_factory=list)
    # The port it also serves TLS on (`start_redis_tls`).
    tls_port: Optional[int] = None

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
        return self.process.poll() is None

    def kill(self) -> None:
        """Kills the server at once, as a crash would."""
        if self.is_running():
            self.process.kill()
        self.process.wait()

    def restart(self) -> None:
        """Kills the server and starts it again on its port with its arguments (its data is
        gone unless its config keeps some, as a cluster node's nodes.conf)."""
        self.kill()
        deadline = time.monotonic() + 10
        while True:  # the port may stay busy for a moment after the kill
            process = _launch(self.directory, self.port, self.arguments)
            if process is not None:
                self.process = process
                return
            if time.monotonic() >= deadline:
                raise RuntimeError(f"redis-server did not restart on port {self.port}")
            time.sleep(0.05)


def start_redis(
    directory: str,
    port: Optional[int] = None,
    extra: Sequence[str] = (),
    config: Optional[str] = None,
) -> RedisServer:
    """A redis-server in `directory`, on a free port, or on `port` (to restart one in place),
    with extra `--option value` arguments; `config` is the text of a config file written into
    `directory` and read first (a sentinel needs one it can rewrite)."""
    arguments = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--daemonize", "no", "--loglevel", "warning", *extra]
    if config is not None:
        config_file = os.path.join(os.path.abspath(directory), "redis.conf")
        with open(config_file, "w") as file:
            file.write(config)
        arguments.insert(0, config_file)
    for _ in range(5):
        chosen = port or free_port()
        process = _launch(directory, chosen, arguments)
        if process is not None:
            return RedisServer(chosen, process, directory, arguments)
    raise RuntimeError("redis-server did not start; is it installed?")


# The one generator of test certificates, shared with the Rust and Node test kits.
MAKE_CERTS = Path(__file__).resolve().parents[2] / "tests" / "tls" / "make-certs.sh"


def make_tls_files(directory: str) -> str:
    """Test certificates (a CA, a server certificate for 127.0.0.1/localhost, a client
    certificate, an expired one, another CA) made with openssl into `directory`; see
    tests/tls/make-certs.sh for the file names."""
    subprocess.run(["sh", str(MAKE_CERTS), directory], check=True)
    return directory


def start_redis_tls(
    directory: str, tls_files: str, cert: str = "server", auth_clients: bool = False,
    extra: Sequence[str] = (),
) -> RedisServer:
    """A redis-server (as `start_redis`) that also serves TLS on a free port (`tls_url`) with
    the certificate `cert` of `tls_files`, trusting its CA for client certificates, which it
    requires when `auth_clients`, with `extra` arguments. Its own outgoing TLS connections
    (cluster bus, replication) present the client certificate. The plain port stays open for
    the kit's own checks."""
    files = Path(tls_files)
    for _ in range(5):
        tls_port = free_port()
        arguments = [
            "--tls-port", str(tls_port),
            "--tls-cert-file", str(files / f"{cert}.crt"),
            "--tls-key-file", str(files / f"{cert}.key"),
            "--tls-ca-cert-file", str(files / "ca.crt"),
            "--tls-auth-clients", "yes" if auth_clients else "no",
            "--tls-client-cert-file", str(files / "client.crt"),
            "--tls-client-key-file", str(files / "client.key"),
            *extra,
        ]
        try:
            server = start_redis(directory, extra=arguments)
        except RuntimeError:
            continue
        server.tls_port = tls_port
        return server
    raise RuntimeError("redis-server with TLS did not start; was it built with TLS?")


def _launch(directory: str, port: int, arguments: list[str]) -> Optional[subprocess.Popen[bytes]]:
    """Spawns redis-server on `port` and waits until it answers PING; None if it exited (port
    taken) or never answered."""
    # A config file, if any, must be the first argument.
    if arguments and not arguments[0].startswith("--"):
        command = [SERVER_PROGRAM, arguments[0], "--port", str(port), *arguments[1:]]
    else:
        command = [SERVER_PROGRAM, "--port", str(port), *arguments]
    process = subprocess.Popen(
        command, cwd=directory, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with RedisConnection(port, timeout=1) as redis:
                if redis.ping():
                    return process
        except (redis_errors.ConnectionError, redis_errors.TimeoutError):  # not up yet
            time.sleep(0.02)
    process.kill()
    process.wait()
    return None


class ServerGroup:
    """Servers started together, each in its own directory under one temporary directory;
    `stop()` (or leaving the `with` block) kills them all and removes the directories."""

    def __init__(self, prefix: str) -> None:
        self.directory = tempfile.mkdtemp(prefix=prefix)
        self.servers: list[RedisServer] = []

    def start(self, extra: Sequence[str] = (), config: Optional[str] = None) -> RedisServer:
        directory = tempfile.mkdtemp(prefix="server-", dir=self.directory)
        server = start_redis(directory, extra=extra, config=config)
        self.servers.append(server)
        return server

    def start_tls(self, tls_files: str, auth_clients: bool, extra: Sequence[str] = ()) -> RedisServer:
        """A server as `start_redis_tls` makes it, in this group."""
        directory = tempfile.mkdtemp(prefix="server-", dir=self.directory)
        server = start_redis_tls(directory, tls_files, auth_clients=auth_clients, extra=extra)
        self.servers.append(server)
        return server

    def stop(self) -> None:
        for server in self.servers:
            server.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ServerGroup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_many(count: int) -> ServerGroup:
    """`count` independent servers (e.g. for a RedLock over 3 or 5 masters), in `.servers`."""
    group = ServerGroup("polylock-py-many-")
    try:
        for _ in range(count):
            group.start()
    except BaseException:
        group.stop()
        raise
    return group
