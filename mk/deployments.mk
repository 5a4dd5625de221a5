# Deployments beyond one server (issue 13): Redis Cluster (3 primaries with a replica each),
# Sentinel (1 primary, 2 replicas, 3 sentinels), replica sync and MultiLock/RedLock over
# independent servers, all started by the test kits on loopback ports.
# `make test` runs the short form through each language's suite (test-core, test-cli,
# test-python, test-node, test-kotlin, test-interop). This target is the long form: every
# deployment suite of every language, with the mid-run failover checks of `polylock check`
# run for 30 s with 16 workers instead of 6 s with 4.

.PHONY: test-deployments
test-deployments: redis-server build-python build-node
	cargo test -p polylock --test cluster --test sentinel --test replica_sync --test multi_lock
	POLYLOCK_CHECK_SECONDS=30 POLYLOCK_CHECK_WORKERS=16 cargo test -p polylock-cli --test check --test deployments
	cd python && $(PY_RUN) -m pytest -q $(DEPLOYMENT_PYTHON_TESTS)
	cd node && node --test --test-concurrency=1 $(DEPLOYMENT_NODE_TESTS)
	cargo build --example peer -p polylock
	$(INTEROP_MVN) -B -ntp -f $(INTEROP_POM) test -Dtest='RedisClusterTest,RedissonClusterInteropTest' -Dpolylock.peer=$(INTEROP_PEER)

DEPLOYMENT_PYTHON_TESTS := tests/test_deployments.py tests/test_replica_sync.py tests/test_multi_lock.py tests/test_topologies.py
DEPLOYMENT_NODE_TESTS := test/deployments.test.js test/replica-sync.test.js test/multi-lock.test.js test/topologies.test.js
