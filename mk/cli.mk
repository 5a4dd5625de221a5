# The `polylock` command-line tool (cli/): inspect, force-unlock, watch, check, and `polylock demo`,
# which runs the demo crate (tests/demo/: its scenarios, its workers, its private redis-server).
# build-cli: builds target/debug/polylock (the demo and its Rust workers are in it; its Python and
#            Node workers are tests/demo/workers/, run from this checkout).
# test-cli:  the command's and the demo crate's tests against real redis-servers (Rust workers only).
# test-demo: every demo scenario, briefly (see its comment).
# test-console: `polylock console` in headless Chromium (tests/console/, playwright-core driving
#            Debian's /usr/bin/chromium, installed with apt-get when missing), against a real
#            redis-server and holder processes in Rust (the core's `peer` example), Python and
#            Node (the packages, built by build-python and build-node); writes its screenshots in
#            target/console-screenshots/ (CONSOLE_SCREENSHOTS=docs/console refreshes the committed
#            ones).
# demo:      builds the CLI, the Python and Node packages if they do not load yet (build-python,
#            build-node), installs redis-server with apt-get if missing, and runs the ticket sale.
#            Pass options with DEMO_ARGS, e.g. `make demo DEMO_ARGS="--tickets 500 --fair"`.

POLYLOCK_CLI := target/debug/polylock
DEMO_ARGS ?=

.PHONY: build-cli test-cli test-demo test-console demo

build-cli:
	cargo build -p polylock-cli

test-cli:
	cargo test -p polylock-cli -p polylock-demo

test-console: build-cli redis-server build-python build-node
	cargo build -p polylock --example peer
	@command -v /usr/bin/chromium >/dev/null || { \
	  echo "chromium is missing: installing it with apt-get"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  ($$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium) >/dev/null; }
	cd tests/console && npm ci --no-audit --no-fund && CONSOLE_SCREENSHOTS="$(CONSOLE_SCREENSHOTS)" npm test

demo: build-cli
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "redis-server is missing: installing it with apt-get"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -q && $$SUDO apt-get install -y -q redis-server; }
	@if [ -x python/.venv/bin/python ] && python/.venv/bin/python -c "import polylock" 2>/dev/null; then :; \
	  else $(MAKE) build-python || echo "building the Python package failed: the demo will skip Python"; fi
	@if node -e "require('./node/index.js')" 2>/dev/null; then :; \
	  else $(MAKE) build-node || echo "building the Node package failed: the demo will skip Node"; fi
	$(POLYLOCK_CLI) demo $(DEMO_ARGS)

## test-demo: the ticket sale with every language (after test-python and test-node built them),
## and each other scenario briefly with Rust, Python and Node workers (DEMO_SCENARIO_LANGUAGES to narrow it).
DEMO_SCENARIO_LANGUAGES ?= rust,python,node
test-demo: build-cli build-python build-node
	$(POLYLOCK_CLI) demo --tickets 30 --workers 2 --languages rust,python,node
	$(POLYLOCK_CLI) demo --tickets 30 --workers 2 --languages rust,python,node --fair
	$(POLYLOCK_CLI) demo --scenario cache-rebuild --rounds 2 --workers 2 --languages $(DEMO_SCENARIO_LANGUAGES)
	$(POLYLOCK_CLI) demo --scenario read-write --ops 60 --workers 2 --languages $(DEMO_SCENARIO_LANGUAGES)
	$(POLYLOCK_CLI) demo --scenario segmented-stock --tickets 30 --segments 3 --workers 2 --languages $(DEMO_SCENARIO_LANGUAGES)
	$(POLYLOCK_CLI) demo --scenario fencing --lease-ms 100 --languages $(DEMO_SCENARIO_LANGUAGES)
	$(POLYLOCK_CLI) demo --scenario fencing --lease-ms 100 --no-fencing --languages $(DEMO_SCENARIO_LANGUAGES)
