package polylock.test

import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger
import kotlin.time.Duration
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.minutes
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.LockException
import polylock.jobLock
import polylock.tryRun
import polylock.runJob

/** The run-once job lock: `client.jobLock(name, atMost, atLeast)` and `client.runJob(...) { }`, against a real redis-server. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class JobLockTest {
    private fun withClients(block: suspend (RedisServer, Client, Client) -> Unit) =
        RedisServer.start().use { redis ->
            runBlocking {
                withTimeout(60_000) {
                    Client.connect(redis.url).use { client ->
                        Client.connect(redis.url).use { other -> block(redis, client, other) }
                    }
                }
            }
        }

    private fun pttl(redis: RedisServer, key: String): Long = redis.command("PTTL", key) as Long

    @Test
    fun `a held job lock skips without waiting`() = withClients { _, client, other ->
        val hold = client.jobLock("skip", 60.seconds).tryAcquire()!!
        assertTrue(hold.isHeld())
        val calls = AtomicInteger()
        val started = System.nanoTime()
        assertNull(other.runJob("skip", 60.seconds) { calls.incrementAndGet() })
        assertEquals(0, calls.get())
        assertTrue(System.nanoTime() - started < 10_000_000_000L, "one look, not a wait for the 60 s lease")
        hold.finish()
        assertFalse(hold.isHeld())
        assertEquals(7, other.runJob("skip", 60.seconds) { 7 }, "released at once (atLeast 0)")
    }

    @Test
    fun `atLeast keeps the lock after a fast job and the next slot runs after it`() = withClients { redis, client, other ->
        assertEquals("fast", client.runJob("at-least", 10.seconds, 1500.milliseconds) { "fast" })
        val ttl = pttl(redis, "at-least")
        assertTrue(ttl in 1..1500, "pttl $ttl")
        assertNull(other.runJob("at-least", 10.seconds, 1500.milliseconds) { "late node" })
        val until = System.nanoTime() + 10_000_000_000L
        while (redis.command("EXISTS", "at-least") == 1L && System.nanoTime() < until) delay(20)
        assertEquals("next slot", other.runJob("at-least", 10.seconds, 1500.milliseconds) { "next slot" })
    }

    @Test
    fun `an exception passes through after the atLeast handling`() = withClients { redis, client, _ ->
        val failure = IllegalStateException("the job failed")
        val thrown = expectThrows<IllegalStateException> {
            client.jobLock("failing", 10.seconds, 2.seconds).tryRun { throw failure }
        }
        assertTrue(thrown === failure)
        val ttl = pttl(redis, "failing")
        assertTrue(ttl in 1..2000, "kept for atLeast, not released: pttl $ttl")
    }

    @Test
    fun `a late finish does not touch the next holder's lock`() = withClients { redis, client, other ->
        val hold = client.jobLock("late", 300.milliseconds, 300.milliseconds).tryAcquire()!!
        delay(600)
        other.lock("late").use { next ->
            assertTrue(next.acquire(0, 60_000))
            hold.finish()
            assertTrue(pttl(redis, "late") > 50_000, "the next holder's lease was changed")
            next.release()
        }
    }

    @Test
    fun `bad options are rejected by the core with InvalidArgument`() = withClients { _, client, _ ->
        val zero = expectThrows<LockException.InvalidArgument> { client.jobLock("bad", Duration.ZERO) }
        assertEquals("invalid argument: at_most must be from 1 ms to 10 years, got 0 ms", zero.message)
        val longer = expectThrows<LockException.InvalidArgument> { client.jobLock("bad", 1.seconds, 2.seconds) }
        assertEquals("invalid argument: at_least (2000 ms) must not be longer than at_most (1000 ms)", longer.message)
    }

    private suspend fun sendReport(): String {
        delay(1)
        return "sent"
    }

    @Test
    fun `the docs examples run`() = withClients { _, client, other ->
        // --- docs/recipes.md: run-once job lock ---
        val sent: String? = client.runJob("reports:nightly", atMost = 10.minutes, atLeast = 30.seconds) { sendReport() }
        assertEquals("sent", sent)
        assertNull(other.runJob("reports:nightly", atMost = 10.minutes, atLeast = 30.seconds) { sendReport() })
        // --- docs/kotlin-swift.md: run-once job lock ---
        val removed: Int? = client.runJob("cleanup:hourly", atMost = 5.minutes, atLeast = 10.seconds) { 3 }
        assertEquals(3, removed)
    }
}
