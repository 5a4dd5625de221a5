#!/usr/bin/env python3
"""Fails when `make help` lists more than 15 public targets, or one that make does not know.

The public targets are the ones `make help` names (`make <target> - ...`); every other target
is an internal step of one of them (docs/development.md, "Tests and make targets").
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MOST = 15


def main():
    out = subprocess.run(["make", "--no-print-directory", "help"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    targets = re.findall(r"^make (\S+)\s+- ", out, re.M)
    problems = []
    if not targets:
        problems.append("make help names no target")
    if len(targets) > MOST:
        problems.append(f"make help names {len(targets)} public targets, more than {MOST}")
    lines = [line for line in out.splitlines() if line.strip()]
    if len(lines) != len(targets):
        problems.append("every line of make help is `make <target> - what it does`")
    for target in targets:
        # -n: what make would run, without running it. Only a rule for the target itself
        # counts: a file it depends on may not be built yet (make lint runs beside the build).
        known = subprocess.run(["make", "-n", "--no-print-directory", target], cwd=ROOT,
                               capture_output=True, text=True)
        if f"No rule to make target '{target}'" in known.stderr:
            problems.append(f"make help names {target}, which make does not know")
    for problem in problems:
        print(problem)
    if not problems:
        print(f"make help: {len(targets)} public targets, each known to make")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
