package dev.polylock.interop;

import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.Arrays;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.TimeoutException;
import java.util.stream.LongStream;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.redisson.api.RBucket;
import org.redisson.api.RFencedLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;

/**
 * A polylock fenced lock (the {@code peer} example's {@code fenced_} commands) and a Redisson
 * RFencedLock on the same name share one lock hash and one token counter: they exclude each
 * other, wake each other's waiters, and the tokens they take, interleaved, reentrant ones
 * included, are one strictly increasing sequence.
 *
 * <p>As in {@link RedissonInteropTest}, "promptly" means long before the holder's 60 s lease
 * would have let a waiter in by expiry.
 */
class RedissonFencedLockInteropTest {
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
        server.recordCommands(Interop.monitorLog(test, "fenced_"));
        redisson = Interop.redisson(server.url());
        observer = Interop.redisson(server.url());
        peer = Peer.start(server.url());
        javaThreads = Interop.daemonThreads("java-fenced-waiter");
    }

    @AfterEach
    void stop() throws Exception {
        Interop.stopAll(javaThreads, Arrays.asList(peer),
                Arrays.asList(redisson, observer), server);
    }

    // --- 1. Tokens taken in turn by Java and polylock: one sequence, both ways excluded ---------

    @ParameterizedTest
    @ValueSource(strings = {"fenced:orders:42", "fenced{eu}:jobs:7"})
    void interleavedTokensStayStrictlyIncreasingAndEachSideExcludesTheOther(String name) throws Exception {
        RFencedLock lock = redisson.getFencedLock(name);
        List<Long> tokens = new ArrayList<>();

        // Java takes the lock and re-enters it: a token each time.
        tokens.add(lock.tryLockAndGetToken(0, LEASE_S, SECONDS));
        tokens.add(lock.lockAndGetToken());
        assertEquals(tokens.get(1), counter(name), "Redisson's counter is " + tokenKey(name));
        String javaOwner = redisson.getId() + ":" + Thread.currentThread().getId();
        assertEquals(Map.of(javaOwner, "2"), Interop.rawHash(observer, name));

        // polylock is excluded, and a refused attempt takes no token.
        assertEquals("ok false", peer.call("fenced_acquire " + name + " 0 -"));
        assertEquals("ok -", peer.call("fenced_token " + name));
        assertEquals(tokens.get(1), counter(name));
        lock.unlock();
        assertEquals("ok false", peer.call("fenced_acquire " + name + " 0 -"), "Java still holds one level");
        lock.unlock();

        // polylock takes the lock and re-enters it, continuing Java's sequence.
        assertEquals("ok true", peer.call("fenced_acquire " + name + " 0 -"));
        tokens.add(token(name));
        assertEquals("ok true", peer.call("fenced_acquire " + name + " 0 " + LEASE_S * 1000));
        tokens.add(token(name));
        assertEquals(tokens.get(3), lock.getToken(), "Redisson's getToken reads the counter polylock increments");
        String peerOwner = Interop.ok(peer.call("fenced_owner " + name));
        assertEquals(Map.of(peerOwner, "2"), Interop.rawHash(observer, name));

        // Java is excluded, and a refused attempt takes no token.
        assertNull(lock.tryLockAndGetToken(0, LEASE_S, SECONDS), "Redisson must not get a lock polylock holds");
        assertFalse(lock.tryLock(), "Redisson must not get a lock polylock holds");
        assertTrue(lock.isLocked());
        assertEquals(tokens.get(3), counter(name));
        assertEquals("ok", peer.call("fenced_release " + name));
        assertNull(lock.tryLockAndGetToken(0, LEASE_S, SECONDS), "polylock still holds one level");
        assertEquals(tokens.get(3), Long.valueOf(Interop.ok(peer.call("fenced_token " + name))),
                "a partial release keeps the hold's latest token");
        assertEquals("ok", peer.call("fenced_release " + name));
        assertFalse(lock.isLocked(), "polylock's last release deletes the lock hash");

        // Java again, through both of its acquire paths: lock() takes a token too.
        tokens.add(lock.tryLockAndGetToken(0, LEASE_S, SECONDS));
        lock.lock();
        tokens.add(lock.getToken());
        lock.unlock();
        lock.unlock();

        // And polylock once more.
        assertEquals("ok true", peer.call("fenced_acquire " + name + " 0 -"));
        tokens.add(token(name));
        assertEquals("ok", peer.call("fenced_release " + name));

        // One token per acquisition, whoever took it: 1, 2, 3, ... with no gap and no repeat.
        List<Long> expected = LongStream.rangeClosed(1, tokens.size()).boxed().toList();
        assertEquals(expected, tokens, "the tokens in the order they were taken");
        RBucket<String> counter = observer.getBucket(tokenKey(name), StringCodec.INSTANCE);
        assertEquals(String.valueOf(tokens.size()), counter.get());
        assertEquals(-1, counter.remainTimeToLive(), "the counter never expires");
    }

    // --- 2. Each side's release wakes the other's waiter, which takes the next token ------------

    @ParameterizedTest
    @ValueSource(strings = {"fenced:orders:43", "fenced{eu}:jobs:8"})
    void eachSidesReleaseWakesTheOthersWaiterWithTheNextToken(String name) throws Exception {
        RFencedLock lock = redisson.getFencedLock(name);
        Long javaToken = lock.tryLockAndGetToken(0, LEASE_S, SECONDS);
        assertNotNull(javaToken);

        peer.send("fenced_acquire " + name + " - -");
        Interop.awaitSubscribers(observer, channel(name), 1);
        assertNull(peer.pollReply(Duration.ofMillis(300)), "polylock must wait while Redisson holds the lock");
        long unlockedAt = System.nanoTime();
        lock.unlock();
        assertEquals("ok true", peer.awaitReply(BOUND));
        Duration woken = Duration.ofNanos(System.nanoTime() - unlockedAt);
        assertTrue(woken.compareTo(PROMPTLY) < 0, "polylock acquired " + woken + " after Redisson's unlock");
        long polylockToken = token(name);
        assertEquals(javaToken + 1, polylockToken);
        // The polylock holder stays subscribed (its handle keeps its channels for its next wait).
        Interop.awaitSubscribers(observer, channel(name), 1);

        Future<Long> waiter = javaThreads.submit(() ->
                redisson.getFencedLock(name).tryLockAndGetToken(BOUND.toSeconds(), LEASE_S, SECONDS));
        Interop.awaitSubscribers(observer, channel(name), 2);
        assertThrows(TimeoutException.class, () -> waiter.get(300, MILLISECONDS),
                "the Java waiter must wait while polylock holds the lock");
        long releasedAt = System.nanoTime();
        assertEquals("ok", peer.call("fenced_release " + name));
        Long next = waiter.get(BOUND.toSeconds(), SECONDS);
        Duration after = Duration.ofNanos(System.nanoTime() - releasedAt);
        assertTrue(after.compareTo(PROMPTLY) < 0, "Redisson acquired " + after + " after polylock's release");
        assertEquals(Long.valueOf(polylockToken + 1), next);
        assertEquals("ok false", peer.call("fenced_acquire " + name + " 0 -"));
    }

    // --- helpers ---------------------------------------------------------------------------------

    /** The token counter as PROTOCOL.md defines it, computed independently of both clients. */
    private static String tokenKey(String name) {
        return name.contains("{") ? "redisson_lock_token:" + name : "redisson_lock_token:{" + name + "}";
    }

    private static String channel(String name) {
        return name.contains("{") ? "redisson_lock__channel:" + name : "redisson_lock__channel:{" + name + "}";
    }

    /** Redisson's token counter as stored (GET), or null when there is none. */
    private Long counter(String name) {
        String value = observer.<String>getBucket(tokenKey(name), StringCodec.INSTANCE).get();
        return value == null ? null : Long.valueOf(value);
    }

    /** The token of the peer's current hold. */
    private long token(String name) throws Exception {
        return Long.parseLong(Interop.ok(peer.call("fenced_token " + name)));
    }

}
