package polylock.test

import java.util.concurrent.TimeUnit
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withContext
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client

/**
 * `client.readWriteLock(name)`: its `readLock()` and `writeLock()`; a redis-server per test.
 * What every binding shows alike (results, errors, Redisson's layout) is in the conformance cases
 * (tests/conformance/behaviour.json, run by [BehaviourTest]); this class keeps Kotlin's own.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class ReadWriteLockTest {
    private fun withClient(block: suspend CoroutineScope.(RedisServer, Client) -> Unit) =
        RedisServer.start().use { redis ->
            runBlocking {
                withTimeout(60_000) { Client.connect(redis.url).use { client -> block(redis, client) } }
            }
        }

    @Test
    fun `every call gives the same owner's lock`() = withClient { _, client ->
        // Reentry of both locks, exclusion and NotHeld: the conformance cases.
        val rw = client.readWriteLock("reentrant-rw")
        val other = client.readWriteLock("reentrant-rw")
        assertEquals("reentrant-rw", rw.name())
        assertEquals(rw.readLock().owner(), rw.readLock().owner())
        assertEquals(rw.readLock().owner(), rw.writeLock().owner())
        assertNotEquals(rw.readLock().owner(), other.readLock().owner())

        assertTrue(rw.writeLock().acquire())
        assertTrue(rw.writeLock().acquire(waitMs = 0))
        // A second handle from writeLock() sees the same hold.
        assertEquals(2, rw.writeLock().holdCount())
        assertFalse(other.readLock().acquire(waitMs = 0))
        rw.writeLock().release()
        rw.writeLock().release()
        assertFalse(rw.writeLock().isHeld())
    }

    @Test
    fun `a write release wakes every waiting reader long before the 60 s lease`() = withClient { _, client ->
        val writer = client.readWriteLock("wake")
        assertTrue(writer.writeLock().acquire(leaseMs = 60_000))
        val started = System.nanoTime()
        val readers = List(3) { client.readWriteLock("wake") }
        val waiting = readers.map { reader ->
            async(Dispatchers.IO) {
                // Woken only by the lease running out, these would give up at 30 s instead.
                reader.readLock().acquire(waitMs = 30_000).also {
                    assertTrue(it)
                    assertTrue(reader.readLock().isHeld())
                }
            }
        }
        delay(300) // let them start waiting
        writer.writeLock().release()
        assertEquals(listOf(true, true, true), waiting.awaitAll())
        val wokenMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started)
        assertTrue(wokenMs < 20_000, "readers woken after $wokenMs ms: not by the write release")
        assertTrue(readers.all { it.readLock().isHeld() })
        readers.forEach { it.readLock().release() }
    }

    @Test
    fun `a Rust writer excludes Kotlin readers and its release wakes them`() = withClient { redis, client ->
        Peer(redis.url).use { rust ->
            suspend fun peer(line: String) = withContext(Dispatchers.IO) { rust.send(line) }
            val rw = client.readWriteLock("mixed-rw")
            assertEquals("ok true", peer("write_acquire mixed-rw 0 -"))
            assertFalse(rw.readLock().acquire(waitMs = 0))
            val started = System.nanoTime()
            val reader = async(Dispatchers.IO) { rw.readLock().acquire(waitMs = 30_000) }
            delay(300)
            assertEquals("ok", peer("write_release mixed-rw"))
            assertTrue(reader.await())
            val wokenMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started)
            assertTrue(wokenMs < 20_000, "woken after $wokenMs ms: not by the Rust release")
            assertEquals("ok true", peer("read_acquire mixed-rw 0 -"), "a Rust reader shares it")
            assertEquals("ok false", peer("write_acquire mixed-rw 0 -"))
            assertEquals("ok", peer("read_release mixed-rw"))
            rw.readLock().release()
        }
    }
}
