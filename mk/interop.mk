# Redisson interop suite: a polylock lock and a Redisson RLock on the same name exclude each
# other, on one server and on a Redis Cluster (Surefire runs every *Test class). Needs cargo,
# Java 17 + Maven (downloads Redisson/JUnit from Maven Central) and redis-server.

INTEROP_MVN ?= mvn
INTEROP_POM := tests/interop-redisson/pom.xml
INTEROP_PEER := $(CURDIR)/target/debug/examples/peer
INTEROP_LAUNCHER := $(CURDIR)/target/debug/polylock-testkit

.PHONY: test-interop interop-build
test-interop:
	cargo build --example peer -p polylock
	cargo build -p polylock-testkit --bins
	$(INTEROP_MVN) -B -ntp -f $(INTEROP_POM) test -Dpolylock.peer=$(INTEROP_PEER) -Dpolylock.testkit=$(INTEROP_LAUNCHER)

## interop-build: the suite's Maven downloads and compilation, without running it
interop-build:
	cargo build --example peer -p polylock
	$(INTEROP_MVN) -B -ntp -q -f $(INTEROP_POM) test-compile
