package polylock.test

import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger
import kotlin.time.Duration.Companion.milliseconds
import kotlinx.coroutines.Dispatchers
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
import polylock.LockException
import polylock.MultiLock
import polylock.RedLock
import polylock.onLost
import polylock.withLock

/** MultiLock and RedLock through the uniffi binding, over three independent redis-servers. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class MultiLockTest {
    /** Owners per server: the lock hash's fields, polylock's own (`polylock:level:*`,
     *  `polylock:waiters`; docs/PROTOCOL.md) left out. */
    private fun holders(servers: List<RedisServer>, name: String): List<Long> =
        servers.map { server ->
            (server.command("HKEYS", name) as List<*>).count { !(it as String).startsWith("polylock:") }.toLong()
        }

    private fun <T> threeServers(body: suspend (List<RedisServer>, List<Client>) -> T): T {
        val servers = List(3) { RedisServer.start() }
        try {
            val options = ClientOptions(watchdogTimeoutMs = 600, responseTimeoutMs = 2_000)
            val clients = servers.map { Client.connectBlocking(it.url, options) }
            try {
                return runBlocking { withContext(Dispatchers.IO) { body(servers, clients) } }
            } finally {
                clients.forEach { it.shutdown() }
            }
        } finally {
            servers.forEach { it.close() }
        }
    }

    @Test
    fun `a multi-lock takes all or none and a red-lock runs withLock`() = threeServers { servers, clients ->
        val multi = MultiLock(clients.map { it.lock("all") })
        val other = clients[1].lock("all")
        assertTrue(other.acquire(waitMs = 0))
        assertFalse(multi.acquire(waitMs = 300))
        assertEquals(listOf(0L, 1L, 0L), holders(servers, "all"))
        other.release()
        assertTrue(multi.acquire(waitMs = 2_000))
        assertEquals(listOf(1L, 1L, 1L), holders(servers, "all"))
        multi.release()
        assertEquals(listOf(0L, 0L, 0L), holders(servers, "all"))

        val red = RedLock(clients.map { it.lock("scoped") })
        assertEquals(2, red.quorum())
        val ran = red.withLock {
            assertEquals(listOf(1L, 1L, 1L), holders(servers, "scoped"))
            val timeout = try {
                RedLock(clients.map { it.lock("scoped") }).withLock(wait = 300.milliseconds) { "never" }
                null
            } catch (error: LockException.Timeout) {
                error
            }
            // Then who held it, lock by lock (the holders' client records).
            val expected = "lock 'scoped' was not acquired within 300 ms: another owner held it all that time ('scoped' held by '"
            assertTrue(timeout!!.message!!.startsWith(expected), timeout.message)
            "ran"
        }
        assertEquals("ran", ran)
        assertEquals(listOf(0L, 0L, 0L), holders(servers, "scoped"))
    }

    @Test
    fun `a server killed mid-hold loses the multi-lock but not the red-lock`() = threeServers { servers, clients ->
        val red = RedLock(clients.map { it.lock("killed-red") })
        val multi = MultiLock(clients.map { it.lock("killed-multi") })
        val lost = AtomicInteger()
        multi.onLost { lost.incrementAndGet() }
        assertTrue(red.acquire(waitMs = 2_000))
        assertTrue(multi.acquire(waitMs = 2_000))
        servers[2].close()
        withTimeout(10_000) { while (!multi.isLost() || lost.get() == 0) delay(20) }
        assertTrue(red.isHeld() && !red.isLost())
        red.release()
        expectThrows<LockException.LockLost> { runBlocking { multi.release() } }
        assertEquals(listOf(0L, 0L), holders(servers.take(2), "killed-red"))
        assertEquals(listOf(0L, 0L), holders(servers.take(2), "killed-multi"))
    }

    @Test
    fun `bad groups get the core error`() = threeServers { _, clients ->
        val empty = expectThrows<LockException.InvalidArgument> { MultiLock(emptyList()) }
        assertEquals("invalid argument: a multi-lock needs at least one lock, got none", empty.message)
        val lock = clients[0].lock("bad")
        val twice = expectThrows<LockException.InvalidArgument> { RedLock(listOf(lock, lock)) }
        assertEquals(
            "invalid argument: a red-lock takes each lock once, but lock 'bad' of one client is given " +
                "twice (it would wait for itself)",
            twice.message,
        )
    }
}
