"""Benchmark worker for Python contenders, driven by bench/run.py.

Usage: py_worker.py <scenario> <contender> <redis-url> <lock-name> [options as JSON]
  scenario:  uncontended | contended | many | rwmix | permits
  contender: polylock | polylock-fair | polylock-fifo | redis-py | python-redis-lock | pottery | raw
             | gil-ceiling (rwmix and permits: polylock only; gil-ceiling: M only, no Redis: each
             call releases the GIL, blocks in the kernel for GIL_CEILING_PAUSE_S and takes the
             GIL back, the least any blocking call from a Python thread does)

Protocol (the same as the Rust and Node workers): connect and warm up, print "ready" (or
"unsupported <reason>" and exit); read
"go <start-epoch-us> <duration-s>", wait for the start, run, print one JSON line of results;
exit when stdin closes (so connections close after the driver has read the server's counters).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, Callable, Tuple

import redis

# Peers without a watchdog get a fixed lease far longer than any hold.
PEER_LEASE_S = 30
TRIVIAL_SCRIPT = "return 1"
# gil-ceiling's block per call: a real sleep in the kernel, as short as the timer allows.
GIL_CEILING_PAUSE_S = 1e-5
# A writer's weight in the rwmix gauge (a reader's is 1): alone it reads exactly this.
WRITER_WEIGHT = 1_000_000

Cycle = Tuple[Callable[[], Any], Callable[[Any], None]]


def now_us() -> int:
    return time.time_ns() // 1000


def data_connection(url: str) -> redis.Redis:
    """The connection a holder reads and writes its data on, connected now: redis-py connects at
    its first command, which would otherwise fall inside the first hold (the Rust and Node
    workers' clients connect when made)."""
    data = redis.Redis.from_url(url)
    data.ping()
    return data


def unsupported(reason: str) -> None:
    """Tells the driver this contender cannot run here (it records the reason and goes on)."""
    print(f"unsupported {reason}", flush=True)
    sys.exit(0)


def make_contender(kind: str, url: str) -> Callable[[str], Cycle]:
    """Returns a factory: lock name -> (acquire, release) for one holder."""
    if kind in ("polylock", "polylock-fair", "polylock-fifo"):
        import polylock

        client = polylock.Client(url)
        factory = {"polylock": "lock", "polylock-fair": "fair_lock",
                   "polylock-fifo": "fifo_lock"}[kind]
        if not hasattr(client, factory):
            unsupported(f"the Python binding has no {factory}")
        make_lock = getattr(client, factory)

        def polylock_handle(name: str) -> Cycle:
            lock = make_lock(name)
            return (lambda: lock.acquire(), lambda _: lock.release())

        return polylock_handle

    if kind == "gil-ceiling":
        def gil_ceiling_handle(_name: str) -> Cycle:
            return (lambda: time.sleep(GIL_CEILING_PAUSE_S),
                    lambda _: time.sleep(GIL_CEILING_PAUSE_S))

        return gil_ceiling_handle
    connection = redis.Redis.from_url(url)
    if kind == "redis-py":

        def redis_py_handle(name: str) -> Cycle:
            lock = connection.lock(name, timeout=PEER_LEASE_S)
            return (lambda: lock.acquire(blocking=True), lambda _: lock.release())

        return redis_py_handle
    if kind == "python-redis-lock":
        import redis_lock

        def python_redis_lock_handle(name: str) -> Cycle:
            lock = redis_lock.Lock(connection, name, expire=PEER_LEASE_S)
            return (lambda: lock.acquire(blocking=True), lambda _: lock.release())

        return python_redis_lock_handle
    if kind == "pottery":
        from pottery import Redlock

        def pottery_handle(name: str) -> Cycle:
            lock = Redlock(key=name, masters={connection}, auto_release_time=PEER_LEASE_S)
            return (lambda: lock.acquire(blocking=True), lambda _: lock.release())

        return pottery_handle
    if kind == "raw":
        script = connection.register_script(TRIVIAL_SCRIPT)

        def raw_handle(name: str) -> Cycle:
            return (lambda: script(keys=[name]), lambda _: script(keys=[name]))

        return raw_handle
    raise SystemExit(f"unknown contender {kind!r}")


def handshake() -> Tuple[int, float]:
    print("ready", flush=True)
    words = sys.stdin.readline().split()
    if len(words) != 3 or words[0] != "go":
        raise SystemExit(f"expected 'go <start-us> <duration-s>', got {words!r}")
    start_us, duration = int(words[1]), float(words[2])
    delay = (start_us - now_us()) / 1e6
    if delay > 0:
        time.sleep(delay)
    return start_us, duration


def uncontended(factory: Callable[[str], Cycle], name: str, options: dict) -> dict:
    acquire, release = factory(name)
    for _ in range(20):
        release(acquire())
    _, duration = handshake()
    cpu_before = time.process_time()
    started = time.perf_counter()
    deadline = started + duration
    cycles = 0
    while time.perf_counter() < deadline:
        release(acquire())
        cycles += 1
    return {
        "cycles": cycles,
        "seconds": time.perf_counter() - started,
        "cpu_s": time.process_time() - cpu_before,
    }


def contended(factory: Callable[[str], Cycle], name: str, options: dict, url: str) -> dict:
    hold_s = options.get("hold_us", 1000) / 1e6
    counter = options["counter"]
    data = data_connection(url)
    acquire, release = factory(name)
    release(acquire())
    start_us, duration = handshake()
    end_us = start_us + int(duration * 1e6)
    waits, holds = [], []
    while now_us() < end_us:
        asked = now_us()
        token = acquire()
        got = now_us()
        value = int(data.get(counter) or 0)
        time.sleep(hold_s)
        data.set(counter, value + 1)
        releasing = now_us()
        release(token)
        waits.append(got - asked)
        holds.append((got, releasing))
    return {"cycles": len(holds), "waits_us": waits, "holds": holds}


def many(factory: Callable[[str], Cycle], name: str, options: dict) -> dict:
    holders = options.get("holders", 64)
    handles = [factory(f"{name}:{index}") for index in range(holders)]
    _, duration = handshake()
    stop = threading.Event()
    counts = [0] * holders
    errors: list = []

    def run(index: int) -> None:
        acquire, release = handles[index]
        try:
            while not stop.is_set():
                release(acquire())
                counts[index] += 1
        except Exception as err:  # reported, and fails the run
            errors.append(repr(err))

    threads = [threading.Thread(target=run, args=(index,)) for index in range(holders)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(duration)
    stop.set()
    for thread in threads:
        thread.join()
    if errors:
        raise SystemExit(f"{len(errors)} holders failed, first: {errors[0]}")
    return {"cycles": sum(counts), "seconds": time.perf_counter() - started}


def many_asyncio(url: str, name: str, options: dict) -> dict:
    """M with asyncio: the holders are tasks of one event loop, through polylock's AsyncClient
    (the calls of one loop turn are settled together: python/src/asyncio.rs)."""
    import asyncio

    import polylock

    async def run_all() -> dict:
        client = await polylock.AsyncClient.connect(url)
        holders = options.get("holders", 64)
        locks = [client.lock(f"{name}:{index}") for index in range(holders)]
        counts = [0] * holders
        stopped = asyncio.Event()

        async def run(index: int) -> None:
            lock = locks[index]
            while not stopped.is_set():
                await lock.acquire()
                await lock.release()
                counts[index] += 1

        _, duration = handshake()
        started = time.perf_counter()
        tasks = [asyncio.create_task(run(index)) for index in range(holders)]
        await asyncio.sleep(duration)
        stopped.set()
        await asyncio.gather(*tasks)
        return {"cycles": sum(counts), "seconds": time.perf_counter() - started}

    return asyncio.run(run_all())


def kind_scenario(scenario: str, kind: str, url: str, name: str, options: dict) -> dict:
    """RW and S: one holder per process on one read-write lock (readers check that the two data
    keys agree, writers update both) or one semaphore (holders count themselves in a gauge)."""
    if kind != "polylock":
        unsupported(f"no {scenario} in {kind}")
    import polylock

    client = polylock.Client(url)
    data = data_connection(url)
    a, b, gauge = f"{name}:a", f"{name}:b", f"{name}:gauge"
    role = "holder"
    if scenario == "rwmix":
        role = "writer" if options.get("role") == "writer" else "reader"
        read_write = client.read_write_lock(name)
        lock = read_write.write_lock() if role == "writer" else read_write.read_lock()
        acquire: Callable[[], Any] = lock.acquire
        release: Callable[[], Any] = lock.release
    else:
        semaphore = client.semaphore(name)
        acquire, release = semaphore.acquire, semaphore.release
    hold_s = options.get("hold_us", 1000) / 1e6
    acquire()
    release()
    start_us, duration = handshake()
    end_us = start_us + int(duration * 1e6)
    waits, holds = [], []
    mismatches = crossed = max_gauge = 0
    # Every holder adds its weight to the gauge for its hold: the server's count of who is
    # inside, exact whatever the processes' clocks say.
    weight = WRITER_WEIGHT if role == "writer" else 1
    while now_us() < end_us:
        asked = now_us()
        acquire()
        got = now_us()
        inside = int(data.incrby(gauge, weight))
        max_gauge = max(max_gauge, inside)
        if role == "reader":
            crossed += inside >= WRITER_WEIGHT
            first, second = data.mget(a, b)
            time.sleep(hold_s)
            mismatches += first != second
        elif role == "writer":
            crossed += inside != WRITER_WEIGHT
            value = int(data.get(a) or 0) + 1
            data.set(a, value)
            time.sleep(hold_s)
            data.set(b, value)
        else:
            time.sleep(hold_s)
        data.decrby(gauge, weight)
        releasing = now_us()
        release()
        waits.append(got - asked)
        holds.append((got, releasing))
    return {"role": role, "cycles": len(holds), "waits_us": waits, "holds": holds,
            "mismatches": mismatches, "crossed": crossed, "max_gauge": max_gauge}


def main() -> None:
    scenario, kind, url, name = sys.argv[1:5]
    options = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    if scenario in ("rwmix", "permits"):
        print(json.dumps(kind_scenario(scenario, kind, url, name, options)), flush=True)
        for _ in sys.stdin:
            pass
        return
    if scenario == "many" and kind == "polylock-asyncio":
        print(json.dumps(many_asyncio(url, name, options)), flush=True)
        for _ in sys.stdin:
            pass
        return
    factory = make_contender(kind, url)
    if scenario == "uncontended":
        result = uncontended(factory, name, options)
    elif scenario == "contended":
        result = contended(factory, name, options, url)
    elif scenario == "many":
        result = many(factory, name, options)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    print(json.dumps(result), flush=True)
    for _ in sys.stdin:
        pass


if __name__ == "__main__":
    main()
