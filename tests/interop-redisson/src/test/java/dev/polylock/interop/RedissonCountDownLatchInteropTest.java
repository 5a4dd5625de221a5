package dev.polylock.interop;

import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;

/**
 * A polylock count-down latch (the {@code peer} example's {@code latch_} commands) and Redisson's
 * RCountDownLatch on the same name share one count: a count set on one side is seen by the
 * other (and cannot be set again there), a polylock waiter wakes when Java counts down to zero,
 * and a Java waiter wakes when polylock does. "Promptly" means long before the 30 s wait bound.
 */
class RedissonCountDownLatchInteropTest {
    private static final Duration PROMPTLY = Duration.ofSeconds(10);
    private static final Duration BOUND = Duration.ofSeconds(30);

    private RedisServer server;
    private Peer peer;
    private RedissonClient redisson;
    private ExecutorService javaThreads;

    @BeforeEach
    void start(TestInfo test) throws Exception {
        server = RedisServer.start();
        server.recordCommands(Interop.monitorLog(test, "latch_"));
        redisson = Interop.redisson(server.url());
        peer = Peer.start(server.url());
        javaThreads = Interop.daemonThreads("java-latch-waiter");
    }

    @AfterEach
    void stop() throws Exception {
        Interop.stopAll(javaThreads, Arrays.asList(peer), Arrays.asList(redisson), server);
    }

    @ParameterizedTest
    @ValueSource(strings = {"latch:ready", "latch{eu}:ready"})
    void polylockWaitsWhileJavaCountsDown(String name) throws Exception {
        RCountDownLatch latch = redisson.getCountDownLatch(name);
        assertTrue(latch.trySetCount(2));
        assertEquals("2", redisson.getBucket(name, StringCodec.INSTANCE).get(), "the count as a plain string");
        assertEquals("ok false", peer.call("latch_try_set " + name + " 5"), "Java's count is set");
        assertEquals("ok 2", peer.call("latch_count " + name));

        peer.send("latch_await " + name + " " + BOUND.toMillis());
        Interop.awaitSubscribers(redisson, channel(name), 1);
        assertNull(peer.pollReply(Duration.ofMillis(300)), "polylock waits: the count is 2");
        latch.countDown();
        assertNull(peer.pollReply(Duration.ofMillis(300)), "1 is not zero");
        long openedAt = System.nanoTime();
        latch.countDown();
        assertEquals("ok true", peer.awaitReply(BOUND));
        assertPrompt(openedAt, "polylock after Java's count down to zero");
        assertEquals("ok 0", peer.call("latch_count " + name));
    }

    @ParameterizedTest
    @ValueSource(strings = {"latch:go", "latch{eu}:go"})
    void javaAwaitsWhilePolylockCountsDown(String name) throws Exception {
        RCountDownLatch latch = redisson.getCountDownLatch(name);
        assertEquals("ok true", peer.call("latch_try_set " + name + " 2"));
        assertFalse(latch.trySetCount(5), "polylock's count is set");
        assertEquals(2, latch.getCount());

        Future<Boolean> waiter = javaThreads.submit(() -> latch.await(BOUND.toMillis(), MILLISECONDS));
        Interop.awaitSubscribers(redisson, channel(name), 1);
        assertEquals("ok", peer.call("latch_count_down " + name));
        Thread.sleep(300);
        assertFalse(waiter.isDone(), "Java waits: the count is 1");
        long openedAt = System.nanoTime();
        assertEquals("ok", peer.call("latch_count_down " + name));
        assertTrue(waiter.get(BOUND.toSeconds(), SECONDS));
        assertPrompt(openedAt, "Java after polylock's count down to zero");
        assertEquals(0, latch.getCount());
        assertEquals("ok true", peer.call("latch_try_set " + name + " 1"), "open again: set again");
        assertEquals(1, latch.getCount());
    }

    private void assertPrompt(long sinceNanos, String what) {
        Duration after = Duration.ofNanos(System.nanoTime() - sinceNanos);
        assertTrue(after.compareTo(PROMPTLY) < 0, what + " took " + after);
    }

    /** Redisson's channel: the name in braces after {@code __}, even with a hash tag of its own. */
    private static String channel(String name) {
        return "redisson_countdownlatch__channel__{" + name + "}";
    }
}
