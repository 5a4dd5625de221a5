"""The history test's runner (see README.md): a redis-server, the test kit's fault proxy in front
of it, Rust, Python and Node workers taking the lock `history` through the proxy, random faults
every 1-3 s, all of it written to one journal; then the checker (check.py) judges the journal.
With `--deployment cluster-broadcast`: a Redis Cluster of 3 primaries instead, with SPUBLISH
renamed away, so that the workers use plain PUBLISH (broadcast mode), as on Redis 6.2; they log
in as a user that may not run INFO, as on a managed service. With `--kind fifo` the workers take
the FIFO lock `history` (`fifo_lock` / `fifoLock`) instead of the plain lock (`lock`).

Usage (from the repository root, after `make test-history` built the workers once):

    python/.venv/bin/python tests/history/run.py [--seconds 60] [--seed N] [--workers 2]
        [--deployment single|cluster-broadcast] [--kind lock|fifo]

The seed is printed first; `--seed N` replays the same fault schedule (kinds, targets, gaps and
durations; the interleaving of the workers is up to the machine).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
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
from redis_cluster import RedisCluster  # noqa: E402

import check  # noqa: E402

RUST_WORKER = REPO / "target" / "debug" / "examples" / "history_worker"
COMMANDS = {
    "rust": [str(RUST_WORKER)],  # --rust-worker replaces it (e.g. a build of older code)
    "python": [sys.executable, str(HERE / "worker.py")],
    "node": ["node", str(HERE / "worker.js")],
}
# How long a worker may take to finish after its stdin closed: its acquire wait bound (10 s)
# and a release's retries, with room to spare.
STOP_GRACE_S = 30.0
# A stall aimed at a holder hits one that entered at most this long ago (its lease, counted
# from about its `enter`, must outlive the stall: see check.STALL_SAFE_NS).
STALL_FRESH_NS = 20_000_000
# No other fault starts until this long after a stall ended: a stalled holder's overdue
# renewal must not meet a cut or a refusal, which could lose its lease for another reason.
STALL_QUIET_S = 0.5

DEPLOYMENTS = ("single", "cluster-broadcast")
# On the cluster: no proxy faults (the cluster client learns every node's own address from
# CLUSTER SLOTS and would go around a proxy in front of one seed), and no server restart (a
# node restarted without a replica or persistence comes back without the ACL user the workers
# log in as; the single-server run covers restarts).
CLUSTER_FAULT_KINDS = ("kill", "stop", "stall", "client-kill")
# The ACL user of the cluster run: everything but INFO (the client needs no INFO). The nodes
# have SPUBLISH renamed away, so the client's SPUBLISH probe finds no sharded pub/sub and it
# uses plain PUBLISH (what a Redis 6.2 cluster gets).
CLUSTER_USER, CLUSTER_PASSWORD = "history", "history-pw"
# The lock's keys that tell the publish mode apart: grant entries are written only by waiters
# that accept grants, which broadcast-mode clients never do; the waiter list is there either way.
GRANTS_KEY = "polylock_lock_grants:{history}"
WAITERS_KEY = "polylock_lock_waiters:{history}"

# The kind of lock the workers take, which they read from this environment variable: `lock`
# (`client.lock`, the default) or `fifo` (`client.fifo_lock` / `fifoLock`).
LOCK_KINDS = ("lock", "fifo")
KIND_VARIABLE = "POLYLOCK_HISTORY_KIND"
# The FIFO lock's keys beside its hash `history` (docs/PROTOCOL.md, "FIFO lock"): the line of
# waiting owners, and each waiter's record, which holds its grant entry
# `<request>:<look>:<lease ms>` when it accepts the lock from a release, else `-`.
FIFO_LINE_KEY = "polylock_fifo_line:{history}"
FIFO_RECORD_PATTERN = "polylock_fifo_waiter:{history}:*"
FIFO_GRANT_ENTRY = re.compile(r"[0-9a-f]+:[0-9]+:[0-9]+")


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
    def __init__(self, slot: str, incarnation: int, url: str, journal: Journal, logs: Path,
                 kind: str) -> None:
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
                env={**os.environ, KIND_VARIABLE: kind},
            )
        journal.write("spawn", self.id, self.process.pid, now_ns())


class Run:
    def __init__(self, args: argparse.Namespace, out: Path) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.out = out
        self.journal = Journal(out / "journal")
        self.server: Optional[conftest.RedisServer] = None
        self.proxy: Optional[FaultProxy] = None
        self.cluster: Optional[RedisCluster] = None
        self.url = ""
        self.kinds = CLUSTER_FAULT_KINDS if args.deployment == "cluster-broadcast" else check.FAULT_KINDS
        if args.faults:
            self.kinds = tuple(kind for kind in self.kinds if kind in args.faults.split(","))
        self.workers: dict[str, Optional[Worker]] = {}
        self.stopped: dict[str, tuple[str, int, str]] = {}  # slot -> (stop|stall, SIGSTOP ns, k=v)
        self.in_section: set[str] = set()  # worker ids between enter and leave (journal tail)
        self.entered_at: dict[str, int] = {}  # worker id -> its latest `enter` time (ns)
        self.quiet_until = 0.0  # no fault before this (time.monotonic())
        # The publish-mode probe: how often the lock's grants HASH and waiter list were seen;
        # for the FIFO lock, how often its line, its waiter records (by what they held) and
        # any plain-lock key were seen.
        self.probe: Optional[RedisConnection] = None
        self.next_probe = 0.0
        if args.kind == "fifo":
            self.probes = {"samples": 0, "line": 0, "records": 0, "grant-entries": 0,
                           "no-grant": 0, "malformed": 0, "plain-keys": 0, "errors": 0}
            self.malformed: list[str] = []  # the first few record values of no known form
        else:
            self.probes = {"samples": 0, "grants": 0, "waiters": 0, "errors": 0}
        self.pending: list[tuple[float, str, Callable[[], None]]] = []
        self.cycle: list[str] = []
        self.injected: dict[str, int] = {kind: 0 for kind in self.kinds}
        self.started = time.monotonic()
        self.stopping = False

    def say(self, message: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}s] {message}", flush=True)

    # -- processes ------------------------------------------------------------------------

    def spawn(self, slot: str) -> None:
        previous = self.workers.get(slot)
        incarnation = previous.incarnation + 1 if previous is not None else 1
        self.workers[slot] = Worker(slot, incarnation, self.url, self.journal, self.out,
                                    self.args.kind)

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
                self.entered_at[parts[1]] = int(parts[3])
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
        live = self.live()
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

    def live(self) -> list[Worker]:
        """The live workers that are not stopped or stalled."""
        return [w for slot, w in sorted(self.workers.items())
                if w is not None and not w.exit_logged and slot not in self.stopped]

    def inject(self) -> None:
        if not self.cycle:  # every kind once per cycle, in a random order
            self.cycle = list(self.kinds)
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
        self.stopped[worker.slot] = ("stop", now_ns(), "")
        os.kill(worker.process.pid, signal.SIGSTOP)
        self.say(f"fault stop {worker.id}{' (in its section)' if holding else ''} "
                 f"for {self.args.pause}s")
        self.later(self.args.pause, f"resume {worker.slot}", lambda: self.resume(worker))

    def fault_stall(self) -> Optional[bool]:
        """SIGSTOP for longer than the old 1 s grant and shorter than the lease: half of the
        time a waiter (a release may grant it the lock while it is stopped), else a holder that
        entered a moment ago (most handoffs are grants, so mostly a granted one). Either way
        its lease must outlive the stall: the checker lets nothing explain an overlap in it."""
        seconds = round(self.rng.uniform(*self.args.stall), 3)
        at_holder = self.rng.random() < 0.5
        worker = None
        start = 0
        until = time.monotonic() + 2.0
        while worker is None and time.monotonic() < until:
            self.follow_journal()
            if at_holder:
                start = now_ns()
                fresh = [w for w in self.live() if w.id in self.in_section
                         and start - self.entered_at[w.id] <= STALL_FRESH_NS]
                if not fresh:
                    time.sleep(0.001)
                    continue
                worker = self.rng.choice(fresh)
            else:
                waiting = [w for w in self.live() if w.id not in self.in_section]
                if not waiting:
                    time.sleep(0.002)
                    continue
                worker = self.rng.choice(waiting)
                start = now_ns()
            os.kill(worker.process.pid, signal.SIGSTOP)
        if worker is None:
            return False
        if at_holder:
            where = f"section,entered-ms-ago={(start - self.entered_at[worker.id]) / 1e6:.1f}"
        else:
            where = "waiting"
        self.stopped[worker.slot] = ("stall", start, f"ms={int(seconds * 1000)} at={where}")
        self.quiet_until = time.monotonic() + seconds + STALL_QUIET_S
        self.say(f"fault stall {worker.id} ({where}) for {seconds}s")
        self.later(seconds, f"resume {worker.slot}", lambda: self.resume(worker))

    def resume(self, worker: Worker) -> None:
        kind, start, extra = self.stopped.pop(worker.slot)
        os.kill(worker.process.pid, signal.SIGCONT)
        self.journal.write("fault", kind, worker.id, start, now_ns(), *([extra] if extra else []))

    def nodes(self) -> list[int]:
        """The ports of the server(s) the workers use."""
        if self.cluster is not None:
            return self.cluster.ports()
        return [self.server.port]

    def fault_client_kill(self) -> None:
        start = now_ns()
        killed = 0
        for port in self.nodes():  # on a cluster, every node: a worker talks to each
            with RedisConnection(port, timeout=2) as redis:
                killed += redis("CLIENT", "KILL", "TYPE", "normal")
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
        start = now_ns()
        # SIGKILL (no shutdown, no save: the key is gone with it), then a start on the same port.
        self.server.restart()
        end = now_ns()
        self.journal.write("fault", "restart", "server", start, end)
        self.say(f"fault restart (server down {(end - start) / 1e6:.0f} ms)")

    # -- the run --------------------------------------------------------------------------

    def start_cluster(self) -> None:
        """3 primaries (no replicas: no failover is injected) without SPUBLISH and, on each
        node, the ACL user the workers log in as, which may run everything but INFO."""
        self.cluster = RedisCluster(primaries=3, replicas_per_primary=0,
                                    extra=("--rename-command", "SPUBLISH", ""))
        for port in self.cluster.ports():
            node = self.cluster.server(port)
            assert node.command("ACL", "SETUSER", CLUSTER_USER, "on", f">{CLUSTER_PASSWORD}",
                                "~*", "&*", "+@all", "-info") in (True, b"OK")
            with RedisConnection(port, timeout=5) as redis:  # the rule holds: INFO is denied
                redis("AUTH", CLUSTER_USER, CLUSTER_PASSWORD)
                try:
                    redis("INFO", "server")
                except Exception as error:  # redis-py's NoPermissionError
                    assert "NOPERM" in str(error) or "permission" in str(error).lower(), error
                else:
                    raise AssertionError(f"user {CLUSTER_USER} may run INFO on node {port}")
        self.url = self.cluster.url.replace(
            "redis+cluster://", f"redis+cluster://{CLUSTER_USER}:{CLUSTER_PASSWORD}@", 1)
        self.probe_port = self.cluster.primary_for_key("history")

    def sample_probe(self) -> None:
        """Every 50 ms, whether the lock's grants HASH and waiter list exist (on the node that
        serves the lock's slot; errors, as after a client-kill or a restart, are counted); for
        the FIFO lock, its line and waiter records instead (`sample_fifo`)."""
        now = time.monotonic()
        if now < self.next_probe:
            return
        self.next_probe = now + 0.05
        try:
            if self.probe is None:
                self.probe = RedisConnection(self.probe_port, timeout=1)
            if self.args.kind == "fifo":
                self.sample_fifo(self.probe)
                return
            grants, waiters = self.probe("EXISTS", GRANTS_KEY), self.probe("EXISTS", WAITERS_KEY)
        except Exception:  # the server restarted or killed the connection: count, go on
            self.probes["errors"] += 1
            if self.probe is not None:
                self.probe.close()
            self.probe = None
            return
        self.probes["samples"] += 1
        self.probes["grants"] += grants
        self.probes["waiters"] += waiters

    def sample_fifo(self, redis: RedisConnection) -> None:
        """One sample of the FIFO lock's keys: whether the line is non-empty, and what the
        waiter records hold (a grant entry, `-`, or anything else, which is malformed); and
        whether a plain-lock key exists (a worker that took the plain lock would show there)."""
        line = redis("LLEN", FIFO_LINE_KEY)
        records: list[bytes] = []
        cursor = b"0"
        while True:  # the node has a few dozen keys at most: one or two SCAN calls
            cursor, keys = redis("SCAN", cursor, "MATCH", FIFO_RECORD_PATTERN, "COUNT", 1000)
            records.extend(keys)
            if cursor in (b"0", "0", 0):
                break
        values = [value for value in (redis("MGET", *records) if records else [])
                  if value is not None]  # a record that lapsed since the SCAN is not counted
        plain = redis("EXISTS", GRANTS_KEY, WAITERS_KEY)
        seen = self.probes
        seen["samples"] += 1
        seen["line"] += line > 0
        seen["records"] += bool(values)
        texts = [v.decode() if isinstance(v, bytes) else str(v) for v in values]
        seen["grant-entries"] += any(FIFO_GRANT_ENTRY.fullmatch(t) for t in texts)
        seen["no-grant"] += any(t == "-" for t in texts)
        odd = [t for t in texts if t != "-" and not FIFO_GRANT_ENTRY.fullmatch(t)]
        seen["malformed"] += bool(odd)
        self.malformed.extend(odd[: max(0, 5 - len(self.malformed))])
        seen["plain-keys"] += plain > 0

    def publish_mode_problems(self) -> list[str]:
        """Broadcast mode: waiters queue (the list is seen) and none registers for grants (the
        HASH is never seen). Single server: grant entries are seen, so the probe can tell."""
        if self.args.kind == "fifo":
            return self.fifo_probe_problems()
        seen = self.probes
        problems = []
        if seen["waiters"] == 0:
            problems.append(f"the waiter list {WAITERS_KEY} was never seen: {seen}")
        if self.args.deployment == "cluster-broadcast" and seen["grants"] > 0:
            problems.append(f"grant entries ({GRANTS_KEY}) in broadcast mode: {seen}")
        if self.args.deployment == "single" and seen["grants"] == 0:
            problems.append(f"no grant entry ({GRANTS_KEY}) was ever seen on one server: {seen}")
        return problems

    def fifo_probe_problems(self) -> list[str]:
        """The FIFO lock: waiters queue (the line is seen non-empty), every waiter record holds
        a grant entry or `-`, and no plain-lock key appears. One server: a record holding a
        grant entry is seen (waiters accept grants). Broadcast mode: records are seen and none
        ever holds a grant entry (the client writes `-`: it accepts no grant, since no script
        can tell that a PUBLISH reached the waiter, see `grant` in kinds/lock_hash.lua)."""
        seen = self.probes
        problems = []
        if seen["line"] == 0:
            problems.append(f"the line {FIFO_LINE_KEY} was never seen non-empty: {seen}")
        if seen["malformed"] > 0:
            problems.append(f"waiter records ({FIFO_RECORD_PATTERN}) held neither a grant entry "
                            f"nor '-', e.g. {self.malformed}: {seen}")
        if seen["plain-keys"] > 0:
            problems.append(f"plain-lock keys ({GRANTS_KEY} or {WAITERS_KEY}) in a FIFO run: "
                            f"{seen}")
        if self.args.deployment == "single" and seen["grant-entries"] == 0:
            problems.append(f"no waiter record ({FIFO_RECORD_PATTERN}) held a grant entry on one "
                            f"server: {seen}")
        if self.args.deployment == "cluster-broadcast":
            if seen["records"] == 0:
                problems.append(f"no waiter record ({FIFO_RECORD_PATTERN}) was ever seen: {seen}")
            if seen["grant-entries"] > 0:
                problems.append(f"waiter records holding grant entries in broadcast mode: {seen}")
        return problems

    def probe_summary(self) -> str:
        """The probe's line in the report: in how many samples each thing was seen."""
        seen = self.probes
        where = self.args.deployment
        if self.args.kind != "fifo":
            return (f"publish-mode probe ({where}): {seen['samples']} samples, grants HASH seen "
                    f"{seen['grants']}, waiter list seen {seen['waiters']}, "
                    f"errors {seen['errors']}")
        return (f"publish-mode probe ({where}, fifo): {seen['samples']} samples, line non-empty "
                f"{seen['line']}, waiter records {seen['records']} (a grant entry "
                f"{seen['grant-entries']}, '-' {seen['no-grant']}, malformed {seen['malformed']}), "
                f"plain-lock keys {seen['plain-keys']}, errors {seen['errors']}")

    def run(self) -> None:
        args = self.args
        if args.deployment == "cluster-broadcast":
            self.start_cluster()
            where = f"cluster on {','.join(map(str, self.cluster.ports()))} (user {CLUSTER_USER})"
        else:
            self.server = conftest.start_redis()
            self.proxy = FaultProxy(self.server.port)
            self.url = self.proxy.url
            self.probe_port = self.server.port
            where = f"redis-server on {self.server.port}, proxy on {self.proxy.port}"
        self.journal.write("run-start", now_ns(), f"seed={args.seed}", f"seconds={args.seconds}",
                           f"workers={args.workers}", f"languages={args.languages}",
                           f"deployment={args.deployment}", f"kind={args.kind}")
        for lang in args.languages.split(","):
            for n in range(1, args.workers + 1):
                self.spawn(f"{lang}-{n}")
        self.say(f"{where}, {len(self.workers)} workers; journal {self.journal.path}")
        deadline = self.started + args.seconds
        next_fault = self.started + self.rng.uniform(1, 3)
        while True:
            self.run_due()
            self.reap()
            self.follow_journal()
            self.sample_probe()
            now = time.monotonic()
            # Past the deadline, go on (20 s at most) until every kind of fault happened once
            # and every stopped worker was resumed (a pause cut short proves nothing).
            if now >= deadline and ((all(self.injected.values()) and not self.stopped)
                                    or now >= deadline + 20):
                break
            if (now >= next_fault and now >= self.quiet_until
                    and (now < deadline or not all(self.injected.values()))):
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
        if self.probe is not None:
            self.probe.close()
        if self.proxy is not None:
            self.proxy.close()
        if self.cluster is not None:
            self.cluster.stop()
        if self.server is not None:
            self.server.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="run length (default 60)")
    parser.add_argument("--seed", type=int, default=None, help="replay a run's fault schedule")
    parser.add_argument("--workers", type=int, default=2, help="workers per language (default 2)")
    parser.add_argument("--languages", default="rust,python,node")
    parser.add_argument("--deployment", choices=DEPLOYMENTS, default="single",
                        help="one server behind the fault proxy (default), or a 3-primary "
                             "cluster without SPUBLISH (broadcast pub/sub), reached as a user without INFO")
    parser.add_argument("--kind", choices=LOCK_KINDS, default="lock",
                        help="the kind of lock the workers take: the plain lock (default) or "
                             "the FIFO lock (fifo_lock / fifoLock)")
    parser.add_argument("--faults", default="",
                        help="only these fault kinds, comma-separated (default: every kind the "
                             "deployment has)")
    parser.add_argument("--rust-worker", type=Path, default=RUST_WORKER,
                        help="the Rust worker binary (default: the history_worker example)")
    parser.add_argument("--pause", type=float, default=2.5,
                        help="SIGSTOP length in s (default 2.5, longer than the 1.5 s lease)")
    parser.add_argument("--stall", type=lambda text: tuple(float(x) for x in text.split(",")),
                        default=(1.1, 1.2),
                        help="stall length range in s (default 1.1,1.2: longer than the old "
                             "1 s grant, shorter than the 1.5 s lease less a renewal's margin)")
    parser.add_argument("--min-rate", type=float, default=20.0,
                        help="fewest sections per minute per language (default 20)")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for the journal and worker logs "
                             "(default target/history/<seed>)")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2**31)
    replay = (f"{Path(sys.argv[0]).as_posix()} --seconds {args.seconds:g} --seed {args.seed}"
              f"{' --deployment ' + args.deployment if args.deployment != 'single' else ''}"
              f"{' --kind ' + args.kind if args.kind != 'lock' else ''}"
              f"{' --faults ' + args.faults if args.faults else ''}")
    print(f"history: seed {args.seed} (replay: {replay})", flush=True)
    if "rust" in args.languages.split(",") and not os.access(args.rust_worker, os.X_OK):
        print(f"{args.rust_worker} is missing: cargo build -p polylock --example history_worker",
              file=sys.stderr)
        return 2
    COMMANDS["rust"] = [str(args.rust_worker)]
    unknown = set(filter(None, args.faults.split(","))) - set(check.FAULT_KINDS)
    if unknown:
        parser.error(f"unknown fault kinds: {sorted(unknown)}")
    prefix = "".join(f"{word}-" for word in (args.deployment, args.kind)
                     if word not in ("single", "lock"))
    out = args.out or REPO / "target" / "history" / f"{prefix}{args.seed}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)

    run = Run(args, out)
    try:
        run.run()
    finally:
        run.cleanup()

    result = check.check(run.journal.path.read_text(), args.min_rate, run.kinds)
    result.problems.extend(run.publish_mode_problems())
    print(run.probe_summary())
    check.report(result)
    print(f"journal and worker logs: {out}")
    if not result.ok:
        print(f"replay: python/.venv/bin/python {replay}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
