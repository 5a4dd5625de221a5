"""The history test's runner (see README.md): a redis-server, the test kit's fault proxy in front
of it, Rust, Python and Node workers taking the lock `history` through the proxy, random faults
every 1-3 s, all of it written to one journal; then the checker (check.py) judges the journal.

Usage (from the repository root, after `make test-history` built the workers once):

    python/.venv/bin/python tests/history/run.py [--seconds 60] [--seed N] [--workers 2]

The seed is printed first; `--seed N` replays the same fault schedule (kinds, targets, gaps and
durations; the interleaving of the workers is up to the machine).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "python" / "tests"))
sys.path.insert(0, str(HERE))

import conftest  # noqa: E402  the Python test kit: its redis-server launcher
from faults import FaultProxy  # noqa: E402
from helpers import RedisConnection  # noqa: E402

import check  # noqa: E402

RUST_WORKER = REPO / "target" / "debug" / "examples" / "history_worker"
COMMANDS = {
    "rust": [str(RUST_WORKER)],
    "python": [sys.executable, str(HERE / "worker.py")],
    "node": ["node", str(HERE / "worker.js")],
}
# How long a worker may take to finish after its stdin closed: its acquire wait bound (10 s)
# and a release's retries, with room to spare.
STOP_GRACE_S = 30.0


class Journal:
    """The runner's side of the journal: one os.write() per line on an O_APPEND descriptor."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.read_offset = 0
        self.partial = b""

    def write(self, *fields: object) -> None:
        data = (" ".join(str(f) for f in fields) + "\n").encode()
        if os.write(self.fd, data) != len(data):
            raise OSError("short write to the journal")

    def new_lines(self) -> list[str]:
        """The complete lines appended since the last call (by anyone)."""
        with open(self.path, "rb") as journal:
            journal.seek(self.read_offset)
            data = journal.read()
        self.read_offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        return [line.decode() for line in lines]


def now_ns() -> int:
    return time.monotonic_ns()  # CLOCK_MONOTONIC, the clock of every worker


class Worker:
    def __init__(self, slot: str, incarnation: int, url: str, journal: Journal, logs: Path) -> None:
        self.slot = slot
        self.id = f"{slot}.{incarnation}"
        self.incarnation = incarnation
        self.killed = False
        self.exit_logged = False
        lang = check.language(slot)
        with open(logs / f"{slot}.log", "ab") as log:
            self.process = subprocess.Popen(
                [*COMMANDS[lang], url, str(journal.path), self.id],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log, cwd=REPO,
            )
        journal.write("spawn", self.id, self.process.pid, now_ns())


