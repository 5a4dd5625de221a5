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
import os
import sys
import time
from pathlib import Path

from polybench.contended import scenario_c
from polybench.machine import load
from polybench.many_locks import m_ceiling, scenario_m
from polybench.paths import BENCH, ROOT, RUST_BIN
from polybench.peers import (C_CONTENDERS, M_CONTENDERS, REDISSON, REDISSON_FAIR, RW_CONTENDERS,
                             S_CONTENDERS, U_CONTENDERS, java_missing)
from polybench.plots import plot
from polybench.read_write import scenario_rw
from polybench.renewal import scenario_r
from polybench.report import write_report
from polybench.semaphore import scenario_s
from polybench.server import RedisServer
from polybench.smoke import smoke_verdict
from polybench.uncontended import scenario_u
from polybench.workers import JavaPool, Run, use_java_pool


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few seconds; check, no report")
    parser.add_argument("--out", type=Path, default=BENCH / "results")
    parser.add_argument("--only", default="UCMRWS", help="scenarios to run, e.g. UC (W: read-write, S: semaphore)")
    parser.add_argument("--langs", default="rust,python,node,java",
                        help="languages to run (java: Redisson)")
    parser.add_argument("--contenders",
                        help="contenders to run, e.g. polylock,polylock-metrics-off (default: all)")
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
        durations = {"u": 0.3, "c": 1.0, "m": 0.5, "r": 2.0}
        workers = [3]
        rounds, warmup_max, java_parallel = 1, 5.0, 3
        u_list = U_CONTENDERS
        c_list = [("rust", "polylock"), ("rust", "polylock-fair"), ("python", "polylock"),
                  ("node", "polylock"), REDISSON, REDISSON_FAIR]
        m_list = [("rust", "polylock"), ("rust", "plain-key"), ("rust", "raw"), REDISSON,
                  ("python", "polylock-asyncio")]
        # A lease a stalled debug build outlives on a loaded machine (300 ms did not, in CI).
        r_locks, r_watchdog = 200, 1500
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
    if args.contenders:
        names = args.contenders.split(",")
        u_list, c_list, m_list, rw_list, s_list = (
            [x for x in chosen if x[1] in names]
            for chosen in (u_list, c_list, m_list, rw_list, s_list))
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
    java_pool = None
    java_cells = [x for x in (u_list if "U" in args.only else []) + (c_list if "C" in args.only
                                                                      else [])
                  + (m_list if "M" in args.only else []) if x[0] == "java"]
    try:
        if java_cells and not java_missing():
            # Every JVM the run needs is started and warmed before any timing begins.
            logs = ROOT / "target" / "bench-java-logs"
            logs.mkdir(parents=True, exist_ok=True)
            java_pool = JavaPool(server.url, {"warmup_max_s": warmup_max}, logs, log,
                                 java_parallel)
            # Each run re-checks the (already warm) JIT is quiet, briefly: at most 10 s, or
            # a fifth of the pool's bound (1 s in the smoke run).
            use_java_pool(java_pool, {"warmup_max_s": min(10.0, warmup_max / 5),
                                      "warmup_min_s": 0.5, "warmup_min_cycles": 100})
            problem = java_pool.ensure(max(workers) if "C" in args.only else 1)
            if problem:
                log(f"Java pool: {problem}")
            info["java_pool"] = list(java_pool.warmups)
        elif java_cells:
            log(f"Java contenders not run: {java_missing()}")
        if "U" in args.only:
            u = scenario_u(server, durations["u"], u_list, rounds, log)
        if "C" in args.only:
            c = scenario_c(server, durations["c"], workers, c_list, rounds, log)
        if "M" in args.only:
            m = scenario_m(server, durations["m"], 64, m_list, log)
            ceiling, benchmarks = m_ceiling(server, m, 5_000 if args.smoke else 100_000, log)
        if "R" in args.only:
            r = scenario_r(server, durations["r"], r_locks, r_watchdog, log)
        if "W" in args.only:
            rw = scenario_rw(server, durations["rw"], rw_processes, rw_writers, rw_list, log)
        if "S" in args.only:
            sem = scenario_s(server, durations["s"], s_processes, s_permits, s_list, log)
    finally:
        if java_pool:
            info["java_pool"] = list(java_pool.warmups)
            java_pool.close()
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


if __name__ == "__main__":
    sys.exit(main())
