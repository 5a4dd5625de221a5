"""The targets table of RESULTS.md: each target met or missed, with what was measured."""

from __future__ import annotations

import itertools
from typing import Optional

from .measure import HOLD_US
from .peers import REDISSON, REDISSON_FAIR, label
from .workers import status


# The fair-lock goals apply to both fair locks: Redisson's layout and polylock's FIFO lock
# (contender, label in the target names).
FAIR_KINDS = (("polylock-fair", "fair"), ("polylock-fifo", "fifo"))


def good(row) -> bool:
    """A row of a run that went through, with a rate."""
    return bool(row) and not status(row["run"]) and row.get("rate") is not None


def target_line(name: str, met: Optional[bool], detail: str) -> str:
    mark = "–" if met is None else ("met" if met else "**missed**")
    return f"| {name} | {mark} | {detail} |"


def targets(u, c, m, ceiling, r, workers) -> list[str]:
    out = []

    def rate(table, key):
        row = table.get(key)
        return row.get("rate") if row and not status(row["run"]) else None

    py, redis_py = rate(u, ("python", "polylock")), rate(u, ("python", "redis-py"))
    if py and redis_py:
        out.append(target_line("Python U ≥ 1.5× redis-py Lock", py >= 1.5 * redis_py,
                               f"{py / redis_py:.2f}× ({py:,.0f} vs {redis_py:,.0f} cycles/s)"))
    node, redlock = rate(u, ("node", "polylock")), rate(u, ("node", "redlock"))
    if node and redlock:
        out.append(target_line("Node U ≥ redlock", node >= redlock,
                               f"{node / redlock:.2f}× ({node:,.0f} vs {redlock:,.0f} cycles/s)"))
    rust, raw = rate(u, ("rust", "polylock")), rate(u, ("rust", "raw"))
    if rust and raw:
        out.append(target_line("Rust U ≥ 80 % of the raw limit", rust >= 0.8 * raw,
                               f"{rust / raw * 100:.0f} % ({rust:,.0f} vs {raw:,.0f} cycles/s)"))
    out += anchor_targets(u, c, workers)
    for lang in ("rust", "python", "node"):
        row = c.get((workers[0], lang, "polylock"))
        if row and not status(row["run"]):
            out.append(target_line(
                f"C {lang} plain W={workers[0]}: utilisation ≥ 0.90, 0 lost",
                row["utilisation"] >= 0.9 and row["lost"] == 0,
                f"utilisation {row['utilisation']:.3f}, lost {row['lost']}"))
    hold_ms = HOLD_US / 1000
    for lang, (contender, kind) in itertools.product(("rust", "python", "node"), FAIR_KINDS):
        for count in workers:
            row = c.get((count, lang, contender))
            if not row or status(row["run"]):
                continue
            p99_bound, max_bound = 1.5 * (count - 1) * hold_ms, 2.5 * (count - 1) * hold_ms
            checks = {
                "utilisation ≥ 0.90": row["utilisation"] >= 0.9,
                "Jain ≥ 0.99": row["jain"] >= 0.99,
                f"wait p99 ≤ {p99_bound:g} ms": row["wait_p99_ms"] <= p99_bound,
                f"wait max ≤ {max_bound:g} ms": row["wait_max_ms"] <= max_bound,
                "≤ 5 commands/CS": row["commands_per_cs"] <= 5,
                "0 lost": row["lost"] == 0,
            }
            missed = [name for name, ok in checks.items() if not ok]
            out.append(target_line(
                f"C {lang} {kind} W={count}", not missed,
                f"utilisation {row['utilisation']:.3f}, Jain {row['jain']:.3f}, wait p99 "
                f"{row['wait_p99_ms']:.1f} / max {row['wait_max_ms']:.1f} ms, "
                f"{row['commands_per_cs']:.2f} commands/CS, lost {row['lost']}"
                + (f"; missed: {', '.join(missed)}" if missed else "")))
    for lang in ("rust", "node", "python"):
        row = m.get((lang, "polylock"))
        if row and not status(row["run"]) and ceiling:
            spc = row["scripts_per_cycle"] or 2
            bound = 0.6 * ceiling / spc
            out.append(target_line(f"M {lang} ≥ 60 % of ceiling ÷ scripts/cycle",
                                   row["rate"] >= bound,
                                   f"{row['rate']:,.0f} cycles/s vs {bound:,.0f} needed "
                                   f"({row['rate'] / (ceiling / spc) * 100:.0f} %)"))
    out += server_work_targets(u, m)
    if r and not status(r["run"]):
        out.append(target_line("R ≤ 1 script call per 100 locks per tick",
                               r["calls_per_100_locks_per_tick"] <= 1,
                               f"{r['calls_per_100_locks_per_tick']:.4f} "
                               f"({r['calls_per_tick']:.1f} calls per tick for {r['locks']:,} locks)"))
    return out


