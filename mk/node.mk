# The Node package `@polylock/polylock` (node/: its napi crate in node/src, built with @napi-rs/cli).

NODE_GENERATED := native.js native.d.ts
# Tests and the demo use a debug addon, so make test compiles no release build at all (a release
# build of the core's tree took minutes of its 2 cores); it is built in target/debug, beside the
# test builds, whose compiled dependencies it reuses (node/scripts/cargo-on-host-tree.sh drops
# the --target napi always passes). dist-node builds the release addon the package ships
# (NODE_DIST_BUILD); `make build-node NODE_BUILD=build` makes a release addon for everything else.
NODE_BUILD ?= build:debug
NODE_DIST_BUILD ?= build
NODE_BUILD_CARGO = $(if $(filter build:debug,$(NODE_BUILD)),CARGO=$(CURDIR)/node/scripts/cargo-on-host-tree.sh)

.PHONY: node-deps build-node test-node

## node-deps: install node/'s dev tools (again only when package.json or the lock file changed:
## other suites use node/node_modules while test-dist builds the packages). The lock file records
## every platform's optional packages (of @napi-rs/cli's own napi-rs dependencies), so npm ci
## accepts it on any platform.
NODE_DEPS_STAMP := node/node_modules/.polylock-installed
node-deps: $(NODE_DEPS_STAMP)
$(NODE_DEPS_STAMP): node/package.json node/package-lock.json
	cd node && npm ci --no-audit --no-fund
	touch $@

## build-node: install node/'s dev tools and build the native addon into node/ (again only when a
## source changed, NODE_BUILD changed or the addon is gone: napi always recompiles the binding
## crate with a thin-LTO link, and five suites ask for the addon)
NODE_ADDON_STAMP := target/node-addon-$(subst :,-,$(NODE_BUILD)).stamp
NODE_ADDON_SOURCES := $(wildcard $(shell git ls-files -- core node/src node/Cargo.toml node/build.rs workspace-hack Cargo.toml Cargo.lock 2>/dev/null))
build-node: node-deps
	@ls node/polylock.*.node >/dev/null 2>&1 || rm -f target/node-addon-*.stamp
	@$(MAKE) --no-print-directory $(NODE_ADDON_STAMP)
$(NODE_ADDON_STAMP): $(NODE_DEPS_STAMP) $(NODE_ADDON_SOURCES)
	cd node && $(NODE_BUILD_CARGO) npm run $(NODE_BUILD)
	@# The addon of the other NODE_BUILD was just overwritten.
	rm -f target/node-addon-*.stamp
	mkdir -p target && touch $@

## test-node: build, check the generated native.js/native.d.ts did not drift from what git has
## (the build that made the addon regenerated them), run node --test
test-node:
	$(MAKE) build-node
	cargo build --example peer -p polylock
	cargo build -p polylock-testkit --bins
	@for file in $(NODE_GENERATED); do \
	  git diff --exit-code -- node/$$file || { \
	    echo "node/$$file changed when regenerated: run 'make build-node' and commit it"; exit 1; }; \
	done
	cd node && npm test

# The npm packages (the napi-rs layout), under the npm scope @polylock (the unscoped name
# `polylock` is someone else's package): `@polylock/polylock` (JavaScript and declarations, no
# addon) and one package per platform with the release addon, `@polylock/polylock-<platform>`
# (node/npm/*, made by `napi create-npm-dirs` from package.json's napi.packageName and
# napi.targets). This machine builds and
# packs linux-x64-gnu; the other platforms' packages are packed the same way where they are
# built. The optionalDependencies on the platform packages are added to the packed
# package.json only (as `napi prepublish` does), so that installing node/'s dev tools never
# asks the registry for packages that are not published yet.
NODE_PLATFORM ?= linux-x64-gnu
NODE_VERSION = $(shell node -p "require('./node/package.json').version")
NODE_STAGE := target/node-dist
NODE_DIST_TEST := target/node-dist-test
DIST_DIR := dist
# npm pack names a scoped package's tarball <scope>-<name>-<version>.tgz.
NODE_TARBALL = $(DIST_DIR)/polylock-polylock-$(NODE_VERSION).tgz
NODE_PLATFORM_TARBALL = $(DIST_DIR)/polylock-polylock-$(NODE_PLATFORM)-$(NODE_VERSION).tgz

