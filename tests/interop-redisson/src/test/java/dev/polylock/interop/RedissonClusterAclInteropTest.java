package dev.polylock.interop;

import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/**
 * Redisson in cluster mode and polylock ({@code peer}) connected as a Redis user who may not run
 * {@code INFO} (as on managed services): polylock learns the cluster's pub/sub mode from its
 * {@code SPUBLISH} probe, not from {@code INFO}, so it waits with {@code SSUBSCRIBE} and publishes
 * with {@code SPUBLISH} as Redisson does, and each side's release wakes the other side's waiter.
 * (Deciding from {@code INFO} fell back to broadcast mode there, and the wake-ups were lost.)
 */
class RedissonClusterAclInteropTest {
    private static final long LEASE_S = 60;
    private static final Duration PROMPTLY = Duration.ofSeconds(10);
    private static final Duration BOUND = Duration.ofSeconds(30);

    private static RedisCluster cluster;
    private static RedissonClient redisson;
    private static Peer peer;
    private static ExecutorService javaThreads;

    @BeforeAll
    static void start() throws Exception {
        cluster = RedisCluster.start();
        for (RedisCluster.Node node : cluster.nodes()) {
            assertEquals("OK", cluster.server(node.port()).command(
                    "ACL", "SETUSER", "noinfo", "on", ">secret", "~*", "&*", "+@all", "-info"));
        }
        redisson = Interop.redissonCluster(cluster.nodeAddresses());
        peer = Peer.start(cluster.url().replaceFirst("://", "://noinfo:secret@"));
        javaThreads = Interop.daemonThreads("java-acl-waiter");
    }

    @AfterAll
    static void stop() throws Exception {
        Interop.stopAll(javaThreads, Arrays.asList(peer), Arrays.asList(redisson), null);
        if (cluster != null) {
            cluster.close();
        }
    }

    @Test
    void aPolylockWaiterWithoutInfoWakesWhenRedissonUnlocks() throws Exception {
        String name = "acl:redisson-holds";
        RLock lock = redisson.getLock(name);
        lock.lock(LEASE_S, SECONDS);
        peer.send("acquire " + name + " " + BOUND.toMillis() + " -");
        String channel = "redisson_lock__channel:{" + name + "}";
        awaitShardSubscribers(channel, 1);

        long unlockedAt = System.nanoTime();
        lock.unlock();
        assertEquals("ok true", peer.awaitReply(BOUND));
        Duration woken = Duration.ofNanos(System.nanoTime() - unlockedAt);
        assertTrue(woken.compareTo(PROMPTLY) < 0, "polylock acquired " + woken
                + " after Redisson's unlock; with a 60 s lease it was not woken by the message");
        assertEquals("ok", peer.call("release " + name));
    }

    @Test
    void aRedissonWaiterWakesWhenPolylockWithoutInfoReleases() throws Exception {
        String name = "acl:polylock-holds";
        assertEquals("ok true", peer.call("acquire " + name + " 0 " + LEASE_S * 1000));
        Future<Boolean> waiter = javaThreads.submit(
                () -> redisson.getLock(name).tryLock(BOUND.toSeconds(), LEASE_S, SECONDS));
        awaitShardSubscribers("redisson_lock__channel:{" + name + "}", 1);

        long releasedAt = System.nanoTime();
        assertEquals("ok", peer.call("release " + name));
        assertTrue(waiter.get(BOUND.toSeconds(), SECONDS), "Redisson's tryLock must succeed after polylock's release");
        Duration after = Duration.ofNanos(System.nanoTime() - releasedAt);
        assertTrue(after.compareTo(PROMPTLY) < 0, "Redisson's waiter got the lock " + after
                + " after polylock's release; with a 60 s lease it was not woken by the message");
        redisson.getLock(name).forceUnlock();
    }

    /** Waits until the nodes count {@code expected} shard subscribers of {@code channel}. */
    private static void awaitShardSubscribers(String channel, long expected) throws Exception {
        long deadline = System.nanoTime() + PROMPTLY.toNanos();
        long seen = -1;
        while (System.nanoTime() < deadline) {
            seen = 0;
            for (RedisCluster.Node node : cluster.nodes()) {
                List<?> reply = (List<?>) cluster.server(node.port()).command("PUBSUB", "SHARDNUMSUB", channel);
                seen += (Long) reply.get(1);
            }
            if (seen == expected) {
                return;
            }
            Thread.sleep(20);
        }
        fail("shard subscribers of " + channel + ": " + seen + ", expected " + expected);
    }
}
