package polylock.test

import java.util.concurrent.TimeUnit
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
import polylock.ClientOptions
import polylock.LockException

/**
 * Waiting without pub/sub: `waitMode = "poll"` passes through to the core, so a waiter under a
 * Redis user that may not SUBSCRIBE still gets the lock after its release; bad poll options
 * throw the core's `InvalidArgument` and message.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class WaitPollTest {
    private fun noSubscribeUrl(redis: RedisServer): String {
        val rule = arrayOf("~*", "&*", "+@all", "-subscribe", "-psubscribe", "-ssubscribe")
        assertEquals("OK", redis.command("ACL", "SETUSER", "nosub_kt", "on", ">secret", *rule))
        return "redis://nosub_kt:secret@127.0.0.1:${redis.port}/0"
    }

    @Test
    fun `a poll waiter denied SUBSCRIBE gets the lock after the release`() = RedisServer.start().use { redis ->
        val url = noSubscribeUrl(redis)
        runBlocking {
            withTimeout(30_000) {
                Client.connect(redis.url).use { holderClient ->
                    val options = ClientOptions(waitMode = "poll", pollMinMs = 1, pollMaxMs = 50)
                    Client.connectWith(url, options).use { waiterClient ->
                        val holder = holderClient.lock("kt-poll")
                        assertTrue(holder.acquire(waitMs = 0, leaseMs = 60_000))
                        val waiter = waiterClient.lock("kt-poll")
                        assertFalse(waiter.acquire(waitMs = 200))
                        val started = System.nanoTime()
                        val waiting = async { waiter.acquire(waitMs = 20_000) }
                        delay(300)
                        holder.release()
                        assertTrue(waiting.await())
                        // Woken by looking, long before the holder's 60 s lease.
                        assertTrue(System.nanoTime() - started < 10_000_000_000L)
                        waiter.release()
                    }
                }
            }
        }
    }

    @Test
    fun `the guide's poll client connects and polls`() = RedisServer.start().use { redis ->
        val url = redis.url
        runBlocking {
            // docs/kotlin-swift.md, "Waiting without pub/sub":
            val pollingClient = Client.connectWith(url, ClientOptions(waitMode = "poll", pollMinMs = 1, pollMaxMs = 128))
            pollingClient.use { client ->
                val lock = client.lock("kt-guide")
                assertTrue(lock.acquire(waitMs = 1_000))
                lock.release()
            }
        }
    }

    @Test
    fun `the guide's lock of its own poll mode polls on a pub-sub client`() = RedisServer.start().use { redis ->
        runBlocking {
            Client.connect(redis.url).use { client ->
                // docs/kotlin-swift.md, "Waiting without pub/sub":
                // Thousands of short-lived names: poll for these, keep pub/sub for the rest.
                val tile = client.lock("tile:17:42", waitMode = "poll", pollMaxMs = 50)
                assertTrue(tile.acquire(waitMs = 1_000))
                tile.release()
            }
        }
    }

    @Test
    fun `bad poll options throw the core's InvalidArgument`() = RedisServer.start().use { redis ->
        val error = expectThrows<LockException.InvalidArgument> {
            Client.connectBlocking(redis.url, ClientOptions(waitMode = "poll", pollMinMs = 50, pollMaxMs = 10))
        }
        assertTrue(error.message!!.contains("poll_max must be at least poll_min (50 ms), got 10 ms"), error.message)
    }

    @Test
    fun `a lock of its own poll mode waits without subscribing on a pub-sub client`() = RedisServer.start().use { redis ->
        // The per-lock wait mode: the same user and default client whose pub/sub waiter is
        // refused gets each kind of lock by polling when only the lock says "poll".
        val url = noSubscribeUrl(redis)
        runBlocking {
            withTimeout(40_000) {
                Client.connect(redis.url).use { holderClient ->
                    Client.connect(url).use { waiterClient ->
                        for (kind in listOf("lock", "fairLock", "fifoLock", "fencedLock")) {
                            val name = "kt-own-poll-$kind"
                            val holder = when (kind) {
                                "lock" -> holderClient.lock(name)
                                "fairLock" -> holderClient.fairLock(name)
                                "fifoLock" -> holderClient.fifoLock(name)
                                else -> holderClient.fencedLock(name)
                            }
                            assertTrue(holder.acquire(waitMs = 0, leaseMs = 60_000))
                            val waiter = when (kind) {
                                "lock" -> waiterClient.lock(name, waitMode = "poll", pollMinMs = 1, pollMaxMs = 50)
                                "fairLock" -> waiterClient.fairLock(name, waitMode = "poll", pollMinMs = 1, pollMaxMs = 50)
                                "fifoLock" -> waiterClient.fifoLock(name, waitMode = "poll", pollMinMs = 1, pollMaxMs = 50)
                                else -> waiterClient.fencedLock(name, waitMode = "poll", pollMinMs = 1, pollMaxMs = 50)
                            }
                            val started = System.nanoTime()
                            val waiting = async { waiter.acquire(waitMs = 20_000) }
                            delay(300)
                            holder.release()
                            assertTrue(waiting.await(), kind)
                            assertTrue(System.nanoTime() - started < 10_000_000_000L, kind)
                            waiter.release()
                        }
                    }
                }
            }
        }
    }

    @Test
    fun `a pub-sub lock on a poll client fails each acquire`() = RedisServer.start().use { redis ->
        runBlocking {
            Client.connectWith(redis.url, ClientOptions(waitMode = "poll")).use { client ->
                val lock = client.lock("kt-own-pubsub", waitMode = "pubsub")
                val error = expectThrows<LockException.InvalidArgument> { lock.acquire(waitMs = 1_000) }
                assertEquals(
                    "invalid argument: lock 'kt-own-pubsub': wait_mode pubsub needs a pub/sub connection, " +
                        "which a client connected with wait_mode poll does not open",
                    error.message,
                )
                // The client's own mode still serves its other locks.
                val other = client.lock("kt-own-pubsub-other")
                assertTrue(other.acquire(waitMs = 1_000))
                other.release()
            }
        }
    }

    @Test
    fun `bad per-lock poll options throw the core's InvalidArgument at creation`() = RedisServer.start().use { redis ->
        Client.connectBlocking(redis.url).use { client ->
            val error = expectThrows<LockException.InvalidArgument> {
                client.lock("kt-bad-own-poll", waitMode = "poll", pollMinMs = 50, pollMaxMs = 10)
            }
            assertEquals("invalid argument: poll_max must be at least poll_min (50 ms), got 10 ms", error.message)
            val noMode = expectThrows<LockException.InvalidArgument> { client.lock("kt-bad-own-poll", pollMinMs = 5) }
            assertEquals("invalid argument: poll_min and poll_max apply only with wait_mode 'poll'", noMode.message)
        }
    }
}
