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

/**
 * The examples of docs/kotlin-swift.md, verbatim apart from the URL (DocsExamplesTest checks that
 * every Kotlin block of the docs is in a test).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class KotlinGuideExamplesTest {
    @Test
    fun `the docs examples run`() = RedisServer.start().use { redis ->
        val url = redis.url
        val steps = mutableListOf<String>()
        fun processOrder() = steps.add("processed")

        runBlocking {
            // --- docs/kotlin-swift.md: suspend API ---
            // in a coroutine
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
    @Test
    fun `the docs examples of the other kinds run`() = RedisServer.start().use { redis ->
        val steps = mutableListOf<String>()
        fun rebuildCache() = steps.add("rebuilt")
        fun readCache() = steps.add("read")
        fun crawl() = steps.add("crawled")
        fun upload() = steps.add("uploaded")

        runBlocking {
            Client.connect(redis.url).use { client ->
                // --- docs/kotlin-swift.md: fenced lock and fenced writes ---
                client.fencedLock("stock:7").use { lock ->
                    lock.acquire()
                    val token = lock.token()!!
                    // ... long work; the lease may run out meanwhile and another holder take the lock ...
                    try {
                        client.fencedSet("stock:7:count", "12".toByteArray(), token)
                    } catch (e: LockException.StaleToken) {
                        // a newer holder wrote with a higher token: this write was refused, nothing changed
                    }
                    lock.release()
                }

                // --- docs/kotlin-swift.md: read-write lock ---
                val rw = client.readWriteLock("catalog")
                if (rw.writeLock().acquire(waitMs = 5_000)) {
                    rebuildCache()
                    rw.readLock().acquire()          // downgrade: readers may enter once the write lock is released
                    rw.writeLock().release()
                    readCache()                      // shared with other readers
                    rw.readLock().release()
                }

                client.semaphore("uploads").trySetPermits(2) // (not in the docs: the count is set elsewhere)
                // --- docs/kotlin-swift.md: semaphores ---
                val slots = client.expirableSemaphore("crawler:slots")
                slots.trySetPermits(4)
                val permit = slots.acquire(waitMs = 5_000)      // leaseMs = null: renewed by the watchdog
                if (permit != null) {
                    try {
                        crawl()                                   // at most 4 at once, across every process
                    } finally {
                        slots.release(permit)
                    }
                }

                val uploads = client.semaphore("uploads")
                if (uploads.acquire(2, waitMs = 1_000)) {
                    try { upload() } finally { uploads.release(2) }
                }
            }
        }
        assertEquals("12", redis.command("GET", "stock:7:count"))
        assertEquals(listOf("rebuilt", "read", "crawled", "uploaded"), steps)
    }
}
