package dev.polylock.interop;

import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeoutException;
import java.util.regex.Pattern;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RType;
import org.redisson.api.RTopic;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;

/**
 * A polylock lock (driven through the {@code peer} example) and a Redisson RLock on the same
 * name exclude each other, wake each other's waiters, and read each other's reentrancy counts.
 *
 * <p>Timing assertions are deliberately loose: a waiter woken by the unlock message must get the
 * lock long before the holder's 60 s lease would have let it in by expiry.
 */
class RedissonInteropTest {
    /** The holder's lease: a waiter that is not woken by a message waits this long. */
    private static final long LEASE_S = 60;
    /** "Promptly": far below the lease, far above any scheduling hiccup on a loaded machine. */
    private static final Duration PROMPTLY = Duration.ofSeconds(10);
    /** Upper bound for any single wait in these tests (still below the lease). */
    private static final Duration BOUND = Duration.ofSeconds(30);
    /** {@code <uuid v4>:<holder id>}, the hash field both sides write (PROTOCOL.md, Identity). */
    private static final Pattern OWNER = Pattern.compile(
            "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}:[0-9]+");

    private RedisServer server;
    private Peer peer;
    /** The Java service under test: takes and waits for locks. */
    private RedissonClient redisson;
    /** A second client that only reads raw data and counts subscribers; never locks. */
    private RedissonClient observer;
    private ExecutorService javaThreads;

    @BeforeEach
    void start(TestInfo test) throws Exception {
        server = RedisServer.start();
        server.recordCommands(Interop.monitorLog(test, ""));
        redisson = connect();
        observer = connect();
        peer = Peer.start(server.url());
        javaThreads = Interop.daemonThreads("java-waiter");
    }

    private RedissonClient connect() {
        return Interop.redisson(server.url());
    }

    @AfterEach
    void stop() throws Exception {
        Interop.stopAll(javaThreads, Arrays.asList(peer),
                Arrays.asList(redisson, observer), server);
    }

    // --- 1. Redisson holds, a polylock waiter is woken by Redisson's unlock message -------------

    @ParameterizedTest
    @ValueSource(strings = {"interop:orders:42", "interop{eu}:jobs:7"})
    void polylockWaiterWakesWhenRedissonUnlocks(String name) throws Exception {
        RLock lock = redisson.getLock(name);
        lock.lock(LEASE_S, SECONDS);

        peer.send("acquire " + name + " - -");
        // The polylock waiter listens on the very channel Redisson publishes on.
        awaitSubscribers(channel(name), 1);
        assertNull(peer.pollReply(Duration.ofMillis(300)),
                "polylock must not get the lock while Redisson holds it");

        long unlockedAt = System.nanoTime();
        lock.unlock();
        String reply = peer.awaitReply(BOUND);
        Duration woken = since(unlockedAt);

        assertEquals("ok true", reply);
        assertTrue(woken.compareTo(PROMPTLY) < 0,
                "polylock acquired " + woken + " after Redisson's unlock; a 60 s lease means it was not woken by the message");
        String peerOwner = Interop.ok(peer.call("owner " + name));
        assertEquals(Map.of(peerOwner, "1"), Interop.rawHash(observer, name));
        assertFalse(lock.tryLock(0, LEASE_S, SECONDS), "Redisson must not get the lock polylock now holds");
        assertEquals("ok", peer.call("release " + name));
        assertFalse(exists(name), "the last release deletes the key");
    }

    // --- 2. polylock holds: Redisson's tryLock fails, then succeeds after polylock's release ----

