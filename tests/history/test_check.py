"""The checker can fail: a hand-made journal with an unexplained overlap fails it, and so does
the journal of explained overlaps once any one explanation is taken out of it.

Run: python/.venv/bin/python -m pytest -q -p no:cacheprovider tests/history/test_check.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import check  # noqa: E402

FIXTURES = HERE / "fixtures"


def test_an_unexplained_overlap_fails_the_checker() -> None:
    finished = subprocess.run(
        [sys.executable, str(HERE / "check.py"), str(FIXTURES / "overlap.journal")],
        capture_output=True, text=True, check=False,
    )
    assert finished.returncode == 1, finished.stdout + finished.stderr
    assert "UNEXPLAINED overlap: node-1.1 #1" in finished.stdout
    assert "history FAIL" in finished.stdout
    result = check.check((FIXTURES / "overlap.journal").read_text())
    assert [(o.earlier.worker, o.later.worker) for o in result.unexplained] == [
        ("python-1.1", "node-1.1")]
    assert len(result.problems) == 1  # nothing else is wrong with it


def test_explained_overlaps_pass() -> None:
    result = check.check((FIXTURES / "allowed.journal").read_text(), min_rate=1)
    assert result.ok, result.problems
    assert result.allowed == {"paused": 2, "restart": 1, "lost": 1}
    assert result.ended_by_death == 1
    assert result.release_errors == {"LockLost": 4}


@pytest.mark.parametrize("line, replacement, overlapped", [
    ("fault stop rust-1.1 1105000000 3605000000", "", "rust-1.1"),
    ("fault restart server 4005000000 4040000000", "", "node-1.1"),
    ("leave python-1.1 2 5200000000 lost=true", "leave python-1.1 2 5200000000 lost=false",
     "python-1.1"),
    ("fault stop python-1.1 8000500000 10500000000", "", "node-1.2"),
    # A pause of another worker, or one that began before the holder called acquire, explains
    # nothing.
    ("fault stop rust-1.1 1105000000 3605000000", "fault stop node-1.1 1105000000 3605000000",
     "rust-1.1"),
    ("fault stop rust-1.1 1105000000 3605000000", "fault stop rust-1.1 1085000000 3605000000",
     "rust-1.1"),
    # A kill ends the holder's section at the kill, not before it.
    ("enter rust-1.1 3 7600000000 6100000000", "enter rust-1.1 3 6004000000 6003000000",
     "node-1.1"),
])
def test_each_explanation_is_needed(line: str, replacement: str, overlapped: str) -> None:
    text = (FIXTURES / "allowed.journal").read_text()
    assert text.count(line + "\n") == 1
    result = check.check(text.replace(line + "\n", replacement + "\n" if replacement else ""),
                         min_rate=1)
    assert not result.ok
    assert [o.earlier.worker for o in result.unexplained] == [overlapped]


def test_an_overlap_during_a_short_stall_fails_the_checker() -> None:
    finished = subprocess.run(
        [sys.executable, str(HERE / "check.py"), str(FIXTURES / "stall.journal")],
        capture_output=True, text=True, check=False,
    )
    assert finished.returncode == 1, finished.stdout + finished.stderr
    assert "history FAIL" in finished.stdout
    result = check.check((FIXTURES / "stall.journal").read_text(), min_rate=1)
    assert [(o.earlier.worker, o.later.worker) for o in result.unexplained] == [
        ("python-1.1", "rust-1.1"), ("rust-1.1", "node-1.1")]
    assert result.faults["stall"] == 2
    assert len(result.problems) == 2  # nothing else is wrong with it


def test_the_same_overlaps_under_a_stop_are_paused() -> None:
    # Only the kind differs: a `stop` (outliving the lease) explains them, a `stall` does not.
    text = (FIXTURES / "stall.journal").read_text().replace("fault stall ", "fault stop ")
    result = check.check(text, min_rate=1)
    assert result.ok, result.problems
    assert result.allowed == {"paused": 2}


def test_a_stall_past_the_lease_leaves_the_lost_flag_its_say() -> None:
    # Ending 1.35 s after the holder's enter, the stall may outlive its lease (1.5 s less a
    # renewal's margin): told lost=true, the holder was warned, as after any lost lease.
    line = "fault stall python-1.1 1110000000 2310000000 ms=1200 at=section"
    text = (FIXTURES / "stall.journal").read_text()
    assert text.count(line + "\n") == 1
    result = check.check(text.replace(line, "fault stall python-1.1 1110000000 2450000000 ms=1340"),
                         min_rate=1)
    assert result.allowed == {"lost": 1}
    assert [(o.earlier.worker, o.later.worker) for o in result.unexplained] == [
        ("rust-1.1", "node-1.1")]


def test_a_worker_that_crashed_by_itself_fails_the_checker() -> None:
    text = (FIXTURES / "allowed.journal").read_text()
    result = check.check(text.replace("exit rust-1.1 0 ", "exit rust-1.1 101 "), min_rate=1)
    assert any("rust-1.1 crashed by itself" in problem for problem in result.problems)


def test_no_progress_fails_the_checker() -> None:
    result = check.check((FIXTURES / "allowed.journal").read_text(), min_rate=20)
    assert any(problem.startswith("no progress") for problem in result.problems)
