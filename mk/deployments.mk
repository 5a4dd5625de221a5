# Deployments beyond one server (issue 13): Redis Cluster (3 primaries with a replica each) and
# Sentinel (1 primary, 2 replicas, 3 sentinels), started by the Rust test kit on loopback ports.
# `make test` runs these through test-core and test-cli; this target runs them alone.

.PHONY: test-deployments
test-deployments: redis-server
	cargo test -p polylock --test cluster --test sentinel
	cargo test -p polylock-cli --test check
