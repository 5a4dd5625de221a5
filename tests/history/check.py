"""The history checker: replays a journal written by run.py and its workers, finds every overlap
of two critical sections, and says which ones the faults explain (see README.md).

Usage: python3 tests/history/check.py <journal> [--min-rate N] [--require-faults kind,kind,...]
Exit status 0 when the history is clean, 1 when it is not, 2 on a malformed journal.

Journal lines (fields separated by one space; times are CLOCK_MONOTONIC in ns; `#` comments):

    run-start <ns> seed=<seed> ...              the runner started
    spawn <worker> <pid> <ns>                   a worker process started (one id per incarnation)
    enter <worker> <seq> <ns> <acquire-ns>      acquired (acquire was called at <acquire-ns>)
    leave <worker> <seq> <ns> lost=<bool>       about to release; lost = the handle's lost flag
    release-error <worker> <seq> <ns> <kind>    release failed with the core's error kind
    acquire-error <worker> <seq> <ns> <kind>    acquire failed (transient ones are retried)
    acquire-timeout <worker> <seq> <ns>         the wait bound passed without the lock
    fault <kind> <target> <start> <end> [k=v]   a fault the runner injected (a `stop` or a
                                                `stall` is journaled when it ends)
    stopping <ns>                               the runner began to stop the workers
    exit <worker> <code|hang> <ns>              a worker process ended (-9: SIGKILL)
    run-end <ns>

Sections are replayed in file order (each line is one O_APPEND write, so file order is the
order of the writes): an `enter` while another worker is between its `enter` and its `leave`
(or its death) is an overlap. It is allowed only when explained (the first reason found):

- paused:  the earlier holder was SIGSTOPped after it called acquire and before the overlap
           (or the later one was stopped after it called acquire and resumed after the
           earlier one entered: its grant was the older one). A paused holder needs fencing.
- restart: the server was restarted after either holder called acquire and before the
           overlap: the key was lost with the server (needs fencing or persistence).
- lost:    the earlier holder's `leave` says lost=true: it was told, and must stop its work.
           Not when the later one entered while the earlier holder was stalled (below).

A `stall` (SIGSTOP for 1.1-1.2 s, longer than the old 1 s grant, shorter than the lease)
explains nothing: a holder stalled for less than its lease must keep the lock. An overlap
entered during a stall of the earlier holder that ends no later than its lease less a renewal's
margin, counted from its `enter` (STALL_SAFE_NS), is UNEXPLAINED whatever its lost flag says.

A killed (or crashed) holder's section ends at its death. Anything else is UNEXPLAINED.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

FAULT_KINDS = ("kill", "stop", "stall", "client-kill", "cut", "refuse", "restart")
EXPECTED_RELEASE_ERRORS = {"LockLost", "Connection", "Timeout"}
TRANSIENT_ERRORS = {"Connection", "Timeout"}
REASONS = ("paused", "restart", "lost")
NS = 1_000_000_000
# The workers' watchdog lease (1.5 s), less what a holder resumed from a stall needs to get its
# overdue renewal to the server (and what passed between the key's new TTL and its `enter`):
# a holder stalled until no later than this after its `enter` still holds the key.
STALL_SAFE_NS = 1_500_000_000 - 200_000_000


class MalformedJournal(ValueError):
    pass


@dataclass(eq=False)  # identity: a section is one event of the history
class Section:
    worker: str
    seq: int
    line: int
    enter: int
    called: int
    leave: Optional[int] = None
    lost: Optional[bool] = None

    @property
    def language(self) -> str:
        return language(self.worker)

    def describe(self, origin: int) -> str:
        end = "open" if self.leave is None else f"{(self.leave - origin) / NS:.3f}s lost={self.lost}"
        return (f"{self.worker} #{self.seq} (line {self.line}): acquire called "
                f"{(self.called - origin) / NS:.3f}s, enter {(self.enter - origin) / NS:.3f}s, "
                f"leave {end}")


@dataclass
class Fault:
    kind: str
    target: str
    start: int
    end: int
    line: int
    extra: str = ""


@dataclass
class Overlap:
    earlier: Section
    later: Section
    reason: Optional[str]  # None: unexplained


@dataclass
class Result:
    seed: Optional[str] = None
    duration_s: float = 0.0
    origin: int = 0
    sections: Counter = field(default_factory=Counter)  # per language
    workers: Counter = field(default_factory=Counter)  # incarnations per language
    faults: Counter = field(default_factory=Counter)
    overlaps: list[Overlap] = field(default_factory=list)
    ended_by_death: int = 0
    lost_sections: int = 0
    release_errors: Counter = field(default_factory=Counter)
    acquire_errors: Counter = field(default_factory=Counter)
    acquire_timeouts: int = 0
    problems: list[str] = field(default_factory=list)
    clock_step_back_ms: float = 0.0
    fault_list: list[Fault] = field(default_factory=list)

    @property
    def allowed(self) -> Counter:
        return Counter(o.reason for o in self.overlaps if o.reason is not None)

    def allowed_by_holder(self) -> dict[tuple[Section, str], list[Section]]:
        """The allowed overlaps grouped by the earlier holder (one paused holder overlaps
        every section entered while it is stopped)."""
        groups: dict[tuple[Section, str], list[Section]] = {}
        for overlap in self.overlaps:
            if overlap.reason is not None:
                groups.setdefault((overlap.earlier, overlap.reason), []).append(overlap.later)
        return groups

    @property
    def unexplained(self) -> list[Overlap]:
        return [o for o in self.overlaps if o.reason is None]

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        sections = ",".join(f"{k}={v}" for k, v in sorted(self.sections.items()))
        faults = ",".join(f"{k}={self.faults[k]}" for k in FAULT_KINDS)
        allowed = ",".join(f"{k}={self.allowed[k]}" for k in REASONS)
        releases = ",".join(f"{k}={v}" for k, v in sorted(self.release_errors.items())) or "none"
        return (f"history {'PASS' if self.ok else 'FAIL'} seed={self.seed} "
                f"duration={self.duration_s:.1f}s sections[{sections}] faults[{faults}] "
                f"overlaps-allowed[{allowed}] unexplained={len(self.unexplained)} "
                f"release-errors[{releases}] problems={len(self.problems)}")


def language(worker: str) -> str:
    return worker.split("-", 1)[0]


def _int(text: str, number: int, line: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise MalformedJournal(f"line {number}: not an integer {text!r}: {line!r}") from None


def _fields(parts: list[str], count: int, number: int, line: str) -> None:
    if len(parts) < count:
        raise MalformedJournal(f"line {number}: expected {count} fields: {line!r}")


def check(text: str, min_rate: float = 20.0, require_faults: tuple[str, ...] = ()) -> Result:
    result = Result()
    entries: list[tuple[int, str, list[str]]] = []
    sections: dict[tuple[str, int], Section] = {}
    deaths: dict[str, int] = {}  # worker -> ns by which it was dead (SIGKILL or exit)
    killed: set[str] = set()
    exits: dict[str, str] = {}
    spawned: list[str] = []
    start = stopping = end = None
    last_ns = None

    # Pass 1: parse, collect sections (with their leave), faults and deaths.
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(" ")
        event = parts[0]
        stamp = None
        if event == "run-start":
            _fields(parts, 2, number, line)
            start = stamp = _int(parts[1], number, line)
            for word in parts[2:]:
                if word.startswith("seed="):
                    result.seed = word[5:]
        elif event in ("stopping", "run-end"):
            _fields(parts, 2, number, line)
            stamp = _int(parts[1], number, line)
            if event == "stopping":
                stopping = stamp
            else:
                end = stamp
        elif event == "spawn":
            _fields(parts, 4, number, line)
            spawned.append(parts[1])
            result.workers[language(parts[1])] += 1
            stamp = _int(parts[3], number, line)
        elif event == "exit":
            _fields(parts, 4, number, line)
            stamp = _int(parts[3], number, line)
            exits[parts[1]] = parts[2]
            deaths[parts[1]] = min(deaths.get(parts[1], stamp), stamp)
        elif event == "fault":
            _fields(parts, 5, number, line)
            fault = Fault(parts[1], parts[2], _int(parts[3], number, line),
                          _int(parts[4], number, line), number, " ".join(parts[5:]))
            if fault.kind not in FAULT_KINDS:
                raise MalformedJournal(f"line {number}: unknown fault kind {fault.kind!r}")
            result.fault_list.append(fault)
            result.faults[fault.kind] += 1
            if fault.kind == "kill":
                killed.add(fault.target)
                deaths[fault.target] = min(deaths.get(fault.target, fault.end), fault.end)
        elif event in ("enter", "leave", "release-error", "acquire-error", "acquire-timeout"):
            _fields(parts, 4, number, line)
            worker, seq = parts[1], _int(parts[2], number, line)
            stamp = _int(parts[3], number, line)
            if event == "enter":
                _fields(parts, 5, number, line)
                if (worker, seq) in sections:
                    raise MalformedJournal(f"line {number}: {worker} entered #{seq} twice")
                sections[(worker, seq)] = Section(worker, seq, number, stamp,
                                                  _int(parts[4], number, line))
                result.sections[language(worker)] += 1
            elif event == "leave":
                _fields(parts, 5, number, line)
                section = sections.get((worker, seq))
                if section is None or section.leave is not None:
                    raise MalformedJournal(f"line {number}: leave without its enter: {line!r}")
                if parts[4] not in ("lost=true", "lost=false"):
                    raise MalformedJournal(f"line {number}: bad lost flag: {line!r}")
                section.leave, section.lost = stamp, parts[4] == "lost=true"
                result.lost_sections += section.lost
            elif event == "release-error":
                _fields(parts, 5, number, line)
                result.release_errors[parts[4]] += 1
                if parts[4] not in EXPECTED_RELEASE_ERRORS:
                    result.problems.append(f"line {number}: unexpected release error: {line}")
            elif event == "acquire-error":
                _fields(parts, 5, number, line)
                result.acquire_errors[parts[4]] += 1
            else:
                result.acquire_timeouts += 1
        else:
            raise MalformedJournal(f"line {number}: unknown event {event!r}: {line!r}")
        if stamp is not None:
            if last_ns is not None and stamp < last_ns:
                result.clock_step_back_ms = max(result.clock_step_back_ms, (last_ns - stamp) / 1e6)
            last_ns = stamp if last_ns is None else max(last_ns, stamp)
        entries.append((number, event, parts))

    origin = start if start is not None else min(
        (s.called for s in sections.values()), default=0)
    result.origin = origin
    finish = stopping if stopping is not None else end if end is not None else last_ns or origin
    result.duration_s = max(0.0, (finish - origin) / NS)

    stops = [f for f in result.fault_list if f.kind == "stop"]
    stalls = [f for f in result.fault_list if f.kind == "stall"]
    restarts = [f for f in result.fault_list if f.kind == "restart"]

    def stalled_within_lease(earlier: Section, later: Section) -> bool:
        """`later` entered while `earlier`'s holder was stalled, and the stall ended early
        enough that its lease (with a renewal's margin) outlived it: the lock was not free."""
        return any(f.target == earlier.worker and earlier.called <= f.start <= later.enter <= f.end
                   and f.end - earlier.enter <= STALL_SAFE_NS for f in stalls)

    def explain(earlier: Section, later: Section) -> Optional[str]:
        if any(f.target == earlier.worker and earlier.called <= f.start <= later.enter
               for f in stops):
            return "paused"
        if any(f.target == later.worker and later.called <= f.start <= later.enter
               and f.end >= earlier.enter for f in stops):
            return "paused"
        if any(min(earlier.called, later.called) <= f.start <= later.enter for f in restarts):
            return "restart"
        # A stall is no pause: a holder told it lost the lock across one was wronged, not warned.
        if earlier.lost and not stalled_within_lease(earlier, later):
            return "lost"
        return None

    # Pass 2: replay the sections in file order.
    open_sections: dict[str, Section] = {}
    for number, event, parts in entries:
        if event == "enter":
            section = sections[(parts[1], int(parts[2]))]
            if section.worker in open_sections:
                raise MalformedJournal(f"line {number}: {section.worker} entered while in a section")
            for other in list(open_sections.values()):
                death = deaths.get(other.worker)
                if death is not None and death < section.enter:
                    del open_sections[other.worker]
                    result.ended_by_death += 1
                    continue
                result.overlaps.append(Overlap(other, section, explain(other, section)))
            open_sections[section.worker] = section
        elif event == "leave":
            open_sections.pop(parts[1], None)
    for section in open_sections.values():
        if section.worker in deaths:
            result.ended_by_death += 1
        else:
            result.problems.append(f"{section.describe(origin)}: never left and never died")

    for overlap in result.unexplained:
        result.problems.append(
            "UNEXPLAINED overlap: " + overlap.later.describe(origin) + " entered while "
            + overlap.earlier.describe(origin) + " held the lock")

    # Workers: none may end by itself, and each must end.
    for worker in spawned:
        code = exits.get(worker)
        if worker in killed:
            if code is not None and code != "-9":
                result.problems.append(f"{worker} was killed by the runner but exited with {code}")
            continue
        if code is None:
            if end is not None:
                result.problems.append(f"{worker}: no exit recorded")
        elif code == "hang":
            result.problems.append(f"{worker} did not stop after its stdin closed")
        elif code != "0":
            result.problems.append(f"{worker} crashed by itself (exit {code}); see its log")
        elif stopping is None or deaths[worker] < stopping:
            result.problems.append(f"{worker} exited by itself before the run stopped")

    # Progress: every language that ran made progress.
    minutes = result.duration_s / 60
    for lang in sorted(result.workers):
        rate = result.sections[lang] / minutes if minutes > 0 else 0.0
        if rate < min_rate:
            result.problems.append(
                f"no progress: {lang} ran {result.sections[lang]} sections in "
                f"{result.duration_s:.1f}s ({rate:.0f}/min, less than {min_rate:g}/min)")

    for kind in require_faults:
        if result.faults[kind] == 0:
            result.problems.append(f"no fault of kind {kind} was injected")
    return result


def report(result: Result, out=sys.stdout) -> None:
    origin = result.origin
    print(f"seed: {result.seed}", file=out)
    print(f"duration: {result.duration_s:.1f}s", file=out)
    for lang in sorted(result.workers):
        print(f"sections {lang}: {result.sections[lang]} "
              f"(worker processes: {result.workers[lang]})", file=out)
    print("faults: " + ", ".join(f"{k}={result.faults[k]}" for k in FAULT_KINDS), file=out)
    holders = Counter(reason for _, reason in result.allowed_by_holder())
    print("overlaps allowed (sections overlapped, holders they overlapped): "
          + ", ".join(f"{k}={result.allowed[k]} ({holders[k]})" for k in REASONS)
          + f"; unexplained: {len(result.unexplained)}", file=out)
    print(f"sections ended by a kill or crash: {result.ended_by_death}; "
          f"left with lost=true: {result.lost_sections}", file=out)
    print("release errors: " + (", ".join(f"{k}={v}" for k, v in
                                         sorted(result.release_errors.items())) or "none"), file=out)
    print("acquire errors: " + (", ".join(f"{k}={v}" for k, v in
                                         sorted(result.acquire_errors.items())) or "none")
          + f"; acquire timeouts: {result.acquire_timeouts}", file=out)
    print(f"largest clock step back between journal lines: {result.clock_step_back_ms:.1f} ms",
          file=out)
    for (earlier, reason), later in result.allowed_by_holder().items():
        print(f"  allowed ({reason}): {len(later)} sections entered from "
              f"{(later[0].enter - origin) / NS:.3f}s to {(later[-1].enter - origin) / NS:.3f}s "
              f"while {earlier.describe(origin)}", file=out)
    for problem in result.problems:
        print(f"PROBLEM: {problem}", file=out)
    for overlap in result.unexplained:
        low = min(overlap.earlier.called, overlap.later.called) - 3 * NS
        high = overlap.later.enter + 3 * NS
        for fault in result.fault_list:
            if fault.end >= low and fault.start <= high:
                print(f"  fault near it: {fault.kind} {fault.target} "
                      f"{(fault.start - origin) / NS:.3f}s-{(fault.end - origin) / NS:.3f}s "
                      f"(line {fault.line}) {fault.extra}".rstrip(), file=out)
    print(result.summary(), file=out)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("journal", type=Path)
    parser.add_argument("--min-rate", type=float, default=20.0,
                        help="fewest sections per minute per language (default 20)")
    parser.add_argument("--require-faults", default="",
                        help="comma-separated fault kinds that must each have happened")
    args = parser.parse_args(argv)
    required = tuple(k for k in args.require_faults.split(",") if k)
    try:
        result = check(args.journal.read_text(), args.min_rate, required)
    except MalformedJournal as error:
        print(f"malformed journal {args.journal}: {error}", file=sys.stderr)
        return 2
    report(result)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
