package dev.polylock.interop;

import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.TimeoutException;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;

/**
 * A polylock semaphore and expirable semaphore (the {@code peer} example's {@code sem_} and
 * {@code xsem_} commands) and Redisson's RSemaphore and RPermitExpirableSemaphore on the same
 * name count the same permits: what one side takes the other cannot, each side's release wakes
 * the other's waiter, and permits are conserved when both take and give concurrently.
 * "Promptly" means long before the test's 30 s wait bound.
 */
class RedissonSemaphoreInteropTest {
    private static final Duration PROMPTLY = Duration.ofSeconds(10);
    private static final Duration BOUND = Duration.ofSeconds(30);

    private RedisServer server;
    private Peer peer;
    private RedissonClient redisson;
    private ExecutorService javaThreads;

    @BeforeEach
    void start(TestInfo test) throws Exception {
        server = RedisServer.start();
        server.recordCommands(Interop.monitorLog(test, "semaphore_"));
        redisson = Interop.redisson(server.url());
        peer = Peer.start(server.url());
        javaThreads = Interop.daemonThreads("java-semaphore-waiter");
    }

    @AfterEach
    void stop() throws Exception {
        Interop.stopAll(javaThreads, Arrays.asList(peer), Arrays.asList(redisson), server);
    }

    // --- RSemaphore ------------------------------------------------------------------------------

    @ParameterizedTest
    @ValueSource(strings = {"sem:pool", "sem{eu}:pool"})
    void bothSidesCountTheSamePermitsAndWakeEachOther(String name) throws Exception {
        RSemaphore semaphore = redisson.getSemaphore(name);
        assertTrue(semaphore.trySetPermits(3));
        assertEquals("ok false", peer.call("sem_try_set " + name + " 5"), "permits are set once");
        assertEquals("ok 3", peer.call("sem_available " + name));

        assertEquals("ok true", peer.call("sem_acquire " + name + " 2 0"));
        assertEquals(1, semaphore.availablePermits());
        assertFalse(semaphore.tryAcquire(2), "Java cannot take the permits polylock holds");
        assertTrue(semaphore.tryAcquire(1));
        assertEquals("ok false", peer.call("sem_acquire " + name + " 1 0"));

        // A polylock waiter is woken by Java's release.
        peer.send("sem_acquire " + name + " 2 -");
        Interop.awaitSubscribers(redisson, channel(name), 1);
        assertNull(peer.pollReply(Duration.ofMillis(300)), "polylock waits: no permit is free");
        semaphore.release(1);
        assertNull(peer.pollReply(Duration.ofMillis(300)), "one permit is not the two it waits for");
        long releasedAt = System.nanoTime();
        semaphore.release(1);
        assertEquals("ok true", peer.awaitReply(BOUND));
        assertPrompt(releasedAt, "polylock after Java's release");
        assertEquals(0, semaphore.availablePermits());

        // A Java waiter is woken by polylock's release.
        Future<Boolean> waiter = javaThreads.submit(() ->
                redisson.getSemaphore(name).tryAcquire(3, BOUND.toSeconds(), SECONDS));
        assertThrows(TimeoutException.class, () -> waiter.get(300, MILLISECONDS));
        long polylockReleasedAt = System.nanoTime();
        assertEquals("ok", peer.call("sem_release " + name + " 4"));
        assertTrue(waiter.get(BOUND.toSeconds(), SECONDS));
        assertPrompt(polylockReleasedAt, "Java after polylock's release");
        assertEquals(1, semaphore.availablePermits());
        assertEquals("ok", peer.call("sem_add " + name + " -1"));
        assertEquals(0, semaphore.availablePermits(), "polylock's add_permits takes from Java's count");
    }

    @Test
    void permitsAreConservedWhenBothSidesTakeAndGiveConcurrently() throws Exception {
        String name = "sem:conserved";
        RSemaphore semaphore = redisson.getSemaphore(name);
        assertTrue(semaphore.trySetPermits(2));
        int rounds = 100;
        List<Future<Integer>> javaWorkers = new ArrayList<>();
        for (int worker = 0; worker < 2; worker++) {
            javaWorkers.add(javaThreads.submit(() -> {
                RSemaphore own = redisson.getSemaphore(name);
                int done = 0;
                for (int round = 0; round < rounds; round++) {
                    if (own.tryAcquire(1, BOUND.toSeconds(), SECONDS)) {
                        own.release(1);
                        done++;
                    }
                }
                return done;
            }));
        }
        for (int round = 0; round < rounds; round++) {
            assertEquals("ok true", peer.call("sem_acquire " + name + " 1 " + BOUND.toMillis()));
            assertEquals("ok", peer.call("sem_release " + name + " 1"));
        }
        for (Future<Integer> worker : javaWorkers) {
            assertEquals(rounds, worker.get(BOUND.toSeconds() * 2, SECONDS));
        }
        assertEquals(2, semaphore.availablePermits(), "every permit taken was given back once");
        assertEquals("ok 2", peer.call("sem_available " + name));
    }

