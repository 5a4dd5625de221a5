package consumer

import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import polylock.Client
import polylock.lock
import polylock.test.RedisServer
import polylock.withLock

/** The installed package: the native library comes from the jar, a real redis-server serves. */
class ConsumerTest {
    @Test
    fun `takes and releases a lock with the library from the jar`() {
        assertNull(System.getProperty("jna.library.path"), "the library must come from the jar")
        RedisServer.start().use { redis ->
            runBlocking {
                Client.connect(redis.url).use { client ->
                    val lock = client.lock("consumer-lock", wait = 5.seconds, lease = 10.seconds)
                    val inside = lock.withLock {
                        assertTrue(lock.isHeld())
                        assertTrue(lock.isLocked())
                        "done"
                    }
                    assertEquals("done", inside)
                    assertFalse(lock.isLocked())
                }
            }
        }
    }
}
