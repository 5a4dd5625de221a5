# The history test (tests/history, see its README): Rust, Python and Node workers on one lock
# under random faults (SIGKILL, SIGSTOP, stalls shorter than the lease, connection kills, proxy
# cuts and refusals, server restarts); every critical section is journaled and the journal is
# checked for overlaps. The plain lock by default; `--kind fifo` runs the FIFO lock.
# test-history:      the checker's own tests (it must fail on tests/history/fixtures/overlap.journal
#                    and stall.journal), then a short run on one server (20 s), one on a
#                    3-primary cluster in broadcast pub/sub mode (15 s), and one of the FIFO lock
#                    on one server (20 s)
# test-history-long: a 60 s run on one server, a 30 s run on the cluster, a 60 s FIFO lock run
#                    on one server
# Runner options go in HISTORY_ARGS, e.g. `make test-history HISTORY_ARGS="--seed 1234"`.

HISTORY_PY := $(CURDIR)/python/.venv/bin/python
HISTORY_ARGS ?=

.PHONY: history-build test-history test-history-long

## history-build: the Rust worker, the fault proxy, the Python and Node packages
history-build: redis-server
	cargo build -p polylock --example history_worker
	cargo build -p polylock-testkit --bins
	$(MAKE) build-python build-node

test-history: history-build
	$(HISTORY_PY) -m pytest -q -p no:cacheprovider tests/history/test_check.py
	$(HISTORY_PY) tests/history/run.py --seconds 20 $(HISTORY_ARGS)
	$(HISTORY_PY) tests/history/run.py --seconds 15 --deployment cluster-broadcast $(HISTORY_ARGS)
	$(HISTORY_PY) tests/history/run.py --seconds 20 --kind fifo $(HISTORY_ARGS)

test-history-long: history-build
	$(HISTORY_PY) tests/history/run.py --seconds 60 $(HISTORY_ARGS)
	$(HISTORY_PY) tests/history/run.py --seconds 30 --deployment cluster-broadcast $(HISTORY_ARGS)
	$(HISTORY_PY) tests/history/run.py --seconds 60 --kind fifo $(HISTORY_ARGS)
