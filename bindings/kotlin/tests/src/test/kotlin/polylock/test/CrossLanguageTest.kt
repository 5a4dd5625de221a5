package polylock.test

import java.util.concurrent.TimeUnit
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
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

/** A Kotlin holder and a Rust holder (core/examples/peer.rs) exclude each other. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class CrossLanguageTest {
    @Test
    fun `a Kotlin holder excludes a Rust holder and the other way round`() =
        RedisServer.start().use { redis ->
            Peer(redis.url).use { rust ->
                runBlocking {
                    withTimeout(60_000) {
                        Client.connect(redis.url).use { client ->
                            client.lock("shared").use { kotlin -> exclude(rust, kotlin, redis) }
                        }
                    }
                }
            }
        }

    private suspend fun exclude(rust: Peer, kotlin: polylock.Lock, redis: RedisServer) {
        suspend fun peer(line: String) = withContext(Dispatchers.IO) { rust.send(line) }

        // Kotlin holds: Rust cannot take it, then can once Kotlin released.
        assertTrue(kotlin.acquire())
        assertEquals("ok false", peer("acquire shared 0 -"))
        assertEquals("ok false", peer("acquire shared 200 -"))
        kotlin.release()
        assertEquals("ok true", peer("acquire shared 0 -"))
        assertEquals("1", redis.command("HGET", "shared", peer("owner shared").removePrefix("ok ")))

        // Rust holds: Kotlin cannot take it, and a waiting Kotlin acquire is woken by the Rust
        // release (Redisson's unlock message on the shared channel).
        assertFalse(kotlin.acquire(waitMs = 0))
        val kotlinWaiter = kotlinx.coroutines.coroutineScope {
            val started = System.nanoTime()
            val acquired = async { kotlin.acquire(waitMs = 30_000) }
            delay(300)
            assertEquals("ok", peer("release shared"))
            assertTrue(acquired.await())
            TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started)
        }
        assertTrue(kotlinWaiter < 20_000, "woken after $kotlinWaiter ms: not by the Rust release")
        assertTrue(kotlin.isHeld())
        assertEquals("ok false", peer("acquire shared 0 -"))
        kotlin.release()
        assertEquals("ok false", peer("is_locked shared"))
    }

    @Test
    fun `Kotlin coroutines and a Rust holder keep a GET-SET counter exact`() =
        RedisServer.start().use { redis ->
            Peer(redis.url).use { rust ->
                runBlocking {
                    withTimeout(60_000) {
                        Client.connect(redis.url).use { client ->
                            val rounds = 30
                            val rustDone = async(Dispatchers.IO) { rust.send("increment mixed mixed-counter $rounds") }
                            (0 until 2).map {
                                async(Dispatchers.IO) {
                                    client.lock("mixed").use { lock ->
                                        RedisConnection(redis.port).use { connection ->
                                            repeat(rounds) {
                                                assertTrue(lock.acquire())
                                                val value = (connection.command("GET", "mixed-counter") as String?)?.toInt() ?: 0
                                                delay(1)
                                                connection.command("SET", "mixed-counter", "${value + 1}")
                                                lock.release()
                                            }
                                        }
                                    }
                                }
                            }.forEach { it.await() }
                            assertEquals("ok", rustDone.await())
                            assertEquals("${3 * rounds}", redis.command("GET", "mixed-counter"))
                        }
                    }
                }
            }
        }
}
