package dev.polylock.interop;

import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.TimeoutException;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * A polylock read-write lock (the {@code peer} example's {@code read_} and {@code write_}
 * commands) and a Redisson RReadWriteLock on the same name share one hash: readers of both
 * share it, a writer of either excludes the other's readers and writers, and each side's
 * release wakes the other's waiters. "Promptly" means long before a 60 s lease would expire.
 */
class RedissonReadWriteLockInteropTest {
    private static final long LEASE_S = 60;
    private static final Duration PROMPTLY = Duration.ofSeconds(10);
    private static final Duration BOUND = Duration.ofSeconds(30);

    private RedisServer server;
    private Peer peer;
    private RedissonClient redisson;
    /** Reads raw data and counts subscribers; never locks. */
    private RedissonClient observer;
    private ExecutorService javaThreads;

    @BeforeEach
    void start(TestInfo test) throws Exception {
        server = RedisServer.start();
        server.recordCommands(Interop.monitorLog(test, "rwlock_"));
        redisson = Interop.redisson(server.url());
        observer = Interop.redisson(server.url());
        peer = Peer.start(server.url());
        javaThreads = Interop.daemonThreads("java-rwlock-waiter");
    }

    @AfterEach
    void stop() throws Exception {
        Interop.stopAll(javaThreads, Arrays.asList(peer), Arrays.asList(redisson, observer), server);
    }

    // --- 1. Readers of both sides share; a writer of either side waits for both ------------------

    @ParameterizedTest
    @ValueSource(strings = {"rw:catalog", "rw{eu}:catalog"})
    void javaAndPolylockReadersShareAndAWriterWaitsForBoth(String name) throws Exception {
        RReadWriteLock javaLock = redisson.getReadWriteLock(name);
        assertTrue(javaLock.readLock().tryLock(0, LEASE_S, SECONDS));
        assertEquals("ok true", peer.call("read_acquire " + name + " 0 -"), "readers share across clients");
        assertEquals("read", Interop.rawHash(observer, name).get("mode"));
        assertEquals(3, Interop.rawHash(observer, name).size(), "mode plus one reader field per side: " + Interop.rawHash(observer, name));

        // Neither side's writer gets in while either reads.
        assertFalse(tryWriteInJava(name), "a Java writer must wait for the readers");
        Peer writer = Peer.start(server.url());
        try {
            assertEquals("ok false", writer.call("write_acquire " + name + " 0 -"));
            writer.send("write_acquire " + name + " - -");
            Interop.awaitSubscribers(observer, channel(name), 1);
            javaLock.readLock().unlock();
            assertNull(writer.pollReply(Duration.ofMillis(300)), "the polylock reader still reads");
            long releasedAt = System.nanoTime();
            assertEquals("ok", peer.call("read_release " + name));
            assertEquals("ok true", writer.awaitReply(BOUND));
            assertPrompt(releasedAt, "polylock writer after the last read release");
            assertEquals("write", Interop.rawHash(observer, name).get("mode"));

            // The polylock writer excludes Java readers and writers, and its release wakes a
            // waiting Java reader.
            assertFalse(tryReadInJava(name), "a Java reader must wait for the polylock writer");
            assertFalse(tryWriteInJava(name), "a Java writer must wait for the polylock writer");
            Future<Boolean> reader = javaThreads.submit(() -> {
                RLock read = redisson.getReadWriteLock(name).readLock();
                boolean got = read.tryLock(BOUND.toSeconds(), LEASE_S, SECONDS);
                if (got) {
                    read.unlock();
                }
                return got;
            });
            Interop.awaitSubscribers(observer, channel(name), 1);
            assertThrows(TimeoutException.class, () -> reader.get(300, MILLISECONDS));
            long writeReleasedAt = System.nanoTime();
            assertEquals("ok", writer.call("write_release " + name));
            assertTrue(reader.get(BOUND.toSeconds(), SECONDS));
            assertPrompt(writeReleasedAt, "Java reader after the polylock write release");
        } finally {
            writer.close();
        }
        assertTrue(Interop.rawHash(observer, name).isEmpty(), "every hold released: " + Interop.rawHash(observer, name));
    }

    // --- 2. A Java writer: polylock readers wait and are woken by its release --------------------

    @ParameterizedTest
    @ValueSource(strings = {"rw:orders", "rw{eu}:orders"})
    void aJavaWriteReleaseWakesPolylockReaders(String name) throws Exception {
        RLock javaWrite = redisson.getReadWriteLock(name).writeLock();
        assertTrue(javaWrite.tryLock(0, LEASE_S, SECONDS));
        assertEquals("ok false", peer.call("read_acquire " + name + " 0 -"));
        assertEquals("ok false", peer.call("write_acquire " + name + " 0 -"));
        Peer second = Peer.start(server.url());
        try {
            peer.send("read_acquire " + name + " - -");
            second.send("read_acquire " + name + " - -");
            Interop.awaitSubscribers(observer, channel(name), 2);
            assertNull(peer.pollReply(Duration.ofMillis(300)), "polylock readers wait for the Java writer");
            long releasedAt = System.nanoTime();
            javaWrite.unlock();
            assertEquals("ok true", peer.awaitReply(BOUND));
            assertEquals("ok true", second.awaitReply(BOUND));
            assertPrompt(releasedAt, "both polylock readers after the Java write release");
            assertEquals("read", Interop.rawHash(observer, name).get("mode"));
            assertFalse(tryWriteInJava(name), "Java's writer waits for the polylock readers");
            assertEquals("ok", peer.call("read_release " + name));
            assertEquals("ok", second.call("read_release " + name));
        } finally {
            second.close();
        }
        assertTrue(tryWriteInJava(name), "the lock is free once both readers left");
    }

