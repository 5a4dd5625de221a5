"""The Python candidate of the mixed-language election test (see run.py); the same behaviour
as the Rust candidate (core/examples/election_worker.rs) and the Node one (worker.js).

Usage: python/.venv/bin/python tests/election/worker.py <redis-url> <election> <lease-ms> <id>

Campaigns on the election without bound; once leading, logs `lead`, then every 50 ms takes the
time, checks `is_leader()` (which reads the clock, so a process resumed after a pause past its
lease learns it lost there) and logs `act` while leading, `lost` once not, and campaigns again.
Each stdout line is `<CLOCK_MONOTONIC ns> <id> <lead|act|lost> <term>`, the time taken before
the check it reports. Errors (the network cut off) are logged as `error` and retried.
"""

from __future__ import annotations

import sys
import time

import polylock

ACT_EVERY_S = 0.05


def log(worker: str, event: str, term: int, at: int) -> None:
    sys.stdout.write(f"{at} {worker} {event} {term}\n")
    sys.stdout.flush()


def main() -> None:
    url, name, lease_ms, worker = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    client = polylock.Client(
        url, watchdog_timeout=lease_ms / 1000, response_timeout=lease_ms / 1000, name=worker
    )
    election = client.election(name)
    while True:
        try:
            leadership = election.campaign(worker)
        except polylock.LockError as error:
            log(worker, "error", 0, time.monotonic_ns())
            sys.stderr.write(f"{worker}: {error!r}\n")
            time.sleep(0.1)
            continue
        assert leadership is not None
        log(worker, "lead", leadership.term, time.monotonic_ns())
        while True:
            now = time.monotonic_ns()
            if not leadership.is_leader():
                log(worker, "lost", leadership.term, now)
                break
            log(worker, "act", leadership.term, now)
            time.sleep(ACT_EVERY_S)


if __name__ == "__main__":
    main()
