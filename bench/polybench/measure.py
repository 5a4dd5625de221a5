"""What the scenarios share: the hold, the command classes counted, percentiles and Jain
fairness, interleaved rounds and their medians, and the log text of a run."""

from __future__ import annotations

import math
import statistics
import uuid

from .workers import Run, status

HOLD_US = 1000
SCRIPT_COMMANDS = ("evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro")
SUBSCRIPTION_COMMANDS = ("subscribe", "unsubscribe", "psubscribe", "punsubscribe",
                         "ssubscribe", "sunsubscribe")


def unique_tag() -> str:
    """A short random suffix, so that no run meets the keys of another."""
    return uuid.uuid4().hex[:8]


def percentile(values: list, q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


def jain(counts: list) -> float:
    total = sum(counts)
    squares = sum(c * c for c in counts)
    return total * total / (len(counts) * squares) if squares else float("nan")


def interleaved(contenders: list, rounds: int) -> list:
    """(round, order of contenders) for each round: every round runs every contender once, and
    each round starts further along the list, so that no contender always runs first or right
    after the same one, and a burst of outside load lands on different contenders."""
    step = max(1, len(contenders) // max(1, rounds))
    return [(index, contenders[(index * step) % len(contenders):]
             + contenders[:(index * step) % len(contenders)]) for index in range(rounds)]


def summarise(rows: list, keys: tuple) -> dict:
    """One row of the report from a cell's rounds: the median and min-max of each of `keys`
    over the rounds that ran, the other figures from the round whose first key is the median
    (the lower middle for an even count), and every round kept under "rounds"."""
    good = [row for row in rows if not status(row["run"]) and row.get(keys[0]) is not None]
    if not good:
        return dict(rows[-1], rounds=rows)
    ordered = sorted(good, key=lambda row: row[keys[0]])
    row = dict(ordered[(len(ordered) - 1) // 2], rounds=rows)
    for key in keys:
        values = [r[key] for r in good]
        row[key] = statistics.median(values)
        row[f"{key}_min"], row[f"{key}_max"] = min(values), max(values)
    row["failed_rounds"] = len(rows) - len(good)
    noises = [r["run"].noise for r in rows if r["run"].noise]
    for key in ("load1", "steal_pct", "other_pct"):
        values = [n[key] for n in noises if key in n and not math.isnan(n[key])]
        row[f"{key}_max"] = max(values) if values else float("nan")
    row["jit_ms_run_max"] = max((result.get("jit_ms_run", 0) for r in rows
                                 for result in r["run"].results), default=0)
    return row


def describe(run: Run, value, unit: str) -> str:
    if run.unsupported:
        return f"unsupported ({run.unsupported})"
    if run.error:
        return f"ERROR {run.error}"
    return f"{value:,.3f} {unit}" if isinstance(value, float) else f"{value} {unit}"


def noise_text(run: Run) -> str:
    noise = run.noise
    if not noise:
        return ""
    return (f" [load {noise.get('load1', float('nan')):.1f}, steal "
            f"{noise.get('steal_pct', float('nan')):.1f} %, other "
            f"{noise.get('other_pct', float('nan')):.0f} %]")
