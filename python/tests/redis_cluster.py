"""A Redis Cluster of real servers (`polylock-testkit up cluster` through redis_server.py): N
primaries with R replicas each, created with `redis-cli --cluster create`, and the faults a
test needs: killing a node
(its replica takes over), a manual failover, a live slot migration. Nodes are named by port;
every change waits until all running nodes agree."""

from __future__ import annotations

from collections.abc import Sequence

from dataclasses import dataclass

from redis_server import Deployment, NotYet, RedisServer, server_arguments, tls_arguments, wait_for

# Beside the launcher's own cluster arguments (validity factor 0: any replica may take over
# however long it was cut off): a 2 s node timeout replaces a killed primary within a few
# seconds yet does not fail a live node on a busy machine; no replica migration keeps the
# layout a test set up; a full sync starts at once.
NODE_ARGS = (
    "--cluster-node-timeout", "2000",
    "--cluster-allow-replica-migration", "no", "--repl-diskless-sync-delay", "0",
)

PRIMARY = "primary"
REPLICA = "replica"


@dataclass
class ClusterNode:
    """One node as the cluster sees it (a line of CLUSTER NODES)."""

    port: int
    id: str
    role: str  # PRIMARY or REPLICA
    primary_port: int | None  # the primary a replica follows
    slots: list[str]  # ranges as CLUSTER NODES writes them: "0-5460", "7000"
    failed: bool  # the cluster agreed that it is down (flag `fail`)

    def serves_slot(self, slot: int) -> bool:
        for text in self.slots:
            first, _, last = text.partition("-")
            if int(first) <= slot <= int(last or first):
                return True
        return False


