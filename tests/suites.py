#!/usr/bin/env python3
"""`make test`: builds every artifact once, then runs the suites side by side, and prints each
suite's time at the end.

Why this shape: the builds are CPU-bound and share target/, so they run first, one after the
other, each exactly as its suite will ask for it (the suites' own cargo, maturin and napi calls
then find nothing to do). The suites mostly wait (on Redis, on sleeps of fault tests, on child
processes), so they run in lanes at once. A lane runs its suites one after the other, and the
suites that write a shared working copy (the Maven projects) are in the same lane; the Python
venv and node/'s addon are rebuilt only when a source changed, so after the build every suite
only reads them. The packages and the lint run in lanes of their own under `nice`, so they
take what the suites leave; the lint's starts with the build (its own target dir), so it also
fills the build's idle moments (downloads, Maven, links).

Each suite's output is printed whole when it ends (passed or failed). After the first failure
no new suite starts; the table marks what did not run. `POLYLOCK_TEST_LANES=1` runs the same
suites one after the other (to read a failure without the others' load).
"""
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "target" / "suites"

# make targets, one after the other, before the suites that wait for them ("target@<step>").
# Each lane starts as soon as the step it needs ended: test-build-core (the core's suites),
# test-build-scripts (the Python and Node suites), test-build-rust (the rest of the Rust builds
# and the interop's Maven build), test-build (the uniffi library, Kotlin and Swift).
BUILD = ["test-build-core", "test-build-scripts", "test-build-rust", "test-build"]

# lane -> (nice level, make targets in order). "target@lane" starts only after that lane ended
# ("@build": after the build). Lanes in EARLY start with the build, the others after it.
# Everything is CPU-bound on 2 cores: the lanes start early and are of about the same length,
# so that none runs long after the others (CI's 1,206 s was 788 s of build, then the Python
# and Node suites one after the other, 419 s; 8abaf4d's 1,149 s ended the JVM lane, the lint
# lane and the wheel together).
LANES = {
    "rust": (0, ["test-core@test-build-core"]),
    "protocol": (0, ["test-protocol@test-build-core", "test-console@test-build-rust"]),
    # The demo, history and election suites run the Python venv and the Node addon, which
    # build-python and build-node rebuild only when a source changed: after test-build-scripts
    # they are read-only, so any lane may run them.
    "python": (0, ["test-python@test-build-scripts", "test-history@test-build-rust", "test-election",
                   "test-parity@build"]),
    "node": (0, ["test-node@test-build-scripts", "bench-smoke@test-build-rust", "test-matrix-smoke",
                 "test-demo", "test-cli"]),
    # Every Maven project is in this lane: they share ~/.m2 and a working copy. The Kotlin
    # package's build ends it, under `nice` as the other package builds.
    "jvm": (0, ["test-interop@test-build-rust", "test-interop-redisson4", "test-kotlin@build",
                "test-swift", "test-dist-kotlin-dev"]),
    # Both build in target/lint: the clippy check, then the packaged crate.
    "lint": (15, ["lint", "test-rust-package@build"]),
    # The packages make test installs are the dev builds the suites use, packed (make dist and
    # make test-dist build and test the release ones: the release wheel alone took about 14
    # minutes of a fresh make test on 2 cores, a dev wheel through zig still 800 s of a niced
    # lane, compiling the dependency tree once more).
    "release": (15, ["python-wheel-dev@test-build-scripts", "test-wheel-python@build", "test-dist-node-dev"]),
}
EARLY = ("rust", "protocol", "python", "node", "jvm", "lint", "release")
# Package builds in lanes of tests: niced like the release lane.
NICED = {"test-dist-kotlin-dev": 15}

print_lock = threading.Lock()
failed = threading.Event()
results = {}  # target -> (lane, start, seconds, cpu seconds, "passed" | "FAILED")
# When make test began (time.monotonic()): each suite's start is given from it.
began = time.monotonic()


