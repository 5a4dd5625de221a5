package polylock.test

import java.util.Collections
import java.util.concurrent.TimeUnit
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
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
import polylock.LockDefaults
import polylock.LockException
import polylock.defaultWait
import polylock.fifoLock
import polylock.withLock

/**
 * polylock's FIFO lock through the uniffi binding (`client.fifoLock`): arrival order in the line
 * `polylock_fifo_line:{name}`, a waiter that gives up leaving it at once, the Duration idiom and
 * the docs example. Reentrancy and exclusion in the lock hash, as every binding shows them, are
 * conformance cases (tests/conformance/behaviour.json, run by [BehaviourTest]).
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class FifoLockTest {
    private fun line(name: String) = "polylock_fifo_line:{$name}"

    private fun record(name: String, owner: String) = "polylock_fifo_waiter:{$name}:$owner"

    private fun lineLength(redis: RedisServer, name: String): Long = redis.command("LLEN", line(name)) as Long

    @Suppress("UNCHECKED_CAST")
    private fun lineEntries(redis: RedisServer, name: String): List<String> =
        redis.command("LRANGE", line(name), "0", "-1") as List<String>

    private suspend fun awaitLineLength(redis: RedisServer, name: String, length: Long) {
        withTimeout(5_000) {
            while (lineLength(redis, name) != length) delay(10)
        }
    }

    @Test
    fun `waiters are served in arrival order`() = RedisServer.start().use { redis ->
        runBlocking {
            withContext(Dispatchers.IO) {
                Client.connectWith(redis.url, ClientOptions(fairQueueTimeoutMs = 60_000)).use { client ->
                    val holder = client.fifoLock("fifo")
                    assertTrue(holder.acquire(leaseMs = 60_000))
                    val order = Collections.synchronizedList(mutableListOf<Int>())
                    val locks = (0 until 5).map { client.fifoLock("fifo") }
                    val owners = locks.map { it.owner() }
                    val waiters = locks.mapIndexed { index, lock ->
                        val waiter = async {
                            assertTrue(lock.acquire())
                            order.add(index)
                            lock.release()
                        }
                        // The next waiter arrives only once this one stands in line.
                        awaitLineLength(redis, "fifo", index + 1L)
                        waiter
                    }
                    // The line holds the owners in arrival order, each with a live record whose
                    // TTL is the fair queue timeout.
                    assertEquals(owners, lineEntries(redis, "fifo"))
                    for (owner in owners) {
                        val ttl = redis.command("PTTL", record("fifo", owner)) as Long
                        assertTrue(ttl in 1..60_000, "record of $owner has PTTL $ttl")
                    }
                    holder.release()
                    waiters.awaitAll()
                    locks.forEach { it.close() }
                    assertEquals((0 until 5).toList(), order.toList())
                    assertEquals(0L, redis.command("EXISTS", line("fifo")))
                    assertEquals(0L, redis.command("EXISTS", "fifo"))
                    for (owner in owners) assertEquals(0L, redis.command("EXISTS", record("fifo", owner)), owner)
                    // The metrics count the handles under the FIFO lock's own kind.
                    val metrics = client.metrics().locks.single { it.name == "fifo" }
                    assertEquals("fifo_lock", metrics.kind)
                    assertEquals(6uL, metrics.acquired)
                }
            }
        }
    }

    @Test
    fun `a waiter whose wait runs out leaves the line at once`() = RedisServer.start().use { redis ->
        runBlocking {
            withContext(Dispatchers.IO) {
                Client.connectWith(redis.url, ClientOptions(fairQueueTimeoutMs = 60_000)).use { client ->
                    val holder = client.fifoLock("skip")
                    assertTrue(holder.acquire(leaseMs = 60_000))

                    // A single try takes no place in line.
                    val trying = client.fifoLock("skip")
                    assertFalse(trying.acquire(waitMs = 0))
                    assertEquals(0L, lineLength(redis, "skip"))
                    assertEquals(0L, redis.command("EXISTS", record("skip", trying.owner())))

                    // A waiter stands in line while it waits (its record would outlive the test),
                    // and is gone from it, record and all, as soon as its wait runs out.
                    val impatient = client.fifoLock("skip")
                    val giving = async { impatient.acquire(waitMs = 1_000) }
                    awaitLineLength(redis, "skip", 1)
                    assertEquals(listOf(impatient.owner()), lineEntries(redis, "skip"))
                    assertEquals(1L, redis.command("EXISTS", record("skip", impatient.owner())))
                    assertFalse(withTimeout(10_000) { giving.await() })
                    assertEquals(0L, lineLength(redis, "skip"))
                    assertEquals(0L, redis.command("EXISTS", record("skip", impatient.owner())))

                    // The next waiter is served on the holder's release.
                    val patient = client.fifoLock("skip")
                    val waiting = async { patient.acquire() }
                    awaitLineLength(redis, "skip", 1)
                    assertEquals(listOf(patient.owner()), lineEntries(redis, "skip"))
                    holder.release()
                    assertTrue(withTimeout(10_000) { waiting.await() })
                    assertTrue(patient.isHeld())
                    assertFalse(impatient.isHeld())
                    assertEquals("1", redis.command("HGET", "skip", patient.owner()))
                    patient.release()
                    assertEquals(0L, redis.command("EXISTS", "skip"))
                }
            }
        }
    }

    @Test
    fun `the Duration idiom sets the FIFO lock's defaults`() = RedisServer.start().use { redis ->
        runBlocking {
            Client.connect(redis.url).use { client ->
                val holder = client.fifoLock("fifo-defaults")
                val waiter = client.fifoLock("fifo-defaults", wait = 300.milliseconds, lease = 5.seconds)
                assertEquals(LockDefaults(waitMs = 300, leaseMs = 5_000), waiter.defaults())
                assertEquals(300.milliseconds, waiter.defaultWait)
                assertTrue(holder.acquire())
                val started = System.nanoTime()
                assertFalse(waiter.acquire()) // the default wait of 300 ms runs out
                val waitedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started)
                assertTrue(waitedMs >= 300, "the default wait of 300 ms took $waitedMs ms")
                assertEquals(0L, lineLength(redis, "fifo-defaults"))
                holder.release()
                assertTrue(waiter.acquire())
                val pttl = redis.command("PTTL", "fifo-defaults") as Long
                assertTrue(pttl in 1..5_000, "the default lease of 5 s left a PTTL of $pttl ms")
                waiter.release()
                // The idiom made a FIFO lock (not a fair one under the same call).
                val kinds = client.metrics().locks.filter { it.name == "fifo-defaults" }.map { it.kind }
                assertEquals(listOf("fifo_lock"), kinds)
                val negativeWait = expectThrows<LockException.InvalidArgument> {
                    client.fifoLock("fifo-defaults", waitMs = -1)
                }
                assertTrue(negativeWait.message!!.contains("wait"), negativeWait.message)
            }
        }
    }

    @Test
    fun `the guide's FIFO lock example runs`() = RedisServer.start().use { redis ->
        val steps = mutableListOf<String>()
        fun runNightlyJob() = steps.add("ran")
        runBlocking {
            Client.connect(redis.url).use { client ->
                // --- docs/kotlin-swift.md: FIFO lock ---
                // Only polylock clients wait on this name: no Redisson interop needed, fewer server calls.
                val jobs = client.fifoLock("jobs:nightly", wait = 30.seconds)
                jobs.withLock { runNightlyJob() }
                // --- end ---
                assertFalse(jobs.isHeld())
            }
        }
        assertEquals(listOf("ran"), steps)
        assertEquals(0L, redis.command("EXISTS", "jobs:nightly"))
    }
}
