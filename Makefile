# polylock: `make demo` runs the cross-language ticket sale, `make test` runs every test.
# Each part of the project adds its own targets in mk/<part>.mk; this file ties them together.

.DEFAULT_GOAL := help
SHELL := /bin/bash

.PHONY: help test test-core lint redis-server
help:
	@echo "make demo   - the cross-language ticket-sale demo (builds what is missing)"
	@echo "make test   - every test: core and faults, Redisson interop, Python, Node, Kotlin, Swift, CLI, history under faults, demo, bench smoke"
	@echo "make bench  - the benchmark run, written to bench/results/RESULTS.md"

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

include $(sort $(wildcard mk/*.mk))

# Every suite, one after the other (each suite starts its own redis-server processes).
.PHONY: test
test: lint test-core test-interop test-python test-node test-kotlin test-swift test-cli test-history test-demo bench-smoke
	@echo "make test: every suite passed"
