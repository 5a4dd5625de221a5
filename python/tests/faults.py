"""The test kit's fault-injecting TCP proxy (the Rust binary `polylock-fault-proxy`) for the
Python tests: put it between a client and redis-server, then switch faults on and off."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Optional

REPO_ROOT = Path(__file__).resolve().parents[2]
BINARY = REPO_ROOT / "target" / "debug" / "polylock-fault-proxy"


class FaultProxyError(RuntimeError):
    pass


class FaultProxy:
    """A proxy on a free loopback port in front of `127.0.0.1:upstream_port`, passing traffic
    until told otherwise. Each fault applies at once to open and new connections. Stopped by
    `close()` (or leaving the `with` block); it also stops if this process dies, because it
    exits when its stdin closes."""

    def __init__(self, upstream_port: int, binary: Path = BINARY) -> None:
        if not os.access(binary, os.X_OK):
            raise RuntimeError(
                f"{binary} is missing: run `cargo build -p polylock-testkit --bin "
                "polylock-fault-proxy` (make test-python does)"
            )
        self._process = subprocess.Popen(
            [str(binary), "--upstream", str(upstream_port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        # One command and its answer at a time, whichever thread sends it.
        self._lock = threading.Lock()
        first = self._read_line()
        word, _, port = first.partition(" ")
        if word != "listening" or not port.isdigit():
            self.close()
            raise FaultProxyError(f"polylock-fault-proxy started with {first!r}")
        self.port = int(port)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def pass_through(self) -> None:
        """Forward both ways."""
        self._send("pass")

    def delay(self, ms: int) -> None:
        """Forward every chunk, both ways, `ms` milliseconds after it arrived (order kept)."""
        self._send(f"delay {int(ms)}")

    def drop_replies(self) -> None:
        """Forward requests (commands run) but discard every reply; connections stay open."""
        self._send("drop-replies")

    def blackhole(self) -> None:
        """Forward nothing either way; connections stay open and new ones are accepted."""
        self._send("blackhole")

    def cut_after_forward(self) -> None:
        """Forward requests; when a reply comes, discard it and close the connection."""
        self._send("cut-after-forward")

    def refuse(self) -> None:
        """Close every connection and stop listening (connection refused) until another
        fault is set; then it listens on the same port again."""
        self._send("refuse")

    def refuse_for(self, seconds: float) -> None:
        """Refuse now, and pass again after `seconds` unless another fault was set."""
        self._send(f"refuse-for {round(seconds * 1000)}")

    def cut(self) -> None:
        """Close every open connection now; new ones follow the current fault."""
        self._send("cut")

    def connections(self) -> int:
        """How many proxied connections are open."""
        return int(self._send("connections"))

    def close(self) -> None:
        stdin: Optional[IO[str]] = self._process.stdin
        if stdin is not None and not stdin.closed:
            stdin.close()  # the proxy's cue to stop
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(
        self,
        kind: Optional[type[BaseException]],
        error: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.close()

    def _send(self, line: str) -> str:
        """Sends one command; returns what followed `ok` in the answer."""
        with self._lock:
            stdin = self._process.stdin
            assert stdin is not None
            stdin.write(line + "\n")
            stdin.flush()
            answer = self._read_line()
        status, _, rest = answer.partition(" ")
        if status != "ok":
            raise FaultProxyError(f"{line!r}: {answer!r}")
        return rest

    def _read_line(self) -> str:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise FaultProxyError(f"polylock-fault-proxy exited ({self._process.poll()})")
        return line.rstrip("\n")
