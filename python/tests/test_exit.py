"""Interpreter exit: polylock's background threads must leave Python alone once it finalizes.

Each case runs fixtures/asyncio_exit.py in many short-lived processes (the crash was a race: a
few percent of processes died with SIGSEGV or "Fatal Python error: PyGILState_Release").
"""

from __future__ import annotations

import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SCRIPT = Path(__file__).parent / "fixtures" / "asyncio_exit.py"
PARALLEL = 8


def run_many(url: str, scenarios: list[str], clean_stderr: bool = False) -> list[str]:
    """Runs the script once per entry of `scenarios`; describes each process that failed
    (with `clean_stderr`, also each that printed a traceback)."""

    def run(scenario: str) -> str | None:
        result = subprocess.run(
            [sys.executable, str(SCRIPT), url, scenario],
            capture_output=True, text=True, timeout=60,
        )
        traceback = clean_stderr and "Traceback" in result.stderr
        if result.returncode == 0 and "Fatal Python error" not in result.stderr and not traceback:
            return None
        code = result.returncode
        status = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
        return f"{scenario}: {status}: {result.stderr.strip()[-600:]}"

    with ThreadPoolExecutor(PARALLEL) as pool:
        return [failure for failure in pool.map(run, scenarios) if failure is not None]


def test_returning_from_asyncio_run_exits_cleanly(url):
    """The report: connect, acquire, release, close, return from asyncio.run."""
    failures = run_many(url, ["basic"] * 48)
    assert failures == [], f"{len(failures)} of 48 processes failed:\n" + "\n".join(failures)


def test_exiting_while_polylock_is_busy_is_clean(url):
    """Many locks, no close, holds and waits left behind, completions after the loop closed,
    on_lost callbacks due around exit (asyncio and sync)."""
    variants = ["many", "noclose", "held", "waiting", "orphan", "lost", "sync"]
    scenarios = variants * 10
    failures = run_many(url, scenarios)
    assert failures == [], (
        f"{len(failures)} of {len(scenarios)} processes failed:\n" + "\n".join(failures)
    )


def test_exiting_while_lost_leases_are_logged_is_clean(url):
    """The core's warnings go to `logging` from polylock's delivery thread; exiting while they
    are due must neither crash, hang, nor print a traceback."""
    scenarios = ["logging"] * 24
    failures = run_many(url, scenarios, clean_stderr=True)
    assert failures == [], (
        f"{len(failures)} of {len(scenarios)} processes failed:\n" + "\n".join(failures)
    )