# The plain lock's rows held to the peers' marks: in each language, and in Rust also with the
# worker's loop on polylock's runtime (docs/rust.md, "Running lock code on polylock's runtime").
PLAIN_ROWS = [("rust", "polylock"), ("rust", "polylock-core-runtime"),
              ("python", "polylock"), ("node", "polylock")]


def anchor_targets(u: dict, c: dict, workers: list) -> list:
    """Targets relative to the best peers and to Redisson, each a ratio measured in this run
    (medians over the rounds): U per language, C plain and fair at every W."""
    out = []

    def is_peer(contender: str) -> bool:
        return not contender.startswith("polylock") and contender != "raw"

    redisson = u.get(REDISSON)
    for lang, contender in PLAIN_ROWS:
        mine = u.get((lang, contender))
        if not good(mine):
            continue
        peers = [(row["rate"], name) for (l, name), row in u.items()
                 if l == lang and is_peer(name) and good(row)]
        if peers:
            best, name = max(peers)
            out.append(target_line(
                f"U {lang}: {contender} ≥ the best {lang} peer", mine["rate"] >= best,
                f"{mine['rate'] / best:.2f}× {name} ({mine['rate']:,.0f} vs {best:,.0f} cycles/s)"))
        if good(redisson):
            out.append(target_line(
                f"U {lang}: {contender} > Redisson RLock", mine["rate"] > redisson["rate"],
                f"{mine['rate'] / redisson['rate']:.2f}× ({mine['rate']:,.0f} vs "
                f"{redisson['rate']:,.0f} cycles/s)"))

    def versus_anchor(title: str, mine: dict, theirs: dict) -> None:
        """A target line: CS/s and utilisation at least Redisson's (`theirs`)."""
        if not (good(mine) and good(theirs)):
            return
        met = mine["rate"] >= theirs["rate"] and mine["utilisation"] >= theirs["utilisation"]
        out.append(target_line(title, met, (
            f"CS/s {mine['rate'] / theirs['rate']:.2f}× ({mine['rate']:,.0f} vs "
            f"{theirs['rate']:,.0f}), utilisation {mine['utilisation'] / theirs['utilisation']:.2f}× "
            f"({mine['utilisation']:.3f} vs {theirs['utilisation']:.3f}), Jain "
            f"{mine['jain']:.3f} vs {theirs['jain']:.3f}")))

    for count in workers:
        peers = [(row["utilisation"], label(l, name)) for (w, l, name), row in c.items()
                 if w == count and is_peer(name) and good(row)]
        best_util, best_name = max(peers) if peers else (None, None)
        blpop = c.get((count, "python", "python-redis-lock"))
        plain_anchor, fair_anchor = c.get((count,) + REDISSON), c.get((count,) + REDISSON_FAIR)
        for lang, contender in PLAIN_ROWS:
            plain = c.get((count, lang, contender))
            shown = lang if contender == "polylock" else f"{lang} {contender}"
            versus_anchor(f"C plain W={count} {shown}: CS/s and utilisation ≥ Redisson RLock's",
                          plain, plain_anchor)
            if good(plain) and best_util is not None:
                checks = {f"utilisation ≥ best peer's ({best_name})":
                          plain["utilisation"] >= best_util,
                          "Jain ≥ 0.9": plain["jain"] >= 0.9,
                          "≤ 3 scripts/CS": plain["scripts_per_cs"] <= 3}
                missed = [name for name, ok in checks.items() if not ok]
                out.append(target_line(
                    f"C plain W={count} {shown}: utilisation ≥ best peer's, Jain ≥ 0.9, "
                    "≤ 3 scripts/CS", not missed,
                    f"utilisation {plain['utilisation']:.3f} vs {best_util:.3f} "
                    f"({plain['utilisation'] / best_util:.2f}×), Jain {plain['jain']:.3f}, "
                    f"{plain['scripts_per_cs']:.2f} scripts/CS"
                    + (f"; missed: {', '.join(missed)}" if missed else "")))
        for lang in ("rust", "python", "node"):
            for contender, kind in FAIR_KINDS:
                out += fair_targets(c.get((count, lang, contender)), kind, count, lang,
                                    fair_anchor, best_util, best_name, blpop, versus_anchor)
    # The fair locks' server work per critical section must not grow with the queue.
    for lang, (contender, kind) in itertools.product(("rust", "python", "node"), FAIR_KINDS):
        fair = [(count, c.get((count, lang, contender))) for count in sorted(workers)]
        fair = [(count, row["all_commands_per_cs"]) for count, row in fair if good(row)]
        if len(fair) >= 2:
            (low_w, low), (high_w, high) = fair[0], fair[-1]
            out.append(target_line(
                f"C {kind} {lang}: commandstats/CS flat in W (W={high_w} within 10 % of W={low_w})",
                high <= low * 1.1,
                ", ".join(f"W={count}: {value:.1f}" for count, value in fair)))
    return out


