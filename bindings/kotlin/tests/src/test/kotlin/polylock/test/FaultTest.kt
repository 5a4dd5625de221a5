package polylock.test

import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicReference
import kotlin.concurrent.thread
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
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
import polylock.ClientOptions
import polylock.LockException
import polylock.LostListener

/**
 * Faults seen through the Kotlin binding: an acquire whose outcome is unknown (the server paused
 * past the response timeout) leaves no lock behind, and `shutdown()` ends the waits and holds
 * made through the client at once.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class FaultTest {
    private fun withRedis(block: suspend CoroutineScope.(RedisServer) -> Unit) =
        RedisServer.start().use { redis ->
            runBlocking { withTimeout(60_000) { block(redis) } }
        }

    private fun elapsedMs(since: Long) = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - since)

    @Test
    fun `an acquire that times out while Redis is paused leaves no lock`() = withRedis { redis ->
        val pauseMs = 3_000L
        for (waitMs in listOf(0L, 500L)) {
            val name = "paused-$waitMs"
            Client.connectWith(redis.url, ClientOptions(responseTimeoutMs = 1_000)).use { client ->
                client.lock(name).use { lock ->
                    // Loads the acquire script, so the paused attempt is one EVALSHA that takes the
                    // lock when the pause ends (a first attempt would get NOSCRIPT there, and the
                    // test could not fail).
                    assertTrue(lock.acquire(waitMs = 5_000))
                    lock.release()

                    assertEquals("OK", redis.command("CLIENT", "PAUSE", "$pauseMs", "ALL"))
                    val started = System.nanoTime()
                    val outcome = try {
                        lock.acquire(waitMs = waitMs, leaseMs = 30_000)
                    } catch (timeout: LockException.Timeout) {
                        null
                    }
                    assertNotEquals(true, outcome, "waitMs $waitMs: acquired while the server was paused")
                    assertTrue(elapsedMs(started) < pauseMs, "waitMs $waitMs: the acquire waited for the pause")
                    assertFalse(lock.isHeld())

                    // The server runs the abandoned attempt when the pause ends; the core must undo
                    // it (before the fix the key stayed for the whole 30 s lease).
                    delay(pauseMs - elapsedMs(started) + 200)
                    val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5)
                    while (redis.command("EXISTS", name) != 0L && System.nanoTime() < deadline) delay(20)
                    assertEquals(
                        0L,
                        redis.command("EXISTS", name),
                        "waitMs $waitMs: the abandoned acquire still holds the lock, PTTL ${redis.command("PTTL", name)} ms",
                    )
                    Client.connect(redis.url).use { other ->
                        other.lock(name).use { next ->
                            assertTrue(next.acquire(waitMs = 5_000))
                            next.release()
                        }
                    }
                    assertFalse(lock.isHeld())
                }
            }
        }
    }

    @Test
    fun `shutdown ends waiting acquires at once and marks the holds lost`() = withRedis { redis ->
        val client = Client.connect(redis.url)
        val holder = client.lock("closing")
        val told = CompletableDeferred<LockException>()
        holder.onLost(object : LostListener {
            override fun onLost(error: LockException) {
                told.complete(error)
            }
        })
        assertTrue(holder.acquire())

        // One waiter in a coroutine, one on a plain thread with the blocking variant.
        val waiter = client.lock("closing")
        val blockingWaiter = client.lock("closing")
        val started = System.nanoTime()
        val waiting = async(Dispatchers.IO) { runCatching { waiter.acquire(waitMs = 30_000) } }
        val blockingOutcome = AtomicReference<Result<Boolean>>()
        val blocking = thread { blockingOutcome.set(runCatching { blockingWaiter.acquireBlocking(waitMs = 30_000) }) }
        delay(500)
        assertFalse(waiting.isCompleted, "the waiter waits while the lock is held")
        assertTrue(blocking.isAlive, "the blocking waiter waits while the lock is held")

        assertEquals(listOf("closing"), client.shutdown())
        val outcomes = listOf(
            withTimeout(10_000) { waiting.await() },
            withContext(Dispatchers.IO) {
                blocking.join(10_000)
                blockingOutcome.get() ?: error("the blocking waiter was not woken by shutdown()")
            },
        )
        assertTrue(elapsedMs(started) < 5_000, "at once, far from the 30 s bound")
        for (outcome in outcomes) {
            val error = outcome.exceptionOrNull()
            assertTrue(error is LockException.Connection, "got $outcome")
            assertTrue(error!!.message!!.contains("the client is closed"), error.message)
        }

        assertFalse(holder.isHeld())
        assertTrue(holder.isLost())
        val lost = withTimeout(5_000) { told.await() }
        assertTrue(lost is LockException.LockLost, "told $lost")
        assertTrue(lost.message!!.contains("closed"), lost.message)
        // shutdown() releases nothing: the key stays until its lease ends.
        assertEquals(1L, redis.command("EXISTS", "closing"))
        listOf(waiter, blockingWaiter, holder).forEach { it.close() }
        client.close()
    }
}
