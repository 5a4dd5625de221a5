"""The installed wheel works without Rust: run by `make test-dist-python` in a fresh venv where
only the wheel from dist/ was installed, with no cargo or rustc on PATH.

Starts a redis-server with the test kit's launcher (tests/redis_server.py, which needs only
redis-py beside the wheel), takes and releases a lock, checks `polylock.__version__`, and stops
the server (closing the launcher's stdin). Not a pytest module (the venv has no pytest)."""

from __future__ import annotations

import importlib.metadata
import shutil
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from redis_server import start_redis  # noqa: E402  (the test kit, found beside this file)


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

    server = start_redis()
    port = server.port
    try:
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
        server.close()
    print(f"polylock {polylock.__version__} from {Path(polylock.__file__).parent}: "
          f"lock taken and released on redis-server :{port} (Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
