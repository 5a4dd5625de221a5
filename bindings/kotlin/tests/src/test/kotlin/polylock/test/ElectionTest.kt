package polylock.test

import java.util.concurrent.TimeUnit
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.async
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.take
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.ClientOptions
import polylock.LockException
import polylock.changes

/**
 * Leader election (`client.election`) from Kotlin against a real redis-server: campaign, resign,
 * terms, proclaim, `leader()`, `observe()` (the `changes()` flow), the lost signal when the
 * server is paused past the lease (`CLIENT PAUSE`), and a `CLIENT KILL` the leader survives.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class ElectionTest {
    private fun withRedis(block: suspend CoroutineScope.(RedisServer) -> Unit) =
        RedisServer.start().use { redis -> runBlocking { withTimeout(60_000) { block(redis) } } }

    private suspend fun connect(url: String, watchdogMs: Long, name: String? = null) =
        Client.connectWith(url, ClientOptions(watchdogTimeoutMs = watchdogMs, name = name))

    @Test
    fun `campaign, proclaim, resign hand over with a higher term`() = withRedis { redis ->
        connect(redis.url, 60_000, "kt-a").use { alice ->
            connect(redis.url, 60_000, "kt-b").use { bob ->
                val election = alice.election("kt-election")
                assertNull(election.leader())
                val first = election.campaign("a:1")!!
                assertTrue(first.isLeader())
                val leader = election.leader()!!
                assertEquals(listOf("a:1", "kt-a"), listOf(leader.value, leader.clientName))
                assertEquals(first.term(), leader.term)
                assertNull(election.campaign("again", waitMs = 0))

                val waiting = async { bob.election("kt-election").campaign("b:1") }
                delay(200)
                assertFalse(waiting.isCompleted)
                first.proclaim("a:2")
                assertEquals("a:2", election.leader()!!.value)
                first.resign()
                first.awaitLost() // returns on a resign too
                assertFalse(first.isLeader())
                val second = withTimeout(20_000) { waiting.await() }!!
                assertTrue(second.term() > first.term(), "terms must strictly increase")
                val late = runCatching { first.proclaim("late") }.exceptionOrNull()
                assertTrue(late is LockException.LockLost, "$late")
                second.resign()
                second.resign()
                assertNull(election.leader())
            }
        }
    }

    @Test
    fun `observe gives the leader now and each change`() = withRedis { redis ->
        connect(redis.url, 60_000).use { client ->
            val election = client.election("kt-observed")
            val observer = election.observe()
            val seen = async { observer.changes().take(4).toList() }
            delay(200)
            val leadership = election.campaign("x")!!
            delay(200)
            leadership.proclaim("y")
            delay(200)
            leadership.resign()
            val changes = withTimeout(20_000) { seen.await() }
            assertEquals(listOf(null, "x", "y", null), changes.map { it?.value })
            assertEquals(leadership.term(), changes[1]!!.term)
        }
    }

    @Test
    fun `a server paused past the lease makes the leader lose it in time`() = withRedis { redis ->
        val leaseMs = 1_500L
        val pauseMs = 4_000L
        connect(redis.url, leaseMs).use { client ->
            val leadership = client.election("kt-paused").campaign("first")!!
            assertEquals("OK", redis.command("CLIENT", "PAUSE", "$pauseMs", "ALL"))
            val started = System.nanoTime()
            withTimeout(pauseMs) { leadership.awaitLost() }
            assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started) < pauseMs, "lost only after the pause")
            assertTrue(leadership.isLost())
            assertFalse(leadership.isLeader())
            connect(redis.url, 60_000).use { other ->
                val next = other.election("kt-paused").campaign("second", waitMs = 15_000)!!
                assertTrue(next.term() > leadership.term())
                next.resign()
            }
        }
    }

    @Test
    fun `a killed connection keeps the leadership`() = withRedis { redis ->
        connect(redis.url, 1_500).use { client ->
            val leadership = client.election("kt-killed").campaign("kept")!!
            assertTrue((redis.command("CLIENT", "KILL", "TYPE", "normal") as Long) >= 1)
            delay(3_000)
            assertTrue(leadership.isLeader())
            leadership.proclaim("still kept")
            assertEquals("still kept", client.election("kt-killed").leader()!!.value)
            leadership.resign()
        }
    }

    /** The example of docs/kotlin-swift.md, "Leader election", verbatim. */
    @Test
    fun `the guide's election example runs`() = withRedis { redis ->
        Client.connect(redis.url).use { client ->
            val election = client.election("reports")
            val leadership = election.campaign("10.0.0.1:8080", waitMs = 10_000)!!
            client.fencedSet("reports:config", "v1".toByteArray(), leadership.term())
            check(election.leader()?.value == "10.0.0.1:8080")
            leadership.resign()
            leadership.awaitLost()
        }
    }

    @Test
    fun `a bad name is InvalidArgument`() = withRedis { redis ->
        Client.connect(redis.url).use { client ->
            val error = runCatching { client.election("") }.exceptionOrNull()
            assertTrue(error is LockException.InvalidArgument, "$error")
        }
    }
}
