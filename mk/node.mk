# The Node package `polylock` (node/, built from bindings/node with @napi-rs/cli).

NODE_GENERATED := native.js native.d.ts
# Tests and the demo use a debug addon: it shares target/debug with every other crate, which
# saves CI a second compile of the whole dependency tree. `make build-node NODE_BUILD=build`
# (the package's own `npm run build`) makes the release addon.
NODE_BUILD ?= build:debug
NODE_DRIFT_DIR := target/node-drift

.PHONY: build-node test-node

## build-node: install node/'s dev tools and build the native addon into node/
build-node:
	@# npm ci can refuse this lock file (npm leaves other platforms' optional packages of
	@# @napi-rs/cli out of it); npm install then installs the same locked versions.
	cd node && { npm ci --no-audit --no-fund || npm install --no-audit --no-fund; }
	cd node && npm run $(NODE_BUILD)

## test-node: build, check the generated native.js/native.d.ts did not drift, run node --test
test-node:
	rm -rf $(NODE_DRIFT_DIR) && mkdir -p $(NODE_DRIFT_DIR)
	cd node && cp $(NODE_GENERATED) ../$(NODE_DRIFT_DIR)/
	$(MAKE) build-node
	cargo build --example peer -p polylock
	cargo build -p polylock-testkit --bin polylock-fault-proxy
	@for file in $(NODE_GENERATED); do \
	  diff -u $(NODE_DRIFT_DIR)/$$file node/$$file || { \
	    echo "node/$$file changed when regenerated: run 'make build-node' and commit it"; exit 1; }; \
	done
	cd node && npm test
