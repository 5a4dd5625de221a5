package dev.polylock.interop;

import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.TestInfo;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;
import org.redisson.config.ReadMode;

/** Set-up shared by the interop test classes. */
final class Interop {
    private Interop() {}

    /** A small single-server Redisson client, as a Java service would configure one. */
    static RedissonClient redisson(String url) {
        Config config = new Config();
        config.setThreads(2);
        config.setNettyThreads(4);
        config.useSingleServer()
                .setAddress(url)
                .setConnectionPoolSize(4)
                .setConnectionMinimumIdleSize(1)
                .setSubscriptionConnectionPoolSize(2)
                .setSubscriptionConnectionMinimumIdleSize(1)
                .setConnectTimeout(5_000)
                .setTimeout(5_000);
        return Redisson.create(config);
    }

    /**
     * A small Redisson client in cluster mode. Reads go to the primaries (Redisson's default reads
     * from replicas, which may lag a write the test just made).
     */
    static RedissonClient redissonCluster(List<String> nodeAddresses) {
        Config config = new Config();
        config.setThreads(2);
        config.setNettyThreads(4);
        config.useClusterServers()
                .addNodeAddress(nodeAddresses.toArray(new String[0]))
                .setReadMode(ReadMode.MASTER)
                .setMasterConnectionPoolSize(4)
                .setMasterConnectionMinimumIdleSize(1)
                .setSlaveConnectionPoolSize(2)
                .setSlaveConnectionMinimumIdleSize(1)
                .setSubscriptionConnectionPoolSize(2)
                .setSubscriptionConnectionMinimumIdleSize(1)
                .setConnectTimeout(5_000)
                .setTimeout(5_000);
        return Redisson.create(config);
    }

    /** The major version of the Redisson on the classpath (the suite runs against 3.x and 4.x). */
    static int redissonMajorVersion() {
        String version = Redisson.class.getPackage().getImplementationVersion();
        return Integer.parseInt(version.substring(0, version.indexOf('.')));
    }

    /** Where a test's MONITOR log goes: `<prefix><method>[_<parameters>].log` under monitor.dir. */
    static Path monitorLog(TestInfo test, String prefix) {
        String method = test.getTestMethod().map(m -> m.getName()).orElse("test");
        String parameters = test.getDisplayName().startsWith("[")
                ? "_" + test.getDisplayName().replaceAll("[^A-Za-z0-9]+", "_").replaceAll("^_|_$", "") : "";
        return Path.of(System.getProperty("monitor.dir", "target/monitor"), prefix + method + parameters + ".log");
    }

    /** Daemon threads for Java waiters, so a stuck waiter never keeps the test JVM alive. */
    static ExecutorService daemonThreads(String name) {
        return Executors.newCachedThreadPool(runnable -> {
            Thread thread = new Thread(runnable, name);
            thread.setDaemon(true);
            return thread;
        });
    }

    /**
     * A test's tear-down, in order: Java waiters, polylock peers, Redisson clients, the server
     * (each may be null: set-up can fail half way).
     */
    static void stopAll(ExecutorService javaThreads, List<Peer> peers, List<RedissonClient> clients,
            RedisServer server) throws Exception {
        if (javaThreads != null) {
            javaThreads.shutdownNow();
        }
        for (Peer peer : peers) {
            if (peer != null) {
                peer.close();
            }
        }
        for (RedissonClient client : clients) {
            if (client != null) {
                client.shutdown(0, 2, TimeUnit.SECONDS);
            }
        }
        if (server != null) {
            server.close();
        }
    }

    /** The text after a peer's {@code ok }; fails the test on any other reply. */
    static String ok(String reply) {
        if (!reply.startsWith("ok ")) {
            fail("peer replied '" + reply + "'");
        }
        return reply.substring("ok ".length());
    }

    /**
     * The owners' fields of the hash at {@code name} (HGETALL), fields and values as strings:
     * what Redisson reads. polylock's own fields beside them ({@code polylock:level:<request>},
     * {@code polylock:waiters}, docs/PROTOCOL.md), which no Redisson script reads, are left
     * out; {@link #storedHash} has them.
     */
    static Map<String, String> rawHash(RedissonClient observer, String name) {
        Map<String, String> owners = new java.util.HashMap<>(storedHash(observer, name));
        owners.keySet().removeIf(field -> field.startsWith("polylock:"));
        return owners;
    }

    /** The hash at {@code name} exactly as stored (HGETALL), fields and values as strings. */
    static Map<String, String> storedHash(RedissonClient observer, String name) {
        return observer.<String, String>getMap(name, StringCodec.INSTANCE).readAllMap();
    }

    /** Waits (10 s at most) until exactly {@code count} connections subscribe to {@code channel}. */
    static void awaitSubscribers(RedissonClient observer, String channel, long count)
            throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        long seen = -1;
        while (System.nanoTime() < deadline) {
            seen = observer.getTopic(channel).countSubscribers();
            if (seen == count) {
                return;
            }
            Thread.sleep(20);
        }
        fail(count + " subscriber(s) expected on " + channel + ", found " + seen);
    }
}
