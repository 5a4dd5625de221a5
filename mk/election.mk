# The mixed-language election test (tests/election/run.py): Rust, Python and Node candidate
# processes on one election, the leader killed (SIGKILL), paused past its lease (SIGSTOP) and
# cut off by the fault proxy; new leaders in time, terms increasing, never two acting leaders.
# About 20 s.

.PHONY: test-election

test-election: redis-server
	cargo build -p polylock --example election_worker
	cargo build -p polylock-testkit --bins
	$(MAKE) build-python build-node
	cd tests/election && $(CURDIR)/python/.venv/bin/python -m pytest -q -p no:cacheprovider test_check.py
	$(CURDIR)/python/.venv/bin/python tests/election/run.py
