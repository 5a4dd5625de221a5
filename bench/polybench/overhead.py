"""What counting metrics costs: Rust polylock with metrics on (the default) against the same
lock from a client made with `ClientOptions.metrics` false, round by round."""

from __future__ import annotations

import statistics

from .workers import status

ON, OFF = "polylock", "polylock-metrics-off"


def round_ratios(on: dict | None, off: dict | None, key: str = "rate") -> list:
    """on/off `key` of each round where both ran: the rounds interleave the contenders, so the
    two runs of one round are close in time and share the machine's load of that moment."""
    if not on or not off:
        return []
    pairs = zip(on.get("rounds", [on]), off.get("rounds", [off]))
    return [a[key] / b[key] for a, b in pairs
            if not status(a["run"]) and not status(b["run"]) and a.get(key) and b.get(key)]


def overhead_lines(u: dict, c: dict, workers: list) -> list:
    cells = [("U", round_ratios(u.get(("rust", ON)), u.get(("rust", OFF))))]
    cells += [(f"C W={count}", round_ratios(c.get((count, "rust", ON)), c.get((count, "rust", OFF))))
              for count in workers]
    cells = [(name, ratios) for name, ratios in cells if ratios]
    if not cells:
        return []
    lines = ["## Metrics overhead", "",
             f"`rust {ON}` (metrics on, the default) against `rust {OFF}` (the same lock, "
             "`ClientOptions.metrics` false): the ratio of their rates in each round (on/off; "
             "1.00 = no cost), and its median over the rounds. Overhead = 1 − median ratio.", "",
             "| cell | on/off per round | median | overhead |", "|---|---|---:|---:|"]
    for name, ratios in cells:
        median = statistics.median(ratios)
        lines.append(f"| {name} | {', '.join(f'{r:.3f}' for r in ratios)} | {median:.3f} | "
                     f"{(1 - median) * 100:+.1f} % |")
    # The worker's own CPU time per cycle depends less on what else runs on the machine than
    # its rate does: on a busy machine it is the steadier figure of what counting adds.
    cpu = round_ratios(u.get(("rust", ON)), u.get(("rust", OFF)), "cpu_us_per_cycle")
    if cpu:
        median = statistics.median(cpu)
        lines += ["", "Client CPU time per U cycle, on/off per round: "
                  f"{', '.join(f'{r:.3f}' for r in cpu)}; median {median:.3f} "
                  f"({(median - 1) * 100:+.1f} % CPU with metrics on)."]
    return lines + [""]
