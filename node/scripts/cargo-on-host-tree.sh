#!/usr/bin/env bash
# The cargo napi runs for make test's debug addon (node.mk sets CARGO to this script).
#
# Why: napi always passes `--target <triple>`, and cargo builds a named target in a tree of its
# own (target/<triple>/debug), so the addon compiled the core's whole dependency tree once more
# than the test builds did (minutes of a fresh make test on 2 cores). For the host's own triple
# the flag changes nothing in the library, so this drops it: the addon then shares target/debug
# with every other debug build. The library is then copied to where napi looks for it.
set -euo pipefail

host=$(rustc -vV | sed -n 's/^host: //p')
args=()
profile=debug
while (($#)); do
  case "$1" in
    --target)
      if [[ "${2:-}" != "$host" ]]; then args+=("$1" "${2:-}"); else dropped=1; fi
      shift 2 || shift ;;
    --release) profile=release; args+=("$1"); shift ;;
    --profile) profile=$2; [[ "$profile" == dev ]] && profile=debug; args+=("$1" "$2"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done

cargo "${args[@]}"
[[ -n "${dropped:-}" && "${args[0]:-}" == build ]] || exit 0

target_dir=${CARGO_TARGET_DIR:-$(cargo metadata --no-deps --format-version 1 |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')}
# The package napi builds is the manifest's in the working directory (node/Cargo.toml).
library="lib$(sed -n 's/^name = "\(.*\)"/\1/p' Cargo.toml | head -n 1 | tr - _).so"
mkdir -p "$target_dir/$host/$profile"
cp -f "$target_dir/$profile/$library" "$target_dir/$host/$profile/$library"
