"""The run-once job lock across a fleet: Python, Node and Rust processes fire the same schedule (a
slot every second, each firing late by a jitter of up to a fifth of a slot, as lagging clocks and
schedulers do); a Redis list records each run's slot. Each slot must run exactly once, also
when the node running a job is SIGKILLed in the middle of it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers import RedisConnection, wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]

SLOT_MS = 1000
SLOTS = 5
# A late firing comes at most a fifth of a slot (200 ms) after the first: at_least covers it,
# with room for a loaded machine's late wake-ups. A dead node's lock lapses before the next
# slot's first firing (200 ms + 700 ms < 1 s).
AT_MOST_MS, AT_LEAST_MS = 700, 500

# The same fleet worker as `core/examples/job_lock.rs fleet`, in Python, with the decorator.
PYTHON_WORKER = textwrap.dedent(
    """
    import random, sys, time
    import polylock
    from helpers import RedisConnection

    url, port, name, worker = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    first_slot, slots, slot_ms, job_ms, at_most_ms, at_least_ms = map(int, sys.argv[5:11])
    records = RedisConnection(port)
    with polylock.Client(url) as client:

        @client.job(name, at_most=at_most_ms / 1000, at_least=at_least_ms / 1000)
        def job(slot):
            records("RPUSH", f"{name}:runs", f"{slot}:{worker}")
            time.sleep(job_ms / 1000)

        for slot in range(slots):
            fire_at = (first_slot + slot * slot_ms) / 1000 + random.uniform(0, slot_ms / 5000)
            if time.time() > fire_at + slot_ms / 5000:
                continue  # not up at that moment (a slow start): a scheduler fires no slot it missed
            time.sleep(max(0.0, fire_at - time.time()))
            job(slot)
    """
)


# The same fleet worker in Node, with `client.runJob`; it records through ioredis (node/'s dev
# dependency), as the Python one through the test kit's connection.
NODE_WORKER = textwrap.dedent(
    """
    const { Client } = require('.')
    const Redis = require('ioredis')

    async function main() {
      const [url, port, name, worker, ...schedule] = process.argv.slice(1)
      const [firstSlot, slots, slotMs, jobMs, atMostMs, atLeastMs] = schedule.map(Number)
      const records = new Redis({ port: Number(port), host: '127.0.0.1' })
      const client = await Client.connect(url)
      const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)))
      for (let slot = 0; slot < slots; slot += 1) {
        const fireAt = firstSlot + slot * slotMs + Math.random() * (slotMs / 5)
        if (Date.now() > fireAt + slotMs / 5) continue // not up at that moment: skipped
        await sleep(fireAt - Date.now())
        await client.runJob(name, async () => {
          await records.rpush(`${name}:runs`, `${slot}:${worker}`)
          await sleep(jobMs)
        }, { atMostMs, atLeastMs })
      }
      await client.close()
      records.disconnect()
    }

    main().catch((error) => {
      console.error(error)
      process.exit(1)
    })
    """
)

NODE_PACKAGE = REPO_ROOT / "node"


def rust_worker() -> Path:
    path = REPO_ROOT / "target" / "debug" / "examples" / "job_lock"
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} is missing: run `cargo build --example job_lock` (make test-python does)")
    return path


def start_fleet(redis_server, name: str, job_ms: int) -> dict[str, subprocess.Popen]:
    """Two Python, two Node and two Rust workers, the first slot 3 s from now (time to start,
    also on a loaded machine; a worker not up by then skips the slots it missed)."""
    if not any(NODE_PACKAGE.glob("polylock.*.node")):
        raise RuntimeError(f"the Node addon is missing in {NODE_PACKAGE}: run `make build-node`")
    first_slot = int(time.time() * 1000) + 3000
    schedule = [str(first_slot), str(SLOTS), str(SLOT_MS), str(job_ms), str(AT_MOST_MS), str(AT_LEAST_MS)]
    tests_dir = Path(__file__).resolve().parent
    fleet = {}
    for worker in ["py1", "py2"]:
        fleet[worker] = subprocess.Popen(
            [sys.executable, "-c", PYTHON_WORKER, redis_server.url, str(redis_server.port), name, worker, *schedule],
            cwd=tests_dir,
            env={**os.environ, "PYTHONPATH": str(tests_dir)},
        )
    for worker in ["js1", "js2"]:
        fleet[worker] = subprocess.Popen(
            ["node", "-e", NODE_WORKER, redis_server.url, str(redis_server.port), name, worker, *schedule],
            cwd=NODE_PACKAGE,
        )
    for worker in ["rs1", "rs2"]:
        fleet[worker] = subprocess.Popen(
            [str(rust_worker()), redis_server.url, "fleet", name, worker, *schedule],
            stdout=subprocess.DEVNULL,
        )
    return fleet


def runs(redis_server, name: str) -> list[tuple[int, str]]:
    with RedisConnection(redis_server.port) as redis:
        entries = redis("LRANGE", f"{name}:runs", 0, -1)
    return [(int(slot), worker) for slot, worker in (entry.decode().split(":") for entry in entries)]


def wait_for_fleet(fleet: dict[str, subprocess.Popen]) -> dict[str, int]:
    try:
        return {worker: process.wait(timeout=30) for worker, process in fleet.items()}
    finally:
        for process in fleet.values():
            process.kill()


def test_each_slot_runs_exactly_once_across_languages(redis_server, name):
    # A fast job: the late firings of a slot come after it finished, when only at_least keeps
    # the lock.
    fleet = start_fleet(redis_server, name, job_ms=20)
    assert wait_for_fleet(fleet) == {worker: 0 for worker in fleet}
    recorded = runs(redis_server, name)
    assert sorted(slot for slot, _ in recorded) == list(range(SLOTS)), recorded


def test_a_node_killed_mid_job_blocks_the_schedule_no_longer_than_at_most(redis_server, name):
    fleet = start_fleet(redis_server, name, job_ms=400)
    killed_slot = 1
    assert wait_until(lambda: any(slot == killed_slot for slot, _ in runs(redis_server, name)), timeout=15)
    (victim,) = [worker for slot, worker in runs(redis_server, name) if slot == killed_slot]
    fleet[victim].send_signal(signal.SIGKILL)
    exits = wait_for_fleet(fleet)
    assert exits[victim] == -signal.SIGKILL
    assert all(code == 0 for worker, code in exits.items() if worker != victim), exits
    recorded = runs(redis_server, name)
    # The killed slot ran once (its start is recorded), and every later slot once: the dead
    # node's lock lapsed after at_most, before the next slot.
    assert sorted(slot for slot, _ in recorded) == list(range(SLOTS)), recorded
    assert not any(worker == victim for slot, worker in recorded if slot > killed_slot)


@pytest.fixture(autouse=True)
def _example_built() -> None:
    rust_worker()
