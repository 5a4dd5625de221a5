"""The smoke run's verdict: every contender that can run here ran, and nothing was lost."""

from __future__ import annotations

from .peers import label
from .workers import Run


def java_text(run: Run) -> str:
    """The JIT work a Java run still did while timed, and its per-run warm-up check."""
    jit = [result["jit_ms_run"] for result in run.results if "jit_ms_run" in result]
    warm = [result["warmup"] for result in run.results if "warmup" in result]
    if not jit:
        return ""
    errors = sum(result.get("errors", 0) for result in run.results)
    return (f"; JIT during the run ≤ {max(jit)} ms, warm-up check "
            f"{max(w['seconds'] for w in warm):.1f} s, "
            f"{sum(1 for w in warm if w.get('quiet'))}/{len(warm)} quiet"
            + (f", {errors} Redisson errors (retried)" if errors else ""))


def rounds_that_ran(scenario: str, cells: dict):
    """(key, round number, row) of every round of every cell, the key ending in (language,
    contender); a round whose contender cannot run here is reported as skipped instead."""
    for key, cell in cells.items():
        for number, row in enumerate(cell.get("rounds", [cell]), 1):
            if row["run"].unsupported:
                print(f"skip {scenario} {label(*key[-2:])}: {row['run'].unsupported}")
                continue
            yield key, number, row


def smoke_verdict(u, c, m, r, rw, sem, permits) -> int:
    """The smoke run passes when every contender that can run here ran, and nothing was lost."""
    passed, failed = 0, 0

    def check(name: str, ok: bool, detail: str = "") -> None:
        nonlocal passed, failed
        passed, failed = passed + ok, failed + (not ok)
        print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")

    for (lang, contender), number, row in rounds_that_ran("U", u):
        run = row["run"]
        check(f"U {label(lang, contender)} round {number}",
              not run.error and row.get("rate", 0) > 0,
              run.error or f"{row.get('rate', 0):,.0f} cycles/s" + java_text(run))
    for (count, lang, contender), number, row in rounds_that_ran("C", c):
        run = row["run"]
        ok = not run.error and row.get("sections", 0) > 0 and row.get("lost") == 0 \
            and row.get("overlaps") == 0
        check(f"C W={count} {label(lang, contender)} round {number}", ok, run.error or
              f"{row.get('sections')} CS, lost {row.get('lost')}, overlaps "
              f"{row.get('overlaps')}" + java_text(run))
    for (lang, contender), row in m.items():
        run = row["run"]
        check(f"M {label(lang, contender)}", not run.error and row.get("rate", 0) > 0,
              run.error or f"{row.get('rate', 0):,.0f} cycles/s")
    if "ticks" in r:
        check("R renewal", r["renewals"] > 0 and r["lost"] == 0 and r["script_calls"] > 0,
              f"{r['renewals']} renewals, {r['script_calls']} script calls, lost {r['lost']}")
    elif r["run"].error:
        check("R renewal", False, r["run"].error)
    for (lang, contender), row in rw.items():
        run = row["run"]
        ok = not run.error and row.get("writes", 0) > 0 and row.get("reads_per_s", 0) > 0 \
            and row.get("mismatches") == 0 and row.get("crossed") == 0 and row.get("lost") == 0
        check(f"RW {label(lang, contender)}", ok, run.error or
              f"{row.get('writes')} writes, mismatches {row.get('mismatches')}, "
              f"crossed {row.get('crossed')}, lost {row.get('lost')}")
    for (lang, contender), row in sem.items():
        run = row["run"]
        ok = not run.error and row.get("acquisitions", 0) > 0 \
            and row.get("max_holders", permits + 1) <= permits \
            and row.get("permits_after") == permits
        check(f"S {label(lang, contender)}", ok, run.error or
              f"{row.get('acquisitions')} acquisitions, max holders {row.get('max_holders')}, "
              f"permits after {row.get('permits_after')}")
    print(f"bench-smoke: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1