.PHONY: dist-node test-dist-node

## dist-node: dist/polylock-polylock-<v>.tgz and dist/polylock-polylock-<platform>-<v>.tgz (release addon;
## make test packs the debug one: test-dist-node-dev)
dist-node: node-deps
	@# The addon of build-node, in place: a second `napi build` into another directory would
	@# recompile and link the binding crate again for the same library.
	@$(MAKE) --no-print-directory build-node NODE_BUILD=$(NODE_DIST_BUILD)
	rm -rf $(NODE_STAGE) && mkdir -p $(NODE_STAGE)/addon $(NODE_STAGE)/polylock $(NODE_STAGE)/platform $(DIST_DIR)
	@# Stripped here, not built with --strip: that changes RUSTFLAGS, which would make
	@# dist-kotlin's release build of the same dependencies start over.
	strip --strip-unneeded -o $(NODE_STAGE)/addon/polylock.$(NODE_PLATFORM).node node/polylock.$(NODE_PLATFORM).node
	@# (node/native.js and node/native.d.ts are the committed ones, drift-checked by test-node.)
	cp -r node/package.json node/README.md node/index.js node/index.d.ts node/lib node/native.js node/native.d.ts node/otel.js node/otel.d.ts \
	  $(NODE_STAGE)/polylock/
	cd $(NODE_STAGE)/polylock && npm pkg delete scripts devDependencies && \
	  for manifest in ../../../node/npm/*/package.json; do \
	    npm pkg set "optionalDependencies.$$(node -p "require('$$manifest').name")=$(NODE_VERSION)" || exit 1; \
	  done
	cp node/npm/$(NODE_PLATFORM)/package.json node/npm/$(NODE_PLATFORM)/README.md $(NODE_STAGE)/platform/
	cp $(NODE_STAGE)/addon/polylock.$(NODE_PLATFORM).node $(NODE_STAGE)/platform/
	rm -f $(NODE_TARBALL) $(NODE_PLATFORM_TARBALL)
	cd $(NODE_STAGE)/polylock && npm pack --pack-destination $(abspath $(DIST_DIR))
	cd $(NODE_STAGE)/platform && npm pack --pack-destination $(abspath $(DIST_DIR))
	@if tar -tzf $(NODE_TARBALL) | grep '\.node$$'; then \
	  echo "dist-node: the main package must not carry an addon"; exit 1; fi
	@tar -tzf $(NODE_PLATFORM_TARBALL) | grep -qx 'package/polylock.$(NODE_PLATFORM).node' || { \
	  echo "dist-node: the platform package has no addon"; exit 1; }
	rm -rf $(NODE_STAGE)

## test-dist-node-dev: what make test runs: test-dist-node on tarballs of the debug addon the
## other suites use (no release build; `make test-dist` packs and tests the release one)
.PHONY: test-dist-node-dev
test-dist-node-dev:
	$(MAKE) --no-print-directory test-dist-node NODE_DIST_BUILD=$(NODE_BUILD)

## test-dist-node: install both tarballs offline in an empty directory and use them
test-dist-node: dist-node redis-server
	rm -rf $(NODE_DIST_TEST) && mkdir -p $(NODE_DIST_TEST)
	cp node/test/dist/* $(NODE_DIST_TEST)/
	cd $(NODE_DIST_TEST) && export PATH="$(PATH_WITHOUT_RUST)" && \
	  ! command -v cargo && ! command -v rustc && \
	  echo '{"name": "polylock-dist-test", "private": true}' > package.json && \
	  npm install --offline --no-audit --no-fund ../../$(NODE_TARBALL) ../../$(NODE_PLATFORM_TARBALL) && \
	  node -e "require('@polylock/polylock')" && \
	  node esm.mjs && \
	  POLYLOCK_NODE_TESTKIT=$(CURDIR)/node/test/redis.js node smoke.js && \
	  node ../../node/node_modules/typescript/bin/tsc --noEmit --strict -p tsconfig.json \
	    --typeRoots ../../node/node_modules/@types
	rm -rf $(NODE_DIST_TEST)