    @Test
    void redissonTryLockFailsWhilePolylockHoldsAndSucceedsAfterRelease() throws Exception {
        String name = "interop:exclusion";
        RLock lock = redisson.getLock(name);
        assertEquals("ok true", peer.call("acquire " + name + " 0 -"));

        assertFalse(lock.tryLock(0, LEASE_S, SECONDS), "Redisson must not get a lock polylock holds");
        assertFalse(lock.tryLock(), "Redisson must not get a lock polylock holds (watchdog lease)");
        assertTrue(lock.isLocked());
        assertFalse(lock.isHeldByCurrentThread());

        assertEquals("ok", peer.call("release " + name));
        assertFalse(lock.isLocked(), "polylock's last release must delete the key");
        assertTrue(lock.tryLock(0, LEASE_S, SECONDS), "Redisson gets the lock once polylock released it");
        assertTrue(lock.isHeldByCurrentThread());
        assertEquals("ok false", peer.call("acquire " + name + " 0 -"),
                "polylock must not get a lock Redisson holds");
        assertEquals("ok true", peer.call("is_locked " + name));

        lock.unlock();
        assertEquals("ok false", peer.call("is_locked " + name));
        assertEquals("ok true", peer.call("acquire " + name + " 0 -"));
        assertEquals("ok", peer.call("release " + name));
    }

    // --- 3. Reentrancy counts and owner fields, written by one side and read by the other -------

    @Test
    void redissonReadsPolylockReentrancyCount() throws Exception {
        String name = "interop:reentrant:polylock";
        RLock lock = redisson.getLock(name);
        assertEquals("ok true", peer.call("acquire " + name + " 0 -"));
        assertEquals("ok true", peer.call("acquire " + name + " 0 -"));
        assertEquals("ok 2", peer.call("hold_count " + name));

        String peerOwner = Interop.ok(peer.call("owner " + name));
        assertTrue(OWNER.matcher(peerOwner).matches(), "owner field '" + peerOwner + "' is not <uuid>:<id>");
        assertTrue(peerOwner.startsWith(peer.clientId() + ":"), "owner field must start with the client id");
        assertEquals(RType.MAP, observer.getKeys().getType(name), "the lock is a Redis hash");
        assertEquals(Map.of(peerOwner, "2"), Interop.rawHash(observer, name), "one owner field, holding the count");
        Map<String, String> stored = Interop.storedHash(observer, name);
        assertEquals(3, stored.size(), "the owner and one level field per acquisition: " + stored);
        assertEquals(2, stored.keySet().stream().filter(field -> field.startsWith("polylock:level:")).count(), stored.toString());
        long ttl = observer.getMap(name, StringCodec.INSTANCE).remainTimeToLive();
        assertTrue(ttl > 0 && ttl <= 30_000, "watchdog lease of 30 s expected, PTTL " + ttl);

        assertTrue(lock.isLocked());
        assertEquals(0, lock.getHoldCount(), "this Java thread holds nothing");
        assertFalse(lock.tryLock(), "Redisson must not enter polylock's hold");

        assertEquals("ok", peer.call("release " + name));
        assertEquals(Map.of(peerOwner, "1"), Interop.rawHash(observer, name));
        assertFalse(lock.tryLock(), "still held once after one of two releases");

        assertEquals("ok", peer.call("release " + name));
        assertFalse(exists(name), "the last release deletes the key");
        assertTrue(lock.tryLock(0, LEASE_S, SECONDS));
        lock.unlock();
    }

    @Test
    void polylockReadsRedissonReentrancyCount() throws Exception {
        String name = "interop:reentrant:redisson";
        RLock lock = redisson.getLock(name);
        lock.lock();
        lock.lock();
        assertEquals(2, lock.getHoldCount());

        String javaOwner = javaOwner(Thread.currentThread().getId());
        assertTrue(OWNER.matcher(javaOwner).matches(), "Redisson's owner '" + javaOwner + "' is not <uuid>:<id>");
        assertEquals(Map.of(javaOwner, "2"), Interop.rawHash(observer, name), "Redisson writes <client id>:<thread id> -> count");

        assertEquals("ok true", peer.call("is_locked " + name));
        assertEquals("ok false", peer.call("acquire " + name + " 0 -"));
        assertTrue(peer.call("release " + name).startsWith("err NotHeld"),
                "polylock must refuse to release a lock Redisson holds");
        assertEquals(Map.of(javaOwner, "2"), Interop.rawHash(observer, name), "a refused release leaves the count alone");

        lock.unlock();
        assertEquals(Map.of(javaOwner, "1"), Interop.rawHash(observer, name));
        assertEquals("ok true", peer.call("is_locked " + name), "still held after one of two unlocks");
        assertEquals("ok false", peer.call("acquire " + name + " 0 -"));

        lock.unlock();
        assertEquals("ok false", peer.call("is_locked " + name), "free after Redisson's second unlock");
        assertEquals("ok true", peer.call("acquire " + name + " 0 -"));
        assertEquals("ok", peer.call("release " + name));
    }

