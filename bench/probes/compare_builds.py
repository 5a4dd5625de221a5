"""Two builds of polylock side by side on one redis-server: the contended cycle
(`core/examples/contended_cost`: 8 clients on one lock, each critical section a GET, 1 ms and a
SET) and the uncontended one (`core/examples/cycle_cost`), each build once per round, in turn.
Prints per kind the medians of the rounds and their ratio (new / old): rates, and server CPU
per cycle or critical section. A measuring tool, not a test:

    cargo build --release --example contended_cost --example cycle_cost   # in each tree
    python3 bench/probes/compare_builds.py <old>/target/release/examples \\
        target/release/examples [rounds] [redis-server ...]

With several servers (paths of redis-server or valkey-server binaries, e.g. the matrix's under
target/servers), each server's figures are printed in turn: one run, side by side.

(An older tree without the examples: copy the two files into its core/examples first.)
"""

import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

CONTENDED = re.compile(
    r"^(\w+): ([\d.]+) sections/s, ([\d.]+) us server CPU per section, (.*)$", re.M)
UNCONTENDED = re.compile(
    r"^(\w+): ([\d.]+) us server CPU per cycle, [\d.]+ commands per cycle, ([\d.]+) cycles/s", re.M)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    builds = {"old": sys.argv[1].rstrip("/") + "/", "new": sys.argv[2].rstrip("/") + "/"}
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    for program in sys.argv[4:] or ["redis-server"]:
        print(f"== {program}", flush=True)
        compare(builds, rounds, program)


def compare(builds, rounds, program):
    port = free_port()
    server = subprocess.Popen(
        [program, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", tempfile.mkdtemp()],
        stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    url = f"redis://127.0.0.1:{port}"
    found = {build: {} for build in builds}
    try:
        for round_ in range(rounds):
            # Each round runs the two builds in the other order: what one run leaves on the
            # server (traces, latches, memory) must not always fall on the same build.
            order = list(builds.items())
            for build, path in order if round_ % 2 == 0 else order[::-1]:
                out = subprocess.run([path + "contended_cost", url, "8", "5"],
                                     capture_output=True, text=True, check=True).stdout
                for m in CONTENDED.finditer(out):
                    found[build].setdefault(("C", m[1]), []).append(
                        (float(m[2]), float(m[3]), m[4]))
                out = subprocess.run([path + "cycle_cost", url, "20000"],
                                     capture_output=True, text=True, check=True).stdout
                for m in UNCONTENDED.finditer(out):
                    found[build].setdefault(("U", m[1]), []).append(
                        (float(m[3]), float(m[2]), "no increment lost"))
    finally:
        server.kill()
        server.wait()
    for key in sorted(found["new"]):
        old, new = found["old"][key], found["new"][key]
        rate = [statistics.median(x[0] for x in runs) for runs in (old, new)]
        cpu = [statistics.median(x[1] for x in runs) for runs in (old, new)]
        lost = any(x[2] != "no increment lost" for x in old + new)
        print(f"{key[0]} {key[1]:5}: rate {rate[0]:8.0f} -> {rate[1]:8.0f} "
              f"({rate[1] / rate[0]:.2f}x); server CPU {cpu[0]:7.2f} -> {cpu[1]:7.2f} us "
              f"({cpu[1] / cpu[0]:.2f}x){'; INCREMENTS LOST' if lost else ''}")


if __name__ == "__main__":
    main()
