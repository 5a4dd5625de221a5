"""U: one client, serial acquire+release cycles, in interleaved rounds."""

from __future__ import annotations

from .measure import SCRIPT_COMMANDS, describe, interleaved, noise_text, summarise, unique_tag
from .peers import label
from .workers import run_workers


def scenario_u(server, duration, contenders, rounds, log) -> dict:
    cells: dict = {key: [] for key in contenders}
    for index, order in interleaved(contenders, rounds):
        for lang, contender in order:
            run = run_workers(server, lang, contender, "uncontended",
                              f"bench:u:{lang}:{contender}:{unique_tag()}", {}, 1, duration)
            row = {"run": run}
            if run.results:
                result = run.results[0]
                row["rate"] = result["cycles"] / result["seconds"]
                row["scripts_per_cycle"] = run.count(SCRIPT_COMMANDS) / result["cycles"]
                row["cpu_us_per_cycle"] = result["cpu_s"] / result["cycles"] * 1e6
                row["server_us_per_cycle"] = run.server_cpu_s / result["cycles"] * 1e6
            cells[(lang, contender)].append(row)
            log(f"U round {index + 1}/{rounds} {label(lang, contender)}: "
                f"{describe(run, row.get('rate'), 'cycles/s')}{noise_text(run)}")
    return {key: summarise(rows, ("rate",)) for key, rows in cells.items()}
