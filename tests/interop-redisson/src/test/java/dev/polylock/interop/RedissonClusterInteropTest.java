package dev.polylock.interop;

import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.redisson.api.RBucket;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;

/**
 * Redisson in cluster mode and polylock ({@code peer} with a {@code redis+cluster://} URL) on one
 * 3-primary Redis 7 cluster: the plain and the fair lock exclude each other both ways, and each
 * side's release wakes the other side's waiter through sharded pub/sub (SSUBSCRIBE/SPUBLISH on
 * the node that serves the lock's slot). On Redis 6.2, which has no sharded pub/sub, both sides
 * subscribe with SUBSCRIBE and publish with PUBLISH, which reaches every node (the server
 * matrix runs this suite on each server). The lock names spread over every primary.
 *
 * <p>"Promptly" means long before the holder's 60 s lease would have let a waiter in by expiry.
 * Every primary's MONITOR log goes to {@code target/redisson-<version>/monitor/cluster_<port>.log}.
 */
class RedissonClusterInteropTest {
    private static final long LEASE_S = 60;
    private static final Duration PROMPTLY = Duration.ofSeconds(10);
    private static final Duration BOUND = Duration.ofSeconds(30);

    /** The two lock kinds both clients share, as each names them. */
    enum Kind {
        PLAIN(""), FAIR("fair_");

        /** The peer's command prefix. */
        final String command;

        Kind(String command) {
            this.command = command;
        }

        RLock redissonLock(String name) {
            return this == PLAIN ? redisson.getLock(name) : redisson.getFairLock(name);
        }

        /** The channel a waiter {@code owner} listens on (PROTOCOL.md: the fair lock tells the head). */
        String waiterChannel(String name, String owner) {
            String channel = tagged("redisson_lock__channel", name);
            return this == PLAIN ? channel : channel + ":" + owner;
        }
    }

    /**
     * Per kind, three names whose slots lie in the three slot ranges {@code redis-cli --cluster
     * create} hands to three primaries (one name has a hash tag); {@link
     * #theLockNamesSpreadOverEveryPrimary} checks that they do.
     */
    private static final Map<Kind, List<String>> REDISSON_HOLDS = Map.of(
            Kind.PLAIN, List.of("plain:redisson-holds:2", "plain{eu}:redisson-holds", "plain:redisson-holds:4"),
            Kind.FAIR, List.of("fair:redisson-holds:3", "fair{eu}:redisson-holds", "fair:redisson-holds:4"));
    private static final Map<Kind, List<String>> POLYLOCK_HOLDS = Map.of(
            Kind.PLAIN, List.of("plain:polylock-holds:3", "plain:polylock-holds:1", "plain{us}:polylock-holds"),
            Kind.FAIR, List.of("fair:polylock-holds:2", "fair:polylock-holds:1", "fair{us}:polylock-holds"));

    private static RedisCluster cluster;
    /** The Java service under test, in cluster mode. */
    private static RedissonClient redisson;
    private static Peer peer;
    private static ExecutorService javaThreads;

    @BeforeAll
    static void start() throws Exception {
        cluster = RedisCluster.start();
        for (RedisCluster.Node node : cluster.nodes()) {
            if (node.primary()) {
                cluster.server(node.port()).recordCommands(Path.of(
                        System.getProperty("monitor.dir", "target/monitor"), "cluster_" + node.port() + ".log"));
            }
        }
        redisson = Interop.redissonCluster(cluster.nodeAddresses());
        // Its fair waiters look again only every 2 min without a message: past the 60 s lease.
        peer = Peer.startWithFairQueueTimeout(cluster.url(), Duration.ofMinutes(4));
        javaThreads = Interop.daemonThreads("java-cluster-waiter");
    }

    @AfterAll
    static void stop() throws Exception {
        Interop.stopAll(javaThreads, Arrays.asList(peer), Arrays.asList(redisson), null);
        if (cluster != null) {
            cluster.close();
        }
    }

    static Stream<Arguments> redissonHolds() {
        return names(REDISSON_HOLDS);
    }

    static Stream<Arguments> polylockHolds() {
        return names(POLYLOCK_HOLDS);
    }

    private static Stream<Arguments> names(Map<Kind, List<String>> names) {
        return Stream.of(Kind.values()).flatMap(kind -> names.get(kind).stream().map(name -> Arguments.of(kind, name)));
    }

