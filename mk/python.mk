# Python package `polylock` (pyo3 binding in bindings/python, package in python/).
# build-python: a venv at python/.venv with maturin, pytest, mypy and redis-py, and the package
#               installed into it (`maturin develop`: a debug build sharing target/).
# test-python:  pytest against real redis-servers (some through the test kit's fault proxy),
#               plus the stub check (mypy.stubtest).
# A plain `pip install ./python` builds a release wheel the same way (see docs/python.md).

PYTHON ?= python3
PY_VENV := python/.venv
PY_RUN := $(CURDIR)/$(PY_VENV)/bin/python

.PHONY: build-python test-python python-peer

$(PY_VENV)/bin/python:
	$(PYTHON) -m venv $(PY_VENV)

build-python: $(PY_VENV)/bin/python
	$(PY_RUN) -m pip install --quiet --disable-pip-version-check "maturin>=1.9,<2" "pytest>=8" "mypy>=1.10" "redis>=5"
	cd python && VIRTUAL_ENV=$(CURDIR)/$(PY_VENV) $(CURDIR)/$(PY_VENV)/bin/maturin develop --quiet

# The Rust holder used by the cross-language test.
python-peer:
	cargo build --quiet -p polylock --example peer

test-python: redis-server build-python python-peer
	cargo build -p polylock-testkit --bin polylock-fault-proxy
	cd python && $(PY_RUN) -m pytest -q tests
	cd python && $(PY_RUN) -m mypy.stubtest polylock._native
	cd python && $(PY_RUN) -m mypy --strict polylock