    // --- 4. polylock's force_unlock wakes a Redisson waiter blocked in lock() -------------------

    @Test
    void polylockForceUnlockWakesBlockedRedissonWaiter() throws Exception {
        String name = "interop:force";
        RLock holder = redisson.getLock(name);
        holder.lock(LEASE_S, SECONDS);

        Future<Woken> waiter = javaThreads.submit(() -> {
            redisson.getLock(name).lock();
            return Woken.now(true);
        });
        awaitSubscribers(channel(name), 1);
        assertThrows(TimeoutException.class, () -> waiter.get(300, MILLISECONDS),
                "the Java waiter must block while the lock is held");

        long forcedAt = System.nanoTime();
        assertEquals("ok true", peer.call("force_unlock " + name));
        Woken woken = waiter.get(BOUND.toSeconds(), SECONDS);
        Duration after = Duration.ofNanos(woken.atNanos - forcedAt);

        assertTrue(after.compareTo(PROMPTLY) < 0,
                "Redisson's waiter got the lock " + after + " after force_unlock; not woken by the message");
        assertEquals(Map.of(javaOwner(woken.threadId), "1"), Interop.rawHash(observer, name), "the waiter's thread now holds it");
        assertThrows(IllegalMonitorStateException.class, holder::unlock,
                "the first holder's lock was deleted by force_unlock");
        assertEquals("ok false", peer.call("acquire " + name + " 0 -"));
    }

    // --- 5. polylock's release wakes a Redisson waiter blocked in tryLock(wait, lease) ----------

    @ParameterizedTest
    @ValueSource(strings = {"interop:orders:43", "interop{eu}:jobs:8"})
    void polylockReleaseWakesBlockedRedissonWaiter(String name) throws Exception {
        assertEquals("ok true", peer.call("acquire " + name + " 0 " + LEASE_S * 1000));

        Future<Woken> waiter = javaThreads.submit(() ->
                Woken.now(redisson.getLock(name).tryLock(BOUND.toSeconds(), LEASE_S, SECONDS)));
        awaitSubscribers(channel(name), 1);
        BlockingQueue<String> messages = new LinkedBlockingQueue<>();
        RTopic topic = observer.getTopic(channel(name), StringCodec.INSTANCE);
        topic.addListener(String.class, (channel, message) -> messages.add(message));
        awaitSubscribers(channel(name), 2);
        assertThrows(TimeoutException.class, () -> waiter.get(300, MILLISECONDS),
                "the Java waiter must block while polylock holds the lock");

        long releasedAt = System.nanoTime();
        assertEquals("ok", peer.call("release " + name));
        Woken woken = waiter.get(BOUND.toSeconds(), SECONDS);
        Duration after = Duration.ofNanos(woken.atNanos - releasedAt);

        assertTrue(woken.acquired, "Redisson's tryLock must succeed after polylock's release");
        assertTrue(after.compareTo(PROMPTLY) < 0,
                "Redisson's waiter got the lock " + after + " after polylock's release; not woken by the message");
        assertEquals("0", messages.poll(PROMPTLY.toMillis(), MILLISECONDS),
                "polylock's release publishes the unlock message 0 on " + channel(name));
        assertEquals(Map.of(javaOwner(woken.threadId), "1"), Interop.rawHash(observer, name));
        assertEquals("ok false", peer.call("acquire " + name + " 0 -"));
    }

    // --- 6. A polylock release that tells a polylock waiter directly still wakes Redisson's ------

