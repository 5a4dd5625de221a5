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
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeoutException;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RLock;
import org.redisson.api.RTopic;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;

/**
 * A polylock fair lock (the {@code peer} example's {@code fair_} commands) and a Redisson
 * RFairLock on the same name share one queue: they exclude each other, each release wakes the
 * head of the queue on its own channel, whichever client it belongs to, and waiters of both
 * kinds get the lock in the order they queued.
 *
 * <p>As in {@link RedissonInteropTest}, "promptly" means long before the holder's 60 s lease
 * would have let a waiter in by expiry.
 */
class RedissonFairLockInteropTest {
    private static final long LEASE_S = 60;
    private static final Duration PROMPTLY = Duration.ofSeconds(10);
    private static final Duration BOUND = Duration.ofSeconds(30);

    private RedisServer server;
    private Peer peer;
    private RedissonClient redisson;
    /** Reads raw data and counts subscribers; never locks. */
    private RedissonClient observer;
    private ExecutorService javaThreads;
    private final List<Peer> extraPeers = new ArrayList<>();

    @BeforeEach
    void start(TestInfo test) throws Exception {
        server = RedisServer.start();
        server.recordCommands(Interop.monitorLog(test, "fair_"));
        redisson = connect();
        observer = connect();
        peer = Peer.start(server.url());
        javaThreads = Interop.daemonThreads("java-fair-waiter");
    }

    private RedissonClient connect() {
        return Interop.redisson(server.url());
    }

    private Peer startExtraPeer() throws Exception {
        Peer extra = Peer.start(server.url());
        extraPeers.add(extra);
        return extra;
    }

    @AfterEach
    void stop() throws Exception {
        List<Peer> peers = new ArrayList<>(extraPeers);
        peers.add(peer);
        Interop.stopAll(javaThreads, peers, Arrays.asList(redisson, observer), server);
    }

    // --- 1. Redisson holds; a queued polylock fair waiter is woken by Redisson's unlock --------

    @ParameterizedTest
    @ValueSource(strings = {"fair:orders:42", "fair{eu}:jobs:7"})
    void polylockFairWaiterQueuesBehindRedissonAndWakesOnUnlock(String name) throws Exception {
        RLock lock = redisson.getFairLock(name);
        lock.lock(LEASE_S, SECONDS);
        // A fair waiter also looks again every half of its queue timeout; with 4 minutes that
        // cannot happen within PROMPTLY, so only the unlock message can wake it in time.
        Peer waiter = Peer.startWithFairQueueTimeout(server.url(), Duration.ofMinutes(4));
        extraPeers.add(waiter);

        String peerOwner = Interop.ok(waiter.call("fair_owner " + name));
        waiter.send("fair_acquire " + name + " - -");
        awaitQueue(name, List.of(peerOwner));
        // The waiter listens on its own channel, the one Redisson's unlock tells the head on.
        awaitSubscribers(waiterChannel(name, peerOwner), 1);
        Double deadline = deadline(name, peerOwner);
        assertNotNull(deadline, "the queued polylock waiter has a deadline in " + timeoutsKey(name));
        // Redisson drops a queue head whose deadline has passed; a live waiter's must lie ahead.
        assertTrue(deadline > System.currentTimeMillis(),
                "the live polylock waiter's deadline passed " + (System.currentTimeMillis() - deadline) + " ms ago");
        assertEquals(1, observer.getScoredSortedSet(timeoutsKey(name), StringCodec.INSTANCE).size());
        assertNull(waiter.pollReply(Duration.ofMillis(300)),
                "polylock must not get the fair lock while Redisson holds it");

        long unlockedAt = System.nanoTime();
        lock.unlock();
        String reply = waiter.awaitReply(BOUND);
        Duration woken = since(unlockedAt);

        assertEquals("ok true", reply);
        assertTrue(woken.compareTo(PROMPTLY) < 0,
                "polylock acquired " + woken + " after Redisson's unlock; a 60 s lease means it was not woken by the message");
        assertEquals(Map.of(peerOwner, "1"), Interop.rawHash(observer, name));
        assertEquals(List.of(), queue(name), "the new holder left the queue");
        assertNull(deadline(name, peerOwner), "the new holder left the timeout set");
        assertFalse(lock.tryLock(0, LEASE_S, SECONDS), "Redisson must not get the fair lock polylock holds");
        assertEquals("ok", waiter.call("fair_release " + name));
        assertFalse(exists(name), "the last release deletes the key");
    }

