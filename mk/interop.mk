# Redisson interop suite: a polylock lock and a Redisson RLock on the same name exclude each
# other, on one server and on a Redis Cluster (Surefire runs every *Test class). Needs cargo,
# Java 17 + Maven (downloads Redisson/JUnit from Maven Central) and redis-server.
#
# The same sources run against two Redisson lines: test-interop against the pom's default
# (3.52.0), test-interop-redisson4 against Redisson 4. Each version builds into its own
# tests/interop-redisson/target/redisson-<version>/ (monitor logs included).

INTEROP_MVN ?= mvn
INTEROP_POM := tests/interop-redisson/pom.xml
INTEROP_PEER := $(CURDIR)/target/debug/examples/peer
INTEROP_LAUNCHER := $(CURDIR)/target/debug/polylock-testkit
INTEROP_REDISSON3 := 3.52.0
INTEROP_REDISSON4 := 4.3.0

.PHONY: test-interop test-interop-redisson4 interop-build interop-binaries
interop-binaries:
	cargo build --example peer -p polylock
	cargo build -p polylock-testkit --bins

test-interop: interop-binaries
	$(INTEROP_MVN) -B -ntp -f $(INTEROP_POM) test -Dredisson.version=$(INTEROP_REDISSON3) -Dpolylock.peer=$(INTEROP_PEER) -Dpolylock.testkit=$(INTEROP_LAUNCHER)

test-interop-redisson4: interop-binaries
	$(INTEROP_MVN) -B -ntp -f $(INTEROP_POM) test -Dredisson.version=$(INTEROP_REDISSON4) -Dpolylock.peer=$(INTEROP_PEER) -Dpolylock.testkit=$(INTEROP_LAUNCHER)

## interop-build: both versions' Maven downloads (Redisson, JUnit, Surefire's JUnit provider)
## and compilation, without running a test
interop-build:
	cargo build --example peer -p polylock
	@# -Dtest=none runs Surefire on no class: it resolves its JUnit provider now, not in a suite.
	for version in $(INTEROP_REDISSON3) $(INTEROP_REDISSON4); do \
	  $(INTEROP_MVN) -B -ntp -q -f $(INTEROP_POM) test -Dredisson.version=$$version \
	    -Dtest=none -Dsurefire.failIfNoSpecifiedTests=false || exit 1; \
	done