    @Test
    void polylockReleaseThatTellsItsOwnWaiterStillWakesRedissonWaiter() throws Exception {
        String name = "interop:told";
        assertEquals("ok true", peer.call("acquire " + name + " 0 " + LEASE_S * 1000));
        // A polylock waiter listed first, listening on its own channel, that never comes to take
        // the lock (as a paused process would): the release tells it and keeps the lock for it.
        String told = tagged("polylock_lock_told", name) + ":ghost";
        BlockingQueue<String> toldMessages = new LinkedBlockingQueue<>();
        observer.getTopic(told, StringCodec.INSTANCE)
                .addListener(String.class, (channel, message) -> toldMessages.add(message));
        awaitSubscribers(told, 1);
        observer.getScoredSortedSet(tagged("polylock_lock_waiters", name), StringCodec.INSTANCE).add(0, "ghost");
        // ... and marks the lock hash as a waiter registering beside a holder does (PROTOCOL.md,
        // "The waiters mark"): a release reads the list only when the mark is there.
        observer.getMap(name, StringCodec.INSTANCE).put("polylock:waiters", "1");

        Future<Woken> waiter = javaThreads.submit(() ->
                Woken.now(redisson.getLock(name).tryLock(BOUND.toSeconds(), LEASE_S, SECONDS)));
        awaitSubscribers(channel(name), 1);
        BlockingQueue<String> messages = new LinkedBlockingQueue<>();
        observer.getTopic(channel(name), StringCodec.INSTANCE)
                .addListener(String.class, (channel, message) -> messages.add(message));
        awaitSubscribers(channel(name), 2);
        assertThrows(TimeoutException.class, () -> waiter.get(300, MILLISECONDS),
                "the Java waiter must block while polylock holds the lock");

        long releasedAt = System.nanoTime();
        assertEquals("ok", peer.call("release " + name));
        Woken woken = waiter.get(BOUND.toSeconds(), SECONDS);
        Duration after = Duration.ofNanos(woken.atNanos - releasedAt);

        assertEquals("0", toldMessages.poll(PROMPTLY.toMillis(), MILLISECONDS), "the listed waiter was told");
        assertEquals("00", messages.poll(PROMPTLY.toMillis(), MILLISECONDS),
                "the shared channel gets 00, which Redisson reads as the unlock message 0");
        assertTrue(woken.acquired, "Redisson's tryLock must succeed after polylock's release");
        assertTrue(after.compareTo(PROMPTLY) < 0,
                "Redisson's waiter got the lock " + after + " after polylock's release; not woken by 00");
        assertEquals(Map.of(javaOwner(woken.threadId), "1"), Interop.rawHash(observer, name));
    }

    // --- helpers ---------------------------------------------------------------------------------

    /** When a Java waiter returned from its lock call, on which thread, and whether it got the lock. */
    private record Woken(boolean acquired, long atNanos, long threadId) {
        static Woken now(boolean acquired) {
            return new Woken(acquired, System.nanoTime(), Thread.currentThread().getId());
        }
    }

    /** The lock channel as PROTOCOL.md defines it, computed independently of both clients. */
    private static String channel(String name) {
        return name.contains("{") ? "redisson_lock__channel:" + name : "redisson_lock__channel:{" + name + "}";
    }

    private String javaOwner(long threadId) {
        return redisson.getId() + ":" + threadId;
    }

    private boolean exists(String name) {
        return observer.getKeys().countExists(name) == 1;
    }

    /** Waits (bounded) until {@code count} connections subscribe to {@code channel} (PUBSUB NUMSUB). */
    private static String tagged(String prefix, String name) {
        return name.contains("{") ? prefix + ":" + name : prefix + ":{" + name + "}";
    }

    private void awaitSubscribers(String channel, long count) throws InterruptedException {
        long deadline = System.nanoTime() + PROMPTLY.toNanos();
        long seen = 0;
        while (System.nanoTime() < deadline) {
            seen = observer.getTopic(channel).countSubscribers();
            if (seen >= count) {
                return;
            }
            Thread.sleep(20);
        }
        fail(count + " subscriber(s) expected on " + channel + ", found " + seen);
    }

    private static Duration since(long startNanos) {
        return Duration.ofNanos(System.nanoTime() - startNanos);
    }
}