class Run:
    def __init__(self, args: argparse.Namespace, out: Path) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.out = out
        self.journal = Journal(out / "journal")
        self.redis_dir = tempfile.mkdtemp(prefix="polylock-history-redis-")
        self.server: Optional[conftest.RedisServer] = None
        self.proxy: Optional[FaultProxy] = None
        self.workers: dict[str, Optional[Worker]] = {}
        self.stopped: dict[str, int] = {}  # slot -> SIGSTOP time (ns)
        self.in_section: set[str] = set()  # worker ids between enter and leave (journal tail)
        self.pending: list[tuple[float, str, Callable[[], None]]] = []
        self.cycle: list[str] = []
        self.injected: dict[str, int] = {kind: 0 for kind in check.FAULT_KINDS}
        self.started = time.monotonic()
        self.stopping = False

    def say(self, message: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}s] {message}", flush=True)

    # -- processes ------------------------------------------------------------------------

    def spawn(self, slot: str) -> None:
        previous = self.workers.get(slot)
        incarnation = previous.incarnation + 1 if previous is not None else 1
        self.workers[slot] = Worker(slot, incarnation, self.proxy.url, self.journal, self.out)

    def reap(self) -> None:
        """Journals every worker exit; one the runner did not cause is a crash (not restarted,
        the checker fails the run)."""
        for slot, worker in self.workers.items():
            if worker is None or worker.exit_logged:
                continue
            code = worker.process.poll()
            if code is None:
                continue
            worker.exit_logged = True
            self.journal.write("exit", worker.id, code, now_ns())
            if not worker.killed and not (self.stopping and code == 0):
                self.say(f"{worker.id} exited by itself with {code}: see {self.out / slot}.log")

    def follow_journal(self) -> None:
        for line in self.journal.new_lines():
            parts = line.split(" ")
            if parts[0] == "enter":
                self.in_section.add(parts[1])
            elif parts[0] == "leave":
                self.in_section.discard(parts[1])

    def later(self, delay: float, what: str, action: Callable[[], None]) -> None:
        self.pending.append((time.monotonic() + delay, what, action))

    def run_due(self) -> None:
        now = time.monotonic()
        due = [p for p in self.pending if p[0] <= now]
        self.pending = [p for p in self.pending if p[0] > now]
        for _, _, action in sorted(due, key=lambda p: p[0]):
            action()

    # -- faults ---------------------------------------------------------------------------

    def pick_worker(self, holder_odds: float) -> Optional[Worker]:
        """A live, running worker; with `holder_odds` one that is in its critical section (as
        far as the journal tells, a few ms late), if any is."""
        live = [w for slot, w in sorted(self.workers.items())
                if w is not None and not w.exit_logged and slot not in self.stopped]
        choose_holder = self.rng.random() < holder_odds
        holding = [w for w in live if w.id in self.in_section]
        until = time.monotonic() + 0.5
        while choose_holder and not holding and time.monotonic() < until:
            time.sleep(0.002)  # the lock is between holders (or unreachable): wait for one
            self.follow_journal()
            holding = [w for w in live if w.id in self.in_section]
        if choose_holder and holding:
            return self.rng.choice(holding)
        return self.rng.choice(live) if live else None

    def inject(self) -> None:
        if not self.cycle:  # every kind once per cycle, in a random order
            self.cycle = list(check.FAULT_KINDS)
            self.rng.shuffle(self.cycle)
        kind = self.cycle.pop()
        if getattr(self, "fault_" + kind.replace("-", "_"))() is not False:
            self.injected[kind] += 1
        else:
            self.cycle.append(kind)  # no worker to aim at: try again next time

    def fault_kill(self) -> Optional[bool]:
        worker = self.pick_worker(holder_odds=0.5)
        if worker is None:
            return False
        holding = worker.id in self.in_section
        start = now_ns()
        worker.killed = True
        os.kill(worker.process.pid, signal.SIGKILL)
        end = now_ns()
        self.journal.write("fault", "kill", worker.id, start, end)
        worker.process.wait()
        self.reap()
        delay = self.rng.uniform(0.5, 2.0)
        self.say(f"fault kill {worker.id}{' (in its section)' if holding else ''}; "
                 f"restarted in {delay:.1f}s")
        self.later(delay, f"restart {worker.slot}", lambda: self.spawn(worker.slot))

    def fault_stop(self) -> Optional[bool]:
        # Mostly a holder: a paused holder is the case the checker must tell apart.
        worker = self.pick_worker(holder_odds=0.75)
        if worker is None:
            return False
        holding = worker.id in self.in_section
        self.stopped[worker.slot] = now_ns()
        os.kill(worker.process.pid, signal.SIGSTOP)
        self.say(f"fault stop {worker.id}{' (in its section)' if holding else ''} "
                 f"for {self.args.pause}s")
        self.later(self.args.pause, f"resume {worker.slot}", lambda: self.resume(worker))

    def resume(self, worker: Worker) -> None:
        start = self.stopped.pop(worker.slot)
        os.kill(worker.process.pid, signal.SIGCONT)
        self.journal.write("fault", "stop", worker.id, start, now_ns())

    def fault_client_kill(self) -> None:
        start = now_ns()
        with RedisConnection(self.server.port, timeout=2) as redis:
            killed = redis("CLIENT", "KILL", "TYPE", "normal")
        self.journal.write("fault", "client-kill", "server", start, now_ns(), f"killed={killed}")
        self.say(f"fault client-kill: {killed} connections")

    def fault_cut(self) -> None:
        start = now_ns()
        self.proxy.cut()
        self.journal.write("fault", "cut", "proxy", start, now_ns())
        self.say("fault cut (proxy)")

    def fault_refuse(self) -> None:
        seconds = round(self.rng.uniform(0.2, 0.8), 3)
        start = now_ns()
        self.proxy.refuse_for(seconds)
        self.journal.write("fault", "refuse", "proxy", start, start + int(seconds * 1e9),
                           f"ms={int(seconds * 1000)}")
        self.say(f"fault refuse (proxy) for {seconds}s")

    def fault_restart(self) -> None:
        port = self.server.port
        start = now_ns()
        self.server.process.kill()  # SIGKILL: no shutdown, no save; the key is gone with it
        self.server.process.wait()
        self.server = conftest.start_redis(self.redis_dir, port)
        end = now_ns()
        self.journal.write("fault", "restart", "server", start, end)
        self.say(f"fault restart (server down {(end - start) / 1e6:.0f} ms)")

    # -- the run --------------------------------------------------------------------------

    def run(self) -> None:
        args = self.args
        self.server = conftest.start_redis(self.redis_dir)
        self.proxy = FaultProxy(self.server.port)
        self.journal.write("run-start", now_ns(), f"seed={args.seed}", f"seconds={args.seconds}",
                           f"workers={args.workers}", f"languages={args.languages}")
        for lang in args.languages.split(","):
            for n in range(1, args.workers + 1):
                self.spawn(f"{lang}-{n}")
        self.say(f"redis-server on {self.server.port}, proxy on {self.proxy.port}, "
                 f"{len(self.workers)} workers; journal {self.journal.path}")
        deadline = self.started + args.seconds
        next_fault = self.started + self.rng.uniform(1, 3)
        while True:
            self.run_due()
            self.reap()
            self.follow_journal()
            now = time.monotonic()
            # Past the deadline, go on (20 s at most) until every kind of fault happened once
            # and every stopped worker was resumed (a pause cut short proves nothing).
            if now >= deadline and ((all(self.injected.values()) and not self.stopped)
                                    or now >= deadline + 20):
                break
            if now >= next_fault and (now < deadline or not all(self.injected.values())):
                self.inject()
                next_fault = time.monotonic() + self.rng.uniform(1, 3)
            time.sleep(0.01)
        self.stop()

    def stop(self) -> None:
        for slot in list(self.stopped):
            self.resume(self.workers[slot])
        self.pending.clear()  # killed workers waiting for their restart stay dead
        self.journal.write("stopping", now_ns())
        self.stopping = True
        self.say("stopping the workers (closing their stdin)")
        live = [w for w in self.workers.values() if w is not None and not w.exit_logged]
        for worker in live:
            worker.process.stdin.close()
        until = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < until and any(w.process.poll() is None for w in live):
            time.sleep(0.05)
        for worker in live:
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait()
                worker.exit_logged = True
                self.journal.write("exit", worker.id, "hang", now_ns())
        self.reap()
        self.journal.write("run-end", now_ns())

    def cleanup(self) -> None:
        """Whatever happened: no stopped, stray or orphaned process is left behind."""
        for slot in list(self.stopped):
            worker = self.workers[slot]
            os.kill(worker.process.pid, signal.SIGCONT)
        for worker in self.workers.values():
            if worker is not None and worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait()
        if self.proxy is not None:
            self.proxy.close()
        if self.server is not None:
            self.server.process.kill()
            self.server.process.wait()
        shutil.rmtree(self.redis_dir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="run length (default 60)")
    parser.add_argument("--seed", type=int, default=None, help="replay a run's fault schedule")
    parser.add_argument("--workers", type=int, default=2, help="workers per language (default 2)")
    parser.add_argument("--languages", default="rust,python,node")
    parser.add_argument("--pause", type=float, default=2.5,
                        help="SIGSTOP length in s (default 2.5, longer than the 1.5 s lease)")
    parser.add_argument("--min-rate", type=float, default=20.0,
                        help="fewest sections per minute per language (default 20)")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for the journal and worker logs "
                             "(default target/history/<seed>)")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2**31)
    print(f"history: seed {args.seed} (replay: {Path(sys.argv[0]).as_posix()} "
          f"--seconds {args.seconds:g} --seed {args.seed})", flush=True)
    if "rust" in args.languages.split(",") and not os.access(RUST_WORKER, os.X_OK):
        print(f"{RUST_WORKER} is missing: cargo build -p polylock --example history_worker",
              file=sys.stderr)
        return 2
    out = args.out or REPO / "target" / "history" / str(args.seed)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)

    run = Run(args, out)
    try:
        run.run()
    finally:
        run.cleanup()

    result = check.check(run.journal.path.read_text(), args.min_rate, check.FAULT_KINDS)
    check.report(result)
    print(f"journal and worker logs: {out}")
    if not result.ok:
        print(f"replay: python/.venv/bin/python tests/history/run.py --seconds {args.seconds:g} "
              f"--seed {args.seed}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