class RedisCluster:
    """`with RedisCluster() as cluster:` 3 primaries with 1 replica each, killed at the end."""

    def __init__(
        self, primaries: int = 3, replicas_per_primary: int = 1,
        tls_files: str | None = None, tls_auth_clients: bool = False,
        extra: Sequence[str] = (),
    ) -> None:
        """With `tls_files` (make_tls_files) every node also serves TLS (`tls_url`), the cluster
        bus and replication use TLS, and TLS clients are told the TLS ports; client
        certificates are required when `tls_auth_clients`. `extra`: more arguments of every
        node (without TLS)."""
        if primaries < 3:
            raise ValueError("redis-cli --cluster create needs 3 primaries or more")
        self.killed: set[int] = set()
        tls = [] if tls_files is None else tls_arguments(tls_files, tls_auth_clients)
        self.group = Deployment(
            "cluster", f"--primaries={primaries}", f"--replicas={replicas_per_primary}", *tls,
            *server_arguments((*NODE_ARGS, *extra)),
        )
        try:

            def complete() -> None:
                nodes = self._settled()
                primary_ports = [node.port for node in nodes if node.role == PRIMARY]
                layout_ok = len(primary_ports) == primaries and all(
                    sum(node.primary_port == port for node in nodes) == replicas_per_primary
                    for port in primary_ports
                )
                if not layout_ok:
                    raise NotYet(f"layout {nodes}")

            wait_for(f"a new cluster of {primaries} primaries with {replicas_per_primary} replicas each", complete)
        except BaseException:
            self.stop()
            raise

    def __enter__(self) -> RedisCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Kills every node and removes their directories."""
        self.group.stop()

    @property
    def url(self) -> str:
        """`redis+cluster://127.0.0.1:p1,127.0.0.1:p2,...`: every running node as a seed."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.ports())

    @property
    def tls_url(self) -> str:
        """`rediss+cluster://...`: every running node's TLS port (started with `tls_files`)."""
        ports = [server.tls_port for server in self._live_servers()]
        return "rediss+cluster://" + ",".join(f"127.0.0.1:{port}" for port in ports)

    def ports(self) -> list[int]:
        """Ports of the running nodes (seeds for redis-py's RedisCluster)."""
        return [server.port for server in self._live_servers()]

    def nodes(self) -> list[ClusterNode]:
        """The nodes as a running node sees them (killed ones included, marked `failed`)."""
        return parse_nodes(self._live_servers()[0].command("CLUSTER", "NODES").decode())

    def primaries(self) -> list[int]:
        return [node.port for node in self.nodes() if node.role == PRIMARY and node.port not in self.killed]

    def replicas(self) -> list[int]:
        return [node.port for node in self.nodes() if node.role == REPLICA and node.port not in self.killed]

    def server(self, port: int) -> RedisServer:
        """The node on `port` (for commands, `kill_clients`...)."""
        for server in self.group.servers:
            if server.port == port:
                return server
        raise KeyError(f"no cluster node on port {port}")

    def slot_for_key(self, key: str) -> int:
        return int(self._live_servers()[0].command("CLUSTER", "KEYSLOT", key))

    def primary_for_key(self, key: str) -> int:
        return self.primary_for_slot(self.slot_for_key(key))

    def primary_for_slot(self, slot: int) -> int:
        nodes = self.nodes()
        for node in nodes:
            if node.role == PRIMARY and not node.failed and node.serves_slot(slot):
                return node.port
        raise AssertionError(f"no primary serves slot {slot}: {nodes}")

    def replica_of(self, primary: int) -> int:
        """The port of a running replica of `primary`."""
        nodes = self.nodes()
        for node in nodes:
            if node.primary_port == primary and node.port not in self.killed:
                return node.port
        raise AssertionError(f"primary {primary} has no running replica: {nodes}")

    def kill(self, port: int) -> None:
        """Kills the node as a crash would; waits until the cluster marks it failed, a replica
        has taken over its slots if it was a primary, and the cluster is ok again."""
        self.server(port).kill()
        self.killed.add(port)
        wait_for(f"the cluster to mark node {port} failed and replace it if it was a primary", self._settled)

    def restart(self, port: int) -> None:
        """Starts a killed node again with its nodes.conf: it rejoins (a former primary as a
        replica of the node that took over). Waits until the cluster agrees."""
        self.server(port).restart()
        self.killed.discard(port)
        wait_for(f"restarted node {port} to rejoin", self._settled)

    def failover(self, replica: int) -> None:
        """CLUSTER FAILOVER sent to `replica`: waits until it is a primary, its old primary (if
        running) replicates from it, and the cluster agrees."""
        old_primary = next(node.primary_port for node in self.nodes() if node.port == replica)
        if old_primary is None:
            raise AssertionError(f"node {replica} is not a replica")
        assert self.server(replica).command("CLUSTER", "FAILOVER") in (True, b"OK")

        def switched() -> None:
            nodes = {node.port: node for node in self._settled()}
            promoted = nodes[replica].role == PRIMARY
            demoted = old_primary in self.killed or nodes[old_primary].primary_port == replica
            if not (promoted and demoted):
                raise NotYet(f"{list(nodes.values())}")

        wait_for(f"replica {replica} to take over from primary {old_primary}", switched)

    def migrate_slot(self, slot: int, to: int) -> None:
        """Moves `slot` with its keys to primary `to` while the cluster serves it, as
        `redis-cli --cluster reshard` does: IMPORTING on the target, MIGRATING on the source,
        MIGRATE of every key, then SETSLOT NODE on every primary. Waits until all agree."""
        self.wait_until_settled()
        source = self.primary_for_slot(slot)
        if source == to:
            return
        ids = {node.port: node.id for node in self.nodes() if node.role == PRIMARY}
        self.server(to).command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source])
        self.server(source).command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to])
        while keys := self.server(source).command("CLUSTER", "GETKEYSINSLOT", slot, 100):
            self.server(source).command("MIGRATE", "127.0.0.1", to, "", 0, 5000, "KEYS", *keys)
        # The target first, so that it owns the slot before the source redirects to it.
        for primary in [to, source, *(port for port in self.primaries() if port not in (to, source))]:
            self.server(primary).command("CLUSTER", "SETSLOT", slot, "NODE", ids[to])

        def moved() -> None:
            owners = [node.port for node in self._settled() if node.role == PRIMARY and node.serves_slot(slot)]
            if owners != [to]:
                raise NotYet(f"slot {slot} is served by {owners}")

        wait_for(f"the cluster to agree that {to} serves slot {slot}", moved)

    def wait_until_settled(self) -> None:
        """Waits until every running node reports cluster_state:ok, all see the same nodes,
        roles and slots (killed nodes marked failed, nothing in handshake or migration), and
        every running replica's link to its primary is up."""
        wait_for("the cluster to agree", self._settled)

    def _live_servers(self) -> list[RedisServer]:
        return [server for server in self.group.servers if server.port not in self.killed]

    def _settled(self) -> list[ClusterNode]:
        agreed: tuple[int, str] | None = None
        for server in self._live_servers():
            info = server.command("CLUSTER", "INFO").decode()
            if "cluster_state:ok" not in info.split():
                raise NotYet(f"node {server.port} is not ok: {info}")
            view = comparable_view(server.command("CLUSTER", "NODES").decode())
            if agreed is None:
                agreed = (server.port, view)
            elif agreed[1] != view:
                raise NotYet(f"nodes {agreed[0]} and {server.port} disagree:\n{agreed[1]}\n-- versus --\n{view}")
        if agreed is None:
            raise AssertionError("every node was killed")
        nodes = parse_nodes(agreed[1])
        for node in nodes:
            killed = node.port in self.killed
            if node.failed != killed:
                raise NotYet(f"node {node.port} is {'killed' if killed else 'running'} yet marked "
                             f"{'failed' if node.failed else 'not failed'}: {agreed[1]}")
            if node.role == REPLICA and not killed:
                link = self.server(node.port).info("replication")
                if link.get("master_link_status") != "up":
                    raise NotYet(f"replica {node.port} is not linked: {link}")
        missing = set(self.ports()) - {node.port for node in nodes}
        if missing:
            raise NotYet(f"nodes {missing} are missing: {agreed[1]}")
        return nodes


def comparable_view(text: str) -> str:
    """CLUSTER NODES reduced to what all nodes must agree on, one sorted line per node, in the
    same columns (so parse_nodes reads it) with those each node fills in for itself (ping
    times, epoch, link state) blanked. NotYet while a node is being met or only suspected
    down (`fail?`), or a slot is migrating."""
    lines = []
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        flags = [flag for flag in fields[2].split(",") if flag != "myself"]
        unsettled = {"handshake", "noaddr", "fail?"} & set(flags)
        if unsettled:
            raise NotYet(f"a node is in state {unsettled}: {line}")
        if any(slot.startswith("[") for slot in fields[8:]):
            raise NotYet(f"a slot is migrating: {line}")
        lines.append(" ".join([fields[0], fields[1], ",".join(flags), fields[3], "- - - -", *fields[8:]]))
    return "\n".join(sorted(lines))


def parse_nodes(text: str) -> list[ClusterNode]:
    rows = [line.split() for line in text.splitlines() if line.strip()]
    port_of = {fields[0]: int(fields[1].split("@")[0].rsplit(":", 1)[1]) for fields in rows}
    nodes = []
    for fields in rows:
        flags = fields[2].split(",")
        role = PRIMARY if "master" in flags else REPLICA
        nodes.append(ClusterNode(
            port=port_of[fields[0]],
            id=fields[0],
            role=role,
            primary_port=port_of.get(fields[3]) if role == REPLICA else None,
            slots=fields[8:],
            failed="fail" in flags,
        ))
    return nodes
