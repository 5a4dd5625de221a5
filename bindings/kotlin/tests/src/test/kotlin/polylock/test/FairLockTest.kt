package polylock.test

import java.util.Collections
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withContext
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.ClientOptions

/** The fair lock through the uniffi binding: FIFO order and a waiter that gives up leaving the queue. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class FairLockTest {
    private fun queueLength(redis: RedisServer, name: String): Long =
        redis.command("LLEN", "redisson_lock_queue:{$name}") as Long

    private suspend fun awaitQueueLength(redis: RedisServer, name: String, length: Long) {
        withTimeout(5_000) {
            while (queueLength(redis, name) != length) delay(10)
        }
    }

    @Test
    fun `waiters are served in arrival order`() = RedisServer.start().use { redis ->
        runBlocking {
            withContext(Dispatchers.IO) {
                Client.connectWith(redis.url, ClientOptions(fairQueueTimeoutMs = 60_000)).use { client ->
                    val holder = client.fairLock("fifo")
                    assertTrue(holder.acquire(leaseMs = 60_000))
                    val order = Collections.synchronizedList(mutableListOf<Int>())
                    val waiters = (0 until 5).map { index ->
                        val waiter = async {
                            client.fairLock("fifo").use { lock ->
                                assertTrue(lock.acquire())
                                order.add(index)
                                lock.release()
                            }
                        }
                        awaitQueueLength(redis, "fifo", index + 1L)
                        waiter
                    }
                    holder.release()
                    waiters.awaitAll()
                    assertEquals((0 until 5).toList(), order.toList())
                    assertEquals(0L, queueLength(redis, "fifo"))
                }
            }
        }
    }

    @Test
    fun `a waiter whose wait runs out leaves the queue at once`() = RedisServer.start().use { redis ->
        runBlocking {
            withContext(Dispatchers.IO) {
                Client.connectWith(redis.url, ClientOptions(fairQueueTimeoutMs = 60_000)).use { client ->
                    val holder = client.fairLock("skip")
                    assertTrue(holder.acquire(leaseMs = 60_000))
                    val impatient = client.fairLock("skip")
                    assertFalse(impatient.acquire(waitMs = 300))
                    assertEquals(0L, queueLength(redis, "skip"))
                    val patient = client.fairLock("skip")
                    val waiting = async { patient.acquire() }
                    awaitQueueLength(redis, "skip", 1)
                    holder.release()
                    assertTrue(withTimeout(10_000) { waiting.await() })
                    assertTrue(patient.isHeld())
                    patient.release()
                }
            }
        }
    }
}
