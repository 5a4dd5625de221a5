"""RESULTS.md: the machine, the versions, one table per scenario, the targets, NOTES.md."""

from __future__ import annotations

import math
from pathlib import Path

from .machine import machine, versions
from .measure import HOLD_US
from .overhead import overhead_lines
from .paths import BENCH
from .peers import JAVA_FLAGS, label
from .targets import targets
from .workers import status


def fmt(value, digits=2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


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


def contender_rows(rows: dict, blanks: int, cells) -> list[str]:
    """One table line per (language, contender) of `rows`: its label, then `cells(key, row)`
    (the rest of the line), or why it did not run and `blanks` empty cells."""
    lines = []
    for (lang, contender), row in rows.items():
        problem = status(row["run"])
        rest = f"{problem} |" + " |" * blanks if problem else cells((lang, contender), row)
        lines.append(f"| {label(lang, contender)} | {rest}")
    return lines


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
              "multiplexed connection, Python: redis-py, Node: ioredis). `rust plain-key` "
              "(M's yardstick, below) is the cheapest two-script cycle that keeps polylock's "
              "guarantees, on the same connection as `rust raw`, with no engine around it: "
              "what the protocol alone lets a serial client reach. On that connection too, "
              "`rust polylock-scripts` sends the two commands of polylock's own uncontended "
              "cycle (read from the server's slow log), and `rust redisson-layout` the least a "
              "lock on Redisson's RLock hash does (no guarantees): the bounds of U Rust's goals "
              "(bench/NOTES.md).", "",
              "| contender | cycles/s (median) | min–max | vs raw of its language | "
              "scripts/cycle | server CPU µs/cycle | client CPU µs/cycle | "
              "noise: load, steal %, other CPU % |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]

    def u_cells(key, row) -> str:
        raw = u.get((key[0], "raw"), {}).get("rate")
        ratio = f"{row['rate'] / raw:.2f}" if raw else "–"
        return (f"{fmt(row['rate'], 0)} | {spread(row, 'rate', 0)} | {ratio} | "
                f"{fmt(row['scripts_per_cycle'])} | {fmt(row.get('server_us_per_cycle'), 1)} | "
                f"{fmt(row['cpu_us_per_cycle'], 0)} | {noise_cell(row)} |")

    lines += contender_rows(u, 6, u_cells)

    lines += ["", "## C: contended, W processes on one lock", "",
              f"Each of W worker processes loops for {durations['c']:g} s: acquire, GET counter, "
              f"hold {HOLD_US / 1000:g} ms, SET counter+1, release. Utilisation = sum of hold "
              "times / wall time. Hold = one critical section, from the acquire's return to "
              "the release call (the GET, the hold and the SET). Gap = from one holder's "
              "release call to the next holder's acquisition. Wait = one acquire call. Jain = fairness of the acquisition counts "
              "of the W workers (1 = equal). Server CPU µs/CS = the redis-server process's CPU "
              "(INFO cpu, user + system) in the timed part per critical section, the workload's "
              "GET and SET included (the same for every contender). "
              "Lost = increments lost (critical sections minus the final counter).", ""]
    header = ("| W | contender | CS/s (median) | min–max | utilisation (median) | min–max | "
              "hold p50 ms | gap p50 ms | gap p99 ms | wait p50 ms | "
              "wait p99 ms | wait max ms | Jain | server CPU µs/CS | scripts/CS | "
              "(un)subscribes/CS | lost (all rounds) | "
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
            f"{spread(row, 'utilisation', 3)} | {fmt(row['hold_p50_ms'])} | "
            f"{fmt(row['gap_p50_ms'])} | {fmt(row['gap_p99_ms'])} | "
            f"{fmt(row['wait_p50_ms'])} | {fmt(row['wait_p99_ms'])} | {fmt(row['wait_max_ms'])} | "
            f"{fmt(row['jain'], 3)} | {fmt(row['server_us_per_cs'], 1)} | {fmt(row['scripts_per_cs'])} | "
            f"{fmt(row['subscriptions_per_cs'])} | {lost} | "
            f"{noise_cell(row)} |")
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
    lines += overhead_lines(u, c, workers)

    lines += ["## M: many locks, 64 concurrent holders in one process", "",
              f"64 concurrent holders (tasks; threads in Python) on 64 distinct names, "
              f"{durations['m']:g} s. Raw EVALSHA ceiling: **{fmt(ceiling, 0)} EVALSHA/s**, "
              "from `rust raw` below (64 concurrent tasks, each two EVALSHA of `return 1` per "
              "cycle on one redis-rs multiplexed connection, the client stack polylock uses; "
              "concurrent calls on it are pipelined). For comparison, redis-benchmark's C client "
              "on the same server: " + ", ".join(
                  f"{name}: {fmt(rate, 0)} EVALSHA/s" for name, rate in
                  info.get("benchmarks", {}).items()) + ".", "",
              "Server CPU/cycle is the redis-server process's CPU (INFO cpu, user + system) over "
              "the timed part divided by the cycles; script µs/cycle the time in EVAL/EVALSHA over "
              "the whole run (INFO commandstats `usec`, each script's own calls included). "
              "`plain-key` is the cheapest lock on a plain key that keeps polylock's guarantees "
              "(bench/probes/lock_protocol_cost.py): M's yardstick of server CPU.", "",
              "| contender | cycles/s | scripts/cycle | "
              "% of ceiling ÷ scripts/cycle | server CPU µs/cycle | script µs/cycle |",
              "|---|---:|---:|---:|---:|---:|"]

    def m_cells(_key, row) -> str:
        spc = row["scripts_per_cycle"] or 2
        share = row["rate"] / (ceiling / spc) * 100 if ceiling else float("nan")
        return (f"{fmt(row['rate'], 0)} | {fmt(row['scripts_per_cycle'])} | "
                f"{fmt(share, 0)} % | "
                f"{fmt(row['server_cpu_us_per_cycle'], 1)} | {fmt(row['script_us_per_cycle'], 1)} |")

    lines += contender_rows(m, 4, m_cells)

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
                  "bursts of script calls seen (a cross-check of the tick count). Counting "
                  "starts after the first renewal tick, whose first call on a fresh server is "
                  "answered NOSCRIPT (the script is then loaded and called again): a one-time "
                  "cost, not a renewal's. Client CPU (getrusage) includes that sampling.", "",
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
    lines, hold = [], f"{HOLD_US / 1000:g} ms"
    (rw_processes, writers), (s_processes, permits) = info["kinds"]["rw"], info["kinds"]["s"]
    if rw:
        lines += ["", "## RW: read-write lock, readers and writers mixed", "",
                  f"{rw_processes} worker processes on one read-write lock for "
                  f"{durations['rw']:g} s, "
                  f"{writers} of them writers: a writer sets key a, holds "
                  f"{hold}, then sets key b to the same value; a reader reads a and "
                  f"b, holds {hold} and counts a mismatch if they differ. Each "
                  "holder counts itself in a gauge key for its hold (the server's count of who is "
                  "inside): max readers = the most readers it saw at once; crossed = holds that "
                  "found a writer beside them; lost = writes minus the final value of a. No peer "
                  "library here has a read-write lock.", "",
                  "| contender | reads/s | writes/s | max readers | read wait p50 / p99 ms | "
                  "write wait p50 / p99 / max ms | mismatches | crossed | lost |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        lines += contender_rows(rw, 7, lambda _key, row: (
            f"{fmt(row['reads_per_s'], 0)} | "
            f"{fmt(row['writes_per_s'], 0)} | {row['max_readers']} | "
            f"{fmt(row['read_wait_p50_ms'])} / {fmt(row['read_wait_p99_ms'])} | "
            f"{fmt(row['write_wait_p50_ms'])} / {fmt(row['write_wait_p99_ms'])} / "
            f"{fmt(row['write_wait_max_ms'])} | {row['mismatches']} | {row['crossed']} | "
            f"{row['lost']} |"))
    if sem:
        lines += ["", "## S: semaphore", "",
                  f"{s_processes} worker processes on one semaphore of {permits} permits for "
                  f"{durations['s']:g} s: acquire one permit, INCR a gauge, hold "
                  f"{hold}, DECR it, release. Utilisation = sum of hold times / "
                  "(wall time x permits); max holders = the gauge's highest reading (the server's "
                  "count, whatever the processes' clocks say); permits after = the free permits once every "
                  "holder released (polylock's Redisson layout).", "",
                  "| contender | acquisitions/s | utilisation | max holders | wait p50 / p99 ms | "
                  "Jain | permits after |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        lines += contender_rows(sem, 5, lambda _key, row: (
            f"{fmt(row['rate'], 0)} | "
            f"{fmt(row['utilisation'])} | {row['max_holders']} | "
            f"{fmt(row['wait_p50_ms'])} / {fmt(row['wait_p99_ms'])} | {fmt(row['jain'], 3)} | "
            f"{row['permits_after']} |"))
    return lines
