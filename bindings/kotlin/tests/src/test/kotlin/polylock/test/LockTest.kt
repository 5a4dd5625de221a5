package polylock.test

import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.atomic.AtomicReference
import kotlin.concurrent.thread
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.CoroutineStart
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
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.ClientOptions
import polylock.LockException
import polylock.LostListener

/** Each test starts its own redis-server and stops it afterwards. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class LockTest {
    private fun withRedis(block: suspend CoroutineScope.(RedisServer) -> Unit) =
        RedisServer.start().use { redis ->
            runBlocking { withTimeout(60_000) { block(redis) } }
        }

    private fun withClient(
        options: ClientOptions = ClientOptions(),
        block: suspend CoroutineScope.(RedisServer, Client) -> Unit,
    ) = withRedis { redis ->
        Client.connectWith(redis.url, options).use { client -> block(redis, client) }
    }

    @Test
    fun `coroutines with separate handles exclude each other on a GET-SET counter`() =
        withRedis { redis ->
            val clients = listOf(Client.connect(redis.url), Client.connect(redis.url))
            val workers = 4
            val rounds = 25
            val inside = AtomicInteger(0)
            val overlaps = AtomicInteger(0)
            coroutineScopeOn(Dispatchers.IO) {
                (0 until workers).map { worker ->
                    async {
                        clients[worker % 2].lock("counter-lock").use { lock ->
                            RedisConnection(redis.port).use { redisConnection ->
                                repeat(rounds) {
                                    assertTrue(lock.acquire())
                                    if (inside.incrementAndGet() != 1) overlaps.incrementAndGet()
                                    // A non-atomic read-modify-write: only exclusion keeps it exact.
                                    val value = (redisConnection.command("GET", "counter") as String?)?.toInt() ?: 0
                                    yield()
                                    redisConnection.command("SET", "counter", "${value + 1}")
                                    inside.decrementAndGet()
                                    lock.release()
                                }
                            }
                        }
                    }
                }.awaitAll()
            }
            assertEquals("${workers * rounds}", redis.command("GET", "counter"))
            assertEquals(0, overlaps.get())
            clients.forEach { it.close() }
        }

    @Test
    fun `plain threads with the blocking variants exclude each other`() = withClient { redis, client ->
        val threads = 3
        val rounds = 20
        val failure = AtomicReference<Throwable?>(null)
        val workers = (0 until threads).map {
            thread {
                runCatching {
                    client.lock("blocking-lock").use { lock ->
                        RedisConnection(redis.port).use { redisConnection ->
                            repeat(rounds) {
                                check(lock.acquireBlocking(waitMs = 30_000))
                                val value = (redisConnection.command("GET", "counter") as String?)?.toInt() ?: 0
                                Thread.sleep(1)
                                redisConnection.command("SET", "counter", "${value + 1}")
                                lock.releaseBlocking()
                            }
                        }
                    }
                }.onFailure { failure.compareAndSet(null, it) }
            }
        }
        withContext(Dispatchers.IO) { workers.forEach { it.join(60_000) } }
        failure.get()?.let { throw it }
        assertEquals("${threads * rounds}", redis.command("GET", "counter"))
    }

    @Test
    fun `two handles of one client are two owners`() = withClient { _, client ->
        // Reentry, hold counts, Redisson's hash and NotHeld: the conformance cases.
        val first = client.lock("reentrant")
        val second = client.lock("reentrant")
        assertNotEquals(first.owner(), second.owner())
        assertTrue(first.acquire())
        assertFalse(second.acquire(waitMs = 0))
        first.release()
        assertTrue(second.acquire(waitMs = 0))
        second.release()
    }

    @Test
    fun `waitMs bounds the wait and a release wakes a waiter`() = withClient { _, client ->
        val holder = client.lock("waited")
        val waiter = client.lock("waited")
        assertTrue(holder.acquire())

        val started = System.nanoTime()
        assertFalse(waiter.acquire(waitMs = 300))
        val waitedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started)
        assertTrue(waitedMs >= 300, "gave up after $waitedMs ms, before its 300 ms wait")
        assertFalse(waiter.isHeld())
        assertEquals(0, waiter.holdCount())

        val wakeStarted = System.nanoTime()
        val acquired = async { waiter.acquire(waitMs = 30_000) }
        delay(200)
        holder.release()
        assertTrue(acquired.await())
        val wokenMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - wakeStarted)
        assertTrue(wokenMs < 20_000, "woken after $wokenMs ms: not by the release")
        waiter.release()
    }

    @Test
    fun `cancelling a coroutine waiting in acquire leaves no lock held`() = withClient { _, client ->
        val holder = client.lock("cancelled")
        val next = client.lock("cancelled")
        assertTrue(holder.acquire())

        val abandoned = client.lock("cancelled")
        val waiting = launch(Dispatchers.IO) { abandoned.acquire() }
        delay(300) // let it subscribe and start waiting
        waiting.cancelAndJoin()
        holder.release()
        // Had the cancelled acquire kept the lock, its 30 s watchdog lease would block this.
        assertTrue(next.acquire(waitMs = 10_000))
        assertFalse(abandoned.isHeld())
        next.release()

        // Cancel at the moment the lock becomes free, so the cancelled acquire sometimes wins
        // the lock in Redis and the core must undo it. The one outcome allowed besides "not
        // held": the acquire completed in Rust just before the cancellation reached it (uniffi
        // then drops the result), and the handle knows that it holds the lock.
        repeat(10) { round ->
            assertTrue(holder.acquire(waitMs = 10_000), "round $round: holder")
            val racer = client.lock("cancelled")
            val racing = launch(Dispatchers.IO, start = CoroutineStart.UNDISPATCHED) { racer.acquire() }
            delay(50)
            holder.release()
            racing.cancelAndJoin()
            if (racer.isHeld()) racer.release()
            assertTrue(next.acquire(waitMs = 10_000), "round $round: a cancelled acquire left the lock held")
            next.release()
            racer.close()
        }
        abandoned.close()
    }

    @Test
    fun `the lost listener is told when the key is deleted behind a holder`() =
        withClient(ClientOptions(watchdogTimeoutMs = 300)) { redis, client ->
            val lock = client.lock("lost-by-delete")
            val told = CompletableDeferred<LockException>()
            val listenerThread = AtomicReference<Thread>()
            val probeAcquired = AtomicReference<Boolean?>(null)
            // A listener that throws is contained: the next listener is still told.
            lock.onLost(object : LostListener {
                override fun onLost(error: LockException) = throw IllegalStateException("listener bug")
            })
            lock.onLost(object : LostListener {
                override fun onLost(error: LockException) {
                    listenerThread.set(Thread.currentThread())
                    // The blocking variants work on the listener's thread (no deadlock).
                    client.lock("probe").use { probe ->
                        probeAcquired.set(probe.acquireBlocking(waitMs = 5_000))
                        probe.releaseBlocking()
                    }
                    told.complete(error)
                }
            })
            assertTrue(lock.acquire())
            assertFalse(lock.isLost())
            assertEquals(1L, redis.command("DEL", "lost-by-delete"))

            val error = withTimeout(10_000) { told.await() }
            assertTrue(error is LockException.LockLost, "told $error")
            assertTrue(error.message!!.contains("lost-by-delete"), error.message)
            assertNotEquals(Thread.currentThread(), listenerThread.get())
            assertEquals(true, probeAcquired.get())
            assertTrue(lock.isLost())
            assertFalse(lock.isHeld())
            expectThrows<LockException.LockLost> { lock.release() }
            // Lost and reported: the handle can take the lock afresh.
            assertTrue(lock.acquire(waitMs = 0))
            assertFalse(lock.isLost())
            lock.release()
        }

    @Test
    fun `the lost listener is told when a fixed lease runs out`() = withClient { _, client ->
        val lock = client.lock("lost-by-lease")
        val told = CountDownLatch(1)
        lock.onLost(object : LostListener {
            override fun onLost(error: LockException) {
                if (error is LockException.LockLost) told.countDown()
            }
        })
        assertTrue(lock.acquire(leaseMs = 200))
        assertTrue(withContext(Dispatchers.IO) { told.await(10, TimeUnit.SECONDS) })
        assertTrue(lock.isLost())
        expectThrows<LockException.LockLost> { lock.release() }
    }

    @Test
    fun `bad input gets typed exceptions`() = withClient { redis, client ->
        expectThrows<LockException.InvalidArgument> { client.lock("") }
        expectThrows<LockException.InvalidArgument> { client.lock("x".repeat(4097)) }
        val lock = client.lock("input")
        expectThrows<LockException.InvalidArgument> { lock.acquire(leaseMs = 0) }
        expectThrows<LockException.InvalidArgument> { lock.acquire(waitMs = -1) }
        expectThrows<LockException.InvalidArgument> { lock.acquireBlocking(leaseMs = -5) }
        assertFalse(lock.isHeld())
        expectThrows<LockException.NotHeld> { lock.release() }
        expectThrows<LockException.NotHeld> { lock.releaseBlocking() }
        // A key of another type (WrongType): the conformance cases.

        expectThrows<LockException.InvalidArgument> { Client.connect("not a url") }
        expectThrows<LockException.InvalidArgument> {
            Client.connectWith(redis.url, ClientOptions(watchdogTimeoutMs = 5))
        }
        expectThrows<LockException.InvalidArgument> {
            Client.connectWith(redis.url, ClientOptions(connectTimeoutMs = -1))
        }
        val nobodyListens = freePort()
        expectThrows<LockException.Connection> {
            Client.connectWith("redis://127.0.0.1:$nobodyListens/0", ClientOptions(connectTimeoutMs = 2_000))
        }
    }

    @Test
    fun `closing a handle that holds the lock releases it in the background`() = withClient { _, client ->
        val closed = client.lock("closed-handle")
        assertTrue(closed.acquire())
        assertTrue(closed.acquire())
        closed.close()
        expectThrows<IllegalStateException> { closed.isHeld() }
        val next = client.lock("closed-handle")
        // Two holds, both released by the background release: well before the 30 s lease.
        assertTrue(next.acquire(waitMs = 10_000))
        next.release()
    }

    @Test
    fun `shutdown reports held locks and later calls fail with Connection`() = withRedis { redis ->
        val client = Client.connect(redis.url)
        val lock = client.lock("after-shutdown")
        assertTrue(lock.acquire())
        assertEquals(listOf("after-shutdown"), client.shutdown())
        expectThrows<LockException.Connection> { client.lock("other").acquire(waitMs = 0) }
        // The hold was reported lost at shutdown, and release says so (as in the core).
        assertTrue(lock.isLost())
        expectThrows<LockException.LockLost> { lock.release() }
        expectThrows<LockException.Connection> { lock.acquire(waitMs = 0) }
        client.close()
        lock.close()
    }
}

private suspend fun <T> coroutineScopeOn(
    dispatcher: kotlinx.coroutines.CoroutineDispatcher,
    block: suspend CoroutineScope.() -> T,
): T = withContext(dispatcher) { block() }
