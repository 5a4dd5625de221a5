# polylock: `make demo` runs the cross-language ticket sale, `make test` runs every test.
# Each part of the project adds its own targets in mk/<part>.mk; this file ties them together.

.DEFAULT_GOAL := help
SHELL := /bin/bash

.PHONY: help test test-core lint redis-server
# The public targets: exactly these, one line each (tests/make_help.py, in `make lint`, checks
# that there are at most 15 and that each exists). Every other target is an internal step of one
# of them (docs/development.md).
help:
	@echo "make demo          - the cross-language ticket-sale demo (builds what is missing)"
	@echo "make test          - every test, in lanes side by side (POLYLOCK_TEST_LANES=1: one after the other)"
	@echo "make lint          - rustfmt, clippy -D warnings, feature unification, the core's layer order"
	@echo "make test-core     - the core's tests against real servers, faults and doc tests included"
	@echo "make test-protocol - the protocol explorer on the real engine (test-protocol-long: longer walks)"
	@echo "make test-history  - Rust, Python and Node workers on one lock under faults, checked for overlaps"
	@echo "make test-python   - the Python package's tests, stub check and mypy --strict"
	@echo "make test-node     - the Node package's tests and the generated-binding drift check"
	@echo "make test-kotlin   - the Kotlin binding's tests on the JVM (the Swift check: test-swift)"
	@echo "make test-cli      - the polylock command's tests and every demo scenario (the console in a browser: test-console)"
	@echo "make test-interop  - Redisson interop (3.52.0; test-interop-redisson4: 4.3.0)"
	@echo "make test-matrix   - every suite on Redis 6.2, 7.0, 8.2 and Valkey 8.1 (long; make test runs its smoke)"
	@echo "make dist          - every package (Python wheel and sdist, npm tarballs, Maven jar) into dist/"
	@echo "make test-dist     - each package installed and used as a new user would"
	@echo "make bench         - the benchmark run, written to bench/results/RESULTS.md"

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
	@# One pass: the explorer feature only adds the explorer's seams (polylock::explorer_seam)
	@# and its test target (tests/explorer, one of --all-targets), and `opentelemetry` one
	@# module, so the core is linted with both on.
	CARGO_TARGET_DIR=$(LINT_TARGET_DIR) cargo clippy --workspace --all-targets --features polylock/explorer,polylock/opentelemetry -- -D warnings
	python3 tests/unified_features.py
	@# The core's layer order (docs/architecture.md): no import points upward.
	python3 -m unittest -q tests/test_layers.py
	python3 tests/layers.py
	python3 tests/make_help.py
	@# The bench's own workspace (bench/rust) locks the core's dependencies too: bench-smoke
	@# builds it with --locked, so a dependency change must update its lock file as well.
	cd bench/rust && cargo metadata --locked --format-version 1 >/dev/null

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
# napi calls find nothing left to do while other suites run. test-build-core first: what the core's
# suites (test-core, test-protocol) need, so that they start while the rest builds.
.PHONY: test-build-core
test-build-core: redis-server
	cargo test -p polylock -p polylock-testkit --no-run
	cargo test -p polylock --features explorer --test explorer --no-run
	cargo build -p polylock-testkit --bins
	@# The explorer's Valkey server, and the matrix's servers that core/tests/acl.rs runs on.
	$(MAKE) --no-print-directory protocol-server matrix-servers

# test-build-scripts then: what the Python and Node suites need, so that they start while the rest
# builds (their tests mostly wait on servers and child processes).
.PHONY: test-build-scripts
test-build-scripts: test-build-core
	$(MAKE) --no-print-directory build-python build-node python-peer

# test-build-rust then: the rest of the Rust builds and the Maven projects of the interop and
# the bench (so that no two lanes fill ~/.m2 at once); the lanes of the Redisson interop, the
# history, the demo and the bench smoke start after it.
.PHONY: test-build-rust
test-build-rust: test-build-scripts
	cargo test -p polylock --features opentelemetry --test otel --no-run
	cargo test -p polylock --no-default-features --lib --no-run
	cargo test -p polylock-cli -p polylock-demo --no-run
	cargo build -p polylock --example peer --example history_worker --example job_lock --example election_worker
	cargo build -p polylock-cli
	$(MAKE) --no-print-directory bench-java interop-build

# test-build last: the uniffi library and the Kotlin and Swift bindings, the Kotlin tests' Maven
# build. The Node addon and the Kotlin jar's library (dev, as make test packs them) are debug
# builds in target/debug too, so the core's dependency tree is compiled once for all of them.
test-build: test-build-rust
	$(MAKE) --no-print-directory build-python build-node build-uniffi swift-deps kotlin-build KOTLIN_PROFILE=dev
