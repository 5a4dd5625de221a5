"""C: W worker processes on one lock, each holding it around a non-atomic GET/SET increment,
in interleaved rounds."""

from __future__ import annotations

from .measure import (HOLD_US, SCRIPT_COMMANDS, SUBSCRIPTION_COMMANDS, describe, interleaved,
                      jain, noise_text, percentile, summarise, unique_tag)
from .peers import label
from .workers import Run, run_workers


def scenario_c(server, duration, workers, contenders, rounds, log) -> dict:
    cells: dict = {(count, lang, contender): [] for count in workers
                   for lang, contender in contenders}
    for index, order in interleaved(contenders, rounds):
        for count in workers:
            for lang, contender in order:
                tag = unique_tag()
                counter = f"bench:counter:{tag}"
                # No MONITOR: its own work would count in the server's CPU per CS.
                run = run_workers(server, lang, contender, "contended", f"bench:c:{tag}",
                                  {"counter": counter, "hold_us": HOLD_US}, count, duration)
                row = {"run": run}
                if run.results:
                    row.update(contended_metrics(run, int(server.command("GET", counter) or 0)))
                cells[(count, lang, contender)].append(row)
                log(f"C round {index + 1}/{rounds} W={count} {label(lang, contender)}: "
                    f"{describe(run, row.get('rate'), 'CS/s')}"
                    + (f" utilisation={row['utilisation']:.3f} lost={row['lost']} "
                       f"jain={row['jain']:.3f}" if run.results else "") + noise_text(run))
    return {key: summarise(rows, ("rate", "utilisation")) for key, rows in cells.items()}


def contended_metrics(run: Run, counter: int) -> dict:
    holds = sorted(tuple(h) for result in run.results for h in result["holds"])
    waits = [w for result in run.results for w in result["waits_us"]]
    sections = len(holds)
    if not sections:
        return {"sections": 0, "lost": counter, "utilisation": 0.0, "jain": float("nan"),
                "waits": [], "gap_p50_ms": float("nan"), "gap_p99_ms": float("nan"),
                "hold_p50_ms": float("nan"),
                "wait_p50_ms": float("nan"), "wait_p99_ms": float("nan"),
                "wait_max_ms": float("nan"), "server_us_per_cs": float("nan"),
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
        # The workload's time inside the lock: its GET, hold and SET (the lock's own calls are
        # outside), so a longer one than a peer's shows the workload running slower beside
        # that lock, not the lock costing more.
        "hold_p50_ms": percentile([end - begin for begin, end in holds], 0.5) / 1000,
        "overlaps": sum(1 for gap in gaps if gap < 0),
        "waits": waits,
        "wait_p50_ms": percentile(waits, 0.5) / 1000,
        "wait_p99_ms": percentile(waits, 0.99) / 1000,
        "wait_max_ms": max(waits) / 1000,
        "jain": jain([result["cycles"] for result in run.results]),
        # The server's CPU per CS, the workload's own GET and SET included (the same for every
        # contender).
        "server_us_per_cs": run.server_cpu_s / sections * 1e6,
        "scripts_per_cs": run.count(SCRIPT_COMMANDS) / sections,
        "subscriptions_per_cs": run.count(SUBSCRIPTION_COMMANDS) / sections,
        "lost": sections - counter,
    }
