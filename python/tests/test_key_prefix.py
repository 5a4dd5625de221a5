"""The key_prefix option reaches the core: clients under different prefixes share nothing,
under the same prefix they share the lock, whose key is the prefixed name."""

from __future__ import annotations

import asyncio

import pytest

import polylock


def test_different_prefixes_do_not_exclude_and_the_same_prefix_does(url, redis, name):
    with (
        polylock.Client(url, key_prefix="a:") as tenant_a,
        polylock.Client(url, key_prefix="a:") as tenant_a_again,
        polylock.Client(url, key_prefix="b:") as tenant_b,
    ):
        held = tenant_a.lock(name)
        assert held.acquire(blocking=False)
        assert not tenant_a_again.lock(name).acquire(blocking=False)
        other = tenant_b.lock(name)
        assert other.acquire(blocking=False)
        assert redis.type(f"a:{name}") == b"hash"
        other.release()
        held.release()


def test_async_clients_take_the_option_too(url, name):
    async def main() -> None:
        async with (
            await polylock.AsyncClient.connect(url, key_prefix="a:") as tenant_a,
            await polylock.AsyncClient.connect(url, key_prefix="b:") as tenant_b,
        ):
            held = tenant_a.lock(name)
            assert await held.acquire(blocking=False)
            other = tenant_b.lock(name)
            assert await other.acquire(blocking=False)
            await other.release()
            await held.release()

    asyncio.run(asyncio.wait_for(main(), timeout=30))


def test_a_bad_prefix_is_the_cores_invalid_argument(url):
    with pytest.raises(polylock.InvalidArgumentError, match="key_prefix must not contain '{'"):
        polylock.Client(url, key_prefix="{app}:")
