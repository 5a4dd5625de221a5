"""M outside the bench, for side-by-side builds: 64 asyncio tasks on 64 locks through one
AsyncClient for `seconds`; prints cycles/s and the process's CPU per cycle. A measuring tool:

    PYTHONPATH=<an unpacked wheel> python bench/probes/many_locks_python.py redis://127.0.0.1:6379 4

(alternate two builds, each in its own unpacked wheel, on one redis-server).
"""
import asyncio
import sys
import time

import polylock


async def main(url: str, seconds: float, holders: int = 64) -> None:
    client = await polylock.AsyncClient.connect(url)
    locks = [client.lock(f"m:{i}") for i in range(holders)]
    counts = [0] * holders
    stopped = asyncio.Event()

    async def run(i: int) -> None:
        lock = locks[i]
        while not stopped.is_set():
            await lock.acquire()
            await lock.release()
            counts[i] += 1

    tasks = [asyncio.create_task(run(i)) for i in range(holders)]
    await asyncio.sleep(1.0)  # warm-up
    base, started, cpu = sum(counts), time.perf_counter(), time.process_time()
    await asyncio.sleep(seconds)
    done = sum(counts) - base
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    stopped.set()
    await asyncio.gather(*tasks)
    await client.close()
    print(f"{done / wall:.0f} cycles/s  {cpu / done * 1e6:.1f} us cpu/cycle", flush=True)


asyncio.run(main(sys.argv[1], float(sys.argv[2])))