    // --- 2. polylock holds; a queued Redisson tryLock(wait, lease) is woken by polylock's release

    @Test
    void redissonFairWaiterQueuesBehindPolylockAndWakesOnRelease() throws Exception {
        String name = "fair:exclusion";
        assertEquals("ok true", peer.call("fair_acquire " + name + " 0 " + LEASE_S * 1000));
        assertFalse(redisson.getFairLock(name).tryLock(), "Redisson must not get a fair lock polylock holds");

        CompletableFuture<Long> waiterThread = new CompletableFuture<>();
        Future<Woken> waiter = javaThreads.submit(() -> {
            waiterThread.complete(Thread.currentThread().getId());
            return Woken.now(redisson.getFairLock(name).tryLock(BOUND.toSeconds(), LEASE_S, SECONDS));
        });
        String javaOwner = javaOwner(waiterThread.get(PROMPTLY.toSeconds(), SECONDS));
        awaitQueue(name, List.of(javaOwner));
        assertNotNull(deadline(name, javaOwner), "Redisson's waiter has a deadline in " + timeoutsKey(name));
        awaitSubscribers(waiterChannel(name, javaOwner), 1);
        BlockingQueue<String> messages = new LinkedBlockingQueue<>();
        RTopic topic = observer.getTopic(waiterChannel(name, javaOwner), StringCodec.INSTANCE);
        topic.addListener(String.class, (channel, message) -> messages.add(message));
        awaitSubscribers(waiterChannel(name, javaOwner), 2);
        assertThrows(TimeoutException.class, () -> waiter.get(300, MILLISECONDS),
                "the Java waiter must block while polylock holds the fair lock");

        long releasedAt = System.nanoTime();
        assertEquals("ok", peer.call("fair_release " + name));
        Woken woken = waiter.get(BOUND.toSeconds(), SECONDS);
        Duration after = Duration.ofNanos(woken.atNanos - releasedAt);

        assertTrue(woken.acquired, "Redisson's tryLock must succeed after polylock's release");
        assertTrue(after.compareTo(PROMPTLY) < 0,
                "Redisson's waiter got the lock " + after + " after polylock's release; not woken by the message");
        assertEquals("0", messages.poll(PROMPTLY.toMillis(), MILLISECONDS),
                "polylock's release tells the head on its own channel " + waiterChannel(name, javaOwner));
        assertEquals(Map.of(javaOwner, "1"), Interop.rawHash(observer, name));
        assertEquals(List.of(), queue(name), "Redisson's new holder left the queue");
        assertEquals("ok false", peer.call("fair_acquire " + name + " 0 -"));
        assertEquals(List.of(), queue(name), "a failed zero-wait attempt leaves no trace in the queue");
    }

    // --- 3. Mixed FIFO: Java A, polylock B, Java C queue in that order and get it in that order --

