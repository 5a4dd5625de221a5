"""A Sentinel deployment of real servers (`polylock-testkit up sentinel` through
redis_server.py): one primary, its replicas and the sentinels monitoring them (down after 1 s).
Failovers go through the sentinels; servers are named by port."""

from __future__ import annotations

from typing import Any

from redis_server import Deployment, NotYet, RedisServer, server_arguments, wait_for

MASTER_NAME = "polylock-primary"

# Any server may become the primary: each starts a full sync at once, not after 5 s.
DATA_ARGS = ("--repl-diskless-sync-delay", "0")


def as_text_map(reply: Any) -> dict[str, str]:
    """A SENTINEL reply describing one instance (a dict or a flat list of pairs), as text."""
    if isinstance(reply, dict):
        pairs = list(reply.items())
    else:
        pairs = list(zip(reply[::2], reply[1::2]))
    decode = lambda value: value.decode() if isinstance(value, bytes) else str(value)  # noqa: E731
    return {decode(name): decode(value) for name, value in pairs}


class RedisSentinel:
    """`with RedisSentinel() as deployment:` 1 primary, 2 replicas, 3 sentinels (quorum 2)."""

    def __init__(self, replicas: int = 2, sentinels: int = 3) -> None:
        self.killed: set[int] = set()
        self.group = Deployment(
            "sentinel", f"--replicas={replicas}", f"--sentinels={sentinels}", *server_arguments(DATA_ARGS),
        )
        self.data: list[RedisServer] = self.group.servers
        self.sentinels: list[RedisServer] = self.group.sentinels
        try:
            self.wait_until_settled()
        except BaseException:
            self.stop()
            raise

    def __enter__(self) -> RedisSentinel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Kills every process and removes their directories."""
        self.group.stop()

    @property
    def master_name(self) -> str:
        return MASTER_NAME

    @property
    def url(self) -> str:
        """`redis+sentinel://127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3/<master name>`."""
        return "redis+sentinel://" + ",".join(f"127.0.0.1:{port}" for _, port in self.sentinel_addresses()) + f"/{MASTER_NAME}"

    def sentinel_addresses(self) -> list[tuple[str, int]]:
        """(host, port) of every sentinel, as redis-py's Sentinel takes them."""
        return [("127.0.0.1", sentinel.port) for sentinel in self.sentinels]

    def primary(self) -> int:
        """The port of the current primary, as the first sentinel that answers reports it."""
        for sentinel in self.sentinels:
            try:
                return self._primary_according_to(sentinel)
            except Exception:  # noqa: BLE001  (ask the next one)
                continue
        raise AssertionError("no sentinel names a primary")

    def replicas(self) -> list[int]:
        """Ports of the running servers that are not the primary."""
        primary = self.primary()
        return [server.port for server in self._live_data() if server.port != primary]

    def server(self, port: int) -> RedisServer:
        """The primary or replica on `port`."""
        for server in self.data:
            if server.port == port:
                return server
        raise KeyError(f"no primary or replica on port {port}")

    def failover(self) -> int:
        """SENTINEL FAILOVER: waits until the sentinels name a new primary, it answers as one,
        and the old primary and the other replicas replicate from it. Returns its port."""
        old_primary = self.primary()
        self.sentinels[0].command("SENTINEL", "FAILOVER", MASTER_NAME)
        return self._wait_for_new_primary(old_primary, "a SENTINEL FAILOVER")

    def kill_primary(self) -> int:
        """Kills the primary as a crash would; waits until the sentinels have promoted a
        replica and the other replicas replicate from it. Returns the new primary's port."""
        old_primary = self.primary()
        self.server(old_primary).kill()
        self.killed.add(old_primary)
        return self._wait_for_new_primary(old_primary, "the primary was killed")

    def wait_until_settled(self) -> int:
        """Waits until every sentinel names the same running primary, which answers as one with
        every other running server as its replica (link up, not syncing), and every sentinel
        knows those replicas as healthy and knows the other sentinels. Returns the primary."""
        return wait_for("the sentinels and replicas to agree on the primary", self._settled)

    def _wait_for_new_primary(self, old_primary: int, after: str) -> int:
        def switched() -> int:
            self._demote_old_primary(old_primary)
            primary = self._settled()
            if primary == old_primary:
                raise NotYet(f"still {old_primary}")
            return primary

        return wait_for(f"a new primary after {after} (it was {old_primary})", switched)

    def _demote_old_primary(self, old_primary: int) -> None:
        """Once a sentinel names a new primary, makes a still running old primary its replica.
        The sentinels would do the same, but only some 10-20 s later (they re-check a former
        primary's role every 10 s, after 8 s of grace)."""
        if old_primary in self.killed:
            return
        for sentinel in self.sentinels:
            try:
                named = self._primary_according_to(sentinel)
            except Exception:  # noqa: BLE001  (ask the next one)
                continue
            if named != old_primary:
                old = self.server(old_primary)
                if old.info("replication").get("role") == "master":
                    old.command("REPLICAOF", "127.0.0.1", named)
                return

    def _settled(self) -> int:
        primary: int | None = None
        for sentinel in self.sentinels:
            named = self._primary_according_to(sentinel)
            if primary is None:
                primary = named
            elif primary != named:
                raise NotYet(f"sentinels disagree: {primary} versus {named} (sentinel {sentinel.port})")
            master = as_text_map(sentinel.command("SENTINEL", "MASTER", MASTER_NAME))
            if master.get("flags") != "master":
                raise NotYet(f"sentinel {sentinel.port} sees the primary as {master}")
            known = [as_text_map(entry) for entry in sentinel.command("SENTINEL", "REPLICAS", MASTER_NAME)]
            # Whom a replica follows is checked on the replica itself below: a sentinel
            # refreshes that only every 10 s.
            healthy = {entry.get("port") for entry in known if entry.get("flags") == "slave"}
            for replica in self._live_data():
                if replica.port != named and str(replica.port) not in healthy:
                    raise NotYet(f"sentinel {sentinel.port} does not know replica {replica.port} as healthy: {known}")
            peers = sentinel.command("SENTINEL", "SENTINELS", MASTER_NAME)
            if len(peers) + 1 != len(self.sentinels):
                raise NotYet(f"sentinel {sentinel.port} knows {len(peers)} other sentinels")
        if primary is None:
            raise AssertionError("there are no sentinels")
        if primary in self.killed:
            raise NotYet(f"the sentinels still name the killed {primary}")
        role = self.server(primary).info("replication")
        replicas = len(self._live_data()) - 1
        if role.get("role") != "master" or role.get("connected_slaves") != str(replicas):
            raise NotYet(f"primary {primary} is not a primary of {replicas} replicas: {role}")
        for replica in self._live_data():
            if replica.port == primary:
                continue
            link = replica.info("replication")
            following = (link.get("role"), link.get("master_port"), link.get("master_link_status"),
                         link.get("master_sync_in_progress")) == ("slave", str(primary), "up", "0")
            if not following:
                raise NotYet(f"{replica.port} does not replicate from {primary}: {link}")
        return primary

    def _primary_according_to(self, sentinel: RedisServer) -> int:
        address = sentinel.command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)
        if not address:
            raise NotYet(f"sentinel {sentinel.port} names no primary")
        return int(address[1])

    def _live_data(self) -> list[RedisServer]:
        return [server for server in self.data if server.port not in self.killed]
