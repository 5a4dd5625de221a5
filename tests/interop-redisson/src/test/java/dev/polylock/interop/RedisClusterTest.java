package dev.polylock.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.redisson.api.RBucket;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;

/** The test kit's cluster works as Redisson in cluster mode sees it. */
class RedisClusterTest {
    @Test
    void redissonInClusterModeWritesAndReadsThroughTheCluster() throws Exception {
        try (RedisCluster cluster = RedisCluster.start()) {
            assertEquals(6, cluster.nodes().size());
            assertTrue(cluster.url().startsWith("redis+cluster://127.0.0.1:"), cluster.url());
            // Interop's cluster client reads from the primaries: Redisson's default reads from
            // replicas, and a replica, fed asynchronously, may not have the value written a
            // moment before (this test failed so twice in CI).
            RedissonClient redisson = Interop.redissonCluster(cluster.nodeAddresses());
            try {
                for (String key : new String[] {"{a}key", "{b}key", "{c}key"}) {
                    RBucket<String> bucket = redisson.getBucket(key, StringCodec.INSTANCE);
                    bucket.set("value of " + key);
                    assertEquals("value of " + key, bucket.get(),
                            "read back through Redisson; every node: " + everyNode(cluster, key));
                    // The value is on the primary that serves the key's slot.
                    int primary = cluster.primaryForKey(key);
                    assertEquals("value of " + key, cluster.server(primary).command("GET", key),
                            "GET " + key + " on " + primary + "; every node: " + everyNode(cluster, key));
                }
            } finally {
                redisson.shutdown();
            }
        }
    }

    /** What each node answers to GET key, and the cluster as the first node sees it. */
    private static String everyNode(RedisCluster cluster, String key) {
        StringBuilder seen = new StringBuilder();
        try {
            for (RedisCluster.Node node : cluster.nodes()) {
                Object value;
                try {
                    value = cluster.server(node.port()).command("GET", key);
                } catch (Exception refused) {
                    value = refused.getMessage();
                }
                seen.append('\n').append(node).append(" GET: ").append(value);
            }
        } catch (Exception failed) {
            seen.append(failed);
        }
        return seen.toString();
    }
}