    @Test
    void mixedWaitersGetTheFairLockInQueueOrder() throws Exception {
        String name = "fair:fifo";
        Peer peerB = startExtraPeer();
        assertEquals("ok true", peer.call("fair_acquire " + name + " 0 " + LEASE_S * 1000));

        BlockingQueue<String> javaAcquisitions = new LinkedBlockingQueue<>();
        InTurn javaA = new InTurn("A", name, javaAcquisitions);
        InTurn javaC = new InTurn("C", name, javaAcquisitions);

        javaThreads.submit(javaA);
        String ownerA = javaOwner(javaA.threadId.get(PROMPTLY.toSeconds(), SECONDS));
        awaitQueue(name, List.of(ownerA));

        String ownerB = Interop.ok(peerB.call("fair_owner " + name));
        peerB.send("fair_acquire " + name + " - -");
        awaitQueue(name, List.of(ownerA, ownerB));

        javaThreads.submit(javaC);
        String ownerC = javaOwner(javaC.threadId.get(PROMPTLY.toSeconds(), SECONDS));
        awaitQueue(name, List.of(ownerA, ownerB, ownerC));
        for (String owner : List.of(ownerA, ownerB, ownerC)) {
            awaitSubscribers(waiterChannel(name, owner), 1);
        }
        assertNull(nextAcquisition(javaAcquisitions, peerB, Duration.ofMillis(300)),
                "no waiter may get the fair lock while the first polylock client holds it");

        Map<String, String> owners = Map.of("A", ownerA, "B", ownerB, "C", ownerC);
        List<String> order = new ArrayList<>();
        assertEquals("ok", peer.call("fair_release " + name));
        for (int turn = 0; turn < 3; turn++) {
            String next = nextAcquisition(javaAcquisitions, peerB, BOUND);
            assertNotNull(next, "nobody got the fair lock after " + order + " released it; queue "
                    + queue(name) + ", deadlines " + deadlines(name));
            order.add(next);
            assertEquals(Map.of(owners.get(next), "1"), Interop.rawHash(observer, name),
                    next + " got the lock, so it alone holds it (order so far " + order + ")");
            switch (next) {
                case "A" -> javaA.release.countDown();
                case "B" -> assertEquals("ok", peerB.call("fair_release " + name));
                case "C" -> javaC.release.countDown();
                default -> fail("unexpected acquisition: " + next);
            }
        }
        assertEquals(List.of("A", "B", "C"), order,
                "a fair lock hands over in queue order; MONITOR log: target/redisson-<version>/monitor/fair_mixedWaitersGetTheFairLockInQueueOrder.log");
        assertTrue(javaC.done.await(PROMPTLY.toSeconds(), SECONDS), "C unlocked");
        assertFalse(exists(name), "the last unlock deletes the key");
        assertEquals(List.of(), queue(name));
    }

    /** A Java thread that queues for the fair lock, reports when it got it, and unlocks on signal. */
    private final class InTurn implements Runnable {
        final String label;
        final String name;
        final BlockingQueue<String> acquisitions;
        final CompletableFuture<Long> threadId = new CompletableFuture<>();
        final CountDownLatch release = new CountDownLatch(1);
        final CountDownLatch done = new CountDownLatch(1);

        InTurn(String label, String name, BlockingQueue<String> acquisitions) {
            this.label = label;
            this.name = name;
            this.acquisitions = acquisitions;
        }

        @Override
        public void run() {
            threadId.complete(Thread.currentThread().getId());
            RLock lock = redisson.getFairLock(name);
            // lock() queues with Redisson's default fair wait timeout (5 min), as most services do.
            lock.lock(LEASE_S, SECONDS);
            acquisitions.add(label);
            try {
                release.await(BOUND.toSeconds(), SECONDS);
            } catch (InterruptedException stopping) {
                Thread.currentThread().interrupt();
            } finally {
                lock.unlock();
                done.countDown();
            }
        }
    }

    /**
     * The next waiter to get the lock ("A"/"C" from the Java threads, "B" from the second peer), or
     * null if none did within {@code bound}.
     */
    private static String nextAcquisition(BlockingQueue<String> javaAcquisitions, Peer peerB, Duration bound)
            throws InterruptedException {
        long deadline = System.nanoTime() + bound.toNanos();
        while (System.nanoTime() < deadline) {
            String java = javaAcquisitions.poll(25, MILLISECONDS);
            if (java != null) {
                return java;
            }
            String reply = peerB.pollReply(Duration.ofMillis(25));
            if (reply != null) {
                return "ok true".equals(reply) ? "B" : "B replied '" + reply + "'";
            }
        }
        return null;
    }

    // --- 4. Exclusion under load: 2 polylock processes and 2 Java threads, non-atomic increments -

    @Test
    void fairLockKeepsNonAtomicIncrementsExactUnderContention() throws Exception {
        String name = "fair:counter-lock";
        String counterKey = "fair:counter";
        int perWorker = 50;
        Peer secondPeer = startExtraPeer();

        List<Future<Void>> javaWorkers = new ArrayList<>();
        for (int worker = 0; worker < 2; worker++) {
            javaWorkers.add(javaThreads.submit(() -> {
                RLock lock = redisson.getFairLock(name);
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
            }));
        }
        peer.send("fair_increment " + name + " " + counterKey + " " + perWorker);
        secondPeer.send("fair_increment " + name + " " + counterKey + " " + perWorker);

        Duration bound = Duration.ofSeconds(60);
        long start = System.nanoTime();
        assertEquals("ok", peer.awaitReply(bound));
        assertEquals("ok", secondPeer.awaitReply(bound.minus(since(start))));
        for (Future<Void> worker : javaWorkers) {
            worker.get(Math.max(1, bound.minus(since(start)).toMillis()), MILLISECONDS);
        }

        assertEquals("200", observer.getBucket(counterKey, StringCodec.INSTANCE).get(),
                "only mutual exclusion keeps 4 x 50 non-atomic increments exact");
        assertFalse(exists(name), "every holder released");
        assertEquals(List.of(), queue(name), "every waiter left the queue");
    }