    // --- 0. The names below reach every primary ---------------------------------------------------

    @Test
    void theLockNamesSpreadOverEveryPrimary() throws Exception {
        Set<Integer> primaries = cluster.nodes().stream().filter(RedisCluster.Node::primary)
                .map(RedisCluster.Node::port).collect(Collectors.toCollection(TreeSet::new));
        assertEquals(3, primaries.size());
        for (Map<Kind, List<String>> direction : List.of(REDISSON_HOLDS, POLYLOCK_HOLDS)) {
            for (Kind kind : Kind.values()) {
                Set<Integer> used = new TreeSet<>();
                for (String name : direction.get(kind)) {
                    used.add(cluster.primaryForKey(name));
                }
                assertEquals(primaries, used, kind + " names " + direction.get(kind) + " must reach every primary");
            }
        }
    }

    // --- 1. Redisson holds; polylock fails at once, then waits and is woken by Redisson's unlock --

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("redissonHolds")
    void polylockWaiterWakesWhenRedissonUnlocks(Kind kind, String name) throws Exception {
        RLock lock = kind.redissonLock(name);
        lock.lock(LEASE_S, SECONDS);
        String javaOwner = javaOwner(Thread.currentThread().getId());
        assertLockHashOnItsPrimary(name, Map.of(javaOwner, "1"));

        assertEquals("ok false", peer.call(kind.command + "acquire " + name + " 0 -"),
                "polylock must not get a lock Redisson holds");
        assertEquals("ok true", peer.call(kind.command + "is_locked " + name));
        String peerOwner = Interop.ok(peer.call(kind.command + "owner " + name));
        assertTrue(peerOwner.startsWith(peer.clientId() + ":"), peerOwner);

        peer.send(kind.command + "acquire " + name + " " + BOUND.toMillis() + " -");
        if (kind == Kind.FAIR) {
            awaitTrue(() -> queue(name).equals(List.of(peerOwner)), () -> "queue " + queue(name));
        }
        String channel = kind.waiterChannel(name, peerOwner);
        awaitTrue(() -> waiterSubscriptions(channel) == 1, () -> "subscribers of " + channel
                + " per node: " + subscribersPerNode(WAITER_NUMSUB, channel));
        if (RedisServer.hasShardedPubsub()) {
            // On 6.2 there is only SUBSCRIBE, which WAITER_NUMSUB counted above.
            assertEquals(0, subscribersPerNode("NUMSUB", channel).values().stream().mapToLong(Long::longValue).sum(),
                    "on a Redis 7 cluster polylock's waiter subscribes with SSUBSCRIBE, not SUBSCRIBE");
        }
        assertNull(peer.pollReply(Duration.ofMillis(300)), "polylock must not get the lock while Redisson holds it");

        long unlockedAt = System.nanoTime();
        lock.unlock();
        String reply = peer.awaitReply(BOUND);
        Duration woken = since(unlockedAt);

        assertEquals("ok true", reply);
        assertTrue(woken.compareTo(PROMPTLY) < 0, "polylock acquired " + woken
                + " after Redisson's unlock; with a 60 s lease it was not woken by the message");
        assertLockHashOnItsPrimary(name, Map.of(peerOwner, "1"));
        if (kind == Kind.FAIR) {
            assertEquals(List.of(), queue(name), "the new holder left the queue");
        }
        assertTrue(lock.isLocked());
        assertFalse(lock.tryLock(0, LEASE_S, SECONDS), "Redisson must not get the lock polylock now holds");
        assertEquals("ok", peer.call(kind.command + "release " + name));
        assertFalse(lock.isLocked(), "the last release deletes the key");
    }

