"""The installed wheel works without Rust: run by `make test-dist-python` in a fresh venv where
only the wheel from dist/ was installed, with no cargo or rustc on PATH.

Starts a redis-server on a free loopback port, takes and releases a lock, checks
`polylock.__version__`, and stops the server by its pid. Not a pytest module (the venv has no
pytest, nor redis-py)."""

from __future__ import annotations

import importlib.metadata
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def pinged(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
            connection.sendall(b"PING\r\n")
            return connection.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def main() -> None:
    for tool in ("cargo", "rustc"):
        assert shutil.which(tool) is None, f"{tool} is on PATH: this check must run without Rust"

    import polylock

    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert Path(polylock.__file__).resolve().is_relative_to(site), (
        f"polylock imported from {polylock.__file__}, not from the venv's {site}"
    )
    version = importlib.metadata.version("polylock")
    assert polylock.__version__ == version, (polylock.__version__, version)

    directory = tempfile.mkdtemp(prefix="polylock-install-check-")
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--loglevel", "warning"],
        cwd=directory, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not pinged(port):
            assert server.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.02)
        with polylock.Client(f"redis://127.0.0.1:{port}/0") as client:
            lock = client.lock("install-check", timeout=5, lease=10)
            assert lock.acquire()
            assert lock.owned() and lock.locked()
            remaining = lock.remaining_lease()
            assert remaining is not None and 0 < remaining <= 10
            lock.release()
            assert not lock.locked()
            with lock:
                assert lock.owned()
            assert lock.remaining_lease() is None
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(directory, ignore_errors=True)
    print(f"polylock {polylock.__version__} from {Path(polylock.__file__).parent}: "
          f"lock taken and released on redis-server :{port} (Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
