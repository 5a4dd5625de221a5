"""The contenders of each scenario, and how each language's worker process is started."""

from __future__ import annotations

import shutil
import sys
from typing import Optional

from .paths import BENCH, JAVA_TARGET, RUST_BIN

# The JVM is sized for up to 64 workers on a 2-core machine: the serial collector (no parallel
# GC threads) and a small heap; the JIT is HotSpot's default (tiered C1 + C2).
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
# "polylock-metrics-off": the plain lock with `ClientOptions.metrics` false, beside "polylock"
# (metrics on, the default), so the tables show what counting costs. "polylock-fair": the fair lock
# (Redisson's RFairLock layout); "polylock-fifo": the FIFO lock (polylock's own layout).
# "polylock-core-runtime": the plain lock with the worker's loop run on polylock's own runtime
# (`polylock::runtime()`), where the connection's tasks run, beside "polylock" on the worker's
# own runtime, so the tables show what crossing between the two runtimes costs.
# Rust's U runs each loop in a task spawned on the worker's multi-thread runtime, as a service
# runs lock code; "polylock-block-on" and "rslock-block-on" run it on `block_on` in the main
# thread instead (issue 44's two shapes). "plain-key" (see M below) in U: what the cheapest
# two-script cycle that keeps polylock's guarantees costs a serial client, rslock's yardstick.
# "polylock-scripts": the two commands of polylock's uncontended cycle, read from the server's
# slow log and sent bare on `raw`'s connection (the protocol without the engine);
# "redisson-layout": the least a lock on Redisson's RLock hash does (the floor of any lock that
# excludes RLock); both in both shapes.
U_CONTENDERS = [
    ("rust", "polylock"), ("rust", "polylock-core-runtime"), ("rust", "polylock-metrics-off"),
    ("rust", "polylock-fair"),
    ("rust", "polylock-fifo"), ("rust", "rslock"), ("rust", "polylock-block-on"),
    ("rust", "rslock-block-on"), ("rust", "plain-key"), ("rust", "raw"),
    ("rust", "polylock-scripts"), ("rust", "polylock-scripts-block-on"),
    ("rust", "redisson-layout"), ("rust", "redisson-layout-block-on"),
    ("python", "polylock"), ("python", "polylock-fair"), ("python", "polylock-fifo"),
    ("python", "redis-py"),
    ("python", "python-redis-lock"), ("python", "pottery"), ("python", "raw"),
    ("node", "polylock"), ("node", "polylock-fair"), ("node", "polylock-fifo"),
    ("node", "redlock"),
    ("node", "redis-semaphore"), ("node", "raw"),
    ("java", "redisson"), ("java", "redisson-fair"),
]
# (plain-key and the two others sent bare have no wait: they are not C contenders.)
C_CONTENDERS = [c for c in U_CONTENDERS
                if c[1] not in ("raw", "plain-key", "polylock-scripts", "redisson-layout")
                and not c[1].endswith("-block-on")]
# Redisson, the anchor: what a polyglot shop runs today (bench/java).
REDISSON = ("java", "redisson")
REDISSON_FAIR = ("java", "redisson-fair")
# "plain-key": the cheapest lock on a plain key that keeps polylock's guarantees
# (bench/probes/lock_protocol_cost.py), M's yardstick of server CPU per cycle. "gil-ceiling":
# Python threads that only release and retake the GIL around a blocking call, twice a cycle, no
# Redis: the most any design of a blocking call from 64 threads reaches (the bound of M python's
# goal; see bench/NOTES.md).
M_CONTENDERS = [
    ("rust", "polylock"), ("rust", "polylock-fair"), ("rust", "rslock"), ("rust", "plain-key"),
    ("rust", "raw"), ("java", "redisson"),
    ("node", "polylock"), ("node", "raw"),
    ("python", "polylock"), ("python", "polylock-asyncio"), ("python", "raw"),
    ("python", "gil-ceiling"),
]
# The read-write lock (RW) and semaphore (S) scenarios: polylock in each language, and the one
# peer that has a semaphore (redis-semaphore's Semaphore); no peer here has a read-write lock.
RW_CONTENDERS = [("rust", "polylock"), ("python", "polylock"), ("node", "polylock")]
S_CONTENDERS = RW_CONTENDERS + [("node", "redis-semaphore")]


def label(lang: str, contender: str) -> str:
    return f"{lang} {contender}"
