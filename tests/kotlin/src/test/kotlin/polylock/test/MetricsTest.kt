package polylock.test

import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client

/** `client.metrics()`, Kotlin's accessor of the core's counters, on a real redis-server. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class MetricsTest {
    @Test
    fun `the snapshot counts acquires, timeouts and holds per lock name`() =
        RedisServer.start().use { redis ->
            runBlocking {
                withTimeout(60_000) {
                    Client.connect(redis.url).use { client ->
                        // The default name is host:pid.
                        assertTrue(client.name().endsWith(":${ProcessHandle.current().pid()}"), client.name())
                        val first = client.lock("metrics:kotlin")
                        val second = client.lock("metrics:kotlin")
                        assertTrue(first.acquire())
                        assertFalse(second.acquire(waitMs = 50))
                        var lock = client.metrics().locks.single { it.name == "metrics:kotlin" }
                        assertEquals("lock", lock.kind)
                        assertEquals(1uL, lock.acquired)
                        assertEquals(1uL, lock.timedOut)
                        assertEquals(1L, lock.holds)
                        assertEquals(0L, lock.waiters)
                        assertEquals(2uL, lock.waitTime.count)
                        assertEquals(lock.waitTime.boundsSeconds.size + 1, lock.waitTime.bucketCounts.size)
                        first.release()
                        lock = client.metrics().locks.single { it.name == "metrics:kotlin" }
                        assertEquals(0L, lock.holds)
                        assertEquals(1uL, lock.holdTime.count)
                        assertTrue(client.metrics().connection.serverCalls > 0uL)
                        first.close()
                        second.close()
                    }
                }
            }
        }
}
