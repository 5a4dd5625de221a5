"""Worker processes and one timed run of them.

Every contender runs in worker processes that share one protocol: print "ready", wait for
"go <start-us> <duration-s>", run, print one JSON line. Java workers are JVMs warmed once (JIT
quiet) and reused: each serves one run at a time over the same protocol (see JavaPool).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .machine import cpu_sample, noise_between
from .paths import BENCH
from .peers import LANGS, java_command, java_missing
from .server import RedisServer


@dataclass
class Run:
    """What one scenario run of one contender produced."""
    results: list = field(default_factory=list)
    delta: dict = field(default_factory=dict)
    unsupported: Optional[str] = None
    error: Optional[str] = None
    start_us: int = 0
    # The server process's CPU (user + system) during the timed part, in seconds: what the
    # contender's work cost the server.
    server_cpu_s: Optional[float] = None
    # The machine during the timed part: load, CPU steal, CPU of processes not the bench's.
    noise: dict = field(default_factory=dict)

    def count(self, names) -> int:
        return sum(self.delta.get(name, 0) for name in names)


def status(run: Run) -> Optional[str]:
    if run.unsupported:
        return f"not run: {run.unsupported}"
    if run.error:
        return f"failed: {run.error[:160]}"
    return None


def now_us() -> int:
    return time.time_ns() // 1000


# Wall-clock time minus CLOCK_MONOTONIC, read once: Node workers add it to their monotonic
# clock (`clock_offset_us`), so that the timestamps of all of them agree (see node_worker.js).
CLOCK_OFFSET_US = time.time_ns() // 1000 - time.monotonic_ns() // 1000


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


class PooledJava(Spawned):
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

    def stderr_tail(self) -> str:
        self.log.flush()
        try:
            return self.log_path.read_text()[-600:]
        except OSError:
            return ""

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
        super().finish()
        super().reap()
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


# The Java pool of this driver run (None: Java contenders are not run), and the options every
# Java run gets: the per-run warm-up check of an already warm JVM. Set by use_java_pool.
java_pool: Optional[JavaPool] = None
java_run_options: dict = {}


def use_java_pool(pool: JavaPool, run_options: dict) -> None:
    global java_pool, java_run_options
    java_pool, java_run_options = pool, run_options


def run_workers(server: RedisServer, lang: str, contender: str, scenario: str, name: str,
                options: dict, processes: int, duration: float) -> Run:
    # "roles" (a list) gives process i the option "role": roles[i % len(roles)].
    roles = options.pop("roles", None)

    def own_options(index: int) -> dict:
        return dict(options, role=roles[index % len(roles)]) if roles else options

    if lang == "java":
        missing = java_missing() or (None if java_pool else "Java contenders not selected")
        if missing:
            return Run(unsupported=missing)
        problem = java_pool.ensure(processes)
        if problem:
            return Run(error=problem)
        workers = java_pool.workers[:processes]
        for index, worker in enumerate(workers):
            worker.begin([scenario, contender, server.url, name,
                          json.dumps(dict(java_run_options, **own_options(index)))])
    else:
        clock = {"clock_offset_us": CLOCK_OFFSET_US} if lang == "node" else {}
        workers = [Spawned(LANGS[lang]() + [scenario, contender, server.url, name,
                                            json.dumps(dict(own_options(index), **clock))])
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
        before = server.commandstats()
        cpu_before = cpu_sample()
        server_cpu_before = server.cpu_seconds()
        start_us = run.start_us = now_us() + 300_000
        for worker in workers:
            worker.send(f"go {start_us} {duration}\n")
        for worker in workers:
            line = worker.readline()
            if not line:
                run.error = f"worker failed: {worker.stderr_tail()!r}"
                return run
            run.results.append(json.loads(line))
        run.noise = noise_between(cpu_before, cpu_sample())
        run.server_cpu_s = server.cpu_seconds() - server_cpu_before
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
