"""R: many watchdog-held locks through one Rust client: what their renewal costs."""

from __future__ import annotations

from .measure import describe, unique_tag
from .workers import run_workers


def scenario_r(server, duration, locks, watchdog_ms, log) -> dict:
    run = run_workers(server, "rust", "polylock", "renewal", f"bench:r:{unique_tag()}",
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
