package dev.polylock.interop;

import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.Arrays;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * polylock's {@code key_prefix} is Redisson's {@code NameMapper}: a polylock client under the
 * prefix {@code app:} and a Redisson client whose NameMapper adds {@code app:} share the lock
 * (and its channel: a release of one wakes the other's waiter); without the prefix on one side
 * they are two locks. For the plain and the fair lock.
 *
 * <p>"Promptly" means long before the holder's 60 s lease would have let a waiter in by expiry.
 */
class RedissonKeyPrefixInteropTest {
    private static final String PREFIX = "app:";
    private static final long LEASE_S = 60;
    private static final Duration PROMPTLY = Duration.ofSeconds(10);
    private static final Duration BOUND = Duration.ofSeconds(30);

    private RedisServer server;
    private Peer prefixedPeer;
    private Peer plainPeer;
    private RedissonClient mapped;
    private RedissonClient plain;

    @BeforeEach
    void start(TestInfo test) throws Exception {
        server = RedisServer.start();
        server.recordCommands(Interop.monitorLog(test, "key_prefix_"));
        mapped = redissonUnder(server.url(), PREFIX);
        plain = Interop.redisson(server.url());
        // Without a message a waiter looks again only after 30 s, past PROMPTLY.
        prefixedPeer = Peer.startWithKeyPrefix(server.url(), PREFIX, Duration.ofSeconds(60));
        plainPeer = Peer.start(server.url());
    }

    @AfterEach
    void stop() throws Exception {
        Interop.stopAll(null, Arrays.asList(prefixedPeer, plainPeer), Arrays.asList(mapped, plain), server);
    }

    /** {@link Interop#redisson}, with a NameMapper that puts {@code prefix} before every name. */
    private static RedissonClient redissonUnder(String url, String prefix) throws Exception {
        Config config = new Config();
        config.setThreads(2);
        config.setNettyThreads(4);
        Object single = config.useSingleServer()
                .setAddress(url)
                .setConnectionPoolSize(4)
                .setConnectionMinimumIdleSize(1)
                .setSubscriptionConnectionPoolSize(2)
                .setSubscriptionConnectionMinimumIdleSize(1)
                .setConnectTimeout(5_000)
                .setTimeout(5_000);
        // The NameMapper interface is org.redisson.api's in Redisson 3 (set on the server
        // config) and org.redisson.config's in Redisson 4 (also on Config): found by reflection,
        // so one source runs against both lines.
        boolean set = setNameMapper(single, prefix);
        set |= setNameMapper(config, prefix);
        assertTrue(set, "no setNameMapper in this Redisson");
        return Redisson.create(config);
    }

    private static boolean setNameMapper(Object target, String prefix) throws Exception {
        for (Method method : target.getClass().getMethods()) {
            if (!method.getName().equals("setNameMapper") || method.getParameterCount() != 1) {
                continue;
            }
            Class<?> type = method.getParameterTypes()[0];
            Object mapper = Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type},
                    (proxy, called, args) -> switch (called.getName()) {
                        case "map" -> prefix + args[0];
                        case "unmap" -> ((String) args[0]).startsWith(prefix)
                                ? ((String) args[0]).substring(prefix.length()) : args[0];
                        case "hashCode" -> System.identityHashCode(proxy);
                        case "equals" -> proxy == args[0];
                        case "toString" -> "NameMapper(" + prefix + ")";
                        default -> throw new UnsupportedOperationException(called.getName());
                    });
            method.invoke(target, mapper);
            return true;
        }
        return false;
    }

    private RLock redissonLock(RedissonClient client, boolean fair, String name) {
        return fair ? client.getFairLock(name) : client.getLock(name);
    }

    private static String command(boolean fair, String command) {
        return (fair ? "fair_" : "") + command;
    }

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void theSamePrefixOnBothSidesIsOneLock(boolean fair) throws Exception {
        String name = "orders:42";
        assertEquals("ok true", prefixedPeer.call(command(fair, "acquire") + " " + name + " 0 -"));
        assertEquals("hash", server.command("TYPE", PREFIX + name), "polylock's key is the mapped name");
        RLock mappedLock = redissonLock(mapped, fair, name);
        assertFalse(mappedLock.tryLock(0, LEASE_S, SECONDS),
                "Redisson under the same NameMapper must not get the lock polylock holds");
        assertEquals("ok", prefixedPeer.call(command(fair, "release") + " " + name));

        // Redisson holds; the polylock waiter is woken by Redisson's unlock, on the mapped channel.
        assertTrue(mappedLock.tryLock(0, LEASE_S, SECONDS));
        prefixedPeer.send(command(fair, "acquire") + " " + name + " - -");
        assertNull(prefixedPeer.pollReply(Duration.ofMillis(500)),
                "polylock must not get the lock while Redisson holds it");
        long unlockedAt = System.nanoTime();
        mappedLock.unlock();
        assertEquals("ok true", prefixedPeer.awaitReply(BOUND));
        Duration woken = Duration.ofNanos(System.nanoTime() - unlockedAt);
        assertTrue(woken.compareTo(PROMPTLY) < 0,
                "polylock acquired " + woken + " after Redisson's unlock: not woken by its message");
        assertEquals("ok", prefixedPeer.call(command(fair, "release") + " " + name));
        assertEquals(0L, server.command("EXISTS", PREFIX + name));
    }

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void withoutThePrefixOnOneSideTheyAreTwoLocks(boolean fair) throws Exception {
        String name = "orders:7";
        // polylock under the prefix, Redisson without a NameMapper.
        assertEquals("ok true", prefixedPeer.call(command(fair, "acquire") + " " + name + " 0 -"));
        RLock plainLock = redissonLock(plain, fair, name);
        assertTrue(plainLock.tryLock(0, LEASE_S, SECONDS), "an unmapped name is another lock");
        plainLock.unlock();
        assertEquals("ok", prefixedPeer.call(command(fair, "release") + " " + name));

        // Redisson under the NameMapper, polylock without the prefix.
        RLock mappedLock = redissonLock(mapped, fair, name);
        assertTrue(mappedLock.tryLock(0, LEASE_S, SECONDS));
        assertEquals("ok true", plainPeer.call(command(fair, "acquire") + " " + name + " 0 -"),
                "a polylock client without the prefix takes another lock");
        assertEquals("ok", plainPeer.call(command(fair, "release") + " " + name));
        mappedLock.unlock();
    }
}