    // --- RPermitExpirableSemaphore ---------------------------------------------------------------

    @ParameterizedTest
    @ValueSource(strings = {"xsem:seats", "xsem{eu}:seats"})
    void expirablePermitsOfBothSidesAreOnePoolAndEitherSideMayReleaseThem(String name) throws Exception {
        RPermitExpirableSemaphore semaphore = redisson.getPermitExpirableSemaphore(name);
        assertTrue(semaphore.trySetPermits(2));
        String javaPermit = semaphore.tryAcquire(0, 60, SECONDS);
        assertNotNull(javaPermit);
        String polylockPermit = Interop.ok(peer.call("xsem_acquire " + name + " 0 60000"));
        assertNotEquals("-", polylockPermit);
        assertEquals(32, polylockPermit.length(), "a 16-byte id in hex, as Redisson's");
        assertEquals(0, semaphore.availablePermits());
        assertEquals("ok -", peer.call("xsem_acquire " + name + " 0 -"));
        assertNull(semaphore.tryAcquire(0, 60, SECONDS));

        // polylock waits and Java's release wakes it.
        peer.send("xsem_acquire " + name + " - 60000");
        Interop.awaitSubscribers(redisson, channel(name), 1);
        assertNull(peer.pollReply(Duration.ofMillis(300)), "polylock waits: no permit is free");
        long releasedAt = System.nanoTime();
        semaphore.release(javaPermit);
        String next = Interop.ok(peer.awaitReply(BOUND));
        assertNotEquals("-", next);
        assertPrompt(releasedAt, "polylock after Java's release");

        // Java may release a polylock permit by its id (Redisson's release works for any id).
        semaphore.release(polylockPermit);
        assertEquals(1, semaphore.availablePermits());
        assertTrue(peer.call("xsem_release " + name + " " + polylockPermit).startsWith("err LockLost "),
                "polylock learns that its permit was taken from it");
        // And polylock may release a permit Java took.
        String javaAgain = semaphore.tryAcquire(0, 60, SECONDS);
        assertNotNull(javaAgain);
        assertEquals("ok", peer.call("xsem_release " + name + " " + javaAgain));
        assertFalse(semaphore.tryRelease(javaAgain), "Java's permit was released by polylock");
        assertEquals("ok", peer.call("xsem_release " + name + " " + next));
        assertEquals(2, semaphore.availablePermits());
    }

    @Test
    void aPolylockPermitWithAShortLeaseComesBackForJavaAndAWatchdogPermitDoesNot() throws Exception {
        String name = "xsem:leases";
        RPermitExpirableSemaphore semaphore = redisson.getPermitExpirableSemaphore(name);
        assertTrue(semaphore.trySetPermits(2));
        Peer watched = Peer.start(server.url(), 300);
        try {
            assertNotEquals("ok -", watched.call("xsem_acquire " + name + " 0 -"), "a permit renewed by the watchdog");
            assertNotEquals("ok -", peer.call("xsem_acquire " + name + " 0 400"), "a permit with a 400 ms lease");
            assertEquals(0, semaphore.availablePermits());
            // Java's wait sees the short lease run out; the watchdog permit, renewed every
            // 100 ms with a 300 ms lease, outlives several of its own leases meanwhile.
            String javaPermit = semaphore.tryAcquire(BOUND.toSeconds(), 60, SECONDS);
            assertNotNull(javaPermit, "the expired polylock permit came back");
            Thread.sleep(1_000);
            assertEquals(0, semaphore.availablePermits(), "the watchdog keeps its permit");
            assertNull(semaphore.tryAcquire(0, 60, SECONDS));
            semaphore.release(javaPermit);
            assertEquals(1, semaphore.availablePermits());
        } finally {
            watched.close();
        }
    }

    // --- helpers ---------------------------------------------------------------------------------

    private void assertPrompt(long sinceNanos, String what) {
        Duration after = Duration.ofNanos(System.nanoTime() - sinceNanos);
        assertTrue(after.compareTo(PROMPTLY) < 0, what + " took " + after);
    }

    private static String channel(String name) {
        return name.contains("{") ? "redisson_sc:" + name : "redisson_sc:{" + name + "}";
    }

}
