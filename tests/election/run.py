"""The mixed-language election test: Rust, Python and Node candidate processes on one election
(workers: core/examples/election_worker.rs, worker.py, worker.js), each through a fault proxy
of its own to one redis-server, with a 1.5 s lease. The runner hits the current leader three
times: SIGKILL, SIGSTOP past its lease then SIGCONT, and a network cut-off (its proxy forwards
nothing). It checks from the candidates' logs (CLOCK_MONOTONIC in every process):
- after each fault a new leader leads within the lease + BOUND_S;
- terms strictly increase from one leader to the next;
- every `act` (a candidate that checked `is_leader()` and still leads) carries the highest term
  led before it: no candidate acts while another, newer leader leads, so at no moment do two
  unpaused candidates act as leaders. A resumed ex-leader must learn on its first check;
- the paused ex-leader logs `lost` after SIGCONT, the cut-off one while cut off.

Usage (from the repository root, after `make test-election` built the workers):

    python/.venv/bin/python tests/election/run.py [--languages rust,python,node]

`--languages` picks the candidates (e.g. `rust,rust,rust` to check a change of the Rust
candidate alone, which rebuilds in seconds).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "python" / "tests"))

from faults import FaultProxy  # noqa: E402
from redis_server import start_redis  # noqa: E402

ELECTION = "mixed-election"
LEASE_MS = 1500
# What a new leader may take beyond the lease: the waiters' wake-up at the key's expiry, the
# acquire and announce round trips, and a loaded machine's scheduling.
BOUND_S = 3.0
STARTUP_S = 30.0
COMMANDS = {
    "rust": [str(REPO / "target" / "debug" / "examples" / "election_worker")],
    "python": [sys.executable, str(HERE / "worker.py")],
    "node": ["node", str(HERE / "worker.js")],
}


@dataclass
class Event:
    at: int  # CLOCK_MONOTONIC ns
    worker: str
    kind: str  # lead, act, lost, error
    term: int


@dataclass
class Candidate:
    worker: str
    language: str
    proxy: FaultProxy
    process: subprocess.Popen[str]
    reader: threading.Thread = field(init=False)


class Group:
    def __init__(self, url_port: int) -> None:
        self.port = url_port
        self.events: list[Event] = []
        self.lock = threading.Lock()
        self.candidates: dict[str, Candidate] = {}
        self.generation = 0

    def start(self, language: str, proxy: Optional[FaultProxy] = None) -> Candidate:
        self.generation += 1
        worker = f"{language}-{self.generation}"
        proxy = proxy or FaultProxy(self.port)
        command = [*COMMANDS[language], proxy.url, ELECTION, str(LEASE_MS), worker]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1)
        candidate = Candidate(worker, language, proxy, process)
        candidate.reader = threading.Thread(target=self._read, args=(candidate,), daemon=True)
        candidate.reader.start()
        self.candidates[worker] = candidate
        return candidate

    def _read(self, candidate: Candidate) -> None:
        assert candidate.process.stdout is not None
        for line in candidate.process.stdout:
            at, worker, kind, term = line.split()
            with self.lock:
                self.events.append(Event(int(at), worker, kind, int(term)))

    def leads(self) -> list[Event]:
        with self.lock:
            return [event for event in self.events if event.kind == "lead"]

    def wait_for(self, predicate, timeout: float, what: str) -> Event:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                found = [event for event in self.events if predicate(event)]
            if found:
                return found[0]
            time.sleep(0.01)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")

    def new_leader(self, after_term: int, since: int, timeout: float) -> Event:
        lead = self.wait_for(
            lambda e: e.kind == "lead" and e.term > after_term,
            timeout,
            f"a leader with a term above {after_term}",
        )
        took = (lead.at - since) / 1e9
        print(f"  new leader {lead.worker} term {lead.term}, {took:.2f} s after the fault")
        return lead

    def stop_all(self) -> None:
        for candidate in self.candidates.values():
            if candidate.process.poll() is None:
                candidate.process.kill()
            candidate.process.wait()
        for candidate in self.candidates.values():
            candidate.reader.join(timeout=5)
        for proxy in {id(c.proxy): c.proxy for c in self.candidates.values()}.values():
            proxy.close()


def check(events: list[Event], languages_started: set[str]) -> None:
    events = sorted(events, key=lambda event: event.at)
    leads = [event for event in events if event.kind == "lead"]
    terms = [lead.term for lead in leads]
    assert terms == sorted(set(terms)), f"terms do not strictly increase: {terms}"
    highest = 0
    acts = 0
    for event in events:
        if event.kind == "lead":
            highest = event.term
        elif event.kind == "act":
            acts += 1
            assert event.term == highest, (
                f"{event.worker} acted with term {event.term} at {event.at} while term "
                f"{highest} led: two leaders at once"
            )
    languages = {lead.worker.split("-")[0] for lead in leads}
    # Each fault hands over to another candidate: of another language whenever one runs.
    assert len(languages) >= min(2, len(languages_started)), f"only {languages} led"
    print(f"checked {len(leads)} leaderships ({sorted(languages)}), {acts} acts")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--languages", default="rust,python,node")
    languages = parser.parse_args().languages.split(",")
    server = start_redis()
    group = Group(server.port)
    lease_s = LEASE_MS / 1000
    started = time.monotonic()
    try:
        for language in languages:
            group.start(language)
        first = group.new_leader(0, time.monotonic_ns(), STARTUP_S)

        print(f"SIGKILL the leader {first.worker}")
        victim = group.candidates[first.worker]
        at = time.monotonic_ns()
        victim.process.kill()
        second = group.new_leader(first.term, at, lease_s + BOUND_S)
        group.start(victim.language, victim.proxy)

        print(f"SIGSTOP the leader {second.worker} past its lease, then SIGCONT")
        paused = group.candidates[second.worker]
        at = time.monotonic_ns()
        os.kill(paused.process.pid, signal.SIGSTOP)
        third = group.new_leader(second.term, at, lease_s + BOUND_S)
        time.sleep(max(0.0, lease_s + 0.5 - (time.monotonic_ns() - at) / 1e9))
        resumed_at = time.monotonic_ns()
        os.kill(paused.process.pid, signal.SIGCONT)
        group.wait_for(
            lambda e: e.worker == second.worker and e.kind == "lost" and e.at >= resumed_at,
            BOUND_S,
            f"{second.worker} to learn it lost after SIGCONT",
        )

        print(f"cut the leader {third.worker} off the network")
        cut = group.candidates[third.worker]
        at = time.monotonic_ns()
        cut.proxy.blackhole()
        fourth = group.new_leader(third.term, at, lease_s + BOUND_S)
        group.wait_for(
            lambda e: e.worker == third.worker and e.kind == "lost" and e.term == third.term,
            lease_s + BOUND_S,
            f"{third.worker} to learn it lost while cut off",
        )
        cut.proxy.pass_through()
        # Every candidate keeps acting or waiting a little longer, under the checks too.
        time.sleep(1.0)
        print(f"last leader {fourth.worker} term {fourth.term}")
    finally:
        group.stop_all()
        server.close()
    check(group.events, set(languages))
    print(f"election test passed in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
