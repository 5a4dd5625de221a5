"""The hot path's I/O on the asyncio loop (python/src/asyncio.rs, core/src/connection/loop_link.rs):
an AsyncClient of one plain server sends the commands of the calls made on its loop on a
connection of its own that the loop reads, not on the core's connection. That connection
authenticates as the URL's user on its database; a value larger than the socket takes at once
still goes out whole; a cut fails the call waiting on it and hands later calls to the core's
connection until it is opened again; aclose() closes it; a blocking call made on the loop's
thread does not wait on it; another loop on the same thread lets it go; and a forked child
leaves the parent's alone."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis.exceptions

import polylock
from helpers import RedisConnection, wait_for_child, wait_until
from redis_server import RedisServer

USER, PASSWORD = "loop_python", "sesame"


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, timeout=120))


@pytest.fixture(scope="module")
def user(redis_server: RedisServer) -> str:
    with redis_server.client() as connection:
        assert connection("ACL", "SETUSER", USER, "on", f">{PASSWORD}", "~*", "&*", "+@all")
    return USER


def user_url(port: int, db: str = "") -> str:
    return f"redis://{USER}:{PASSWORD}@127.0.0.1:{port}{db}"


class Monitor:
    """The commands the server runs (MONITOR), collected by a thread until closed: each as
    (source address, command words)."""

    def __init__(self, server: RedisServer) -> None:
        self.seen: list[tuple[str, list[str]]] = []
        self._connection = RedisConnection(server.port)
        self._monitor = self._connection.monitor()
        self._monitor.__enter__()
        self._stopped = False
        self._thread = threading.Thread(target=self._collect, daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        while not self._stopped:
            try:
                command = self._monitor.next_command()
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, ValueError):
                return
            if command.get("client_type") == "lua":
                continue
            source = f"{command['client_address']}:{command['client_port']}"
            self.seen.append((source, str(command["command"]).split()))

    def of(self, word: str, about: str) -> list[str]:
        """The sources of the commands `word` naming `about` (a lock's name: other tests'
        clients may still be renewing theirs), in order."""
        return [
            source
            for source, words in list(self.seen)
            if words[0].lower() == word and any(about in each for each in words[1:])
        ]

    def sources_of(self, word: str, about: str) -> set[str]:
        return set(self.of(word, about))

    def count(self, word: str, about: str) -> int:
        return len(self.of(word, about))

    def close(self) -> None:
        self._stopped = True
        self._connection.close()  # ends the thread's read
        self._thread.join(timeout=10)


@pytest.fixture
def monitor(redis_server: RedisServer) -> Iterator[Monitor]:
    watch = Monitor(redis_server)
    try:
        yield watch
    finally:
        watch.close()


def addresses(redis: RedisConnection) -> list[str]:
    return [entry["addr"] for entry in redis.client_list()]


def user_at(redis: RedisConnection, addr: str) -> str:
    return next(entry["user"] for entry in redis.client_list() if entry["addr"] == addr)


def fresh(prefix: str) -> str:
    return f"loop:{prefix}:{uuid.uuid4().hex[:10]}"


async def one_cycle_on(client: polylock.AsyncClient, monitor: Monitor, prefix: str) -> str:
    """Takes and releases a fresh lock; the address of the connection its scripts went on."""
    name = fresh(prefix)
    lock = client.lock(name)
    assert await lock.acquire()
    await lock.release()
    assert wait_until(lambda: monitor.count("evalsha", name) >= 1, timeout=10)
    (source,) = monitor.sources_of("evalsha", name)
    return source


def test_the_calls_on_the_loop_go_out_on_the_loops_connection_as_the_urls_user_on_its_database(
    redis_server: RedisServer, redis: RedisConnection, user: str, monitor: Monitor
) -> None:
    async def main() -> str:
        client = await polylock.AsyncClient.connect(user_url(redis_server.port, "/3"))
        try:
            record = f"polylock:client:{client.id}"
            # The connect's own write (its client record) goes on the core's connection.
            assert wait_until(
                lambda: any(w[0].lower() == "hset" and record in w[1] for _, w in list(monitor.seen)),
                timeout=10,
            )
            core = {s for s, w in list(monitor.seen) if w[0].lower() == "hset" and record in w[1]}
            name = fresh("hot")
            lock = client.lock(name)
            for _ in range(5):
                assert await lock.acquire()
                await lock.release()
            # MONITOR's lines come on their own connection: wait for the ten cycles' scripts.
            assert wait_until(lambda: monitor.count("evalsha", name) >= 10, timeout=10)
            sources = monitor.sources_of("evalsha", name) | monitor.sources_of("eval", name)
            assert len(sources) == 1, f"one connection sent the scripts: {sources}"
            (hot,) = sources
            assert hot not in core, f"the scripts went on the core's connection ({hot})"
            # That connection authenticated as the URL's user.
            assert user_at(redis, hot) == USER
            return hot
        finally:
            await client.aclose()

    hot = run(main())
    # And selected database 3.
    assert any(s == hot and w[0].lower() == "select" and w[1:] == ["3"] for s, w in list(monitor.seen))


def test_the_calls_of_many_tasks_on_the_loop_all_go_out_and_settle(url: str) -> None:
    # 64 tasks, each making its calls as the replies to the others' come in: their commands go
    # out a few in one write (core/src/connection/loop_link.rs, `defer_writes`), and every
    # reply must reach its own call.
    async def main() -> list[int]:
        client = await polylock.AsyncClient.connect(url, response_timeout=30)
        try:

            async def worker(index: int) -> int:
                lock = client.lock(fresh(f"many-{index}"))
                for _ in range(100):
                    assert await lock.acquire()
                    await lock.release()
                return 100

            return await asyncio.wait_for(
                asyncio.gather(*(worker(index) for index in range(64))), timeout=20
            )
        finally:
            await client.aclose()

    assert run(main()) == [100] * 64


def test_aclose_closes_the_loops_connection(
    redis_server: RedisServer, redis: RedisConnection, user: str, monitor: Monitor
) -> None:
    async def main() -> None:
        client = await polylock.AsyncClient.connect(user_url(redis_server.port))
        hot = await one_cycle_on(client, monitor, "close")
        assert hot in addresses(redis)
        assert user_at(redis, hot) == USER
        await client.aclose()
        assert wait_until(lambda: hot not in addresses(redis), timeout=10), f"{hot} is still open"

    run(main())


def test_a_value_the_socket_cannot_take_at_once_goes_out_whole(url: str) -> None:
    async def main() -> None:
        client = await polylock.AsyncClient.connect(url)
        try:
            election = client.election(fresh("big"))
            leadership = await election.campaign("small", timeout=5)
            assert leadership is not None, "elected"
            # 32 MiB, far more than a loopback socket's send buffer: the loop writes the rest
            # when the socket can take it.
            value = "v" * (32 * 1024 * 1024 - 7) + "the end"
            await leadership.proclaim(value)
            leader = await election.leader()
            assert leader is not None and len(leader.value) == len(value)
            assert leader.value == value, "the announced value differs"
            await leadership.proclaim("small again")
            leader = await election.leader()
            assert leader is not None and leader.value == "small again"
            await leadership.resign()
        finally:
            await client.aclose()

    run(main())


def test_a_cut_fails_the_call_waiting_on_the_loops_connection_later_calls_work_and_it_opens_again(
    fault_proxy: Any,
) -> None:
    async def main() -> None:
        client = await polylock.AsyncClient.connect(fault_proxy.url, response_timeout=60)
        try:
            lock = client.lock(fresh("cut"))
            assert await lock.acquire()
            await lock.release()
            # The client's command and pub/sub connections, and the loop's.
            opened = fault_proxy.connections()
            # Replies stop: the next call waits on the loop's connection, far from its 60 s
            # response timeout, until the proxy closes every connection.
            fault_proxy.blackhole()
            pending = asyncio.ensure_future(lock.acquire(timeout=0))
            # One turn of the loop: the task starts, and its call writes its command (either
            # outcome below is accepted, should it not have).
            await asyncio.sleep(0)
            fault_proxy.cut()
            fault_proxy.pass_through()
            try:
                outcome: Any = await pending
            except polylock.ConnectionError as error:
                outcome = error
            assert isinstance(outcome, (bool, polylock.ConnectionError)), outcome
            # Later calls go to the core's connection, which reconnects.
            deadline = time.monotonic() + 60
            while True:
                try:
                    locked = await lock.locked()
                    break
                except polylock.ConnectionError:
                    assert time.monotonic() < deadline, "no call worked after the cut"
                    await asyncio.sleep(0.05)
            if locked:  # the cut acquire's, if it got the lock before the cut
                assert await lock.force_unlock()
            other = client.lock(lock.name)
            assert await other.acquire(timeout=10)
            await other.release()
            # And the loop's connection is opened again in the background (the loop must run
            # meanwhile: it attaches the new one).
            deadline = time.monotonic() + 60
            while fault_proxy.connections() < opened and time.monotonic() < deadline:
                await asyncio.sleep(0.025)
            assert fault_proxy.connections() == opened, "the loop's connection was not opened again"
            assert await other.acquire(timeout=10)
            await other.release()
        finally:
            await client.aclose()

    run(main())


def test_a_blocking_call_on_the_loops_thread_does_not_wait_on_the_loops_connection(url: str) -> None:
    # A blocking call on the loop's thread blocks the loop: were its command sent on the loop's
    # connection, nothing would read the reply until the response timeout failed it.
    async def main() -> None:
        client = await polylock.AsyncClient.connect(url, response_timeout=2)
        try:
            lock = client.lock(fresh("blocking"))
            assert await lock.acquire()
            # The shared core handle, as the blocking API calls it.
            assert lock._probe.locked()
            await lock.release()
            assert not lock._probe.locked()
        finally:
            await client.aclose()

    run(main())


def test_a_client_connected_on_one_loop_works_on_the_next_which_closes_the_first_loops_connection(
    url: str, redis: RedisConnection, monitor: Monitor
) -> None:
    async def first() -> tuple[polylock.AsyncClient, str]:
        client = await polylock.AsyncClient.connect(url)
        return client, await one_cycle_on(client, monitor, "first")

    client, hot = run(first())

    async def second() -> None:
        try:
            lock = client.lock(fresh("second"))
            assert await lock.acquire()
            await lock.release()
        finally:
            await client.aclose()

    run(second())
    assert wait_until(lambda: hot not in addresses(redis), timeout=10), f"{hot} is still open"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_a_forked_child_that_runs_a_loop_leaves_the_parents_loop_connection_working(
    url: str, monitor: Monitor
) -> None:
    # The child inherits the parent's loop state and its link's socket. Its own loop lets that
    # state go, which must close the child's copy of the socket only, not shut the parent's
    # connection down (the parent's next call on its loop would fail as a broken connection).
    event_loop = asyncio.new_event_loop()
    try:
        client = event_loop.run_until_complete(polylock.AsyncClient.connect(url, response_timeout=30))
        name = fresh("fork")
        lock = client.lock(name)

        async def cycle() -> bool:  # a lock belongs to its task: both calls in one
            acquired = await lock.acquire(timeout=5)
            await lock.release()
            return acquired

        assert event_loop.run_until_complete(cycle())
        assert wait_until(lambda: monitor.count("evalsha", name) >= 2, timeout=10)
        (hot,) = monitor.sources_of("evalsha", name)
        pid = os.fork()
        if pid == 0:  # child: never return into pytest
            code = 1
            try:

                async def child() -> bool:
                    async with await polylock.AsyncClient.connect(url) as own:
                        other = own.lock(fresh("fork-child"))
                        acquired = await other.acquire(timeout=5)
                        await other.release()
                        return acquired

                code = 0 if asyncio.run(child()) else 2
            finally:
                os._exit(code)
        status = wait_for_child(pid)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        # The parent's calls on its loop still work, on its loop's connection.
        for _ in range(3):
            assert event_loop.run_until_complete(cycle())
        assert wait_until(lambda: monitor.count("evalsha", name) >= 8, timeout=10)
        after = set(monitor.of("evalsha", name)[2:])
        assert after == {hot}, f"the parent's scripts went on {after}, not its loop's connection {hot}"
        event_loop.run_until_complete(client.aclose())
    finally:
        event_loop.close()
