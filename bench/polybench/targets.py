"""The targets table of RESULTS.md: issue 44's goals, each a ratio of two figures measured side by
side in this run (medians over the rounds), with both figures beside it."""

from __future__ import annotations

from typing import Optional

from .peers import REDISSON, REDISSON_FAIR, label
from .workers import status

# The polylock rows the contended goal holds: the plain, fair and FIFO locks in every language.
POLYLOCK_LOCKS = ("polylock", "polylock-fair", "polylock-fifo")
# M's goals compare each language's polylock with Rust's.
M_LANGS = ("python", "node")


def good(row) -> bool:
    """A row of a run that went through, with a rate."""
    return bool(row) and not status(row["run"]) and row.get("rate") is not None


def target_line(name: str, met: Optional[bool], detail: str) -> str:
    mark = "–" if met is None else ("met" if met else "**missed**")
    return f"| {name} | {mark} | {detail} |"


def ratio_line(name: str, mine: dict, theirs: dict, bound: Optional[float], key: str = "rate",
               unit: str = "cycles/s", at_most: bool = False) -> str:
    """`mine[key]` at least (or at most) `bound` × `theirs[key]`; not measured when either row
    is missing or failed. With no `bound` the line is not a goal (a goal's ceiling or floor):
    the ratio alone."""
    if not (good(mine) and good(theirs)) or not theirs.get(key):
        return target_line(name, None, "not measured in this run")
    ratio = mine[key] / theirs[key]
    met = None if bound is None else (ratio <= bound if at_most else ratio >= bound)
    return target_line(name, met, f"{ratio:.2f}× ({mine[key]:,.1f} vs {theirs[key]:,.1f} {unit})")


def bound_line(name: str, mine: dict, theirs: dict) -> str:
    """Not a goal: what bounds a missed one, as a ratio like the goal's."""
    return ratio_line(f"(bound, not a goal) {name}", mine, theirs, None)


def targets(u, c, m, ceiling, r, workers) -> list[str]:
    del ceiling, r  # no goal of issue 44's is about them
    return [*many_locks_targets(m), *uncontended_targets(u), *contended_targets(c, workers),
            server_cpu_target(u, c, m), nothing_lost_target(c)]


def many_locks_targets(m: dict) -> list[str]:
    """M: server CPU per cycle against the cheapest lock that keeps the same guarantees, cycles/s
    against Redisson's RLock, and Python and Node against Rust."""
    rust = m.get(("rust", "polylock"))
    out = [
        ratio_line("M rust: server CPU per cycle ≤ 1.5× the plain-key lock's", rust,
                   m.get(("rust", "plain-key")), 1.5, key="server_cpu_us_per_cycle",
                   unit="µs/cycle", at_most=True),
        ratio_line("M rust: cycles/s ≥ Redisson RLock's", rust, m.get(REDISSON), 1.0),
    ]
    for lang in M_LANGS:
        out.append(ratio_line(f"M {lang}: cycles/s ≥ 0.8× Rust polylock's",
                              m.get((lang, "polylock")), rust, 0.8))
        if lang == "python":
            out.append(bound_line("M python threads, the GIL's ceiling: 64 "
                                  "threads, each cycle two calls that release the GIL and block, "
                                  "no Redis, against Rust polylock",
                                  m.get(("python", "gil-ceiling")), rust))
    # Python's holders are threads in the row above; asyncio tasks here.
    out.append(ratio_line("M python, asyncio tasks: cycles/s ≥ 0.8× Rust polylock's",
                          m.get(("python", "polylock-asyncio")), rust, 0.8))
    return out


def uncontended_targets(u: dict) -> list[str]:
    """U: Rust against rslock in both shapes, Node against redis-semaphore, Python against
    redis-py."""
    return [
        ratio_line("U rust, lock code in a spawned task: ≥ 0.95× rslock",
                   u.get(("rust", "polylock")), u.get(("rust", "rslock")), 0.95),
        ratio_line("U rust, lock code on block_on: ≥ 0.9× rslock",
                   u.get(("rust", "polylock-block-on")), u.get(("rust", "rslock-block-on")), 0.9),
        bound_line("U rust, polylock's two scripts sent bare, no engine: "
                   "spawned, against rslock", u.get(("rust", "polylock-scripts")),
                   u.get(("rust", "rslock"))),
        bound_line("U rust, the same on block_on, against rslock",
                   u.get(("rust", "polylock-scripts-block-on")),
                   u.get(("rust", "rslock-block-on"))),
        bound_line("U rust, the least a lock on Redisson's RLock layout does, "
                   "no guarantees, no engine: spawned, against rslock",
                   u.get(("rust", "redisson-layout")), u.get(("rust", "rslock"))),
        bound_line("U rust, the same on block_on, against rslock",
                   u.get(("rust", "redisson-layout-block-on")),
                   u.get(("rust", "rslock-block-on"))),
        ratio_line("U node: ≥ 0.9× redis-semaphore",
                   u.get(("node", "polylock")), u.get(("node", "redis-semaphore")), 0.9),
        ratio_line("U python: ≥ redis-py", u.get(("python", "polylock")),
                   u.get(("python", "redis-py")), 1.0),
    ]


