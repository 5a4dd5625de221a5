"""The machine: its load, CPU steal and other processes' CPU around a timed run (/proc), and
its description and the software versions for the report."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path

from .paths import BENCH


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def own_ticks() -> int:
    """CPU ticks (user + system) of this driver and every process under it (workers, the
    redis-server, pooled JVMs)."""
    parents, ticks = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        ticks[int(entry.name)] = int(fields[11]) + int(fields[12])
    ours, frontier = {os.getpid()}, [os.getpid()]
    children: dict = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in ours:
                ours.add(child)
                frontier.append(child)
    return sum(ticks.get(pid, 0) for pid in ours)


def cpu_sample() -> dict:
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    except (OSError, ValueError):
        return {}
    values += [0] * (8 - len(values))
    user, nice, system, idle, iowait, _irq, _softirq, steal = values
    return {"total": sum(values), "busy": user + nice + system, "idle": idle + iowait,
            "steal": steal, "ours": own_ticks()}


def noise_between(before: dict, after: dict) -> dict:
    """Steal % (the hypervisor took the CPU), other % (CPU used by processes that are not the
    bench's, approximately: user + system time of the machine minus that of the driver's process
    tree) and the 1-minute load average at the end (the bench's own runnable workers included)."""
    noise = {"load1": float(load().split()[0]) if load() != "?" else float("nan")}
    if before and after and after["total"] > before["total"]:
        total = after["total"] - before["total"]
        noise["steal_pct"] = 100 * (after["steal"] - before["steal"]) / total
        other = (after["busy"] - before["busy"]) - (after["ours"] - before["ours"])
        noise["other_pct"] = max(0.0, 100 * other / total)
    return noise


def versions() -> list[str]:
    def cmd(*args):
        try:
            return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip()
        except OSError:
            return "?"
    lines = []
    try:
        from importlib import metadata
        for package in ("polylock", "redis", "python-redis-lock", "pottery", "matplotlib"):
            try:
                lines.append(f"{package} {metadata.version(package)} (PyPI/Python)")
            except metadata.PackageNotFoundError:
                lines.append(f"{package}: not installed")
    except ImportError:
        pass
    for package in ("redlock", "redis-semaphore", "ioredis"):
        try:
            data = json.loads((BENCH / "node_modules" / package / "package.json").read_text())
            lines.append(f"{package} {data['version']} (npm)")
        except OSError:
            lines.append(f"{package}: not installed")
    lock = BENCH / "rust" / "Cargo.lock"
    if lock.exists():
        text = lock.read_text().split("[[package]]")
        for package in ("rslock", "redis", "tokio"):
            found = sorted({block.split('version = "')[1].split('"')[0] for block in text
                            if f'name = "{package}"\n' in block})
            lines.append(f"{package} {', '.join(found)} (crates.io; bench/rust/Cargo.lock)")
    lines.append(cmd("rustc", "--version"))
    lines.append(f"Python {platform.python_version()}")
    lines.append(f"Node {cmd('node', '--version')}")
    return lines


def machine() -> list[str]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "?"
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError):
        pass
    return [f"{platform.system()} {platform.release()} {platform.machine()}",
            f"{os.cpu_count()} CPUs: {model}", f"memory {memory}"]
