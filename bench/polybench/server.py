"""The throwaway redis-server a driver run measures on, and the MONITOR command counter."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

# The test kit's one launcher (docs/testing.md), built by `cargo build -p polylock-testkit
# --bins`; it runs POLYLOCK_REDIS_SERVER (e.g. another Redis or Valkey build), else redis-server.
LAUNCHER = Path(__file__).resolve().parents[2] / "target" / "debug" / "polylock-testkit"


class RedisServer:
    """A throwaway redis-server on a free loopback port (`polylock-testkit up single`); `stop()`
    closes the launcher's stdin, on which it stops the server and removes its files."""

    def __init__(self) -> None:
        if not LAUNCHER.exists():
            raise RuntimeError(f"{LAUNCHER} is missing: run `cargo build -p polylock-testkit --bins`")
        self.process = subprocess.Popen(
            [str(LAUNCHER), "up", "single", "--arg=--maxclients", "--arg=10000", "--json"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        if not first:
            self.stop()
            raise RuntimeError("redis-server did not start (polylock-testkit up single failed)")
        self.port = int(json.loads(first)["nodes"][0]["port"])
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def command(self, *words: str) -> str:
        """One command over a fresh socket (RESP), reply as text; enough for the driver's needs."""
        payload = f"*{len(words)}\r\n" + "".join(
            f"${len(w.encode())}\r\n{w}\r\n" for w in words)
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            sock.sendall(payload.encode())
            data = b""
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
                if data.startswith((b"+", b"-", b":")) and data.endswith(b"\r\n"):
                    break
                if data.startswith(b"$"):
                    header, _, rest = data.partition(b"\r\n")
                    length = int(header[1:])
                    if length < 0 or len(rest) >= length + 2:
                        break
        if data.startswith(b"$"):
            header, _, rest = data.partition(b"\r\n")
            return "" if int(header[1:]) < 0 else rest[: int(header[1:])].decode()
        if data.startswith(b"-"):
            raise RuntimeError(data.decode().strip())
        return data[1:].decode().strip()

    def commandstats(self) -> dict[str, int]:
        stats = {}
        for line in self.command("INFO", "commandstats").splitlines():
            if line.startswith("cmdstat_"):
                name, _, rest = line.partition(":")
                calls = next(f for f in rest.split(",") if f.startswith("calls="))
                stats[name[len("cmdstat_"):]] = int(calls[len("calls="):])
        return stats

    def cpu_seconds(self) -> float:
        """The server process's CPU so far (INFO cpu: user + system), in seconds."""
        fields = dict(line.split(":", 1) for line in self.command("INFO", "cpu").splitlines()
                      if ":" in line)
        return float(fields["used_cpu_user"]) + float(fields["used_cpu_sys"])

    def script_usec(self) -> int:
        """Microseconds the server spent in script calls so far (commandstats `usec` of EVAL
        and EVALSHA, each including the calls its script made)."""
        total = 0
        for line in self.command("INFO", "commandstats").splitlines():
            name, _, rest = line.partition(":")
            if name in ("cmdstat_evalsha", "cmdstat_eval"):
                total += int(next(f for f in rest.split(",") if f.startswith("usec="))[5:])
        return total

    def version(self) -> str:
        for line in self.command("INFO", "server").splitlines():
            if line.startswith("redis_version:"):
                return line.split(":", 1)[1]
        return "?"

    def stop(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
