package dev.polylock.interop;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * A Redis Cluster of real servers ({@link RedisServer}): N primaries with R replicas each,
 * created with {@code redis-cli --cluster create}; returned once every node reports
 * {@code cluster_state:ok}, all agree on the slot map and every replica replicates. Nodes are
 * named by port. {@link #close()} stops them all.
 */
final class RedisCluster implements AutoCloseable {
    private static final long WAIT_TIMEOUT_MS = 30_000;
    /**
     * A 2 s node timeout replaces a killed primary within a few seconds yet does not fail a
     * live node on a busy machine; validity factor 0 lets any replica take over; no replica
     * migration keeps the layout; a full sync starts at once.
     */
    private static final List<String> NODE_ARGS = List.of("--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
            "--cluster-replica-validity-factor", "0", "--cluster-allow-replica-migration", "no",
            "--repl-diskless-sync-delay", "0");

    /** One node as the cluster sees it (a line of CLUSTER NODES). */
    record Node(int port, String id, boolean primary, String primaryId, List<String> slots, boolean failed) {
        boolean servesSlot(int slot) {
            for (String range : slots) {
                String[] bounds = range.split("-");
                int first = Integer.parseInt(bounds[0]);
                int last = Integer.parseInt(bounds[bounds.length - 1]);
                if (first <= slot && slot <= last) {
                    return true;
                }
            }
            return false;
        }
    }

    private final List<RedisServer> servers = new ArrayList<>();
    private final Set<Integer> killed = new HashSet<>();

    private RedisCluster() {}

    /** 3 primaries with 1 replica each. */
    static RedisCluster start() throws Exception {
        return start(3, 1);
    }

    static RedisCluster start(int primaries, int replicasPerPrimary) throws Exception {
        RedisCluster cluster = new RedisCluster();
        try {
            for (int i = 0; i < primaries * (1 + replicasPerPrimary); i++) {
                cluster.servers.add(RedisServer.start(NODE_ARGS));
            }
            List<String> create = new ArrayList<>(List.of(RedisServer.cliProgram(), "--cluster", "create"));
            for (RedisServer server : cluster.servers) {
                create.add("127.0.0.1:" + server.port());
            }
            create.addAll(List.of("--cluster-replicas", Integer.toString(replicasPerPrimary), "--cluster-yes"));
            Process redisCli = new ProcessBuilder(create).redirectErrorStream(true).start();
            String output = new String(redisCli.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!redisCli.waitFor(60, TimeUnit.SECONDS) || redisCli.exitValue() != 0) {
                throw new IllegalStateException("redis-cli --cluster create failed:\n" + output);
            }
            cluster.waitFor("a new cluster of " + primaries + " primaries with " + replicasPerPrimary
                    + " replicas each", () -> {
                List<Node> nodes = cluster.settled();
                long primaryCount = nodes.stream().filter(Node::primary).count();
                boolean complete = primaryCount == primaries && nodes.stream().filter(Node::primary)
                        .allMatch(primary -> nodes.stream()
                                .filter(node -> primary.id().equals(node.primaryId())).count() == replicasPerPrimary);
                if (!complete) {
                    throw new IllegalStateException("layout " + nodes);
                }
                return null;
            });
        } catch (Exception | Error failure) {
            cluster.close();
            throw failure;
        }
        return cluster;
    }

    /** {@code redis://127.0.0.1:p} of every running node: Redisson's cluster node addresses. */
    List<String> nodeAddresses() {
        return liveServers().stream().map(RedisServer::url).collect(Collectors.toList());
    }

    /** {@code redis+cluster://127.0.0.1:p1,127.0.0.1:p2,...}: every running node as a seed. */
    String url() {
        return "redis+cluster://" + liveServers().stream().map(server -> "127.0.0.1:" + server.port())
                .collect(Collectors.joining(","));
    }

    /** The nodes as a running node sees them (killed ones included, marked failed). */
    List<Node> nodes() throws IOException {
        return parseNodes((String) liveServers().get(0).command("CLUSTER", "NODES"));
    }

    RedisServer server(int port) {
        return servers.stream().filter(server -> server.port() == port).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("no cluster node on port " + port));
    }

    int slotForKey(String key) throws IOException {
        return ((Long) liveServers().get(0).command("CLUSTER", "KEYSLOT", key)).intValue();
    }

    int primaryForKey(String key) throws IOException {
        return primaryForSlot(slotForKey(key));
    }

    int primaryForSlot(int slot) throws IOException {
        List<Node> nodes = nodes();
        return nodes.stream().filter(node -> node.primary() && !node.failed() && node.servesSlot(slot))
                .findFirst().map(Node::port)
                .orElseThrow(() -> new IllegalStateException("no primary serves slot " + slot + ": " + nodes));
    }

    /** The port of a running replica of {@code primary}. */
    int replicaOf(int primary) throws IOException {
        List<Node> nodes = nodes();
        String id = nodes.stream().filter(node -> node.port() == primary).findFirst().orElseThrow().id();
        return nodes.stream().filter(node -> id.equals(node.primaryId()) && !killed.contains(node.port()))
                .findFirst().map(Node::port)
                .orElseThrow(() -> new IllegalStateException("primary " + primary + " has no running replica"));
    }

    /**
     * Kills the node as a crash would; waits until the cluster marks it failed, a replica has
     * taken over its slots if it was a primary, and the cluster is ok again.
     */
    void kill(int port) throws Exception {
        server(port).kill();
        killed.add(port);
        waitFor("the cluster to mark node " + port + " failed and replace it if it was a primary", this::settled);
    }

    /** CLUSTER FAILOVER sent to {@code replica}: waits until it is a primary and all agree. */
    void failover(int replica) throws Exception {
        server(replica).command("CLUSTER", "FAILOVER");
        waitFor("replica " + replica + " to take over", () -> {
            List<Node> nodes = settled();
            if (nodes.stream().noneMatch(node -> node.port() == replica && node.primary())) {
                throw new IllegalStateException(nodes.toString());
            }
            return null;
        });
    }

    @Override
    public void close() throws InterruptedException {
        for (RedisServer server : servers) {
            server.close();
        }
    }

    private List<RedisServer> liveServers() {
        return servers.stream().filter(server -> !killed.contains(server.port())).collect(Collectors.toList());
    }

    /** The agreed nodes, or throws with what disagrees. */
    private List<Node> settled() throws IOException {
        String agreed = null;
        int agreedBy = 0;
        for (RedisServer server : liveServers()) {
            String info = (String) server.command("CLUSTER", "INFO");
            if (!info.contains("cluster_state:ok")) {
                throw new IllegalStateException("node " + server.port() + " is not ok: " + info);
            }
            String view = comparableView((String) server.command("CLUSTER", "NODES"));
            if (agreed == null) {
                agreed = view;
                agreedBy = server.port();
            } else if (!agreed.equals(view)) {
                throw new IllegalStateException("nodes " + agreedBy + " and " + server.port() + " disagree:\n"
                        + agreed + "\n-- versus --\n" + view);
            }
        }
        List<Node> nodes = parseNodes(agreed);
        for (Node node : nodes) {
            boolean isKilled = killed.contains(node.port());
            if (node.failed() != isKilled) {
                throw new IllegalStateException("node " + node.port() + " is " + (isKilled ? "killed" : "running")
                        + " yet marked " + (node.failed() ? "failed" : "not failed") + ": " + agreed);
            }
            if (!node.primary() && !isKilled) {
                String link = (String) server(node.port()).command("INFO", "replication");
                if (!link.contains("master_link_status:up")) {
                    throw new IllegalStateException("replica " + node.port() + " is not linked: " + link);
                }
            }
        }
        return nodes;
    }

    /**
     * CLUSTER NODES reduced to what all nodes must agree on, one sorted line per node, in the
     * same columns with those each node fills in for itself blanked; throws while a node is being
     * met or only suspected down ({@code fail?}), or a slot is migrating.
     */
    private static String comparableView(String text) {
        List<String> lines = new ArrayList<>();
        for (String line : text.split("\n")) {
            String[] fields = line.trim().split("\\s+");
            if (fields.length < 8) {
                continue;
            }
            List<String> flags = new ArrayList<>(List.of(fields[2].split(",")));
            flags.remove("myself");
            for (String unsettled : List.of("handshake", "noaddr", "fail?")) {
                if (flags.contains(unsettled)) {
                    throw new IllegalStateException("a node is in state " + unsettled + ": " + line);
                }
            }
            List<String> slots = List.of(fields).subList(8, fields.length);
            if (slots.stream().anyMatch(slot -> slot.startsWith("["))) {
                throw new IllegalStateException("a slot is migrating: " + line);
            }
            lines.add(String.join(" ", fields[0], fields[1], String.join(",", flags), fields[3], "- - - -",
                    String.join(" ", slots)).trim());
        }
        lines.sort(null);
        return String.join("\n", lines);
    }

    private static List<Node> parseNodes(String text) {
        List<Node> nodes = new ArrayList<>();
        for (String line : text.split("\n")) {
            String[] fields = line.trim().split("\\s+");
            if (fields.length < 8) {
                continue;
            }
            String address = fields[1].split("@")[0];
            int port = Integer.parseInt(address.substring(address.lastIndexOf(':') + 1));
            List<String> flags = List.of(fields[2].split(","));
            nodes.add(new Node(port, fields[0], flags.contains("master"), fields[3],
                    List.of(fields).subList(8, fields.length), flags.contains("fail")));
        }
        return nodes;
    }

    private interface Check<T> {
        T run() throws Exception;
    }

    /** Retries {@code check} every 50 ms for at most 30 s; then fails with what it last saw. */
    private <T> T waitFor(String what, Check<T> check) throws Exception {
        long deadline = System.currentTimeMillis() + WAIT_TIMEOUT_MS;
        while (true) {
            try {
                return check.run();
            } catch (IllegalStateException | IOException seen) {
                if (System.currentTimeMillis() >= deadline) {
                    throw new AssertionError("gave up after " + WAIT_TIMEOUT_MS / 1000 + " s waiting for " + what
                            + "; last saw: " + seen.getMessage(), seen);
                }
            }
            Thread.sleep(50);
        }
    }
}
