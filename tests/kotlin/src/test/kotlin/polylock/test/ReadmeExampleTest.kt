package polylock.test

import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.ClientOptions
import polylock.LockException
import polylock.LostListener

/** The examples of docs/kotlin-swift.md, verbatim apart from the URL and the recorded steps. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ReadmeExampleTest {
    @Test
    fun `the README examples run`() = RedisServer.start().use { redis ->
        val url = redis.url
        val steps = mutableListOf<String>()
        fun processOrder() = steps.add("processed")

        runBlocking {
            // --- docs/kotlin-swift.md: suspend API ---
            Client.connect(url).use { client ->
                client.lock("orders:42").use { lock ->
                    if (lock.acquire(waitMs = 5_000)) {   // null: wait without bound
                        try {
                            processOrder()                  // lease renewed by the watchdog meanwhile
                        } finally {
                            lock.release()
                        }
                    }
                }
            }

            // --- docs/kotlin-swift.md: options, lost listener, errors ---
            val client = Client.connectWith(url, ClientOptions(watchdogTimeoutMs = 10_000, connectTimeoutMs = 2_000))
            val lock = client.lock("reports")
            lock.onLost(object : LostListener {
                override fun onLost(error: LockException) {
                    System.err.println("lost: ${error.message}")
                }
            })
            try {
                lock.acquire(leaseMs = 60_000)          // a fixed lease, never renewed
                lock.release()
            } catch (e: LockException.WrongType) {
                println("'reports' is not a lock: ${e.message}")
            } catch (e: LockException) {
                println("failed: ${e.message}")
            }
            lock.close()
            client.close()
        }

        // --- docs/kotlin-swift.md: plain threads ---
        Client.connectBlocking(url).use { client ->
            client.lock("orders:42").use { lock ->
                if (lock.acquireBlocking(waitMs = 5_000)) {
                    try {
                        processOrder()
                    } finally {
                        lock.releaseBlocking()
                    }
                }
            }
        }
        assertEquals(listOf("processed", "processed"), steps)
    }
}
