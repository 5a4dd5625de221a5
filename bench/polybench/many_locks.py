"""M: many concurrent holders on distinct names in one process, beside the raw EVALSHA
ceiling (and redis-benchmark's, for reference)."""

from __future__ import annotations

import subprocess

from .measure import SCRIPT_COMMANDS, describe, unique_tag
from .peers import label
from .workers import run_workers


def scenario_m(server, duration, holders, contenders, log) -> dict:
    rows = {}
    for lang, contender in contenders:
        # The server's cost of a cycle: its process CPU in the timed part (run.server_cpu_s), and
        # the part of all its CPU spent in scripts, read around the whole run (the workers'
        # connects and warm-up included, which a run of seconds makes small).
        script_before = server.script_usec()
        run = run_workers(server, lang, contender, "many",
                          f"bench:m:{unique_tag()}", {"holders": holders}, 1, duration)
        script_after = server.script_usec()
        row = {"run": run}
        if run.results:
            result = run.results[0]
            cycles = max(1, result["cycles"])
            row["rate"] = result["cycles"] / result["seconds"]
            row["scripts_per_cycle"] = run.count(SCRIPT_COMMANDS) / cycles
            row["server_cpu_us_per_cycle"] = run.server_cpu_s * 1e6 / cycles
            row["script_us_per_cycle"] = (script_after - script_before) / cycles
        rows[(lang, contender)] = row
        log(f"M {label(lang, contender)}: {describe(run, row.get('rate'), 'cycles/s')}")
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


def m_ceiling(server, m: dict, requests: int, log) -> tuple:
    """(the raw EVALSHA/s ceiling M is measured against, redis-benchmark's rates for reference)."""
    benchmarks = {"64 connections": evalsha_benchmark(server, requests, 64, 1),
                  "4 connections, pipeline 16": evalsha_benchmark(server, requests * 4, 4, 16)}
    raw = m.get(("rust", "raw"), {})
    # The ceiling polylock is held to: the same client stack (redis-rs, one multiplexed
    # connection, 64 concurrent callers), doing nothing but the scripts' round trips.
    ceiling = raw["rate"] * raw["scripts_per_cycle"] if raw.get("rate") else \
        benchmarks["64 connections"]
    log(f"M ceiling: {ceiling:,.0f} EVALSHA/s; redis-benchmark {benchmarks}")
    return ceiling, benchmarks
