package polylock.test

import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.async
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertSame
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.ClientOptions
import polylock.LockException
import polylock.acquire
import polylock.withLock

/** `client.withLock(name, wait, lease) { }`: a function run under a lock, against a real redis-server. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class ClientWithLockTest {
    private fun withClient(block: suspend (RedisServer, Client) -> Unit) =
        RedisServer.start().use { redis ->
            runBlocking {
                withTimeout(60_000) { Client.connect(redis.url).use { client -> block(redis, client) } }
            }
        }

    @Test
    fun `concurrent calls never overlap`() = withClient { _, client ->
        val inside = AtomicInteger()
        val most = AtomicInteger()
        val calls = AtomicInteger()
        coroutineScope {
            (1..4).map {
                async(Dispatchers.Default) {
                    repeat(5) {
                        client.withLock("overlap") {
                            most.accumulateAndGet(inside.incrementAndGet(), ::maxOf)
                            calls.incrementAndGet()
                            delay(20) // a window another caller would enter without the lock
                            inside.decrementAndGet()
                        }
                    }
                }
            }.awaitAll()
        }
        assertEquals(20, calls.get())
        assertEquals(1, most.get())
    }

    @Test
    fun `the result and the exception pass through and the lock is released`() = withClient { redis, client ->
        val result = client.withLock("through", wait = 5.seconds, lease = 30.seconds) {
            assertEquals(1L, redis.command("EXISTS", "through"), "runs holding the lock")
            42
        }
        assertEquals(42, result)
        assertEquals(0L, redis.command("EXISTS", "through"))
        val failure = IllegalStateException("block failed")
        val thrown = expectThrows<IllegalStateException> {
            client.withLock("through") { throw failure }
        }
        assertSame(failure, thrown)
        assertEquals(0L, redis.command("EXISTS", "through"), "released after the exception")
        assertEquals("again", client.withLock("through") { "again" })
    }

    @Test
    fun `a held lock makes a short wait fail with Timeout naming the holder`() = withClient { redis, client ->
        Client.connectWith(redis.url, ClientOptions(name = "with-lock-holder")).use { holderClient ->
            holderClient.lock("held", null, null).use { holder ->
                assertTrue(holder.acquire(lease = 30.seconds))
                var ran = false
                val timeout = expectThrows<LockException.Timeout> {
                    client.withLock("held", wait = 200.milliseconds) { ran = true }
                }
                assertFalse(ran)
                // The core's message, as a timed-out lock.withLock gives it.
                val message = timeout.message ?: ""
                assertTrue(
                    message.startsWith(
                        "lock 'held' was not acquired within 200 ms: another owner held it all that time " +
                            "(held by 'with-lock-holder'",
                    ),
                    message,
                )
                holder.release()
                assertEquals("free", client.withLock("held", wait = 5.seconds) { "free" })
            }
        }
    }

    @Test
    fun `the example of the Kotlin guide runs`() = withClient { redis, client ->
        val before = processedOrders.get()
        // --- docs/kotlin-swift.md: a function under a lock ---
        val total = client.withLock("orders:42", wait = 5.seconds, lease = 30.seconds) {
            processOrder()   // under the lock; a new handle per call, closed afterwards
            42
        }
        assertEquals(42, total)
        assertEquals(before + 1, processedOrders.get())
        assertEquals(0L, redis.command("EXISTS", "orders:42"))
    }
}
