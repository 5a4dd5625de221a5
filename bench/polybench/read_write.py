"""RW: readers and writers mixed on one read-write lock, checked through the server's gauge."""

from __future__ import annotations

from .measure import HOLD_US, describe, percentile, unique_tag
from .peers import label
from .workers import run_workers

# A writer's weight in the RW gauge, as the workers count it (a reader's is 1).
WRITER_WEIGHT = 1_000_000


def scenario_rw(server, duration, processes, writers, contenders, log) -> dict:
    """RW: `processes` holders of one read-write lock, `writers` of them writers."""
    rows = {}
    roles = ["writer"] * writers + ["reader"] * (processes - writers)
    for lang, contender in contenders:
        name = f"bench:rw:{unique_tag()}"
        run = run_workers(server, lang, contender, "rwmix", name,
                          {"hold_us": HOLD_US, "roles": roles}, processes, duration)
        row = {"run": run}
        if run.results:
            reads = [r for r in run.results if r["role"] == "reader"]
            writes = [r for r in run.results if r["role"] == "writer"]
            read_holds = [tuple(h) for r in reads for h in r["holds"]]
            write_holds = [tuple(h) for r in writes for h in r["holds"]]
            every = read_holds + write_holds
            wall_s = (max(end for _, end in every) - run.start_us) / 1e6 if every else 1.0
            read_waits = [w for r in reads for w in r["waits_us"]]
            write_waits = [w for r in writes for w in r["waits_us"]]
            final = int(server.command("GET", f"{name}:a") or 0)
            row.update({
                "reads_per_s": len(read_holds) / wall_s,
                "writes_per_s": len(write_holds) / wall_s,
                # A reader's gauge reading counts the readers inside with it (the server's count).
                "max_readers": max((r["max_gauge"] % WRITER_WEIGHT for r in reads), default=0),
                "read_wait_p50_ms": percentile(read_waits, 0.5) / 1000,
                "read_wait_p99_ms": percentile(read_waits, 0.99) / 1000,
                "write_wait_p50_ms": percentile(write_waits, 0.5) / 1000,
                "write_wait_p99_ms": percentile(write_waits, 0.99) / 1000,
                "write_wait_max_ms": max(write_waits, default=float("nan")) / 1000,
                "writes": len(write_holds),
                "mismatches": sum(r["mismatches"] for r in reads),
                "crossed": sum(r["crossed"] for r in run.results),
                "lost": len(write_holds) - final,
            })
        rows[(lang, contender)] = row
        log(f"RW {label(lang, contender)}: {describe(run, row.get('reads_per_s'), 'reads/s')}"
            + (f" writes/s={row['writes_per_s']:.0f} max readers={row['max_readers']} "
               f"mismatches={row['mismatches']} crossed={row['crossed']} lost={row['lost']}"
               if run.results else ""))
    return rows
