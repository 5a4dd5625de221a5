"""The fault proxy helper (tests/faults.py) with redis-py clients: each fault does to a
client what it promises, and the server, seen directly, shows what really ran."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis.exceptions as redis_errors

from faults import FaultProxy, FaultProxyError
from helpers import RedisConnection, wait_until

REPLY_TIMEOUT = 0.4


@pytest.fixture
def through_proxy(fault_proxy: FaultProxy) -> Iterator[RedisConnection]:
    """A redis-py client whose connections go through the proxy, giving up on a reply after
    0.4 s; connected (in pass mode) before the test sets a fault."""
    with RedisConnection(fault_proxy.port, timeout=REPLY_TIMEOUT) as client:
        assert client.ping()
        yield client


def test_drop_replies_runs_the_command_but_the_reply_never_arrives(
    fault_proxy, through_proxy, redis, name
):
    fault_proxy.drop_replies()
    with pytest.raises(redis_errors.TimeoutError):
        through_proxy.set(name, "ran")
    assert redis("GET", name) == b"ran"


def test_blackhole_forwards_nothing(fault_proxy, through_proxy, redis, name):
    fault_proxy.blackhole()
    with pytest.raises(redis_errors.TimeoutError):
        through_proxy.set(name, "lost")
    assert redis("EXISTS", name) == 0


def test_cut_after_forward_runs_the_command_then_drops_the_connection(
    fault_proxy, through_proxy, redis, name
):
    fault_proxy.cut_after_forward()
    with pytest.raises(redis_errors.ConnectionError):
        through_proxy.incr(name)
    assert redis("GET", name) == b"1", "INCR ran once"
    assert wait_until(lambda: fault_proxy.connections() == 0, timeout=5)


def test_delay_holds_requests_and_replies(fault_proxy):
    with RedisConnection(fault_proxy.port, timeout=5) as client:
        assert client.ping()
        fault_proxy.delay(150)
        started = time.monotonic()
        assert client.ping()
        # Once on the way in, once on the way out.
        assert time.monotonic() - started >= 0.3


def test_refuse_then_pass_listens_again_on_the_same_port(fault_proxy, through_proxy):
    port = fault_proxy.port
    fault_proxy.refuse()
    assert fault_proxy.connections() == 0
    with pytest.raises(redis_errors.ConnectionError, match="refused"):
        through_proxy.ping()
    fault_proxy.pass_through()
    assert fault_proxy.port == port
    assert through_proxy.ping()


def test_refuse_for_passes_again_by_itself(fault_proxy, through_proxy):
    started = time.monotonic()
    fault_proxy.refuse_for(0.5)
    with pytest.raises(redis_errors.ConnectionError, match="refused"):
        through_proxy.ping()

    def answers() -> bool:
        try:
            return bool(through_proxy.ping())
        except redis_errors.ConnectionError:
            return False

    assert wait_until(answers, timeout=5)
    assert time.monotonic() - started >= 0.5


def test_cut_closes_connections_and_redis_py_reconnects(fault_proxy, through_proxy):
    assert fault_proxy.connections() == 1
    fault_proxy.cut()
    assert fault_proxy.connections() == 0
    # redis-py sees the closed socket before reusing it and opens a new connection.
    assert through_proxy.ping()
    # The proxy counts the new connection once it has closed the cut one's server side too.
    assert wait_until(lambda: fault_proxy.connections() == 1, timeout=5)


def test_a_command_the_proxy_rejects_raises(fault_proxy):
    with pytest.raises(FaultProxyError, match="not a number of milliseconds"):
        fault_proxy.delay(-1)
