package polylock.test

import java.util.concurrent.TimeUnit
import kotlin.concurrent.thread
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.async
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.LockException
import polylock.awaitZero
import polylock.awaitZeroBlocking

/** `client.countDownLatch(name)` (Redisson RCountDownLatch layout); a redis-server per test. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class CountDownLatchTest {
    private fun withClient(block: suspend CoroutineScope.(RedisServer, Client) -> Unit) =
        RedisServer.start().use { redis ->
            runBlocking { withTimeout(60_000) { Client.connect(redis.url).use { client -> block(redis, client) } } }
        }

    @Test
    fun `the blocking variants and Duration waits count down to an open latch`() = withClient { _, client ->
        // The count set once, counted down, deleted, Redisson's string: the conformance cases.
        val latch = client.countDownLatch("ready")
        assertEquals("ready", latch.name())
        assertTrue(latch.trySetCountBlocking(1))
        assertFalse(latch.awaitZero(0.milliseconds))
        latch.countDownBlocking()
        assertTrue(latch.awaitZero(0.milliseconds))
    }

    @Test
    fun `waiters wake when another client counts down, long before their timeout`() = withClient { redis, client ->
        assertTrue(client.countDownLatch("go").trySetCount(1))
        val started = System.nanoTime()
        val coroutine = async { client.countDownLatch("go").awaitZero(60.seconds) }
        var fromThread = false
        val blocking = thread { fromThread = client.countDownLatch("go").awaitZeroBlocking(60.seconds) }
        delay(300)
        Client.connect(redis.url).use { other -> other.countDownLatch("go").countDown() }
        assertTrue(coroutine.await())
        blocking.join(30_000)
        assertTrue(fromThread)
        assertTrue(TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - started) < 30)
    }

    @Test
    fun `bad input is the core's InvalidArgument`() = withClient { _, client ->
        val latch = client.countDownLatch("bad")
        for (count in listOf(0L, -1L, 1L shl 53)) {
            val error = expectThrows<LockException.InvalidArgument> { latch.trySetCount(count) }
            assertEquals("invalid argument: count must be from 1 to 9007199254740991, got $count", error.message)
        }
        val error = expectThrows<LockException.InvalidArgument> { latch.awaitZero(-1L) }
        assertTrue(error.message!!.contains("timeout must be"), error.message)
        expectThrows<LockException.InvalidArgument> { client.countDownLatch("") }
    }

    /** The example of docs/recipes.md and docs/kotlin-swift.md, verbatim. */
    @Test
    fun `the docs example runs`() = withClient { _, client ->
        val latch = client.countDownLatch("workers-ready")
        latch.trySetCount(3)
        repeat(3) { latch.countDown() }
        check(latch.awaitZero(30.seconds)) { "the workers are not ready after 30 s" }
    }
}
