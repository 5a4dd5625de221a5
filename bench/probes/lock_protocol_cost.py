"""The server's CPU per lock cycle of a few lock protocols, each pipelined by redis-py on a
redis-server of its own (so the figures are the server's work, not round trips): rslock's
(`SET NX PX`, then a GET/DEL script), the same with its `SET` inside a script, a lock on a plain
key as polylock would need it to keep its guarantees (an acquire script that checks the
request's tombstone before `SET NX PX`; a release script that reads the key and a waiters mark
in one `MGET` and renames the key to the owner's release trace), that lock without the tombstone
check and without the trace, and two `return 1` scripts; then polylock's own locks through its
Python client, one cycle at a time, beside rslock's protocol sent the same way. Microseconds per
cycle from INFO cpu (the server process's user and system CPU), two rounds.

    python/.venv/bin/python bench/probes/lock_protocol_cost.py [--cycles 100000]

(any Python with redis-py and the polylock package built from this tree).

Written for issue 32's M goal (many locks, bound by the server): what a lock that keeps
polylock's guarantees could cost at best, against rslock's.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import time

import redis

RSLOCK_RELEASE = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
                  "return redis.call('del', KEYS[1]) else return 0 end")
SET_IN_A_SCRIPT = ("if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return nil end "
                   "return redis.call('pttl', KEYS[1])")
# KEYS: the lock, the request's tombstone. ARGV: the owner's token, the lease.
PLAIN_KEY_ACQUIRE = """if redis.call('exists', KEYS[2]) == 1 then return 'UNDONE' end
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return nil end
return redis.call('pttl', KEYS[1])"""
# KEYS: the lock, the owner's release trace, the waiters mark, the channel. ARGV: the token.
PLAIN_KEY_RELEASE = """local held, waiting = unpack(redis.call('mget', KEYS[1], KEYS[3]))
if held == ARGV[1] then
  redis.call('rename', KEYS[1], KEYS[2])
  if waiting then redis.call('publish', KEYS[4], 0) end
  return 1
end
return 0"""
PLAIN_KEY_RELEASE_WITHOUT_TRACE = """local held, waiting = unpack(redis.call('mget', KEYS[1], KEYS[3]))
if held == ARGV[1] then
  redis.call('del', KEYS[1])
  if waiting then redis.call('publish', KEYS[4], 0) end
  return 1
end
return 0"""
NOTHING = "return 1"

LOCKS = 64
REQUEST = "0123456789abcdef0123456789abcdef"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_cpu_us(connection: redis.Redis) -> float:
    """The server process's CPU so far (INFO cpu: user + system), in µs. (INFO commandstats
    would count a script's inner calls twice: in the script's `usec` and in their own.)"""
    cpu = connection.info("cpu")
    return (cpu["used_cpu_user"] + cpu["used_cpu_sys"]) * 1e6


def measure(connection: redis.Redis, cycles: int, cycle) -> float:
    before = server_cpu_us(connection)
    batch = 500
    for first in range(0, cycles, batch):
        pipe = connection.pipeline(transaction=False)
        for index in range(first, first + batch):
            cycle(pipe, index)
        pipe.execute()
    return (server_cpu_us(connection) - before) / cycles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=100_000)
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    try:
        connection = redis.Redis(port=port)
        for _ in range(100):
            try:
                connection.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        sha = {name: connection.script_load(text) for name, text in {
            "rslock release": RSLOCK_RELEASE, "set in a script": SET_IN_A_SCRIPT,
            "acquire": PLAIN_KEY_ACQUIRE, "release": PLAIN_KEY_RELEASE,
            "release without trace": PLAIN_KEY_RELEASE_WITHOUT_TRACE, "nothing": NOTHING,
        }.items()}
        names = [f"lock:{index}" for index in range(LOCKS)]

        def keys(index: int) -> tuple[str, str, list[str]]:
            name = names[index % LOCKS]
            owner = f"6b1f1f5e-0000-4000-8000-{index % LOCKS:012d}:1"
            release_keys = [name, f"polylock_released:{{{name}}}:{owner}",
                            f"polylock_waiting:{{{name}}}", f"polylock_channel:{{{name}}}"]
            return name, f"{owner}:{REQUEST}", release_keys

        def rslock(pipe, index):
            name, token, _ = keys(index)
            pipe.set(name, token, nx=True, px=30_000)
            pipe.evalsha(sha["rslock release"], 1, name, token)

        def rslock_set_in_a_script(pipe, index):
            name, token, _ = keys(index)
            pipe.evalsha(sha["set in a script"], 1, name, token, 30_000)
            pipe.evalsha(sha["rslock release"], 1, name, token)

        def plain_key(release: str, tombstone: bool):
            def cycle(pipe, index):
                name, token, release_keys = keys(index)
                if tombstone:
                    pipe.evalsha(sha["acquire"], 2, name,
                                 f"polylock_acquire_latch:{{{name}}}:{REQUEST}", token, 30_000)
                else:
                    pipe.evalsha(sha["set in a script"], 1, name, token, 30_000)
                pipe.evalsha(sha[release], 4, *release_keys, token)
            return cycle

        def nothing(pipe, _index):
            pipe.evalsha(sha["nothing"], 0)
            pipe.evalsha(sha["nothing"], 0)

        protocols = [
            ("rslock: SET NX PX, GET/DEL script", rslock),
            ("rslock with its SET in a script", rslock_set_in_a_script),
            ("plain key, tombstone check and release trace", plain_key("release", True)),
            ("plain key, no tombstone check", plain_key("release", False)),
            ("plain key, no release trace", plain_key("release without trace", True)),
            ("two `return 1` scripts", nothing),
        ]
        print(f"redis-server {connection.info('server')['redis_version']}, {args.cycles:,} "
              "cycles per protocol and round; server µs per cycle:")
        for round_number in (1, 2):
            for name, cycle in protocols:
                print(f"  round {round_number}  {name}: {measure(connection, args.cycles, cycle):.2f}")
        # polylock itself, through its Python client, one cycle at a time (it pipelines
        # nothing); rslock's protocol the same way beside it, as the yardstick.
        serial = args.cycles // 10
        print(f"one cycle at a time, {serial:,} cycles; server µs per cycle:")
        import polylock

        client = polylock.Client(f"redis://127.0.0.1:{port}")
        try:
            for round_number in (1, 2):
                before = server_cpu_us(connection)
                for index in range(serial):
                    name, token, _ = keys(index)
                    connection.set(name, token, nx=True, px=30_000)
                    connection.evalsha(sha["rslock release"], 1, name, token)
                print(f"  round {round_number}  rslock's protocol: "
                      f"{(server_cpu_us(connection) - before) / serial:.2f}")
                for kind in ("lock", "fifo_lock", "fair_lock"):
                    handles = [getattr(client, kind)(f"{kind}:{index}") for index in range(LOCKS)]
                    before = server_cpu_us(connection)
                    for index in range(serial):
                        handle = handles[index % LOCKS]
                        handle.acquire()
                        handle.release()
                    print(f"  round {round_number}  polylock {kind}: "
                          f"{(server_cpu_us(connection) - before) / serial:.2f}")
        finally:
            client.close()
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
