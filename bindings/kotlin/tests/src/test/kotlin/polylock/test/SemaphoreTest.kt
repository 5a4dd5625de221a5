package polylock.test

import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.atomic.AtomicReference
import kotlin.concurrent.thread
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withContext
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.yield
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.LockException

/**
 * `client.semaphore(name)` and `client.expirableSemaphore(name)`; a redis-server per test.
 * What every binding shows alike (results, errors, Redisson's layout) is in the conformance cases
 * (tests/conformance/behaviour.json, run by [BehaviourTest]); this class keeps Kotlin's own.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SemaphoreTest {
    private fun withRedis(block: suspend CoroutineScope.(RedisServer) -> Unit) =
        RedisServer.start().use { redis ->
            runBlocking { withTimeout(60_000) { block(redis) } }
        }

    private fun withClient(block: suspend CoroutineScope.(RedisServer, Client) -> Unit) =
        withRedis { redis -> Client.connect(redis.url).use { client -> block(redis, client) } }

    private fun millisSince(started: Long) = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started)

    @Test
    fun `permits are conserved under concurrent acquire and release from coroutines and threads`() =
        withRedis { redis ->
            val clients = listOf(Client.connect(redis.url), Client.connect(redis.url))
            val permits = 3
            assertTrue(clients[0].semaphore("pool").trySetPermits(permits))
            assertFalse(clients[1].semaphore("pool").trySetPermits(10), "set already")
            assertEquals(3L, clients[1].semaphore("pool").availablePermits())

            val inside = AtomicInteger(0)
            val most = AtomicInteger(0)
            val rounds = 15
            fun enter() = inside.incrementAndGet().also { now -> most.accumulateAndGet(now) { a, b -> maxOf(a, b) } }

            val failure = AtomicReference<Throwable?>(null)
            val threads = (0 until 2).map { worker ->
                thread {
                    runCatching {
                        clients[worker % 2].semaphore("pool").use { semaphore ->
                            repeat(rounds) {
                                check(semaphore.acquireBlocking(1, waitMs = 30_000))
                                enter()
                                Thread.sleep(1)
                                inside.decrementAndGet()
                                semaphore.releaseBlocking(1)
                            }
                        }
                    }.onFailure { failure.compareAndSet(null, it) }
                }
            }
            withContext(Dispatchers.IO) {
                (0 until 6).map { worker ->
                    async {
                        clients[worker % 2].semaphore("pool").use { semaphore ->
                            repeat(rounds) {
                                // Two permits at once now and then: still never more than three in use.
                                val taking = if (it % 5 == 0) 2 else 1
                                assertTrue(semaphore.acquire(taking, waitMs = 30_000))
                                repeat(taking) { enter() }
                                yield()
                                repeat(taking) { inside.decrementAndGet() }
                                semaphore.release(taking)
                            }
                        }
                    }
                }.awaitAll()
                threads.forEach { it.join(60_000) }
            }
            failure.get()?.let { throw it }
            assertTrue(most.get() <= permits, "${most.get()} permits in use at once, of $permits")
            assertEquals(0, inside.get())
            assertEquals(3L, clients[0].semaphore("pool").availablePermits())
            assertEquals("3", redis.command("GET", "pool"))
            clients.forEach { it.close() }
        }

    @Test
    fun `a waiter is woken by a release long before its wait bound, and a wait runs out`() = withClient { _, client ->
        val semaphore = client.semaphore("wake")
        assertTrue(semaphore.trySetPermits(1))
        assertTrue(semaphore.acquire(1, waitMs = 0))
        assertEquals(0L, semaphore.availablePermits())

        val started = System.nanoTime()
        assertFalse(semaphore.acquire(1, waitMs = 300))
        assertTrue(millisSince(started) >= 300, "gave up after ${millisSince(started)} ms, before its 300 ms wait")

        val waitStarted = System.nanoTime()
        val waiter = async(Dispatchers.IO) { client.semaphore("wake").acquire(1, waitMs = 30_000) }
        delay(300)
        semaphore.release(1) // any handle may release
        assertTrue(waiter.await())
        val wokenMs = millisSince(waitStarted)
        assertTrue(wokenMs < 20_000, "woken after $wokenMs ms: not by the release")
        assertEquals(0L, semaphore.availablePermits())
        // addPermits below zero: the conformance cases.
    }

    @Test
    fun `cancelling a coroutine waiting in acquire takes nothing`() = withClient { _, client ->
        val semaphore = client.semaphore("cancelled")
        assertTrue(semaphore.trySetPermits(1))
        assertTrue(semaphore.acquire(1))
        val waiting = launch(Dispatchers.IO) { client.semaphore("cancelled").acquire(1) }
        delay(300)
        waiting.cancelAndJoin()
        semaphore.release(1)
        // A waiter that survived its cancellation would take the permit; this acquire would wait.
        assertTrue(semaphore.acquire(1, waitMs = 10_000))
        semaphore.release(1)
        assertEquals(1L, semaphore.availablePermits())

        val expirable = client.expirableSemaphore("cancelled-x")
        assertTrue(expirable.trySetPermits(1))
        val held = expirable.acquire()!!
        val abandoned = client.expirableSemaphore("cancelled-x")
        val waitingX = launch(Dispatchers.IO) { abandoned.acquire() }
        delay(300)
        waitingX.cancelAndJoin()
        expirable.release(held)
        val again = expirable.acquire(waitMs = 10_000)
        assertNotNull(again)
        assertEquals(emptyList<String>(), abandoned.heldPermits())
        expirable.release(again!!)
        assertEquals(1L, expirable.availablePermits())
    }

    @Test
    fun `expirable permits through the blocking variants, and back after a fixed lease`() =
        withClient { _, client ->
            // Ids, their release by id (also from another client, the acquirer then finding its
            // permit lost), held ids and NotHeld: the conformance cases. Here: the blocking variants.
            val slots = client.expirableSemaphore("slots")
            assertEquals("slots", slots.name())
            assertTrue(slots.trySetPermits(2))
            val first = slots.acquireBlocking(waitMs = 0)!!
            val second = slots.acquireBlocking(waitMs = 0)!!
            assertNull(slots.acquireBlocking(waitMs = 200))
            slots.releaseBlocking(first)
            slots.releaseBlocking(second)
            assertEquals(2L, slots.availablePermits())
            expectThrows<LockException.NotHeld> { slots.releaseBlocking(second) }

            // A fixed lease: the permit comes back by itself, and its release says it was lost.
            val leased = slots.acquire(leaseMs = 300)!!
            assertEquals(1L, slots.availablePermits())
            val others = client.expirableSemaphore("slots")
            val a = others.acquire(waitMs = 0)!!
            // Both permits in use until the lease runs out; then this acquire gets the leased one.
            val b = others.acquire(waitMs = 10_000)
            assertNotNull(b)
            expectThrows<LockException.LockLost> { slots.release(leased) }
            others.release(a)
            others.release(b!!)
            assertEquals(2L, others.availablePermits())
        }

    @Test
    fun `closing an expirable semaphore handle releases its permits in the background`() = withClient { _, client ->
        val closed = client.expirableSemaphore("closed")
        assertTrue(closed.trySetPermits(1))
        assertNotNull(closed.acquire())
        closed.close()
        // Watchdog-renewed with a 30 s lease: only the background release frees it this soon.
        val next = client.expirableSemaphore("closed")
        val permit = next.acquire(waitMs = 10_000)
        assertNotNull(permit)
        next.release(permit!!)
    }

    @Test
    fun `an expirable permit of a killed holder comes back while a plain permit does not`() = withRedis { redis ->
        // The Rust peer renews its watchdog permits every third of 1 s.
        Peer(redis.url, watchdogTimeoutMs = 1_000).use { rust ->
            Client.connect(redis.url).use { client ->
                suspend fun peer(line: String) = withContext(Dispatchers.IO) { rust.send(line) }
                val plain = client.semaphore("plain")
                val fixed = client.expirableSemaphore("fixed")
                val watched = client.expirableSemaphore("watched")
                assertTrue(plain.trySetPermits(1))
                assertTrue(fixed.trySetPermits(1))
                assertTrue(watched.trySetPermits(1))
                assertEquals("ok true", peer("sem_acquire plain 1 0"))
                assertTrue(Regex("ok [0-9a-f]{32}").matches(peer("xsem_acquire fixed 0 1500")))
                assertTrue(Regex("ok [0-9a-f]{32}").matches(peer("xsem_acquire watched 0 -")))

                // While the peer lives, its watchdog keeps the permit past its 1 s lease.
                assertNull(watched.acquire(waitMs = 2_500))
                assertEquals(0L, watched.availablePermits())

                rust.kill()
                val killed = System.nanoTime()
                val fromFixed = fixed.acquire(waitMs = 15_000)
                val fromWatched = watched.acquire(waitMs = 15_000)
                assertNotNull(fromFixed, "the fixed-lease permit did not come back")
                assertNotNull(fromWatched, "the watchdog permit did not come back")
                val backMs = millisSince(killed)
                assertTrue(backMs < 15_000, "back $backMs ms after the kill")

                // The plain permit is gone for good: both expirable permits came back meanwhile,
                // and a wait longer than their leases still finds none.
                assertEquals(0L, plain.availablePermits())
                assertFalse(plain.acquire(1, waitMs = 2_000))
                assertEquals(0L, plain.availablePermits())
                plain.addPermits(1) // the only way back
                assertTrue(plain.acquire(1, waitMs = 0))

                fixed.release(fromFixed!!)
                watched.release(fromWatched!!)
            }
        }
    }
}
