package dev.polylock.interop;

import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.TestInfo;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

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
}