    // --- 2. polylock holds (reentrant); Redisson fails at once, then waits and is woken ----------

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("polylockHolds")
    void redissonWaiterWakesWhenPolylockReleases(Kind kind, String name) throws Exception {
        RLock lock = kind.redissonLock(name);
        assertEquals("ok true", peer.call(kind.command + "acquire " + name + " 0 " + LEASE_S * 1000));
        assertEquals("ok true", peer.call(kind.command + "acquire " + name + " 0 " + LEASE_S * 1000));
        assertEquals("ok 2", peer.call(kind.command + "hold_count " + name));
        String peerOwner = Interop.ok(peer.call(kind.command + "owner " + name));
        assertLockHashOnItsPrimary(name, Map.of(peerOwner, "2"));

        assertFalse(lock.tryLock(0, LEASE_S, SECONDS), "Redisson must not get a lock polylock holds");
        assertTrue(lock.isLocked());
        assertFalse(lock.isHeldByCurrentThread());
        assertEquals(0, lock.getHoldCount(), "this Java thread holds nothing");
        long ttl = lock.remainTimeToLive();
        assertTrue(ttl > 0 && ttl <= LEASE_S * 1000, "polylock's 60 s lease as Redisson sees it: " + ttl);

        assertEquals("ok", peer.call(kind.command + "release " + name));
        assertLockHashOnItsPrimary(name, Map.of(peerOwner, "1"));
        assertFalse(lock.tryLock(0, LEASE_S, SECONDS), "still held once after one of two releases");

        CompletableFuture<Long> waiterThread = new CompletableFuture<>();
        Future<Woken> waiter = javaThreads.submit(() -> {
            waiterThread.complete(Thread.currentThread().getId());
            return Woken.now(kind.redissonLock(name).tryLock(BOUND.toSeconds(), LEASE_S, SECONDS));
        });
        String javaOwner = javaOwner(waiterThread.get(PROMPTLY.toSeconds(), SECONDS));
        if (kind == Kind.FAIR) {
            awaitTrue(() -> queue(name).equals(List.of(javaOwner)), () -> "queue " + queue(name));
        }
        String channel = kind.waiterChannel(name, javaOwner);
        awaitTrue(() -> waiterSubscriptions(channel) == 1, () -> "subscribers of " + channel
                + " per node: " + subscribersPerNode(WAITER_NUMSUB, channel));
        assertThrows(TimeoutException.class, () -> waiter.get(300, MILLISECONDS),
                "the Java waiter must block while polylock holds the lock");

        long releasedAt = System.nanoTime();
        assertEquals("ok", peer.call(kind.command + "release " + name));
        Woken woken = waiter.get(BOUND.toSeconds(), SECONDS);
        Duration after = Duration.ofNanos(woken.atNanos - releasedAt);

        assertTrue(woken.acquired, "Redisson's tryLock must succeed after polylock's release");
        assertTrue(after.compareTo(PROMPTLY) < 0, "Redisson's waiter got the lock " + after
                + " after polylock's release; with a 60 s lease it was not woken by the message");
        assertLockHashOnItsPrimary(name, Map.of(javaOwner, "1"));
        if (kind == Kind.FAIR) {
            assertEquals(List.of(), queue(name), "Redisson's new holder left the queue");
        }
        assertEquals("ok true", peer.call(kind.command + "is_locked " + name));
        assertEquals("ok false", peer.call(kind.command + "acquire " + name + " 0 -"));

        lock.unlockAsync(woken.threadId).get(PROMPTLY.toSeconds(), SECONDS);
        assertEquals("ok false", peer.call(kind.command + "is_locked " + name));
    }

    // --- 3. Exclusion under load: a Java thread and the peer on one counter ----------------------

    @ParameterizedTest
    @EnumSource(Kind.class)
    void nonAtomicIncrementsStayExactUnderTheSharedLock(Kind kind) throws Exception {
        String name = kind.name().toLowerCase() + ":counter-lock";
        String counterKey = kind.name().toLowerCase() + ":counter";
        int perWorker = 50;

        Future<Void> javaWorker = javaThreads.submit(() -> {
            RLock lock = kind.redissonLock(name);
            RBucket<String> counter = redisson.getBucket(counterKey, StringCodec.INSTANCE);
            for (int i = 0; i < perWorker; i++) {
                lock.lock(LEASE_S, SECONDS);
                try {
                    String value = counter.get();
                    counter.set(Integer.toString((value == null ? 0 : Integer.parseInt(value)) + 1));
                } finally {
                    lock.unlock();
                }
            }
            return null;
        });
        peer.send(kind.command + "increment " + name + " " + counterKey + " " + perWorker);

        Duration bound = Duration.ofSeconds(60);
        long start = System.nanoTime();
        assertEquals("ok", peer.awaitReply(bound));
        javaWorker.get(Math.max(1, bound.minus(since(start)).toMillis()), MILLISECONDS);

        assertEquals(String.valueOf(2 * perWorker),
                cluster.server(cluster.primaryForKey(counterKey)).command("GET", counterKey),
                "only mutual exclusion keeps 2 x " + perWorker + " non-atomic increments exact");
        assertFalse(kind.redissonLock(name).isLocked(), "both released");
        if (kind == Kind.FAIR) {
            assertEquals(List.of(), queue(name), "every waiter left the queue");
        }
    }

