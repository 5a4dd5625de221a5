# Python package `polylock` (python/: the pyo3 crate in python/src, the package in python/polylock).
# build-python: a venv at python/.venv with maturin, pytest, mypy, redis-py and the OpenTelemetry
#               SDK and Prometheus exporter (test_otel.py, docs/python.md), and the package
#               installed into it (`maturin develop`: a debug build sharing target/).
# test-python:  pytest against real redis-servers (some through the test kit's fault proxy),
#               the job fleet test with Node workers too (so it needs build-node),
#               plus the stub check (mypy.stubtest).
# A plain `pip install ./python` builds a release wheel from source (needs Rust); users install the wheel of dist-python.
# python-wheel:     the abi3 wheel (CPython 3.9+) with the cargo profile PY_WHEEL_PROFILE
#                   (release by default) into target/wheels/<profile>: the release one
#                   manylinux_2_17 through zig; the dev one is build-python's extension packed
#                   (tagged for this machine's glibc). maturin, ziglang and auditwheel live in
#                   target/dist-venv.
# dist-python:      the release wheel and the sdist, into dist/.
# test-dist-python: installs the PY_WHEEL_PROFILE wheel (with no index; then redis-py for the
#                   test kit's launcher) into a fresh venv (target/dist-test-venv) and uses
#                   it with no cargo/rustc on PATH (python/tests/install_check.py); the tag must
#                   be abi3 / cp39, and for the release wheel auditwheel must find it
#                   manylinux_2_17.
# test-wheel-python: what `make test` runs: test-dist-python on the dev wheel, and the sdist
#                   check. `make test-dist` and `make dist` build and check the release wheel:
#                   its zig build compiles the dependency tree once more (the release build took
#                   14 minutes of a fresh make test on 2 cores, a dev one with zig several).

PYTHON ?= python3
PY_VENV := python/.venv
PY_RUN := $(CURDIR)/$(PY_VENV)/bin/python

.PHONY: build-python test-python python-peer dist-python test-dist-python

$(PY_VENV)/bin/python:
	$(PYTHON) -m venv $(PY_VENV)

PY_DEV_TOOLS := "maturin>=1.9,<2" "pytest>=8" "mypy>=1.10" "redis>=5" \
  "opentelemetry-api>=1.24" "opentelemetry-sdk>=1.24" "opentelemetry-exporter-prometheus>=0.45b0" "prometheus-client>=0.20"

# build-python installs the tools and builds the extension again only when a source changed or
# the extension is gone: `maturin develop` rewrites python/polylock/_native.abi3.so in place,
# which would pull it from under the suites of other lanes that import it (six suites ask for
# build-python). The package's .py files are installed editable, so they need no rebuild.
PY_TOOLS_STAMP := $(PY_VENV)/.installed-dev-tools
PY_NATIVE_STAMP := target/python-native.stamp
PY_NATIVE_SOURCES := $(wildcard $(shell git ls-files -- core python/src python/Cargo.toml workspace-hack Cargo.toml Cargo.lock python/pyproject.toml 2>/dev/null))

$(PY_TOOLS_STAMP): $(PY_VENV)/bin/python mk/python.mk
	$(PY_RUN) -m pip install --quiet --disable-pip-version-check $(PY_DEV_TOOLS)
	touch $@

build-python: $(PY_TOOLS_STAMP)
	@ls python/polylock/_native*.so >/dev/null 2>&1 || rm -f $(PY_NATIVE_STAMP)
	@$(MAKE) --no-print-directory $(PY_NATIVE_STAMP)
$(PY_NATIVE_STAMP): $(PY_TOOLS_STAMP) $(PY_NATIVE_SOURCES)
	cd python && VIRTUAL_ENV=$(CURDIR)/$(PY_VENV) $(CURDIR)/$(PY_VENV)/bin/maturin develop --quiet
	mkdir -p target && touch $@

# The Rust holder used by the cross-language test, and the Rust fleet worker of test_job_fleet.py.
python-peer:
	cargo build --quiet -p polylock --example peer --example job_lock

test-python: redis-server build-python build-node python-peer
	cargo build -p polylock-testkit --bins
	cd python && $(PY_RUN) -m pytest -q tests
	cd python && $(PY_RUN) -m mypy.stubtest polylock._native
	cd python && $(PY_RUN) -m mypy --strict polylock

PY_DIST_VENV := $(CURDIR)/target/dist-venv
PY_TEST_VENV := $(CURDIR)/target/dist-test-venv

