#!/usr/bin/env python3
"""Fails when two builds of `make test` would compile the core's dependencies differently.

Cargo compiles a crate once per feature set. Each command below is one build that `make test`
runs; for every crate in the core's dependency tree they must all ask the same features, or the
core and much of its tree are compiled again (see workspace-hack/Cargo.toml). Prints the crates
whose features differ and the member that asks for more, then exits 1.
"""
import subprocess
import sys

# (what builds it, cargo tree arguments): the package selections of make test's cargo builds.
BUILDS = [
    ("the core's tests", ["-p", "polylock", "-p", "polylock-testkit", "-e", "normal,build,dev"]),
    ("the test kit's binaries", ["-p", "polylock-testkit", "-e", "normal,build"]),
    ("the Python binding", ["-p", "polylock-python", "-e", "normal,build"]),
    ("the Node binding", ["-p", "polylock-node", "-e", "normal,build"]),
    ("the uniffi library", ["-p", "polylock-ffi", "-p", "uniffi-bindgen", "-e", "normal,build"]),
    ("the CLI's and the demo's tests", ["-p", "polylock-cli", "-p", "polylock-demo", "-e", "normal,build,dev"]),
]


def tree(arguments):
    out = subprocess.run(
        ["cargo", "tree", "--prefix", "none", "-f", "{p}|{f}", *arguments],
        check=True, capture_output=True, text=True,
    ).stdout
    features = {}
    for line in out.splitlines():
        package, _, flags = line.replace(" (*)", "").replace(" (proc-macro)", "").partition("|")
        package = package.split(" (")[0]  # drop a path source
        features.setdefault(package, set()).update(f for f in flags.split(",") if f)
    return features


def main():
    core_tree = set(tree(["-p", "polylock", "-e", "normal,build"]))
    seen = {}  # crate -> {frozenset(features): [build names]}
    for name, arguments in BUILDS:
        for package, flags in tree(arguments).items():
            if package in core_tree:
                seen.setdefault(package, {}).setdefault(frozenset(flags), []).append(name)
    differing = {package: sets for package, sets in seen.items() if len(sets) > 1}
    for package, sets in sorted(differing.items()):
        print(f"{package}: features differ between builds")
        for flags, names in sets.items():
            print(f"  {', '.join(names)}: {','.join(sorted(flags)) or '(none)'}")
    if differing:
        print("add the union to workspace-hack/Cargo.toml, so that each crate is compiled once")
        return 1
    print(f"unified features: {len(seen)} crates of the core's tree, the same in {len(BUILDS)} builds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