    // --- helpers ---------------------------------------------------------------------------------

    private record Woken(boolean acquired, long atNanos, long threadId) {
        static Woken now(boolean acquired) {
            return new Woken(acquired, System.nanoTime(), Thread.currentThread().getId());
        }
    }

    /** {@code prefix:{name}}, or {@code prefix:name} when the name has a hash tag (PROTOCOL.md). */
    private static String tagged(String prefix, String name) {
        return name.contains("{") ? prefix + ":" + name : prefix + ":{" + name + "}";
    }

    private static String javaOwner(long threadId) {
        return redisson.getId() + ":" + threadId;
    }

    /**
     * The lock hash is {@code expected} on the primary that serves its slot, and every other
     * primary redirects a read of it there (MOVED).
     */
    private static void assertLockHashOnItsPrimary(String name, Map<String, String> expected) throws IOException {
        int slot = cluster.slotForKey(name);
        int home = cluster.primaryForSlot(slot);
        assertEquals(expected, pairs(cluster.server(home).command("HGETALL", name)),
                name + " (slot " + slot + ") on its primary " + home);
        for (RedisCluster.Node node : cluster.nodes()) {
            if (node.primary() && node.port() != home) {
                IOException moved = assertThrows(IOException.class,
                        () -> cluster.server(node.port()).command("HGETALL", name));
                assertTrue(moved.getMessage().startsWith("MOVED " + slot + " "), moved.getMessage());
            }
        }
    }

    /** The fair lock's queue LIST, head first, read on its slot's primary. */
    private static List<String> queue(String name) {
        String key = tagged("redisson_lock_queue", name);
        try {
            List<?> items = (List<?>) cluster.server(cluster.primaryForKey(key)).command("LRANGE", key, 0, -1);
            return items.stream().map(String::valueOf).collect(Collectors.toList());
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** How waiters subscribe: sharded (SSUBSCRIBE) from Redis 7 on, plain (SUBSCRIBE) on 6.2. */
    private static final String WAITER_NUMSUB = RedisServer.hasShardedPubsub() ? "SHARDNUMSUB" : "NUMSUB";

    private static long waiterSubscriptions(String channel) {
        return subscribersPerNode(WAITER_NUMSUB, channel).values().stream().mapToLong(Long::longValue).sum();
    }

    /** {@code PUBSUB <numsub> channel} on every node (primaries and replicas), by port. */
    private static Map<Integer, Long> subscribersPerNode(String numsub, String channel) {
        Map<Integer, Long> counts = new TreeMap<>();
        try {
            for (RedisCluster.Node node : cluster.nodes()) {
                List<?> reply = (List<?>) cluster.server(node.port()).command("PUBSUB", numsub, channel);
                counts.put(node.port(), (Long) reply.get(1));
            }
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        return counts;
    }

    private static Map<String, String> pairs(Object reply) {
        List<?> items = (List<?>) reply;
        Map<String, String> map = new HashMap<>();
        for (int i = 0; i + 1 < items.size(); i += 2) {
            String field = String.valueOf(items.get(i));
            // polylock's own fields beside the owners' (docs/PROTOCOL.md): Redisson never reads them.
            if (!field.startsWith("polylock:")) {
                map.put(field, String.valueOf(items.get(i + 1)));
            }
        }
        return map;
    }

    /** Waits (bounded by {@link #PROMPTLY}) until {@code condition} holds. */
    private static void awaitTrue(BooleanSupplier condition, Supplier<String> seen) throws InterruptedException {
        long deadline = System.nanoTime() + PROMPTLY.toNanos();
        while (System.nanoTime() < deadline) {
            if (condition.getAsBoolean()) {
                return;
            }
            Thread.sleep(20);
        }
        fail("gave up after " + PROMPTLY + "; last saw " + seen.get());
    }

    private static Duration since(long startNanos) {
        return Duration.ofNanos(System.nanoTime() - startNanos);
    }
}
