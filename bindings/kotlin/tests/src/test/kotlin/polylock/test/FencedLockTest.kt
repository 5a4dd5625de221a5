package polylock.test

import java.util.concurrent.TimeUnit
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withContext
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.LockException

/**
 * `client.fencedLock`, `Lock.token()`, `client.fencedSet`/`fencedDelete`; a redis-server per test.
 * What every binding shows alike (results, errors, Redisson's layout) is in the conformance cases
 * (tests/conformance/behaviour.json, run by [BehaviourTest]); this class keeps Kotlin's own.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class FencedLockTest {
    private fun withClient(block: suspend CoroutineScope.(RedisServer, Client) -> Unit) =
        RedisServer.start().use { redis ->
            runBlocking {
                withTimeout(60_000) { Client.connect(redis.url).use { client -> block(redis, client) } }
            }
        }

    @Test
    fun `tokens are Redisson's counter, shared with a Rust holder`() = withClient { redis, client ->
        // Tokens growing on reentry and across holders, a partial release keeping its token and a
        // plain lock's none: the conformance cases.
        val first = client.fencedLock("fenced")
        val second = client.fencedLock("fenced")
        assertTrue(second.acquire(waitMs = 0))
        val t3 = second.token()!!
        // Redisson's RFencedLock counter, shared with Java holders of the name.
        assertEquals("$t3", redis.command("GET", "redisson_lock_token:{fenced}"))
        second.release()

        // A Rust holder of the same name takes the next token, and Kotlin the one after it.
        Peer(redis.url).use { rust ->
            suspend fun peer(line: String) = withContext(Dispatchers.IO) { rust.send(line) }
            assertEquals("ok true", peer("fenced_acquire fenced 0 -"))
            val rustToken = peer("fenced_token fenced").removePrefix("ok ").toLong()
            assertTrue(rustToken > t3, "Rust token $rustToken after $t3")
            assertFalse(first.acquire(waitMs = 0))
            assertEquals("ok", peer("fenced_release fenced"))
            assertTrue(first.acquire(waitMs = 0))
            assertTrue(first.token()!! > rustToken)
            first.release()
        }
    }

    @Test
    fun `a holder whose lease ran out cannot write over the next holder`() = withClient { redis, client ->
        val slow = client.fencedLock("stock")
        val next = client.fencedLock("stock")
        assertTrue(slow.acquire(leaseMs = 300))
        val stale = slow.token()!!
        // The slow holder's lease runs out; the next holder gets the lock and writes.
        assertTrue(next.acquire(waitMs = 10_000))
        val fresh = next.token()!!
        assertTrue(fresh > stale)
        client.fencedSet("stock:count", byteArrayOf(0x31, 0x32), fresh)
        assertEquals("12", redis.command("GET", "stock:count"))
        client.fencedSet("stock:count", "13".toByteArray(), fresh) // an equal token is accepted
        assertEquals("13", redis.command("GET", "stock:count"))

        val refused = expectThrows<LockException.StaleToken> {
            client.fencedSet("stock:count", "99".toByteArray(), stale)
        }
        assertTrue(refused.message!!.contains("stock:count"), refused.message)
        assertEquals("13", redis.command("GET", "stock:count"))
        expectThrows<LockException.StaleToken> { client.fencedDelete("stock:count", stale) }
        assertEquals("13", redis.command("GET", "stock:count"))

        // Bytes go through unchanged, zero and high bytes included.
        client.fencedSet("stock:blob", byteArrayOf(0, 1, -1, 0x7f), fresh)
        assertEquals(4L, redis.command("STRLEN", "stock:blob"))

        assertTrue(client.fencedDelete("stock:count", fresh))
        assertFalse(client.fencedDelete("stock:count", fresh))
        assertEquals(0L, redis.command("EXISTS", "stock:count"))
        // The fence outlives the value: the stale token still cannot write it.
        expectThrows<LockException.StaleToken> { client.fencedSet("stock:count", "1".toByteArray(), stale) }
        assertEquals(0L, redis.command("EXISTS", "stock:count"))
        next.release()
        expectThrows<LockException.LockLost> { slow.release() }
    }
}
