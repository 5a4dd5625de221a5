"""S: holders of one semaphore, one permit per hold, checked through the server's gauge."""

from __future__ import annotations

from .measure import HOLD_US, describe, jain, percentile, unique_tag
from .peers import label
from .workers import run_workers


def scenario_s(server, duration, processes, permits, contenders, log) -> dict:
    """S: `processes` holders of one semaphore of `permits` permits, one permit per hold."""
    rows = {}
    for lang, contender in contenders:
        name = f"bench:s:{unique_tag()}"
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