    // --- 5. polylock's fair_force_unlock wakes a Java fair waiter ------------------------------

    @Test
    void polylockForceUnlockWakesRedissonFairWaiter() throws Exception {
        String name = "fair:force";
        RLock holder = redisson.getFairLock(name);
        holder.lock(LEASE_S, SECONDS);

        CompletableFuture<Long> waiterThread = new CompletableFuture<>();
        Future<Woken> waiter = javaThreads.submit(() -> {
            waiterThread.complete(Thread.currentThread().getId());
            redisson.getFairLock(name).lock();
            return Woken.now(true);
        });
        String javaOwner = javaOwner(waiterThread.get(PROMPTLY.toSeconds(), SECONDS));
        awaitQueue(name, List.of(javaOwner));
        awaitSubscribers(waiterChannel(name, javaOwner), 1);
        assertThrows(TimeoutException.class, () -> waiter.get(300, MILLISECONDS),
                "the Java waiter must block while the fair lock is held");
        assertEquals("ok true", peer.call("fair_is_locked " + name));

        long forcedAt = System.nanoTime();
        assertEquals("ok true", peer.call("fair_force_unlock " + name));
        Woken woken = waiter.get(BOUND.toSeconds(), SECONDS);
        Duration after = Duration.ofNanos(woken.atNanos - forcedAt);

        assertTrue(after.compareTo(PROMPTLY) < 0,
                "Redisson's fair waiter got the lock " + after + " after fair_force_unlock; not woken by the message");
        assertEquals(Map.of(javaOwner, "1"), Interop.rawHash(observer, name), "the waiter's thread now holds it");
        assertEquals(List.of(), queue(name));
        assertThrows(IllegalMonitorStateException.class, holder::unlock,
                "the first holder's lock was deleted by fair_force_unlock");
        assertEquals("ok false", peer.call("fair_acquire " + name + " 0 -"));
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

    private static String queueKey(String name) {
        return tagged("redisson_lock_queue", name);
    }

    private static String timeoutsKey(String name) {
        return tagged("redisson_lock_timeout", name);
    }

    /** The channel on which a release tells the waiter {@code owner} that it is next. */
    private static String waiterChannel(String name, String owner) {
        return tagged("redisson_lock__channel", name) + ":" + owner;
    }

    private String javaOwner(long threadId) {
        return redisson.getId() + ":" + threadId;
    }

    private boolean exists(String name) {
        return observer.getKeys().countExists(name) == 1;
    }

    /** The queue LIST, head first. */
    private List<String> queue(String name) {
        return observer.<String>getList(queueKey(name), StringCodec.INSTANCE).readAll();
    }

    /** The owner's deadline (epoch ms) in the timeout ZSET, or null. */
    private Double deadline(String name, String owner) {
        return observer.<String>getScoredSortedSet(timeoutsKey(name), StringCodec.INSTANCE).getScore(owner);
    }

    /** Every deadline in the timeout ZSET, relative to now, for failure messages. */
    private String deadlines(String name) {
        long now = System.currentTimeMillis();
        StringBuilder text = new StringBuilder("{");
        for (var entry : observer.<String>getScoredSortedSet(timeoutsKey(name), StringCodec.INSTANCE)
                .entryRange(0, -1)) {
            text.append(entry.getValue()).append("=now").append(entry.getScore() - now >= 0 ? "+" : "")
                    .append((long) (entry.getScore() - now)).append("ms ");
        }
        return text.append("}").toString();
    }

    private void awaitQueue(String name, List<String> expected) throws InterruptedException {
        long deadline = System.nanoTime() + PROMPTLY.toNanos();
        List<String> seen = List.of();
        while (System.nanoTime() < deadline) {
            seen = queue(name);
            if (seen.equals(expected)) {
                return;
            }
            Thread.sleep(20);
        }
        fail("queue " + queueKey(name) + " expected " + expected + ", found " + seen);
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