def is_barging_peer(contender: str) -> bool:
    """A peer whose waiters race for the lock (every peer here but Redisson's RFairLock)."""
    return (not contender.startswith("polylock") and contender != "raw"
            and contender != REDISSON_FAIR[1])


def contended_targets(c: dict, workers: list) -> list[str]:
    """C, at every W and for each polylock lock in each language: utilisation at least 0.95× the
    best barging peer's (the peer of any language with the highest utilisation at that W), its
    longest wait at most 0.1× that peer's, Jain at least 0.99; the hold p50 of both beside."""
    out = []
    for count in workers:
        peers = [(row["utilisation"], key) for key, row in c.items()
                 if key[0] == count and is_barging_peer(key[2]) and good(row)]
        if not peers:
            out.append(target_line(f"C W={count}", None, "no barging peer measured"))
            continue
        _, best_key = max(peers)
        best = c[best_key]
        for lang in ("rust", "python", "node"):
            for contender in POLYLOCK_LOCKS:
                row = c.get((count, lang, contender))
                name = (f"C W={count} {label(lang, contender)}: utilisation ≥ 0.95× the best "
                        "barging peer's, longest wait ≤ 0.1× its, Jain ≥ 0.99")
                if not good(row):
                    out.append(target_line(name, None, "not measured in this run"))
                    continue
                checks = {
                    "utilisation": row["utilisation"] >= 0.95 * best["utilisation"],
                    "longest wait": row["wait_max_ms"] <= 0.1 * best["wait_max_ms"],
                    "Jain": row["jain"] >= 0.99,
                }
                missed = [check for check, ok in checks.items() if not ok]
                out.append(target_line(name, not missed, (
                    f"best barging peer {label(*best_key[1:])}; utilisation "
                    f"{row['utilisation'] / best['utilisation']:.2f}× ({row['utilisation']:.3f} "
                    f"vs {best['utilisation']:.3f}), longest wait "
                    f"{row['wait_max_ms'] / best['wait_max_ms']:.3f}× ({row['wait_max_ms']:,.1f} "
                    f"vs {best['wait_max_ms']:,.1f} ms), Jain {row['jain']:.3f}; hold p50 "
                    f"{row['hold_p50_ms']:.2f} vs {best['hold_p50_ms']:.2f} ms"
                    + (f"; missed: {', '.join(missed)}" if missed else ""))))
    return out


def server_cpu_target(u: dict, c: dict, m: dict) -> str:
    """The server's CPU per cycle (per critical section in C) is reported for every contender
    that ran in U, C and M."""
    figures = {"U": (u, "server_us_per_cycle"), "C": (c, "server_us_per_cs"),
               "M": (m, "server_cpu_us_per_cycle")}
    missing = [f"{scenario} {label(*key[-2:])}" for scenario, (table, field) in figures.items()
               for key, row in table.items() if good(row) and row.get(field) is None]
    ran = sum(1 for table, _ in figures.values() for row in table.values() if good(row))
    return target_line("Server CPU per cycle for every contender in U, C and M", not missing,
                       f"{ran} cells" + (f"; missing: {', '.join(missing)}" if missing else ""))


def nothing_lost_target(c: dict) -> str:
    """No critical section lost in any C cell, in any round."""
    lost = {key: sum(r.get("lost", 0) for r in row.get("rounds", [row]))
            for key, row in c.items() if not status(row["run"])}
    losers = [f"W={key[0]} {label(*key[1:])}: {value}" for key, value in lost.items() if value]
    return target_line("Nothing lost in any C cell", not losers,
                       f"{len(lost)} cells" + (f"; lost: {', '.join(losers)}" if losers else ""))
