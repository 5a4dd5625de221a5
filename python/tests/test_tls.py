"""TLS: a lock over rediss:// with the test CA (certificates made by tests/tls/make-certs.sh)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import polylock
from redis_cluster import RedisCluster
from redis_server import RedisServer, make_tls_files, start_redis_tls


@pytest.fixture(scope="module")
def tls_files() -> Iterator[Path]:
    directory = tempfile.mkdtemp(prefix="polylock-py-tls-")
    try:
        yield Path(make_tls_files(directory))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def tls_server(tls_files: Path) -> Iterator[RedisServer]:
    server = start_redis_tls(str(tls_files))
    try:
        yield server
    finally:
        server.close()


def test_a_lock_over_rediss_with_a_private_ca(tls_server: RedisServer, tls_files: Path) -> None:
    first = polylock.Client(tls_server.tls_url, tls_ca=tls_files / "ca.crt")
    second = polylock.Client(tls_server.tls_url, tls_ca=(tls_files / "ca.crt").read_text())
    mine, theirs = first.lock("tls:py"), second.lock("tls:py")
    assert mine.acquire(timeout=0)
    assert not theirs.acquire(timeout=0)
    mine.release()
    assert theirs.acquire(timeout=2)
    theirs.release()
    first.close()
    second.close()


def test_async_client_over_rediss(tls_server: RedisServer, tls_files: Path) -> None:
    async def run() -> None:
        client = await polylock.AsyncClient.connect(tls_server.tls_url, tls_ca=tls_files / "ca.crt")
        lock = client.lock("tls:py:async")
        assert await lock.acquire(timeout=0)
        await lock.release()
        client.close()

    asyncio.run(run())


def test_tls_errors_are_typed(tls_server: RedisServer, tls_files: Path) -> None:
    with pytest.raises(polylock.ConnectionError, match="certificate is not trusted"):
        polylock.Client(tls_server.tls_url, tls_ca=tls_files / "other-ca.crt")
    with pytest.raises(polylock.InvalidArgumentError, match="tls_ca file .* was not found"):
        polylock.Client(tls_server.tls_url, tls_ca=tls_files / "missing.crt")
    with pytest.raises(polylock.InvalidArgumentError, match="tls_cert is set without tls_key"):
        polylock.Client(tls_server.tls_url, tls_ca=tls_files / "ca.crt", tls_cert=tls_files / "client.crt")


@pytest.mark.parametrize(
    ("cert", "auth_clients", "says"),
    [("expired", False, "has expired"), ("server", True, "client certificate")],
    ids=["expired server certificate", "missing client certificate"],
)
def test_an_expired_certificate_and_a_missing_client_certificate_are_typed(
    tls_files: Path, cert: str, auth_clients: bool, says: str,
) -> None:
    """The same kind and words as in Rust, Node and Kotlin: the core's."""
    server = start_redis_tls(str(tls_files), cert=cert, auth_clients=auth_clients)
    try:
        with pytest.raises(polylock.ConnectionError, match=says):
            polylock.Client(server.tls_url, tls_ca=tls_files / "ca.crt")
    finally:
        server.close()


def test_a_lock_over_a_tls_cluster_with_client_certificates(tls_files: Path) -> None:
    """rediss+cluster://: 3 primaries serving TLS only to clients that show a certificate."""
    with RedisCluster(3, 0, tls_files=str(tls_files), tls_auth_clients=True) as cluster:
        tls = {"tls_ca": tls_files / "ca.crt", "tls_cert": tls_files / "client.crt",
               "tls_key": tls_files / "client.key"}
        first = polylock.Client(cluster.tls_url, **tls)
        second = polylock.Client(cluster.tls_url, **tls)
        for name in ("tls:py:cluster:a", "tls:py:cluster:b", "tls:py:cluster:c"):
            mine, theirs = first.lock(name), second.lock(name)
            assert mine.acquire(timeout=0)
            assert not theirs.acquire(timeout=0)
            mine.release()
            assert theirs.acquire(timeout=2)
            theirs.release()
        first.close()
        second.close()
        with pytest.raises(polylock.ConnectionError, match="certificate is not trusted"):
            polylock.Client(cluster.tls_url, **{**tls, "tls_ca": tls_files / "other-ca.crt"})
        with pytest.raises(polylock.ConnectionError, match="client certificate"):
            polylock.Client(cluster.tls_url, tls_ca=tls_files / "ca.crt")