    // --- 3. Reentrancy and downgrade, seen by the other side --------------------------------------

    @ParameterizedTest
    @ValueSource(strings = {"rw:profile", "rw{eu}:profile"})
    void aPolylockWriterThatDowngradesLetsJavaReadersInOnlyAfterItsWriteRelease(String name) throws Exception {
        assertEquals("ok true", peer.call("write_acquire " + name + " 0 -"));
        assertEquals("ok true", peer.call("write_acquire " + name + " 0 -"), "the writer re-enters");
        assertEquals("ok true", peer.call("read_acquire " + name + " 0 -"), "the writer may read");
        String owner = Interop.ok(peer.call("write_owner " + name));
        assertEquals("2", Interop.rawHash(observer, name).get(owner + ":write"), "Redisson's writer field counts levels");
        assertEquals("1", Interop.rawHash(observer, name).get(owner), "the reader field of the same owner");
        assertFalse(tryReadInJava(name), "Java readers wait while polylock writes");
        assertEquals("ok", peer.call("write_release " + name));
        assertFalse(tryReadInJava(name), "one write level is still held");
        assertEquals("ok", peer.call("write_release " + name));
        assertEquals("read", Interop.rawHash(observer, name).get("mode"), "the last write release leaves a read hold");
        assertTrue(tryReadInJava(name), "after the downgrade Java reads beside polylock");
        assertFalse(tryWriteInJava(name));
        assertEquals("ok", peer.call("read_release " + name));
        assertTrue(Interop.rawHash(observer, name).isEmpty(), "the polylock read release deleted the hash: " + Interop.rawHash(observer, name));
    }

    // --- 4. Redisson's watchdog renewal of a read lock that a polylock reader holds twice --------

    /**
     * A Redisson reader without a lease is kept alive by Redisson's watchdog, whose renewal script
     * walks every reader's level keys ({@code {name}:<owner>:rwlock_timeout:<level>}). In Redisson
     * 3.52.0 that script reuses its outer loop variable for the levels, so once any reader holds
     * two levels the renewal fails ("Can't update locks ... expiration"), the Java reader's level
     * key lapses, and the last polylock read release deletes the hash under the live Java reader.
     * Redisson 4 fixed the script; this checks the fix holds with a re-entered polylock reader.
     */
    @Test
    void aJavaWatchdogReaderKeepsItsHoldWhileAPolylockReaderHoldsTwoLevels() throws Exception {
        assumeTrue(Interop.redissonMajorVersion() >= 4,
                "Redisson 3.x fails this renewal (docs/redisson.md, \"Read-write lock\")");
        String name = "rw:watchdog";
        long watchdogMs = 1_500;
        Config config = new Config();
        config.setLockWatchdogTimeout(watchdogMs);
        config.useSingleServer().setAddress(server.url());
        RedissonClient watchdogClient = Redisson.create(config);
        try {
            assertEquals("ok true", peer.call("read_acquire " + name + " 0 60000"));
            assertEquals("ok true", peer.call("read_acquire " + name + " 0 60000"), "the polylock reader re-enters");
            javaThreads.submit(() -> watchdogClient.getReadWriteLock(name).readLock().lock()).get(BOUND.toSeconds(), SECONDS);
            // Past several watchdog timeouts: only renewals keep the Java reader's level key.
            Thread.sleep(3 * watchdogMs);
            assertEquals("ok", peer.call("read_release " + name));
            assertEquals("ok", peer.call("read_release " + name));
            Map<String, String> hash = Interop.rawHash(observer, name);
            assertEquals("read", hash.get("mode"), "the Java reader still holds the lock: " + hash);
            assertEquals(2, hash.size(), "mode plus the Java reader's field: " + hash);
            assertFalse(tryWriteInJava(name), "a writer must wait for the watchdog-renewed Java reader");
        } finally {
            watchdogClient.shutdown(0, 2, SECONDS);
        }
    }

    // --- helpers ---------------------------------------------------------------------------------

    private void assertPrompt(long sinceNanos, String what) {
        Duration after = Duration.ofNanos(System.nanoTime() - sinceNanos);
        assertTrue(after.compareTo(PROMPTLY) < 0, what + " took " + after);
    }

    /** Tries (no wait) a Java read and releases it at once on the same thread. */
    private boolean tryReadInJava(String name) throws Exception {
        return javaThreads.submit(() -> {
            RLock read = redisson.getReadWriteLock(name).readLock();
            boolean got = read.tryLock(0, LEASE_S, SECONDS);
            if (got) {
                read.unlock();
            }
            return got;
        }).get(BOUND.toSeconds(), SECONDS);
    }

    /** Tries (no wait) a Java write and releases it at once on the same thread. */
    private boolean tryWriteInJava(String name) throws Exception {
        return javaThreads.submit(() -> {
            RLock write = redisson.getReadWriteLock(name).writeLock();
            boolean got = write.tryLock(0, LEASE_S, SECONDS);
            if (got) {
                write.unlock();
            }
            return got;
        }).get(BOUND.toSeconds(), SECONDS);
    }

    private static String channel(String name) {
        return name.contains("{") ? "redisson_rwlock:" + name : "redisson_rwlock:{" + name + "}";
    }

}
