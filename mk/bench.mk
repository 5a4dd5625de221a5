# Benchmarks: polylock against peer lock libraries on one redis-server (bench/, see
# docs/development.md, Benchmarks).
# bench:       the full run (~45 min, not measured yet: U and C in 3 interleaved rounds; 64 JVMs warmed for
#              Redisson, ~15-20 min of it): writes bench/results/RESULTS.md and the PNG plots.
# bench-smoke: a few seconds of every scenario, checked (part of `make test`; debug builds).
# Peers are installed into bench/.venv (PyPI) and bench/node_modules (npm); the Rust worker is
# the crate bench/rust (its own workspace), built in release mode into target/bench-rust; the
# Java worker (Redisson, from Maven Central like tests/interop-redisson) is bench/java, built by
# Maven into bench/java/target (a jar and a classpath file: each JVM starts with `java -cp`).

BENCH_PYTHON ?= python3
BENCH_VENV := bench/.venv
BENCH_PY := $(CURDIR)/$(BENCH_VENV)/bin/python
BENCH_TARGET := $(CURDIR)/target/bench-rust
BENCH_PYPI := "redis>=5,<9" "python-redis-lock>=4,<5" "pottery>=3,<4" "matplotlib>=3.8,<4" "maturin>=1.9,<2"

BENCH_MVN ?= mvn
BENCH_JAVA_JAR := bench/java/target/polylock-bench-java.jar

.PHONY: bench bench-smoke bench-smoke-build bench-deps bench-rust bench-java bench-python-polylock bench-node-polylock

$(BENCH_VENV)/bin/python:
	$(BENCH_PYTHON) -m venv $(BENCH_VENV)

## bench-deps: the peers (PyPI, npm, Maven Central) and the Rust and Java workers
bench-deps: $(BENCH_VENV)/bin/python bench-rust bench-java
	cargo build -p polylock-testkit --bins
	$(BENCH_PY) -m pip install --quiet --disable-pip-version-check $(BENCH_PYPI)
	cd bench && npm ci --no-audit --no-fund

## bench-java: the Redisson worker: its jar and target/classpath.txt (dependencies in ~/.m2)
bench-java: $(BENCH_JAVA_JAR)
$(BENCH_JAVA_JAR): bench/java/pom.xml $(wildcard bench/java/src/main/java/dev/polylock/bench/*.java)
	$(BENCH_MVN) -B -ntp -q -f bench/java/pom.xml package

bench-rust:
	cd bench/rust && CARGO_TARGET_DIR=$(BENCH_TARGET) cargo build --release --locked

# polylock itself, as users get it: the wheel of `make dist`, the release addon for Node.
bench-python-polylock: $(BENCH_VENV)/bin/python dist-python
	$(BENCH_PY) -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps dist/polylock-*-cp39-abi3-*.whl

bench-node-polylock:
	$(MAKE) build-node NODE_BUILD=build

bench: bench-deps bench-python-polylock bench-node-polylock
	@echo "load average now: $$(cut -d' ' -f1-3 /proc/loadavg) (run on a quiet machine)"
	$(BENCH_PY) bench/run.py --out bench/results

# The smoke run only checks that every contender runs and loses nothing, so it uses the builds
# the test suites made: the debug Python package and Rust worker (sharing target/debug), and
# the Node addon of build-node.
# The Python package is python/'s editable one (PYTHONPATH): build-python made it, and a second
# `maturin develop` would rewrite its extension under the suites of other lanes.
bench-smoke: bench-smoke-build
	BENCH_RUST_BIN=$(CURDIR)/target/debug/polylock-bench PYTHONPATH=$(CURDIR)/python \
	  $(BENCH_PY) bench/run.py --smoke --out target/bench-smoke

## bench-smoke-build: the peers and the debug workers bench-smoke runs
bench-smoke-build: $(BENCH_VENV)/bin/python build-node build-python bench-java
	$(BENCH_PY) -m pip install --quiet --disable-pip-version-check $(BENCH_PYPI)
	cd bench && npm ci --no-audit --no-fund
	@# target/ (not target/bench-rust): the debug dependencies the test suites compiled are reused.
	cd bench/rust && CARGO_TARGET_DIR=$(CURDIR)/target cargo build --locked
	@# The test kit's launcher, which starts the redis-server the drivers measure on.
	cargo build -p polylock-testkit --bins
