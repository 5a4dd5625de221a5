# polylock: `make demo` runs the cross-language ticket sale, `make test` runs every test.
# Each part of the project adds its own targets in mk/<part>.mk; this file ties them together.

.DEFAULT_GOAL := help
SHELL := /bin/bash

.PHONY: help test test-core lint redis-server
help:
	@echo "make demo   - the cross-language ticket-sale demo (builds what is missing)"
	@echo "make test   - every test: core and faults, the protocol explorer, Redisson interop (3.52.0 and 4.3.0), Python, Node, Kotlin, Swift, API parity, CLI, history under faults, demo, packages, bench smoke, the server matrix smoke"
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
	@# The `opentelemetry` feature: its tests (the real SDK's in-memory exporters) and the
	@# examples of docs/observability.md and of polylock::otel.
	cargo test -p polylock --features opentelemetry --test otel
	cargo test -p polylock --features opentelemetry --doc -- ObservabilityDoctests otel::

# Clippy's check builds share nothing with the test builds, so they go to their own directory:
# `make test` runs the lint beside the suites, whose cargo calls must not wait for its lock.
LINT_TARGET_DIR := $(CURDIR)/target/lint
lint:
	cargo fmt --all --check
	@# One pass: the explorer feature only adds test code and `opentelemetry` one module, so
	@# the core is linted with both on.
	CARGO_TARGET_DIR=$(LINT_TARGET_DIR) cargo clippy --workspace --all-targets --features polylock/explorer,polylock/opentelemetry -- -D warnings
	python3 tests/unified_features.py
	@# The core's layer order (docs/architecture.md): no import points upward.
	python3 -m unittest -q tests/test_layers.py
	python3 tests/layers.py

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

# Every suite: tests/suites.py builds what they use once (test-build), then runs them in lanes
# side by side and prints each suite's time (each suite starts its own redis-server processes).
# `make test-serial` runs the same suites one after the other.
.PHONY: test test-serial test-build
test:
	python3 tests/suites.py

test-serial:
	POLYLOCK_TEST_LANES=1 python3 tests/suites.py

# What the suites build, built once and in the suites' own way, so that their cargo, maturin and
# napi calls find nothing left to do while other suites run.
test-build: redis-server
	cargo test -p polylock -p polylock-testkit --no-run
	cargo test -p polylock --features explorer --lib --no-run
	cargo test -p polylock --features opentelemetry --test otel --no-run
	cargo test -p polylock --no-default-features --lib --no-run
	cargo test -p polylock-cli --no-run
	cargo build -p polylock --example peer --example history_worker --example job_lock --example election_worker
	cargo build -p polylock-testkit --bins
	cargo build -p polylock-cli
	@# bench-smoke builds its own peers and worker in its lane (downloads, mostly); only its
	@# Maven build is here, so that no two lanes fill ~/.m2 at once.
	@# kotlin-release-library right after build-node: the release tree they share is then warm.
	$(MAKE) --no-print-directory build-python build-node kotlin-release-library build-uniffi protocol-server swift-deps \
	  bench-java interop-build kotlin-build matrix-servers