$(PY_DIST_VENV)/bin/maturin:
	$(PYTHON) -m venv $(PY_DIST_VENV)
	$(PY_DIST_VENV)/bin/python -m pip install --quiet --disable-pip-version-check "maturin>=1.9,<2" "ziglang>=0.13" "auditwheel>=6"

PY_WHEEL_PROFILE ?= release
PY_WHEEL_DIR = target/wheels/$(PY_WHEEL_PROFILE)

.PHONY: python-wheel python-sdist test-wheel-python
# Built again only when a source changed: make test's release lane builds the dev wheel early
# (python-wheel-dev), and test-wheel-python then finds it built.
PY_WHEEL_SOURCES := $(PY_NATIVE_SOURCES) $(wildcard $(shell git ls-files -- python/polylock python/README.md 2>/dev/null))
python-wheel: $(PY_DIST_VENV)/bin/maturin
	@$(MAKE) --no-print-directory $(PY_WHEEL_DIR)/.built
$(PY_WHEEL_DIR)/.built: $(PY_WHEEL_SOURCES)
	rm -rf $(PY_WHEEL_DIR) && mkdir -p $(PY_WHEEL_DIR)
ifeq ($(PY_WHEEL_PROFILE),dev)
	@# make test's wheel: the extension build-python (maturin develop) compiled, packed as a
	@# wheel (the same cargo call: nothing compiles again), tagged for this machine's glibc.
	@# zig (manylinux_2_17) needs a dependency tree of its own, minutes of a fresh make test on
	@# 2 cores: the release wheel has it (make dist, checked by make test-dist).
	cd python && PATH="$(PY_DIST_VENV)/bin:$$PATH" maturin build --quiet --profile dev --out $(CURDIR)/$(PY_WHEEL_DIR)
else
	@# Its own target dir: zig's compiler settings would otherwise rebuild, in place, the release
	@# artifacts the Node addon and its tests share (same profile, other fingerprints).
	cd python && CARGO_TARGET_DIR=$(CURDIR)/target/dist-python PATH="$(PY_DIST_VENV)/bin:$$PATH" maturin build --quiet --profile $(PY_WHEEL_PROFILE) --zig --compatibility manylinux2014 --out $(CURDIR)/$(PY_WHEEL_DIR)
endif
	touch $@

python-sdist: $(PY_DIST_VENV)/bin/maturin
	mkdir -p dist
	rm -f dist/polylock-*.tar.gz
	cd python && $(PY_DIST_VENV)/bin/maturin sdist --out ../dist
	tar tzf dist/polylock-*.tar.gz | grep -q '^polylock-[^/]*/core/src/lib.rs$$'

dist-python: python-sdist
	$(MAKE) --no-print-directory python-wheel PY_WHEEL_PROFILE=release
	rm -f dist/polylock-*.whl
	cp target/wheels/release/polylock-*.whl dist/
	@ls -l dist/polylock-*

test-dist-python: python-wheel redis-server
	@# The test kit's launcher, which install_check.py starts its redis-server with.
	cargo build -p polylock-testkit --bins
	rm -rf $(PY_TEST_VENV)
	$(PYTHON) -m venv $(PY_TEST_VENV)
	$(PY_TEST_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-index $(PY_WHEEL_DIR)/polylock-*-cp39-abi3-*.whl
	@# redis-py for the test kit's redis-server launcher (python/tests/redis_server.py) only.
	$(PY_TEST_VENV)/bin/python -m pip install --quiet --disable-pip-version-check "redis>=5"
	cd $(PY_TEST_VENV) && PATH="$(PATH_WITHOUT_RUST)" $(PY_TEST_VENV)/bin/python $(CURDIR)/python/tests/install_check.py
ifneq ($(PY_WHEEL_PROFILE),dev)
	$(PY_DIST_VENV)/bin/auditwheel show $(PY_WHEEL_DIR)/polylock-*.whl | tee target/dist-python-auditwheel.txt
	grep -q '"manylinux_2_17_x86_64"' target/dist-python-auditwheel.txt
	ls $(PY_WHEEL_DIR)/polylock-*.whl | grep -q -- '-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl$$'
endif

# make test's release lane packs it once build-python built the extension, then tests it.
.PHONY: python-wheel-dev
python-wheel-dev: python-sdist build-python
	$(MAKE) --no-print-directory python-wheel PY_WHEEL_PROFILE=dev

test-wheel-python: python-sdist
	$(MAKE) --no-print-directory test-dist-python PY_WHEEL_PROFILE=dev