def run(target, lane, niceness):
    log = LOGS / f"{target}.log"
    command = ["make", "--no-print-directory", target]
    niceness = NICED.get(target, niceness)
    if niceness:
        command = ["nice", "-n", str(niceness), *command]
    start = time.monotonic()
    with open(log, "wb") as out:
        # No stdin: a tool that reads it (cargo's `rustc -` under napi) must not get whatever
        # the caller's stdin holds.
        process = subprocess.Popen(
            command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
        )
        # wait4: the CPU the suite's processes used (user + system, of every process the make
        # call waited for), which says where a CPU-bound run's time goes.
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = code = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - start
    outcome = "passed" if code == 0 else "FAILED"
    results[target] = (lane, start - began, seconds, usage.ru_utime + usage.ru_stime, outcome)
    with print_lock:
        print(f"\n===== {target} ({lane}): {outcome} in {seconds:.0f} s =====", flush=True)
        sys.stdout.buffer.write(log.read_bytes())
        print(f"===== end of {target} =====", flush=True)
    if code != 0:
        failed.set()
    return code == 0


# A lane's end, or a build step's ("build" once every step ended).
lane_ended = {lane: threading.Event() for lane in [*LANES, "build", *BUILD]}


def lane_worker(lane, niceness, targets):
    try:
        for target in targets:
            target, _, after = target.partition("@")
            if after:
                lane_ended[after].wait()
            if failed.is_set():
                return
            run(target, lane, niceness)
    finally:
        lane_ended[lane].set()


def dev_null_is_a_device():
    """A /dev/null replaced by a regular file (some tool renamed its output over it) hands
    whatever was written there to every reader, e.g. cargo's `rustc -` probe: say so plainly."""
    import stat

    if stat.S_ISCHR(os.stat("/dev/null").st_mode):
        return True
    print("/dev/null is not a character device: recreate it (mknod -m 666 /dev/null c 1 3)")
    return False


def main():
    if not dev_null_is_a_device():
        return 1
    LOGS.mkdir(parents=True, exist_ok=True)
    global began
    began = wall = time.monotonic()
    serial = os.environ.get("POLYLOCK_TEST_LANES") == "1"
    threads = {
        lane: threading.Thread(target=lane_worker, args=(lane, niceness, targets))
        for lane, (niceness, targets) in LANES.items()
    }
    if not serial:
        for lane in EARLY:
            threads[lane].start()
    for target in BUILD:
        ok = run(target, "build", 0)
        lane_ended[target].set()
        if not ok:
            break
    for target in BUILD:
        lane_ended[target].set()
    lane_ended["build"].set()
    if serial:
        for lane, (niceness, targets) in LANES.items():
            lane_worker(lane, niceness, targets)
    else:
        for lane, thread in threads.items():
            if lane not in EARLY:
                thread.start()
        for thread in threads.values():
            thread.join()
    wall = time.monotonic() - wall

    suites = BUILD + [t.partition("@")[0] for _, targets in LANES.values() for t in targets]
    width = max(map(len, suites))
    print("\nsuite times (seconds; the lanes run at the same time; start: from make test's start;"
          " cpu: user + system of the suite's processes)")
    print(f"  {'suite':<{width}} {'lane':<8} {'start':>6} {'time':>6} {'cpu':>6}  result")
    for target in suites:
        lane, start, seconds, cpu, outcome = results.get(target, ("", 0, 0, 0, "not run"))
        print(f"  {target:<{width}} {lane:<8} {start:>6.0f} {seconds:>6.0f} {cpu:>6.0f}  {outcome}")
    cpu = sum(result[3] for result in results.values())
    outcome = "FAILED" if failed.is_set() else "passed"
    print(f"  {'make test':<{width}} {'':<8} {0:>6} {wall:>6.0f} {cpu:>6.0f}  {outcome}")
    print(f"logs: {LOGS.relative_to(ROOT)}/")
    if not dev_null_is_a_device():  # a suite must not break the machine either
        return 1
    return 1 if failed.is_set() else 0


if __name__ == "__main__":
    sys.exit(main())
