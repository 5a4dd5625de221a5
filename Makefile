# polylock: `make demo` runs the cross-language ticket sale, `make test` runs every test.
# Each part of the project adds its own targets in mk/<part>.mk; this file ties them together.

.DEFAULT_GOAL := help
SHELL := /bin/bash

.PHONY: help test test-core lint redis-server
help:
	@echo "make demo   - the cross-language ticket-sale demo (builds what is missing)"
	@echo "make test   - every test: core and faults, the protocol explorer, Redisson interop, Python, Node, Kotlin, Swift, API parity, CLI, history under faults, demo, packages, bench smoke"
	@echo "make bench  - the benchmark run, written to bench/results/RESULTS.md"
	@echo "make dist   - every package (Python wheel and sdist, npm tarballs, Maven jar) into dist/"

# Installs redis-server (and faketime, which skews one test peer's clock) from Debian's
# packages when they are missing.
redis-server:
	@command -v redis-server >/dev/null && command -v faketime >/dev/null || { \
	  echo "redis-server or faketime is missing; installing them with apt-get"; \
	  (apt-get update -qq && apt-get install -y -qq redis-server faketime) >/dev/null; }
	@redis-server --version

test-core: redis-server
	cargo test -p polylock -p polylock-testkit

lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy -p polylock --all-targets --features explorer -- -D warnings

include $(sort $(wildcard mk/*.mk))

# PATH without the directories holding cargo or rustc: an installed package must not need them.
PATH_WITHOUT_RUST = $(shell echo "$$PATH" | tr ':' '\n' | while read -r dir; do \
  [ -x "$$dir/cargo" ] || [ -x "$$dir/rustc" ] || printf '%s:' "$$dir"; done | sed 's/:$$//')

# The packages users install (release builds, once), and each installed as a new user would.
.PHONY: dist test-dist test-parity
dist: dist-python dist-node dist-kotlin
test-dist: test-rust-package test-dist-python test-dist-node test-dist-kotlin

# The public API of every language against tests/parity/api.toml (after the packages are built).
test-parity: build-python build-node build-uniffi
	python3 tests/parity/check.py --python $(CURDIR)/python/.venv/bin/python --self-test
	python3 tests/parity/check.py --python $(CURDIR)/python/.venv/bin/python

# Every suite, one after the other (each suite starts its own redis-server processes).
.PHONY: test
test: lint test-core test-protocol test-interop test-python test-node test-kotlin test-swift test-parity test-cli test-history test-demo test-dist bench-smoke
	@echo "make test: every suite passed"
