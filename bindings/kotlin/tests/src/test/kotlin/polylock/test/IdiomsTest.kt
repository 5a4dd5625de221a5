package polylock.test

import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit
import kotlin.time.Duration
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.async
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Bound
import polylock.Client
import polylock.LockDefaults
import polylock.LockException
import polylock.acquire
import polylock.acquireBlocking
import polylock.defaultLease
import polylock.defaultWait
import polylock.fairLock
import polylock.fencedLock
import polylock.fifoLock
import polylock.lock
import polylock.onLost
import polylock.remainingLease
import polylock.watchdogTimeout
import polylock.withLock

/** The per-lock defaults, remainingLease and the Kotlin idioms (Duration overloads, withLock). */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class IdiomsTest {
    private fun withClient(block: suspend CoroutineScope.(RedisServer, Client) -> Unit) =
        RedisServer.start().use { redis ->
            runBlocking {
                withTimeout(60_000) { Client.connect(redis.url).use { client -> block(redis, client) } }
            }
        }

    @Test
    fun `a lock's default wait bounds an acquire that leaves it out`() = withClient { _, client ->
        val holder = client.lock("default-wait")
        val waiter = client.lock("default-wait", wait = 300.milliseconds)
        assertEquals(300.milliseconds, waiter.defaultWait)
        assertNull(waiter.defaultLease)
        assertEquals(LockDefaults(waitMs = 300, leaseMs = null), waiter.defaults())
        assertTrue(holder.acquire())

        val started = System.nanoTime()
        assertFalse(waiter.acquire()) // the generated, millisecond call
        assertFalse(waiter.acquire(lease = 5.seconds)) // the Duration call, wait left out
        assertFalse(waiter.acquireBlocking(wait = null))
        val waitedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started)
        assertTrue(waitedMs >= 900, "three waits of the default 300 ms took $waitedMs ms")
        holder.release()
    }

    @Test
    fun `Duration INFINITE waits without bound whatever the lock's default`() = withClient { _, client ->
        val holder = client.lock("infinite-wait")
        val waiter = client.lock("infinite-wait", wait = 100.milliseconds)
        assertTrue(holder.acquire())
        val acquired = async { waiter.acquire(wait = Duration.INFINITE) }
        delay(500) // five times the default wait: an acquire with the default has given up by now
        assertFalse(acquired.isCompleted, "the unbounded acquire gave up with the default wait")
        holder.release()
        assertTrue(acquired.await())
        // The millisecond API says the same with Bound.Unbounded; Bound.Millis(0) is one attempt.
        assertTrue(waiter.acquireWith(Bound.Unbounded, Bound.LockDefault))
        assertEquals(2, waiter.holdCount())
        assertFalse(holder.acquireWith(Bound.Millis(0), Bound.LockDefault))
        waiter.release()
        waiter.release()
    }

    @Test
    fun `a lock's default lease is used unless the acquire asks for the watchdog`() = withClient { redis, client ->
        val lock = client.lock("default-lease", lease = 5.seconds)
        assertEquals(5.seconds, lock.defaultLease)
        assertTrue(lock.acquire())
        val fixed = lock.remainingLease()!!
        assertTrue(fixed > Duration.ZERO && fixed <= 5.seconds, "remaining lease $fixed")
        assertTrue((redis.command("PTTL", "default-lease") as Long) in 1..5_000)
        lock.release()

        // INFINITE: the watchdog lease (30 s here), renewed while held.
        assertEquals(30.seconds, client.watchdogTimeout)
        assertTrue(lock.acquire(lease = Duration.INFINITE))
        val watchdog = lock.remainingLease()!!
        assertTrue(watchdog > 5.seconds && watchdog <= 30.seconds, "remaining lease $watchdog")
        lock.release()
    }

    @Test
    fun `remainingLease is null when free and INFINITE for a key without expiry`() = withClient { redis, client ->
        val lock = client.fencedLock("remaining")
        assertNull(lock.remainingLease())
        assertNull(lock.remainingLeaseMs())
        assertTrue(lock.acquire(lease = 10.seconds))
        val remaining = lock.remainingLeaseMs()!!
        assertTrue(remaining in 1..10_000, "remaining $remaining ms")
        assertEquals(1L, redis.command("PERSIST", "remaining"))
        assertEquals(Duration.INFINITE, lock.remainingLease())
        assertEquals(Long.MAX_VALUE, lock.remainingLeaseMs())
        assertTrue(lock.forceUnlock())
        assertNull(lock.remainingLease())
    }

    @Test
    fun `defaults out of bounds are rejected by the core with InvalidArgument`() = withClient { _, client ->
        val zeroLease = expectThrows<LockException.InvalidArgument> { client.lock("bad", lease = Duration.ZERO) }
        assertTrue(zeroLease.message!!.contains("lease"), zeroLease.message)
        val negativeWait = expectThrows<LockException.InvalidArgument> { client.fairLock("bad", waitMs = -1) }
        assertTrue(negativeWait.message!!.contains("wait"), negativeWait.message)
        val negativeFifoWait = expectThrows<LockException.InvalidArgument> {
            client.fifoLock("bad", wait = (-1).milliseconds)
        }
        assertTrue(negativeFifoWait.message!!.contains("wait"), negativeFifoWait.message)
        val lock = client.lock("bad")
        expectThrows<LockException.InvalidArgument> { lock.acquire(wait = (-5).milliseconds) }
        assertFalse(lock.isHeld())
    }

    @Test
    fun `withLock holds the lock for its block and releases it after`() = withClient { redis, client ->
        val lock = client.lock("scoped")
        val value = lock.withLock(wait = 1.seconds) {
            assertTrue(lock.isHeld())
            assertEquals(1L, redis.command("EXISTS", "scoped"))
            42
        }
        assertEquals(42, value)
        assertFalse(lock.isHeld())
        assertFalse(lock.isLocked())
    }

    @Test
    fun `withLock releases when its block throws and rethrows the block's exception`() = withClient { _, client ->
        val lock = client.lock("scoped-throw")
        val thrown = expectThrows<IllegalStateException> {
            lock.withLock<Unit> { throw IllegalStateException("block failed") }
        }
        assertEquals("block failed", thrown.message)
        assertEquals(0, thrown.suppressed.size)
        assertFalse(lock.isHeld())
        assertFalse(lock.isLocked())
    }

    @Test
    fun `withLock throws Timeout with the core's message when the wait runs out and does not run its block`() = withClient { _, client ->
        val holder = client.lock("scoped-taken")
        val waiter = client.lock("scoped-taken", wait = 200.milliseconds)
        assertTrue(holder.acquire())
        var ran = false
        val byDefault = expectThrows<LockException.Timeout> { waiter.withLock { ran = true } }
        // Then who held it (the holder's client record; ClientRecordTest).
        val expected = "lock 'scoped-taken' was not acquired within 200 ms: another owner held it all that time (held by '"
        assertTrue(byDefault.message!!.startsWith(expected), byDefault.message)
        expectThrows<LockException.Timeout> { waiter.withLock(wait = Duration.ZERO) { ran = true } }
        assertFalse(ran)
        assertFalse(waiter.isHeld())
        assertTrue(holder.isHeld())
        holder.release()
    }

    @Test
    fun `cancelling a coroutine inside withLock releases the lock`() = withClient { _, client ->
        val lock = client.lock("scoped-cancel")
        val inside = CompletableDeferred<Unit>()
        val job = launch {
            lock.withLock {
                inside.complete(Unit)
                delay(60_000)
            }
        }
        inside.await()
        assertTrue(lock.isLocked())
        job.cancelAndJoin()
        assertFalse(lock.isHeld())
        assertFalse(lock.isLocked())
    }

    @Test
    fun `a release that fails after a failing block is attached as suppressed`() = withClient { redis, client ->
        val lock = client.lock("scoped-lost")
        val thrown = expectThrows<IllegalStateException> {
            lock.withLock<Unit> {
                redis.command("DEL", "scoped-lost") // the hold is lost behind the block's back
                throw IllegalStateException("block failed")
            }
        }
        val suppressed = thrown.suppressed.single()
        assertTrue(suppressed is LockException.LockLost || suppressed is LockException.NotHeld, "$suppressed")
        // Without a block failure, the release's own failure is what withLock throws.
        val lost = expectThrows<LockException> { lock.withLock { redis.command("DEL", "scoped-lost") } }
        assertTrue(lost is LockException.LockLost || lost is LockException.NotHeld, "$lost")
    }

    @Test
    fun `a lambda lost listener is told when the key is deleted behind a holder`() = withClient { redis, client ->
        val lock = client.lock("lost-lambda")
        val errors = CopyOnWriteArrayList<LockException>()
        val told = CountDownLatch(1)
        lock.onLost { error ->
            errors.add(error)
            told.countDown()
        }
        assertTrue(lock.acquire(lease = 200.milliseconds))
        redis.command("DEL", "lost-lambda")
        assertTrue(told.await(10, TimeUnit.SECONDS), "the listener was not called")
        assertTrue(errors.single() is LockException.LockLost, "${errors.single()}")
        assertTrue(lock.isLost())
    }

    @Test
    fun `semaphores take Durations`() = withClient { _, client ->
        val semaphore = client.semaphore("sem-duration")
        assertTrue(semaphore.trySetPermits(1))
        assertTrue(semaphore.acquire()) // one permit, no bound
        assertFalse(semaphore.acquire(wait = 100.milliseconds))
        assertFalse(semaphore.acquireBlocking(wait = Duration.ZERO))
        semaphore.release(1)
        assertTrue(semaphore.acquire(permits = 1, wait = Duration.INFINITE))

        val expirable = client.expirableSemaphore("expirable-duration")
        assertTrue(expirable.trySetPermits(1))
        val permit = expirable.acquire(lease = 10.seconds)!!
        assertNull(expirable.acquire(wait = 100.milliseconds))
        assertNull(expirable.acquireBlocking(wait = Duration.ZERO, lease = 1.seconds))
        assertEquals(listOf(permit), expirable.heldPermits())
        expirable.release(permit)
        assertEquals(1L, expirable.availablePermits())
    }
}