def fair_targets(fair, kind, count, lang, fair_anchor, best_util, best_name, blpop,
                 versus_anchor) -> list:
    """The issue's fair-lock goals for one cell of the fair lock (Redisson's layout) or the FIFO
    lock (polylock's): Jain, utilisation against every peer, gap against BLPOP's, server calls;
    `versus_anchor` adds the line against Redisson's RFairLock."""
    out = []
    versus_anchor(f"C {kind} W={count} {lang}: CS/s and utilisation ≥ Redisson RFairLock's",
                  fair, fair_anchor)
    if not good(fair) or best_util is None:
        return out
    checks = {"Jain ≥ 0.99": fair["jain"] >= 0.99,
              f"utilisation ≥ every peer's ({best_name})": fair["utilisation"] >= best_util,
              "commandstats/CS ≤ 20": fair["all_commands_per_cs"] <= 20}
    detail = (f"Jain {fair['jain']:.3f}, utilisation {fair['utilisation']:.3f} vs "
              f"{best_util:.3f} ({fair['utilisation'] / best_util:.2f}×), "
              f"{fair['all_commands_per_cs']:.1f} commandstats/CS")
    if good(blpop):
        checks["gap p50 ≤ python-redis-lock's"] = fair["gap_p50_ms"] <= blpop["gap_p50_ms"]
        detail += f", gap p50 {fair['gap_p50_ms']:.2f} vs {blpop['gap_p50_ms']:.2f} ms"
    missed = [name for name, ok in checks.items() if not ok]
    out.append(target_line(
        f"C {kind} W={count} {lang}: Jain ≥ 0.99, utilisation ≥ every peer's, gap p50 "
        "≤ BLPOP's, commandstats/CS ≤ 20", not missed,
        detail + (f"; missed: {', '.join(missed)}" if missed else "")))
    return out


def server_work_targets(u: dict, m: dict) -> list:
    """Server work (issue 32): commands per uncontended cycle, and M against rslock with the
    server's CPU per cycle beside each rate."""
    out = []
    for contender, bound in (("polylock", 7), ("polylock-fair", 9), ("polylock-fifo", 9)):
        for lang in ("rust", "python", "node"):
            row = u.get((lang, contender))
            if row and not status(row["run"]) and row.get("commands_per_cycle") is not None:
                out.append(target_line(
                    f"U {lang} {contender}: ≤ {bound} commandstats/cycle",
                    row["commands_per_cycle"] <= bound + 0.005,
                    f"{row['commands_per_cycle']:.2f} commandstats/cycle"))
    peer = m.get(("rust", "rslock"))
    if not peer or status(peer["run"]) or not peer.get("rate"):
        return out
    for lang in ("rust", "python", "node"):
        row = m.get((lang, "polylock"))
        if not row or status(row["run"]) or not row.get("rate"):
            continue
        out.append(target_line(
            f"M {lang}: polylock ≥ rslock", row["rate"] >= peer["rate"],
            f"{row['rate'] / peer['rate']:.2f}× ({row['rate']:,.0f} vs {peer['rate']:,.0f} "
            f"cycles/s); server CPU {row['server_cpu_us_per_cycle']:.1f} vs "
            f"{peer['server_cpu_us_per_cycle']:.1f} µs/cycle, in scripts "
            f"{row['script_us_per_cycle']:.1f} vs {peer['script_us_per_cycle']:.1f}"))
    return out
