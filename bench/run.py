"""Benchmarks polylock and peer Redis lock libraries side by side on one redis-server.

    python bench/run.py                 # the full run: writes bench/results/RESULTS.md and PNGs
    python bench/run.py --smoke --out D # a few seconds; checks the harness works, exits 1 if not

Every contender runs in worker processes (bench/rust, bench/workers/py_worker.py,
bench/workers/node_worker.js, bench/java for Redisson) that share one protocol: print "ready",
wait for "go <start-us> <duration-s>", run, print one JSON line. The driver reads the server's
INFO commandstats just before "go" and just after the last result, so each scenario's command
counts are its own, and samples /proc (load, CPU steal, CPU of processes not its own) around
every timed run. Java workers are JVMs warmed once (JIT quiet) before timing begins and reused:
each serves one run at a time over the same protocol (see JavaPool).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RUST_BIN = Path(
    os.environ.get("BENCH_RUST_BIN", ROOT / "target" / "bench-rust" / "release" / "polylock-bench")
)
HOLD_US = 1000
# A writer's weight in the RW gauge, as the workers count it (a reader's is 1).
WRITER_WEIGHT = 1_000_000

# The Java worker (Redisson): bench/java, built by `make bench-java` into a jar and a classpath
# file. The JVM is sized for up to 64 workers on a 2-core machine: the serial collector (no
# parallel GC threads) and a small heap; the JIT is HotSpot's default (tiered C1 + C2).
JAVA_TARGET = BENCH / "java" / "target"
JAVA_FLAGS = ["-XX:+UseSerialGC", "-Xms32m", "-Xmx256m",
              "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]


def java_command() -> list:
    classpath = (JAVA_TARGET / "classpath.txt").read_text().strip()
    return ["java", *JAVA_FLAGS, "-cp", f"{JAVA_TARGET / 'polylock-bench-java.jar'}:{classpath}",
            "dev.polylock.bench.Worker"]


def java_missing() -> Optional[str]:
    if not (JAVA_TARGET / "polylock-bench-java.jar").exists() or \
            not (JAVA_TARGET / "classpath.txt").exists():
        return "bench/java is not built (make bench-java)"
    if not shutil.which("java"):
        return "no java on PATH"
    return None


LANGS = {
    "rust": lambda: [str(RUST_BIN)],
    "python": lambda: [sys.executable, str(BENCH / "workers" / "py_worker.py")],
    "node": lambda: ["node", str(BENCH / "workers" / "node_worker.js")],
    "java": java_command,
}

# (language, contender) in table order; "raw" is the two-EVALSHA limit of that language.
U_CONTENDERS = [
    ("rust", "polylock"), ("rust", "polylock-fair"), ("rust", "rslock"), ("rust", "raw"),
    ("python", "polylock"), ("python", "polylock-fair"), ("python", "redis-py"),
    ("python", "python-redis-lock"), ("python", "pottery"), ("python", "raw"),
    ("node", "polylock"), ("node", "polylock-fair"), ("node", "redlock"),
    ("node", "redis-semaphore"), ("node", "raw"),
    ("java", "redisson"), ("java", "redisson-fair"),
]
C_CONTENDERS = [c for c in U_CONTENDERS if c[1] != "raw"]
# Redisson, the anchor: what a polyglot shop runs today (bench/java).
REDISSON = ("java", "redisson")
REDISSON_FAIR = ("java", "redisson-fair")
M_CONTENDERS = [
    ("rust", "polylock"), ("rust", "polylock-fair"), ("rust", "rslock"), ("rust", "raw"),
    ("node", "polylock"), ("node", "raw"),
    ("python", "polylock"), ("python", "raw"),
]
# The read-write lock (RW) and semaphore (S) scenarios: polylock in each language, and the one
# peer that has a semaphore (redis-semaphore's Semaphore); no peer here has a read-write lock.
RW_CONTENDERS = [("rust", "polylock"), ("python", "polylock"), ("node", "polylock")]
S_CONTENDERS = RW_CONTENDERS + [("node", "redis-semaphore")]
SCRIPT_COMMANDS = ("evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro")
SUBSCRIPTION_COMMANDS = ("subscribe", "unsubscribe", "psubscribe", "punsubscribe",
                         "ssubscribe", "sunsubscribe")


def label(lang: str, contender: str) -> str:
    return f"{lang} {contender}"


def now_us() -> int:
    return time.time_ns() // 1000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A throwaway redis-server on a free loopback port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--maxclients", "10000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                if self.command("PING") == "PONG":
                    return
            except OSError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)

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

    def version(self) -> str:
        for line in self.command("INFO", "server").splitlines():
            if line.startswith("redis_version:"):
                return line.split(":", 1)[1]
        return "?"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Monitor:
    """Counts the commands clients send (MONITOR), apart from those scripts run inside Redis.

    INFO commandstats also counts every redis.call() made inside a Lua script, so it cannot say
    how many commands a lock sends over the wire; MONITOR marks those as "[db lua]".
    """

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.sendall(b"*1\r\n$7\r\nMONITOR\r\n")
        self.client: dict[str, int] = {}
        self.scripted: dict[str, int] = {}
        self.counting = False
        self.buffer = b""
        reply = self._line()
        if reply != b"+OK":
            raise RuntimeError(f"MONITOR refused: {reply!r}")
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _line(self) -> Optional[bytes]:
        while b"\r\n" not in self.buffer:
            try:
                chunk = self.sock.recv(1 << 16)
            except OSError:
                return None
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line

    def _read(self) -> None:
        while True:
            line = self._line()
            if line is None:
                return
            if not self.counting:
                continue
            # +1700000000.123456 [0 127.0.0.1:5000] "EVALSHA" "..."  or  [0 lua] "hincrby" ...
            head, _, rest = line.partition(b"] ")
            source = head.rpartition(b" ")[2]
            command = rest.split(b'"', 2)[1].decode(errors="replace").lower() if b'"' in rest else "?"
            table = self.scripted if source == b"lua" else self.client
            table[command] = table.get(command, 0) + 1

    def close(self) -> None:
        self.counting = False
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(10)


@dataclass
class Run:
    """What one scenario run of one contender produced."""
    results: list = field(default_factory=list)
    delta: dict = field(default_factory=dict)
    unsupported: Optional[str] = None
    error: Optional[str] = None
    start_us: int = 0
    sent: dict = field(default_factory=dict)
    # The machine during the timed part: load, CPU steal, CPU of processes not the bench's.
    noise: dict = field(default_factory=dict)

    def commands(self, exclude_workload: int = 0) -> int:
        total = sum(v for k, v in self.delta.items() if k != "info")
        return total - exclude_workload

    def count(self, names) -> int:
        return sum(self.delta.get(name, 0) for name in names)


# ---------------------------------------------------------------- the machine during a run

def own_ticks() -> int:
    """CPU ticks (user + system) of this driver and every process under it (workers, the
    redis-server, pooled JVMs)."""
    parents, ticks = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        ticks[int(entry.name)] = int(fields[11]) + int(fields[12])
    ours, frontier = {os.getpid()}, [os.getpid()]
    children: dict = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in ours:
                ours.add(child)
                frontier.append(child)
    return sum(ticks.get(pid, 0) for pid in ours)


def cpu_sample() -> dict:
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    except (OSError, ValueError):
        return {}
    values += [0] * (8 - len(values))
    user, nice, system, idle, iowait, _irq, _softirq, steal = values
    return {"total": sum(values), "busy": user + nice + system, "idle": idle + iowait,
            "steal": steal, "ours": own_ticks()}


def noise_between(before: dict, after: dict) -> dict:
    """Steal % (the hypervisor took the CPU), other % (CPU used by processes that are not the
    bench's, approximately: user + system time of the machine minus that of the driver's process
    tree) and the 1-minute load average at the end (the bench's own runnable workers included)."""
    noise = {"load1": float(load().split()[0]) if load() != "?" else float("nan")}
    if before and after and after["total"] > before["total"]:
        total = after["total"] - before["total"]
        noise["steal_pct"] = 100 * (after["steal"] - before["steal"]) / total
        other = (after["busy"] - before["busy"]) - (after["ours"] - before["ours"])
        noise["other_pct"] = max(0.0, 100 * other / total)
    return noise


# ---------------------------------------------------------------- workers

class Spawned:
    """A worker process for one run: stdin closing ends it."""

    def __init__(self, command: list) -> None:
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, cwd=BENCH)

    def readline(self) -> str:
        return self.proc.stdout.readline()

    def send(self, line: str) -> None:
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def stderr_tail(self) -> str:
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            return "(still running)"
        return self.proc.stderr.read()[-600:]

    def kill(self) -> None:
        self.proc.kill()

    def finish(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def reap(self) -> None:
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class PooledJava:
    """One warm JVM of the pool (`Worker serve`): the worker protocol for one run at a time,
    begun by a "run ..." line and ended by "end" (answered "ended") instead of closing stdin."""

    def __init__(self, url: str, options: dict, log_path: Path) -> None:
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(java_command() + ["serve", url, json.dumps(options)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, cwd=BENCH)
        self.warm: dict = {}
        self.started = time.monotonic()

    def wait_ready(self) -> Optional[str]:
        line = self.proc.stdout.readline().strip()
        if not line.startswith("ready"):
            return f"pooled JVM did not start: {line!r} {self.stderr_tail()!r}"
        self.warm = json.loads(line[len("ready"):].strip() or "{}")
        self.warm["wall_s"] = time.monotonic() - self.started
        return None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def begin(self, words: list) -> None:
        self.send("run " + " ".join(words) + "\n")

    def readline(self) -> str:
        return self.proc.stdout.readline()

    def send(self, line: str) -> None:
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def stderr_tail(self) -> str:
        self.log.flush()
        try:
            return self.log_path.read_text()[-600:]
        except OSError:
            return ""

    def kill(self) -> None:
        self.proc.kill()

    def finish(self) -> None:
        try:
            self.send("end\n")
        except OSError:
            pass

    def reap(self) -> None:
        """Waits for "ended" (the run's client shut down); a JVM that does not answer is
        killed and replaced at the next run."""
        if not self.alive():
            return
        while True:
            line = self.proc.stdout.readline()
            if not line or line.strip() == "ended":
                break
        if not line:
            self.proc.kill()

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class JavaPool:
    """JVMs warmed once (JIT quiet, both lock kinds) and reused for every Java run, each with
    its one Redisson client.

    A fresh JVM spends 10-20 s of JIT compiler CPU before it runs at speed; at W = 64 over three
    rounds, fresh JVMs per run would cost hours of CPU on two cores, and the warm-up of one run
    would load the machine for the others. The pool starts `parallel` JVMs at a time (one per
    core by default, so each warms at full speed) and keeps them for the whole driver run.
    """

    def __init__(self, url: str, options: dict, log_dir: Path, log, parallel: int) -> None:
        self.url, self.options, self.log_dir, self.log = url, options, log_dir, log
        self.parallel = max(1, parallel)
        self.workers: list = []
        self.spawned = 0
        self.warmups: list = []

    def ensure(self, count: int) -> Optional[str]:
        """At least `count` live warm JVMs; an error message if they cannot be had."""
        self.workers = [w for w in self.workers if w.alive()]
        missing = count - len(self.workers)
        if missing <= 0:
            return None
        started = time.monotonic()
        self.log(f"Java pool: warming {missing} JVM(s), {self.parallel} at a time")
        while len(self.workers) < count:
            batch = []
            for _ in range(min(self.parallel, count - len(self.workers))):
                self.spawned += 1
                batch.append(PooledJava(self.url, self.options,
                                        self.log_dir / f"java-worker-{self.spawned}.log"))
            # A JVM's warm-up is bounded by its warmup_max_s; nothing may hang past that.
            bound = float(self.options.get("warmup_max_s", 60)) * 2 + 120
            timer = threading.Timer(bound, lambda: [w.kill() for w in batch])
            timer.start()
            for worker in batch:
                problem = worker.wait_ready()
                if problem:
                    timer.cancel()
                    for other in batch:
                        other.kill()
                    return problem
                self.workers.append(worker)
                self.warmups.append(worker.warm)
            timer.cancel()
        seconds = [w["wall_s"] for w in self.warmups[-missing:]]
        self.log(f"Java pool: {len(self.workers)} warm JVM(s) in {time.monotonic() - started:.0f} s "
                 f"(per JVM {min(seconds):.1f}-{max(seconds):.1f} s, "
                 f"{sum(1 for w in self.warmups[-missing:] if w.get('quiet'))}/{missing} JIT-quiet)")
        return None

    def close(self) -> None:
        for worker in self.workers:
            worker.close()
        self.workers = []


# The Java pool of this driver run (None: Java contenders are not run).
JAVA_POOL: Optional[JavaPool] = None
# Options every Java run gets: the per-run warm-up check of an already warm JVM.
JAVA_RUN_OPTIONS: dict = {}


def run_workers(server: RedisServer, lang: str, contender: str, scenario: str, name: str,
                options: dict, processes: int, duration: float, monitor: bool = False) -> Run:
    # "roles" (a list) gives process i the option "role": roles[i % len(roles)].
    roles = options.pop("roles", None)

    def own_options(index: int) -> dict:
        return dict(options, role=roles[index % len(roles)]) if roles else options

    if lang == "java":
        missing = java_missing() or (None if JAVA_POOL else "Java contenders not selected")
        if missing:
            return Run(unsupported=missing)
        problem = JAVA_POOL.ensure(processes)
        if problem:
            return Run(error=problem)
        workers = JAVA_POOL.workers[:processes]
        for index, worker in enumerate(workers):
            worker.begin([scenario, contender, server.url, name,
                          json.dumps(dict(JAVA_RUN_OPTIONS, **own_options(index)))])
    else:
        workers = [Spawned(LANGS[lang]() + [scenario, contender, server.url, name,
                                            json.dumps(own_options(index))])
                   for index in range(processes)]
    # Nothing may hang: a stuck run is killed, and its empty replies become an error.
    budget = 180 + duration * 3 + processes * 2
    timer = threading.Timer(budget, lambda: [w.kill() for w in workers])
    timer.start()
    run = Run()
    try:
        for worker in workers:
            line = worker.readline().strip()
            if line.startswith("unsupported"):
                run.unsupported = line[len("unsupported"):].strip()
                return run
            if line != "ready":
                run.error = f"worker did not start: {line!r} {worker.stderr_tail()!r}"
                return run
        watcher = Monitor(server.port) if monitor else None
        before = server.commandstats()
        if watcher:
            watcher.counting = True
        cpu_before = cpu_sample()
        start_us = run.start_us = now_us() + 300_000
        for worker in workers:
            worker.send(f"go {start_us} {duration}\n")
        for worker in workers:
            line = worker.readline()
            if not line:
                run.error = f"worker failed: {worker.stderr_tail()!r}"
                if watcher:
                    watcher.close()
                return run
            run.results.append(json.loads(line))
        run.noise = noise_between(cpu_before, cpu_sample())
        if watcher:
            server.command("PING")  # the monitor has seen everything before this
            time.sleep(0.2)
            watcher.close()
            run.sent = {k: v for k, v in watcher.client.items() if k not in ("info", "ping")}
        after = server.commandstats()
        # PING is nobody's lock work (Redisson's idle pooled connections send one every 30 s).
        run.delta = {k: after.get(k, 0) - before.get(k, 0) for k in after if k != "ping"}
        return run
    finally:
        for worker in workers:
            worker.finish()
        for worker in workers:
            worker.reap()
        timer.cancel()  # after reap: a pooled JVM that never answers "ended" is killed too


def percentile(values: list, q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


def jain(counts: list) -> float:
    total = sum(counts)
    squares = sum(c * c for c in counts)
    return total * total / (len(counts) * squares) if squares else float("nan")


# ---------------------------------------------------------------- scenarios

def interleaved(contenders: list, rounds: int) -> list:
    """(round, order of contenders) for each round: every round runs every contender once, and
    each round starts further along the list, so that no contender always runs first or right
    after the same one, and a burst of outside load lands on different contenders."""
    step = max(1, len(contenders) // max(1, rounds))
    return [(index, contenders[(index * step) % len(contenders):]
             + contenders[:(index * step) % len(contenders)]) for index in range(rounds)]


def summarise(rows: list, keys: tuple) -> dict:
    """One row of the report from a cell's rounds: the median and min-max of each of `keys`
    over the rounds that ran, the other figures from the round whose first key is the median
    (the lower middle for an even count), and every round kept under "rounds"."""
    good = [row for row in rows if not status(row["run"]) and row.get(keys[0]) is not None]
    if not good:
        return dict(rows[-1], rounds=rows)
    ordered = sorted(good, key=lambda row: row[keys[0]])
    row = dict(ordered[(len(ordered) - 1) // 2], rounds=rows)
    for key in keys:
        values = [r[key] for r in good]
        row[key] = statistics.median(values)
        row[f"{key}_min"], row[f"{key}_max"] = min(values), max(values)
    row["failed_rounds"] = len(rows) - len(good)
    noises = [r["run"].noise for r in rows if r["run"].noise]
    for key in ("load1", "steal_pct", "other_pct"):
        values = [n[key] for n in noises if key in n and not math.isnan(n[key])]
        row[f"{key}_max"] = max(values) if values else float("nan")
    row["jit_ms_run_max"] = max((result.get("jit_ms_run", 0) for r in rows
                                 for result in r["run"].results), default=0)
    return row


def scenario_u(server, duration, contenders, rounds, log) -> dict:
    cells: dict = {key: [] for key in contenders}
    for index, order in interleaved(contenders, rounds):
        for lang, contender in order:
            run = run_workers(server, lang, contender, "uncontended",
                              f"bench:u:{lang}:{contender}:{uuid.uuid4().hex[:8]}", {}, 1, duration)
            row = {"run": run}
            if run.results:
                result = run.results[0]
                row["rate"] = result["cycles"] / result["seconds"]
                row["commands_per_cycle"] = run.commands() / result["cycles"]
                row["scripts_per_cycle"] = run.count(SCRIPT_COMMANDS) / result["cycles"]
                row["cpu_us_per_cycle"] = result["cpu_s"] / result["cycles"] * 1e6
            cells[(lang, contender)].append(row)
            log(f"U round {index + 1}/{rounds} {label(lang, contender)}: "
                f"{describe(run, row.get('rate'), 'cycles/s')}{noise_text(run)}")
    return {key: summarise(rows, ("rate",)) for key, rows in cells.items()}


def scenario_c(server, duration, workers, contenders, rounds, log) -> dict:
    cells: dict = {(count, lang, contender): [] for count in workers
                   for lang, contender in contenders}
    for index, order in interleaved(contenders, rounds):
        for count in workers:
            for lang, contender in order:
                tag = uuid.uuid4().hex[:8]
                counter = f"bench:counter:{tag}"
                run = run_workers(server, lang, contender, "contended", f"bench:c:{tag}",
                                  {"counter": counter, "hold_us": HOLD_US}, count, duration,
                                  monitor=True)
                row = {"run": run}
                if run.results:
                    row.update(contended_metrics(run, int(server.command("GET", counter) or 0)))
                cells[(count, lang, contender)].append(row)
                log(f"C round {index + 1}/{rounds} W={count} {label(lang, contender)}: "
                    f"{describe(run, row.get('rate'), 'CS/s')}"
                    + (f" utilisation={row['utilisation']:.3f} lost={row['lost']} "
                       f"jain={row['jain']:.3f}" if run.results else "") + noise_text(run))
    return {key: summarise(rows, ("rate", "utilisation")) for key, rows in cells.items()}


def noise_text(run: Run) -> str:
    noise = run.noise
    if not noise:
        return ""
    return (f" [load {noise.get('load1', float('nan')):.1f}, steal "
            f"{noise.get('steal_pct', float('nan')):.1f} %, other "
            f"{noise.get('other_pct', float('nan')):.0f} %]")


def contended_metrics(run: Run, counter: int) -> dict:
    holds = sorted(tuple(h) for result in run.results for h in result["holds"])
    waits = [w for result in run.results for w in result["waits_us"]]
    sections = len(holds)
    if not sections:
        return {"sections": 0, "lost": counter, "utilisation": 0.0, "jain": float("nan"),
                "waits": [], "gap_p50_ms": float("nan"), "gap_p99_ms": float("nan"),
                "wait_p50_ms": float("nan"), "wait_p99_ms": float("nan"),
                "wait_max_ms": float("nan"), "commands_per_cs": float("nan"),
                "scripts_per_cs": float("nan"), "subscriptions_per_cs": float("nan"),
                "overlaps": 0, "rate": 0.0}
    wall_us = max(end for _, end in holds) - run.start_us
    gaps = [holds[i + 1][0] - holds[i][1] for i in range(sections - 1)]
    return {
        "sections": sections,
        "rate": sections / (wall_us / 1e6),
        "utilisation": sum(end - begin for begin, end in holds) / wall_us,
        "gap_p50_ms": percentile(gaps, 0.5) / 1000,
        "gap_p99_ms": percentile(gaps, 0.99) / 1000,
        "overlaps": sum(1 for gap in gaps if gap < 0),
        "waits": waits,
        "wait_p50_ms": percentile(waits, 0.5) / 1000,
        "wait_p99_ms": percentile(waits, 0.99) / 1000,
        "wait_max_ms": max(waits) / 1000,
        "jain": jain([result["cycles"] for result in run.results]),
        # The workload's own GET and SET are not the lock's cost.
        "commands_per_cs": (sum(run.sent.values()) - 2 * sections) / sections,
        "sent_breakdown": {k: v / sections for k, v in run.sent.items()},
        "all_commands_per_cs": run.commands(exclude_workload=2 * sections) / sections,
        "scripts_per_cs": run.count(SCRIPT_COMMANDS) / sections,
        "subscriptions_per_cs": run.count(SUBSCRIPTION_COMMANDS) / sections,
        "lost": sections - counter,
    }


def scenario_m(server, duration, holders, contenders, log) -> dict:
    rows = {}
    for lang, contender in contenders:
        run = run_workers(server, lang, contender, "many",
                          f"bench:m:{uuid.uuid4().hex[:8]}", {"holders": holders}, 1, duration)
        row = {"run": run}
        if run.results:
            result = run.results[0]
            row["rate"] = result["cycles"] / result["seconds"]
            row["scripts_per_cycle"] = run.count(SCRIPT_COMMANDS) / max(1, result["cycles"])
            row["commands_per_cycle"] = run.commands() / max(1, result["cycles"])
        rows[(lang, contender)] = row
        log(f"M {label(lang, contender)}: {describe(run, row.get('rate'), 'cycles/s')}")
    return rows


def scenario_rw(server, duration, processes, writers, contenders, log) -> dict:
    """RW: `processes` holders of one read-write lock, `writers` of them writers."""
    rows = {}
    roles = ["writer"] * writers + ["reader"] * (processes - writers)
    for lang, contender in contenders:
        name = f"bench:rw:{uuid.uuid4().hex[:8]}"
        run = run_workers(server, lang, contender, "rwmix", name,
                          {"hold_us": HOLD_US, "roles": roles}, processes, duration)
        row = {"run": run}
        if run.results:
            reads = [r for r in run.results if r["role"] == "reader"]
            writes = [r for r in run.results if r["role"] == "writer"]
            read_holds = [tuple(h) for r in reads for h in r["holds"]]
            write_holds = [tuple(h) for r in writes for h in r["holds"]]
            every = read_holds + write_holds
            wall_s = (max(end for _, end in every) - run.start_us) / 1e6 if every else 1.0
            read_waits = [w for r in reads for w in r["waits_us"]]
            write_waits = [w for r in writes for w in r["waits_us"]]
            final = int(server.command("GET", f"{name}:a") or 0)
            row.update({
                "reads_per_s": len(read_holds) / wall_s,
                "writes_per_s": len(write_holds) / wall_s,
                # A reader's gauge reading counts the readers inside with it (the server's count).
                "max_readers": max((r["max_gauge"] % WRITER_WEIGHT for r in reads), default=0),
                "read_wait_p50_ms": percentile(read_waits, 0.5) / 1000,
                "read_wait_p99_ms": percentile(read_waits, 0.99) / 1000,
                "write_wait_p50_ms": percentile(write_waits, 0.5) / 1000,
                "write_wait_p99_ms": percentile(write_waits, 0.99) / 1000,
                "write_wait_max_ms": max(write_waits, default=float("nan")) / 1000,
                "writes": len(write_holds),
                "mismatches": sum(r["mismatches"] for r in reads),
                "crossed": sum(r["crossed"] for r in run.results),
                "lost": len(write_holds) - final,
            })
        rows[(lang, contender)] = row
        log(f"RW {label(lang, contender)}: {describe(run, row.get('reads_per_s'), 'reads/s')}"
            + (f" writes/s={row['writes_per_s']:.0f} max readers={row['max_readers']} "
               f"mismatches={row['mismatches']} crossed={row['crossed']} lost={row['lost']}"
               if run.results else ""))
    return rows


def scenario_s(server, duration, processes, permits, contenders, log) -> dict:
    """S: `processes` holders of one semaphore of `permits` permits, one permit per hold."""
    rows = {}
    for lang, contender in contenders:
        name = f"bench:s:{uuid.uuid4().hex[:8]}"
        if contender == "polylock":
            server.command("SET", name, str(permits))  # Redisson's layout: the free permits
        run = run_workers(server, lang, contender, "permits", name,
                          {"hold_us": HOLD_US, "permits": permits}, processes, duration)
        row = {"run": run}
        if run.results:
            holds = [tuple(h) for r in run.results for h in r["holds"]]
            waits = [w for r in run.results for w in r["waits_us"]]
            wall_us = max((end for _, end in holds), default=run.start_us + 1) - run.start_us
            row.update({
                "rate": len(holds) / (wall_us / 1e6),
                "utilisation": sum(end - begin for begin, end in holds) / (wall_us * permits),
                # The server's gauge: exact, whatever the processes' clocks say.
                "max_holders": max(r["max_gauge"] for r in run.results),
                "wait_p50_ms": percentile(waits, 0.5) / 1000,
                "wait_p99_ms": percentile(waits, 0.99) / 1000,
                "jain": jain([r["cycles"] for r in run.results]),
                "acquisitions": len(holds),
                # Every permit back once all holders released (polylock's layout only).
                "permits_after": int(server.command("GET", name) or 0)
                if contender == "polylock" else permits,
            })
        rows[(lang, contender)] = row
        log(f"S {label(lang, contender)}: {describe(run, row.get('rate'), 'acquisitions/s')}"
            + (f" utilisation={row['utilisation']:.2f} max holders={row['max_holders']} "
               f"permits after={row['permits_after']}" if run.results else ""))
    return rows


def evalsha_benchmark(server, requests: int, clients: int, pipeline: int) -> float:
    """EVALSHA/s the server sustains from redis-benchmark's C client."""
    sha = server.command("SCRIPT", "LOAD", "return 1")
    output = subprocess.run(
        ["redis-benchmark", "-p", str(server.port), "-c", str(clients), "-n", str(requests),
         "-P", str(pipeline), "-q", "EVALSHA", sha, "0"],
        capture_output=True, text=True, timeout=300).stdout
    # e.g. "EVALSHA 5d4...: 81234.12 requests per second, p50=0.391 msec"
    for piece in output.replace("\r", "\n").splitlines()[::-1]:
        if "requests per second" in piece:
            return float(piece.split(":")[-1].split("requests")[0].strip().split()[-1])
    raise RuntimeError(f"redis-benchmark gave no rate: {output[-300:]!r}")


def scenario_r(server, duration, locks, watchdog_ms, log) -> dict:
    run = run_workers(server, "rust", "polylock", "renewal", f"bench:r:{uuid.uuid4().hex[:8]}",
                      {"locks": locks, "watchdog_ms": watchdog_ms}, 1, duration)
    row = {"run": run}
    if run.results:
        result = run.results[0]
        row.update(result)
        # Each renewed lock is one PEXPIRE inside the renewal script: so many lock renewals
        # per script call, whatever the tick detection saw.
        renewals = max(1, result["renewals"])
        ticks = max(1, result["ticks"])
        row["renewal_ticks"] = renewals / locks
        row["calls_per_tick"] = result["script_calls"] / row["renewal_ticks"]
        row["calls_per_100_locks_per_tick"] = result["script_calls"] * 100 / renewals
        row["cpu_percent"] = 100 * result["cpu_s"] / result["seconds"]
        row["cpu_ms_per_tick"] = 1000 * result["cpu_s"] / row["renewal_ticks"]
        row["expected_ticks"] = result["seconds"] / (watchdog_ms / 3000)
        row["ticks"] = ticks
    log(f"R: {describe(run, row.get('calls_per_tick'), 'script calls per tick')}")
    return row


def describe(run: Run, value, unit: str) -> str:
    if run.unsupported:
        return f"unsupported ({run.unsupported})"
    if run.error:
        return f"ERROR {run.error}"
    return f"{value:,.3f} {unit}" if isinstance(value, float) else f"{value} {unit}"


# ---------------------------------------------------------------- report

def fmt(value, digits=2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def status(run: Run) -> Optional[str]:
    if run.unsupported:
        return f"not run: {run.unsupported}"
    if run.error:
        return f"failed: {run.error[:160]}"
    return None


def versions() -> list[str]:
    def cmd(*args):
        try:
            return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip()
        except OSError:
            return "?"
    lines = []
    try:
        from importlib import metadata
        for package in ("polylock", "redis", "python-redis-lock", "pottery", "matplotlib"):
            try:
                lines.append(f"{package} {metadata.version(package)} (PyPI/Python)")
            except metadata.PackageNotFoundError:
                lines.append(f"{package}: not installed")
    except ImportError:
        pass
    for package in ("redlock", "redis-semaphore", "ioredis"):
        try:
            data = json.loads((BENCH / "node_modules" / package / "package.json").read_text())
            lines.append(f"{package} {data['version']} (npm)")
        except OSError:
            lines.append(f"{package}: not installed")
    lock = BENCH / "rust" / "Cargo.lock"
    if lock.exists():
        text = lock.read_text().split("[[package]]")
        for package in ("rslock", "redis", "tokio"):
            found = sorted({block.split('version = "')[1].split('"')[0] for block in text
                            if f'name = "{package}"\n' in block})
            lines.append(f"{package} {', '.join(found)} (crates.io; bench/rust/Cargo.lock)")
    lines.append(cmd("rustc", "--version"))
    lines.append(f"Python {platform.python_version()}")
    lines.append(f"Node {cmd('node', '--version')}")
    return lines


def machine() -> list[str]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "?"
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError):
        pass
    return [f"{platform.system()} {platform.release()} {platform.machine()}",
            f"{os.cpu_count()} CPUs: {model}", f"memory {memory}"]


def target_line(name: str, met: Optional[bool], detail: str) -> str:
    mark = "–" if met is None else ("met" if met else "**missed**")
    return f"| {name} | {mark} | {detail} |"


def spread(row: dict, key: str, digits: int) -> str:
    low, high = row.get(f"{key}_min"), row.get(f"{key}_max")
    if low is None or len(row.get("rounds", [])) < 2:
        return "–"
    return f"{fmt(float(low), digits)}–{fmt(float(high), digits)}"


def noise_cell(row: dict) -> str:
    values = [row.get(key) for key in ("load1_max", "steal_pct_max", "other_pct_max")]
    if all(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
        return "–"
    return f"{fmt(values[0], 1)}, {fmt(values[1], 1)}, {fmt(values[2], 0)}"


def java_errors(row: dict) -> int:
    """Redisson calls that threw (and were retried) over every round of a cell."""
    return sum(result.get("errors", 0) for r in row.get("rounds", [row])
               for result in r["run"].results)


def java_report(info: dict) -> list:
    """How the Java workers (Redisson) ran: the JVM, the pool's warm-up."""
    warmups = info.get("java_pool") or []
    if not warmups:
        return []
    walls = [w.get("wall_s", 0) for w in warmups]
    jit = [w.get("jit_ms", 0) / 1000 for w in warmups]
    cpu = [w.get("cpu_s", 0) for w in warmups]
    quiet = sum(1 for w in warmups if w.get("quiet"))
    return [
        "**Redisson** (`java redisson`: RLock, `java redisson-fair`: RFairLock; "
        "bench/java/Worker.java) runs with Redisson's defaults except its thread pools, "
        "`threads` 2 and `nettyThreads` 2 (defaults 16 and 32; the other workers run one "
        "runtime thread or event loop each on this 2-core machine), in JVMs started with `"
        + " ".join(JAVA_FLAGS[:-1]) + "`. The counter's GET and SET go through Redisson's "
        "RBucket (StringCodec): plain GET and SET.",
        f"A fresh JVM spends seconds of JIT compiler CPU before it runs at speed, so the "
        f"{len(warmups)} JVM(s) were started and warmed before any timing began, each looping "
        "lock / GET / SET / unlock on private RLock and RFairLock names from four threads until "
        "its JIT was quiet (total compilation time grew < 5 ms over 1 s), and reused for every "
        f"Java run: {quiet} of {len(warmups)} reached quiet; warm-up per JVM "
        f"{min(walls):.0f}–{max(walls):.0f} s wall, JIT {min(jit):.1f}–{max(jit):.1f} s, "
        f"process CPU {min(cpu):.1f}–{max(cpu):.1f} s. Each JVM keeps its Redisson client "
        "(connected once, as in a long-lived service; a new client per run made the JIT "
        "compile again) and, before each \"ready\", loops on private names again until its "
        "JIT is quiet (at most 10 s). PING is left out of every command count (Redisson's "
        "idle connections send one every 30 s).", ""]


def write_report(out: Path, info: dict, u: dict, c: dict, m: dict, ceiling: float, r: dict,
                 workers: list, durations: dict, rw: dict, sem: dict) -> None:
    lines = ["# polylock benchmarks", "",
             f"Run {info['started']} – {info['finished']} (UTC), `make bench` "
             f"(`python bench/run.py`). One redis-server {info['redis']} on a loopback port, "
             "`--save \"\" --appendonly no`; every contender in worker processes on the same "
             "machine as the server.", "",
             "**Machine:** " + "; ".join(machine()) + ".",
             f"**Load average** (1/5/15 min) at start: {info['load_start']}; at end: "
             f"{info['load_end']}." + (
                 " The machine was busy with other work during the run, so absolute numbers "
                 "are lower and noisier than on a quiet machine; compare contenders side by side."
                 if max(float(x) for x in (info['load_start'] + " " + info['load_end']).split()
                        [0::3]) > 1.5 else ""), "",
             "**Versions:** " + "; ".join(versions()) + ".", "",
             "Settings: contenders run with their defaults, except where a default would make "
             "them give up under contention (redlock `retryCount: -1`, redis-semaphore "
             "`acquireTimeout` 600 s). polylock locks take the watchdog lease (no lease given); "
             f"peers take a fixed 30 s lease, Redisson its watchdog lease (`lock()`, the "
             "default 30 s lockWatchdogTimeout). Hold in C: "
             f"{HOLD_US / 1000:g} ms (a blocking "
             "sleep between the GET and the SET of a non-atomic increment).", ""]
    lines += java_report(info)
    lines += ["**Rounds and noise.** U and C run every cell "
              f"{info.get('rounds', 1)} time(s), interleaved: each round runs every contender "
              "once (per W in C), each round starting further along the contender list. Tables "
              "give the median over the rounds with the min–max spread of cycles/s, CS/s and "
              "utilisation; their other columns come from the round with the median rate. "
              "Noise, worst round of the cell: the 1-minute load average at the end of the timed "
              "part (the bench's own runnable workers included, so W processes show as load "
              "≈ W), CPU steal % (/proc/stat: time the hypervisor gave to other guests) and "
              "other CPU % (user + system time of the machine minus that of the bench's own "
              "processes: other work on the machine), both as % of all CPU time of the timed "
              "part.", ""]

    lines += ["## U: uncontended acquire+release", "",
              f"One client, serial cycles for {durations['u']:g} s. `raw` is the limit: two "
              "EVALSHA of `return 1` per cycle with that language's usual client (Rust: redis-rs "
              "multiplexed connection, Python: redis-py, Node: ioredis).", "",
              "| contender | cycles/s (median) | min–max | vs raw of its language | "
              "scripts/cycle | commandstats/cycle (incl. inside scripts) | client CPU µs/cycle | "
              "noise: load, steal %, other CPU % |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (lang, contender), row in u.items():
        problem = status(row["run"])
        if problem:
            lines.append(f"| {label(lang, contender)} | {problem} | | | | | | |")
            continue
        raw = u.get((lang, "raw"), {}).get("rate")
        ratio = f"{row['rate'] / raw:.2f}" if raw else "–"
        lines.append(f"| {label(lang, contender)} | {fmt(row['rate'], 0)} | "
                     f"{spread(row, 'rate', 0)} | {ratio} | "
                     f"{fmt(row['scripts_per_cycle'])} | {fmt(row['commands_per_cycle'])} | "
                     f"{fmt(row['cpu_us_per_cycle'], 0)} | {noise_cell(row)} |")

    lines += ["", "## C: contended, W processes on one lock", "",
              f"Each of W worker processes loops for {durations['c']:g} s: acquire, GET counter, "
              f"hold {HOLD_US / 1000:g} ms, SET counter+1, release. Utilisation = sum of hold "
              "times / wall time. Gap = from one holder's release call to the next holder's "
              "acquisition. Wait = one acquire call. Jain = fairness of the acquisition counts "
              "of the W workers (1 = equal). Commands sent/CS = the commands the lock sends "
              "to Redis (counted with MONITOR; scripts count once, subscriptions included) per "
              "critical section, the workload's own GET and SET subtracted; commandstats/CS = "
              "the INFO commandstats delta the same way, which also counts each redis.call() "
              "inside a script. "
              "Lost = increments lost (critical sections minus the final counter).", ""]
    header = ("| W | contender | CS/s (median) | min–max | utilisation (median) | min–max | "
              "gap p50 ms | gap p99 ms | wait p50 ms | "
              "wait p99 ms | wait max ms | Jain | commands sent/CS | scripts/CS | "
              "(un)subscribes/CS | commandstats/CS | lost (all rounds) | "
              "noise: load, steal %, other CPU % |")
    lines += [header, "|---:|---|" + "---:|" * 16]
    for (count, lang, contender), row in c.items():
        problem = status(row["run"])
        if problem:
            lines.append(f"| {count} | {label(lang, contender)} | {problem} |" + " |" * 15)
            continue
        lost_all = sum(r.get("lost", 0) for r in row.get("rounds", [row]))
        lost = f"**{lost_all}**" if lost_all else "0"
        if row.get("failed_rounds"):
            lost += f" ({row['failed_rounds']} round(s) failed)"
        lines.append(
            f"| {count} | {label(lang, contender)} | {fmt(row['rate'], 0)} | "
            f"{spread(row, 'rate', 0)} | {fmt(row['utilisation'], 3)} | "
            f"{spread(row, 'utilisation', 3)} | {fmt(row['gap_p50_ms'])} | {fmt(row['gap_p99_ms'])} | "
            f"{fmt(row['wait_p50_ms'])} | {fmt(row['wait_p99_ms'])} | {fmt(row['wait_max_ms'])} | "
            f"{fmt(row['jain'], 3)} | {fmt(row['commands_per_cs'])} | {fmt(row['scripts_per_cs'])} | "
            f"{fmt(row['subscriptions_per_cs'])} | {fmt(row['all_commands_per_cs'])} | {lost} | "
            f"{noise_cell(row)} |")
    lines += ["", f"What each contender sends per critical section at W={workers[0]} (MONITOR; the "
              "workload's GET and SET included):", ""]
    for (count, lang, contender), row in c.items():
        if count == workers[0] and not status(row["run"]) and row.get("sent_breakdown"):
            parts = sorted(row["sent_breakdown"].items(), key=lambda kv: -kv[1])
            lines.append(f"- {label(lang, contender)}: " + ", ".join(
                f"{name.upper()} {value:.2f}" for name, value in parts if value >= 0.005))
    jit = [f"W={count} {contender} {row['jit_ms_run_max']} ms" + (
               f" ({java_errors(row)} lock/unlock calls failed and were retried)"
               if java_errors(row) else "")
           for (count, lang, contender), row in c.items()
           if lang == "java" and not status(row["run"])]
    if jit:
        lines += ["", "JIT compilation during the timed part of the Java runs (the most of any "
                  "worker, over the rounds; 0 = fully warm): " + ", ".join(jit) + ". A lock() "
                  "or unlock() that throws (Redisson's own timeouts, e.g. its 7.5 s "
                  "subscriptionTimeout on a starved machine) is counted and retried."]
    lines += ["", "![wait distribution](wait_distribution.png)", "",
              "![utilisation against W](utilisation.png)", ""]

    lines += ["## M: many locks, 64 concurrent holders in one process", "",
              f"64 concurrent holders (tasks; threads in Python) on 64 distinct names, "
              f"{durations['m']:g} s. Raw EVALSHA ceiling: **{fmt(ceiling, 0)} EVALSHA/s**, "
              "from `rust raw` below (64 concurrent tasks, each two EVALSHA of `return 1` per "
              "cycle on one redis-rs multiplexed connection, the client stack polylock uses; "
              "concurrent calls on it are pipelined). For comparison, redis-benchmark's C client "
              "on the same server: " + ", ".join(
                  f"{name}: {fmt(rate, 0)} EVALSHA/s" for name, rate in
                  info.get("benchmarks", {}).items()) + ".", "",
              "| contender | cycles/s | scripts/cycle | commands/cycle | "
              "% of ceiling ÷ scripts/cycle |", "|---|---:|---:|---:|---:|"]
    for (lang, contender), row in m.items():
        problem = status(row["run"])
        if problem:
            lines.append(f"| {label(lang, contender)} | {problem} | | | |")
            continue
        spc = row["scripts_per_cycle"] or 2
        share = row["rate"] / (ceiling / spc) * 100 if ceiling else float("nan")
        lines.append(f"| {label(lang, contender)} | {fmt(row['rate'], 0)} | "
                     f"{fmt(row['scripts_per_cycle'])} | {fmt(row['commands_per_cycle'])} | "
                     f"{fmt(share, 0)} % |")

    lines += ["", "## R: renewal cost", ""]
    problem = status(r["run"])
    if problem:
        lines.append(problem)
    else:
        lines += [f"{r['locks']:,} locks held through one Rust client with a "
                  f"{r['watchdog_ms']} ms watchdog timeout (renewal every "
                  f"{r['watchdog_ms'] / 3:.0f} ms) for {r['seconds']:.1f} s, counted on the "
                  "server (INFO commandstats sampled every 20 ms): script calls, lock renewals "
                  "(the PEXPIREs inside the renewal script; renewals ÷ locks = ticks), and the "
                  "bursts of script calls seen (a cross-check of the tick count). Client CPU "
                  "(getrusage) includes that sampling.", "",
                  "| locks | ticks: renewals ÷ locks (bursts seen, expected) | script calls | "
                  "script calls/tick | calls per 100 locks per tick | client CPU | CPU ms/tick | "
                  "locks lost |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|",
                  f"| {r['locks']:,} | {r['renewal_ticks']:.2f} ({r['ticks']}, "
                  f"{r['expected_ticks']:.0f}) | {r['script_calls']:,} | "
                  f"{fmt(r['calls_per_tick'], 1)} | {fmt(r['calls_per_100_locks_per_tick'], 3)} | "
                  f"{fmt(r['cpu_percent'], 1)} % of a core | "
                  f"{fmt(r['cpu_ms_per_tick'], 1)} | {r['lost']} |"]

    lines += kinds_report(info, durations, rw, sem)

    lines += ["", "## Targets", "", "| target | status | measured |", "|---|---|---|"]
    lines += targets(u, c, m, ceiling, r, workers)

    notes = BENCH / "NOTES.md"
    if notes.exists():
        lines += ["", notes.read_text().strip()]
    (out / "RESULTS.md").write_text("\n".join(lines) + "\n")


def kinds_report(info: dict, durations: dict, rw: dict, sem: dict) -> list[str]:
    """The RW and S sections of RESULTS.md."""
    lines = []
    if rw:
        processes, writers = info["kinds"]["rw"]
        lines += ["", "## RW: read-write lock, readers and writers mixed", "",
                  f"{processes} worker processes on one read-write lock for {durations['rw']:g} s, "
                  f"{writers} of them writers: a writer sets key a, holds "
                  f"{HOLD_US / 1000:g} ms, then sets key b to the same value; a reader reads a and "
                  f"b, holds {HOLD_US / 1000:g} ms and counts a mismatch if they differ. Each "
                  "holder counts itself in a gauge key for its hold (the server's count of who is "
                  "inside): max readers = the most readers it saw at once; crossed = holds that "
                  "found a writer beside them; lost = writes minus the final value of a. No peer "
                  "library here has a read-write lock.", "",
                  "| contender | reads/s | writes/s | max readers | read wait p50 / p99 ms | "
                  "write wait p50 / p99 / max ms | mismatches | crossed | lost |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for (lang, contender), row in rw.items():
            problem = status(row["run"])
            if problem:
                lines.append(f"| {label(lang, contender)} | {problem} | | | | | | | |")
                continue
            lines.append(
                f"| {label(lang, contender)} | {fmt(row['reads_per_s'], 0)} | "
                f"{fmt(row['writes_per_s'], 0)} | {row['max_readers']} | "
                f"{fmt(row['read_wait_p50_ms'])} / {fmt(row['read_wait_p99_ms'])} | "
                f"{fmt(row['write_wait_p50_ms'])} / {fmt(row['write_wait_p99_ms'])} / "
                f"{fmt(row['write_wait_max_ms'])} | {row['mismatches']} | {row['crossed']} | "
                f"{row['lost']} |")
    if sem:
        processes, permits = info["kinds"]["s"]
        lines += ["", "## S: semaphore", "",
                  f"{processes} worker processes on one semaphore of {permits} permits for "
                  f"{durations['s']:g} s: acquire one permit, INCR a gauge, hold "
                  f"{HOLD_US / 1000:g} ms, DECR it, release. Utilisation = sum of hold times / "
                  "(wall time x permits); max holders = the gauge's highest reading (the server's "
                  "count, whatever the processes' clocks say); permits after = the free permits once every "
                  "holder released (polylock's Redisson layout).", "",
                  "| contender | acquisitions/s | utilisation | max holders | wait p50 / p99 ms | "
                  "Jain | permits after |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for (lang, contender), row in sem.items():
            problem = status(row["run"])
            if problem:
                lines.append(f"| {label(lang, contender)} | {problem} | | | | | |")
                continue
            lines.append(
                f"| {label(lang, contender)} | {fmt(row['rate'], 0)} | "
                f"{fmt(row['utilisation'])} | {row['max_holders']} | "
                f"{fmt(row['wait_p50_ms'])} / {fmt(row['wait_p99_ms'])} | {fmt(row['jain'], 3)} | "
                f"{row['permits_after']} |")
    return lines


def targets(u, c, m, ceiling, r, workers) -> list[str]:
    out = []

    def rate(table, key):
        row = table.get(key)
        return row.get("rate") if row and not status(row["run"]) else None

    py, redis_py = rate(u, ("python", "polylock")), rate(u, ("python", "redis-py"))
    if py and redis_py:
        out.append(target_line("Python U ≥ 1.5× redis-py Lock", py >= 1.5 * redis_py,
                               f"{py / redis_py:.2f}× ({py:,.0f} vs {redis_py:,.0f} cycles/s)"))
    node, redlock = rate(u, ("node", "polylock")), rate(u, ("node", "redlock"))
    if node and redlock:
        out.append(target_line("Node U ≥ redlock", node >= redlock,
                               f"{node / redlock:.2f}× ({node:,.0f} vs {redlock:,.0f} cycles/s)"))
    rust, raw = rate(u, ("rust", "polylock")), rate(u, ("rust", "raw"))
    if rust and raw:
        out.append(target_line("Rust U ≥ 80 % of the raw limit", rust >= 0.8 * raw,
                               f"{rust / raw * 100:.0f} % ({rust:,.0f} vs {raw:,.0f} cycles/s)"))
    out += anchor_targets(u, c, workers)
    for lang in ("rust", "python", "node"):
        row = c.get((workers[0], lang, "polylock"))
        if row and not status(row["run"]):
            out.append(target_line(
                f"C {lang} plain W={workers[0]}: utilisation ≥ 0.90, 0 lost",
                row["utilisation"] >= 0.9 and row["lost"] == 0,
                f"utilisation {row['utilisation']:.3f}, lost {row['lost']}"))
    hold_ms = HOLD_US / 1000
    for lang in ("rust", "python", "node"):
        for count in workers:
            row = c.get((count, lang, "polylock-fair"))
            if not row or status(row["run"]):
                continue
            p99_bound, max_bound = 1.5 * (count - 1) * hold_ms, 2.5 * (count - 1) * hold_ms
            checks = {
                "utilisation ≥ 0.90": row["utilisation"] >= 0.9,
                "Jain ≥ 0.99": row["jain"] >= 0.99,
                f"wait p99 ≤ {p99_bound:g} ms": row["wait_p99_ms"] <= p99_bound,
                f"wait max ≤ {max_bound:g} ms": row["wait_max_ms"] <= max_bound,
                "≤ 5 commands/CS": row["commands_per_cs"] <= 5,
                "0 lost": row["lost"] == 0,
            }
            missed = [name for name, ok in checks.items() if not ok]
            out.append(target_line(
                f"C {lang} fair W={count}", not missed,
                f"utilisation {row['utilisation']:.3f}, Jain {row['jain']:.3f}, wait p99 "
                f"{row['wait_p99_ms']:.1f} / max {row['wait_max_ms']:.1f} ms, "
                f"{row['commands_per_cs']:.2f} commands/CS, lost {row['lost']}"
                + (f"; missed: {', '.join(missed)}" if missed else "")))
    for lang in ("rust", "node", "python"):
        row = m.get((lang, "polylock"))
        if row and not status(row["run"]) and ceiling:
            spc = row["scripts_per_cycle"] or 2
            bound = 0.6 * ceiling / spc
            out.append(target_line(f"M {lang} ≥ 60 % of ceiling ÷ scripts/cycle",
                                   row["rate"] >= bound,
                                   f"{row['rate']:,.0f} cycles/s vs {bound:,.0f} needed "
                                   f"({row['rate'] / (ceiling / spc) * 100:.0f} %)"))
    if r and not status(r["run"]):
        out.append(target_line("R ≤ 1 script call per 100 locks per tick",
                               r["calls_per_100_locks_per_tick"] <= 1,
                               f"{r['calls_per_100_locks_per_tick']:.4f} "
                               f"({r['calls_per_tick']:.1f} calls per tick for {r['locks']:,} locks)"))
    return out


def anchor_targets(u: dict, c: dict, workers: list) -> list:
    """Targets relative to the best peers and to Redisson, each a ratio measured in this run
    (medians over the rounds): U per language, C plain and fair at every W."""
    out = []

    def good(row) -> bool:
        return bool(row) and not status(row["run"]) and row.get("rate") is not None

    def is_peer(contender: str) -> bool:
        return not contender.startswith("polylock") and contender != "raw"

    redisson = u.get(REDISSON)
    for lang in ("rust", "python", "node"):
        mine = u.get((lang, "polylock"))
        if not good(mine):
            continue
        peers = [(row["rate"], name) for (l, name), row in u.items()
                 if l == lang and is_peer(name) and good(row)]
        if peers:
            best, name = max(peers)
            out.append(target_line(
                f"U {lang}: polylock ≥ the best {lang} peer", mine["rate"] >= best,
                f"{mine['rate'] / best:.2f}× {name} ({mine['rate']:,.0f} vs {best:,.0f} cycles/s)"))
        if good(redisson):
            out.append(target_line(
                f"U {lang}: polylock > Redisson RLock", mine["rate"] > redisson["rate"],
                f"{mine['rate'] / redisson['rate']:.2f}× ({mine['rate']:,.0f} vs "
                f"{redisson['rate']:,.0f} cycles/s)"))

    def versus(mine: dict, theirs: dict) -> str:
        return (f"CS/s {mine['rate'] / theirs['rate']:.2f}× ({mine['rate']:,.0f} vs "
                f"{theirs['rate']:,.0f}), utilisation {mine['utilisation'] / theirs['utilisation']:.2f}× "
                f"({mine['utilisation']:.3f} vs {theirs['utilisation']:.3f}), Jain "
                f"{mine['jain']:.3f} vs {theirs['jain']:.3f}")

    for count in workers:
        peers = [(row["utilisation"], label(l, name)) for (w, l, name), row in c.items()
                 if w == count and is_peer(name) and good(row)]
        best_util, best_name = max(peers) if peers else (None, None)
        blpop = c.get((count, "python", "python-redis-lock"))
        plain_anchor, fair_anchor = c.get((count,) + REDISSON), c.get((count,) + REDISSON_FAIR)
        for lang in ("rust", "python", "node"):
            plain = c.get((count, lang, "polylock"))
            if good(plain) and good(plain_anchor):
                out.append(target_line(
                    f"C plain W={count} {lang}: CS/s and utilisation ≥ Redisson RLock's",
                    plain["rate"] >= plain_anchor["rate"]
                    and plain["utilisation"] >= plain_anchor["utilisation"],
                    versus(plain, plain_anchor)))
            if good(plain) and best_util is not None:
                checks = {f"utilisation ≥ best peer's ({best_name})":
                          plain["utilisation"] >= best_util,
                          "Jain ≥ 0.9": plain["jain"] >= 0.9,
                          "≤ 3 scripts/CS": plain["scripts_per_cs"] <= 3}
                missed = [name for name, ok in checks.items() if not ok]
                out.append(target_line(
                    f"C plain W={count} {lang}: utilisation ≥ best peer's, Jain ≥ 0.9, "
                    "≤ 3 scripts/CS", not missed,
                    f"utilisation {plain['utilisation']:.3f} vs {best_util:.3f} "
                    f"({plain['utilisation'] / best_util:.2f}×), Jain {plain['jain']:.3f}, "
                    f"{plain['scripts_per_cs']:.2f} scripts/CS"
                    + (f"; missed: {', '.join(missed)}" if missed else "")))
            fair = c.get((count, lang, "polylock-fair"))
            if good(fair) and good(fair_anchor):
                out.append(target_line(
                    f"C fair W={count} {lang}: CS/s and utilisation ≥ Redisson RFairLock's",
                    fair["rate"] >= fair_anchor["rate"]
                    and fair["utilisation"] >= fair_anchor["utilisation"],
                    versus(fair, fair_anchor)))
            if good(fair) and best_util is not None:
                checks = {"Jain ≥ 0.99": fair["jain"] >= 0.99,
                          f"utilisation ≥ every peer's ({best_name})":
                          fair["utilisation"] >= best_util,
                          "commandstats/CS ≤ 20": fair["all_commands_per_cs"] <= 20}
                detail = (f"Jain {fair['jain']:.3f}, utilisation {fair['utilisation']:.3f} vs "
                          f"{best_util:.3f} ({fair['utilisation'] / best_util:.2f}×), "
                          f"{fair['all_commands_per_cs']:.1f} commandstats/CS")
                if good(blpop):
                    checks["gap p50 ≤ python-redis-lock's"] = \
                        fair["gap_p50_ms"] <= blpop["gap_p50_ms"]
                    detail += (f", gap p50 {fair['gap_p50_ms']:.2f} vs "
                               f"{blpop['gap_p50_ms']:.2f} ms")
                missed = [name for name, ok in checks.items() if not ok]
                out.append(target_line(
                    f"C fair W={count} {lang}: Jain ≥ 0.99, utilisation ≥ every peer's, gap p50 "
                    "≤ BLPOP's, commandstats/CS ≤ 20", not missed,
                    detail + (f"; missed: {', '.join(missed)}" if missed else "")))
    # The fair lock's server work per critical section must not grow with the queue.
    for lang in ("rust", "python", "node"):
        fair = [(count, c.get((count, lang, "polylock-fair"))) for count in sorted(workers)]
        fair = [(count, row["all_commands_per_cs"]) for count, row in fair if good(row)]
        if len(fair) >= 2:
            (low_w, low), (high_w, high) = fair[0], fair[-1]
            out.append(target_line(
                f"C fair {lang}: commandstats/CS flat in W (W={high_w} within 10 % of W={low_w})",
                high <= low * 1.1,
                ", ".join(f"W={count}: {value:.1f}" for count, value in fair)))
    return out


def plot(out: Path, c: dict, workers: list) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    contenders = []
    for (_, lang, contender) in c:
        if (lang, contender) not in contenders:
            contenders.append((lang, contender))
    styles = {"rust": "-", "python": "--", "node": ":", "java": "-."}
    palette = plt.get_cmap("tab20").colors
    colours = {key: palette[index % len(palette)] for index, key in enumerate(contenders)}

    figure, axes = plt.subplots(1, len(workers), figsize=(6 * len(workers) + 2.5, 5),
                                squeeze=False)
    for axis, count in zip(axes[0], workers):
        for lang, contender in contenders:
            row = c.get((count, lang, contender))
            if not row or status(row["run"]) or not row.get("waits"):
                continue
            waits = sorted(max(w / 1000, 0.001) for w in row["waits"])
            fractions = [(i + 1) / len(waits) for i in range(len(waits))]
            axis.step(waits, fractions, where="post", linestyle=styles[lang],
                      color=colours[(lang, contender)], label=label(lang, contender))
        axis.axvline((count - 1) * HOLD_US / 1000, color="grey", linewidth=0.8)
        axis.set_xscale("log")
        axis.set_xlabel("acquire wait (ms, log)")
        axis.set_ylabel("fraction of acquisitions ≤ x")
        axis.set_title(f"W = {count} (grey: (W−1) × hold)")
        axis.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, fontsize=8, loc="center right")
    figure.suptitle("C: distribution of acquire waits per contender")
    figure.tight_layout(rect=(0, 0, 0.86, 1))
    figure.savefig(out / "wait_distribution.png", dpi=90)
    plt.close(figure)

    figure, axis = plt.subplots(figsize=(8, 5))
    for lang, contender in contenders:
        points = [(count, c[(count, lang, contender)]["utilisation"]) for count in workers
                  if (count, lang, contender) in c and not status(c[(count, lang, contender)]["run"])]
        if points:
            axis.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                      linestyle=styles[lang], color=colours[(lang, contender)],
                      label=label(lang, contender))
    axis.axhline(0.9, color="grey", linewidth=0.8)
    axis.set_xscale("log", base=2)
    axis.set_xticks(workers, [str(w) for w in workers])
    axis.set_ylim(0, 1.05)
    axis.set_xlabel("W (worker processes on one lock)")
    axis.set_ylabel("utilisation (hold time / wall time)")
    axis.set_title("C: lock utilisation against W (grey: 0.90 target)")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=7, loc="lower left")
    figure.tight_layout()
    figure.savefig(out / "utilisation.png", dpi=90)
    plt.close(figure)


# ---------------------------------------------------------------- main

def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few seconds; check, no report")
    parser.add_argument("--out", type=Path, default=BENCH / "results")
    parser.add_argument("--only", default="UCMRWS", help="scenarios to run, e.g. UC (W: read-write, S: semaphore)")
    parser.add_argument("--langs", default="rust,python,node,java",
                        help="languages to run (java: Redisson)")
    parser.add_argument("--workers", help="C's worker counts, e.g. 8,32")
    parser.add_argument("--duration", type=float, help="override every scenario's duration")
    parser.add_argument("--rounds", type=int, help="rounds of U and C (default 3; smoke 1)")
    parser.add_argument("--java-parallel", type=int,
                        help="JVMs of the Java pool warmed at a time (default: one per CPU; "
                        "smoke: all at once)")
    parser.add_argument("--java-warmup-max", type=float,
                        help="bound of a pooled JVM's warm-up in seconds (default 90; smoke 5)")
    args = parser.parse_args()
    if not RUST_BIN.exists():
        print(f"missing {RUST_BIN}: build bench/rust first (make bench does)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)

    if args.smoke:
        durations = {"u": 0.3, "c": 1.0, "m": 0.5, "r": 1.5}
        workers = [3]
        rounds, warmup_max, java_parallel = 1, 5.0, 3
        u_list = U_CONTENDERS
        c_list = [("rust", "polylock"), ("rust", "polylock-fair"), ("python", "polylock"),
                  ("node", "polylock"), REDISSON, REDISSON_FAIR]
        m_list = [("rust", "polylock"), ("rust", "raw")]
        r_locks, r_watchdog = 200, 300
        rw_processes, rw_writers, s_processes, s_permits = 3, 1, 4, 2
    else:
        durations = {"u": 3.0, "c": 5.0, "m": 5.0, "r": 30.0}
        workers = [8, 32, 64]
        rounds, warmup_max, java_parallel = 3, 90.0, os.cpu_count() or 2
        u_list, c_list, m_list = U_CONTENDERS, C_CONTENDERS, M_CONTENDERS
        r_locks, r_watchdog = 10_000, 3000
        rw_processes, rw_writers, s_processes, s_permits = 8, 2, 8, 3
    durations["rw"], durations["s"] = durations["c"], durations["c"]
    langs = args.langs.split(",")
    u_list, c_list, m_list, rw_list, s_list = (
        [x for x in chosen if x[0] in langs]
        for chosen in (u_list, c_list, m_list, RW_CONTENDERS, S_CONTENDERS))
    if args.workers:
        workers = [int(w) for w in args.workers.split(",")]
    if args.duration:
        durations = {key: args.duration for key in durations}
    rounds = args.rounds or rounds
    warmup_max = args.java_warmup_max or warmup_max
    java_parallel = args.java_parallel or java_parallel

    info = {"started": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "load_start": load(),
            "rounds": rounds}
    server = RedisServer()
    info["redis"] = server.version()
    log(f"redis-server {info['redis']} on port {server.port}; load {info['load_start']}")
    u = c = m = rw = sem = {}
    r = {"run": Run(unsupported="not selected")}
    ceiling, benchmarks = 0.0, {}
    global JAVA_POOL, JAVA_RUN_OPTIONS
    java_cells = [x for x in (u_list if "U" in args.only else []) + (c_list if "C" in args.only
                                                                      else []) if x[0] == "java"]
    try:
        if java_cells and not java_missing():
            # Every JVM the run needs is started and warmed before any timing begins.
            logs = ROOT / "target" / "bench-java-logs"
            logs.mkdir(parents=True, exist_ok=True)
            JAVA_POOL = JavaPool(server.url, {"warmup_max_s": warmup_max}, logs, log,
                                 java_parallel)
            # Each run re-checks the (already warm) JIT is quiet, briefly: at most 10 s, or
            # a fifth of the pool's bound (1 s in the smoke run).
            JAVA_RUN_OPTIONS = {"warmup_max_s": min(10.0, warmup_max / 5), "warmup_min_s": 0.5,
                                "warmup_min_cycles": 100}
            problem = JAVA_POOL.ensure(max(workers) if "C" in args.only else 1)
            if problem:
                log(f"Java pool: {problem}")
            info["java_pool"] = list(JAVA_POOL.warmups)
        elif java_cells:
            log(f"Java contenders not run: {java_missing()}")
        if "U" in args.only:
            u = scenario_u(server, durations["u"], u_list, rounds, log)
        if "C" in args.only:
            c = scenario_c(server, durations["c"], workers, c_list, rounds, log)
        if "M" in args.only:
            m = scenario_m(server, durations["m"], 64, m_list, log)
            requests = 5_000 if args.smoke else 100_000
            benchmarks = {"64 connections": evalsha_benchmark(server, requests, 64, 1),
                          "4 connections, pipeline 16": evalsha_benchmark(server, requests * 4, 4, 16)}
            raw = m.get(("rust", "raw"), {})
            # The ceiling polylock is held to: the same client stack (redis-rs, one multiplexed
            # connection, 64 concurrent callers), doing nothing but the scripts' round trips.
            ceiling = raw["rate"] * raw["scripts_per_cycle"] if raw.get("rate") else \
                benchmarks["64 connections"]
            log(f"M ceiling: {ceiling:,.0f} EVALSHA/s; redis-benchmark {benchmarks}")
        if "R" in args.only:
            r = scenario_r(server, durations["r"], r_locks, r_watchdog, log)
        if "W" in args.only:
            rw = scenario_rw(server, durations["rw"], rw_processes, rw_writers, rw_list, log)
        if "S" in args.only:
            sem = scenario_s(server, durations["s"], s_processes, s_permits, s_list, log)
    finally:
        if JAVA_POOL:
            info["java_pool"] = list(JAVA_POOL.warmups)
            JAVA_POOL.close()
        server.stop()
    info["finished"] = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    info["load_end"] = load()

    if args.smoke:
        return smoke_verdict(u, c, m, r, rw, sem, s_permits)
    info["benchmarks"] = benchmarks
    info["kinds"] = {"rw": (rw_processes, rw_writers), "s": (s_processes, s_permits)}
    write_report(args.out, info, u, c, m, ceiling, r, workers, durations, rw, sem)
    if c:
        plot(args.out, c, workers)
    log(f"wrote {args.out / 'RESULTS.md'}")
    return 0


def java_text(run: Run) -> str:
    """The JIT work a Java run still did while timed, and its per-run warm-up check."""
    jit = [result["jit_ms_run"] for result in run.results if "jit_ms_run" in result]
    warm = [result["warmup"] for result in run.results if "warmup" in result]
    if not jit:
        return ""
    errors = sum(result.get("errors", 0) for result in run.results)
    return (f"; JIT during the run ≤ {max(jit)} ms, warm-up check "
            f"{max(w['seconds'] for w in warm):.1f} s, "
            f"{sum(1 for w in warm if w.get('quiet'))}/{len(warm)} quiet"
            + (f", {errors} Redisson errors (retried)" if errors else ""))


def smoke_verdict(u, c, m, r, rw, sem, permits) -> int:
    """The smoke run passes when every contender that can run here ran, and nothing was lost."""
    passed, failed = 0, 0

    def check(name: str, ok: bool, detail: str = "") -> None:
        nonlocal passed, failed
        passed, failed = passed + ok, failed + (not ok)
        print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")

    for (lang, contender), cell in u.items():
        for number, row in enumerate(cell.get("rounds", [cell]), 1):
            run = row["run"]
            if run.unsupported:
                print(f"skip U {label(lang, contender)}: {run.unsupported}")
                continue
            check(f"U {label(lang, contender)} round {number}",
                  not run.error and row.get("rate", 0) > 0,
                  run.error or f"{row.get('rate', 0):,.0f} cycles/s" + java_text(run))
    for (count, lang, contender), cell in c.items():
        for number, row in enumerate(cell.get("rounds", [cell]), 1):
            run = row["run"]
            if run.unsupported:
                print(f"skip C {label(lang, contender)}: {run.unsupported}")
                continue
            ok = not run.error and row.get("sections", 0) > 0 and row.get("lost") == 0 \
                and row.get("overlaps") == 0
            check(f"C W={count} {label(lang, contender)} round {number}", ok, run.error or
                  f"{row.get('sections')} CS, lost {row.get('lost')}, overlaps "
                  f"{row.get('overlaps')}" + java_text(run))
    for (lang, contender), row in m.items():
        run = row["run"]
        check(f"M {label(lang, contender)}", not run.error and row.get("rate", 0) > 0,
              run.error or f"{row.get('rate', 0):,.0f} cycles/s")
    if "ticks" in r:
        check("R renewal", r["renewals"] > 0 and r["lost"] == 0 and r["script_calls"] > 0,
              f"{r['renewals']} renewals, {r['script_calls']} script calls, lost {r['lost']}")
    elif r["run"].error:
        check("R renewal", False, r["run"].error)
    for (lang, contender), row in rw.items():
        run = row["run"]
        ok = not run.error and row.get("writes", 0) > 0 and row.get("reads_per_s", 0) > 0 \
            and row.get("mismatches") == 0 and row.get("crossed") == 0 and row.get("lost") == 0
        check(f"RW {label(lang, contender)}", ok, run.error or
              f"{row.get('writes')} writes, mismatches {row.get('mismatches')}, "
              f"crossed {row.get('crossed')}, lost {row.get('lost')}")
    for (lang, contender), row in sem.items():
        run = row["run"]
        ok = not run.error and row.get("acquisitions", 0) > 0 \
            and row.get("max_holders", permits + 1) <= permits \
            and row.get("permits_after") == permits
        check(f"S {label(lang, contender)}", ok, run.error or
              f"{row.get('acquisitions')} acquisitions, max holders {row.get('max_holders')}, "
              f"permits after {row.get('permits_after')}")
    print(f"bench-smoke: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
