package polylock.test

import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking
import org.json.JSONObject
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.TestFactory
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.ClientOptions
import polylock.Lock
import polylock.LockException

/**
 * The bad-input table every binding checks (tests/conformance/bad_input.json), in Kotlin: each
 * case a `Long` of milliseconds can express (`integer_ms`) fails with the `LockException` of the
 * case's kind whose message is the core's, unchanged (uniffi's flat error carries the core's
 * message without a prefix), through the suspending and (where there is one) the blocking
 * calls, and writes nothing to Redis.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class ConformanceTest {
    private lateinit var redis: RedisServer
    private lateinit var client: Client

    private val cases = conformanceCases("bad_input.json")

    @BeforeAll
    fun start() {
        redis = RedisServer.start()
        client = Client.connectBlocking(redis.url)
    }

    @AfterAll
    fun stop() {
        client.shutdown()
        client.close()
        redis.close()
    }

    private fun JSONObject.ms(key: String): Long? = if (has(key)) getLong(key) else null

    /** The option named in the table (the core's name) in Kotlin's own name. */
    private fun option(name: String, ms: Long): ClientOptions = when (name) {
        "watchdog_timeout" -> ClientOptions(watchdogTimeoutMs = ms)
        "connect_timeout" -> ClientOptions(connectTimeoutMs = ms)
        "response_timeout" -> ClientOptions(responseTimeoutMs = ms)
        "fair_queue_timeout" -> ClientOptions(fairQueueTimeoutMs = ms)
        "replica_sync_timeout" -> ClientOptions(replicaSyncTimeoutMs = ms)
        else -> error("unknown option $name")
    }

    /** The failures of the case's call, suspending and blocking. */
    private fun failures(case: JSONObject): List<LockException> = when (case.getString("call")) {
        "lock" -> listOf(expectThrows<LockException> { client.lock(case.getString("name")) })
        "acquire" -> acquireFailures(case, client.lock("conformance"))
        "connect" -> {
            // Nobody listens there: a connect that dialled would fail with Connection instead.
            val url = "redis://127.0.0.1:${freePort()}/0"
            val options = if (case.has("value")) {
                ClientOptions(keyPrefix = case.getString("value"))
            } else if (case.has("count")) {
                check(case.getString("option") == "min_replicas") { "unknown count option ${case.getString("option")}" }
                ClientOptions(minReplicas = case.getLong("count"))
            } else {
                option(case.getString("option"), case.getLong("ms"))
            }
            listOf(
                expectThrows<LockException> { runBlocking { Client.connectWith(url, options) } },
                expectThrows<LockException> { Client.connectBlocking(url, options) },
            )
        }
        "read_write_lock" -> listOf(expectThrows<LockException> { client.readWriteLock(case.getString("name")) })
        "read_lock_acquire" -> client.readWriteLock("conformance").use { rw -> acquireFailures(case, rw.readLock()) }
        "write_lock_acquire" -> client.readWriteLock("conformance").use { rw -> acquireFailures(case, rw.writeLock()) }
        "semaphore_acquire" -> client.semaphore("conformance").use { semaphore ->
            val permits = case.permits()
            val waitMs = case.ms("wait_ms")
            listOf(
                expectThrows<LockException> { runBlocking { semaphore.acquire(permits, waitMs) } },
                expectThrows<LockException> { semaphore.acquireBlocking(permits, waitMs) },
            )
        }
        "semaphore_release" -> client.semaphore("conformance").use { semaphore ->
            val permits = case.permits()
            listOf(
                expectThrows<LockException> { runBlocking { semaphore.release(permits) } },
                expectThrows<LockException> { semaphore.releaseBlocking(permits) },
            )
        }
        "semaphore_try_set_permits" -> client.semaphore("conformance").use { semaphore ->
            listOf(expectThrows<LockException> { runBlocking { semaphore.trySetPermits(case.permits()) } })
        }
        "semaphore_add_permits" -> client.semaphore("conformance").use { semaphore ->
            listOf(expectThrows<LockException> { runBlocking { semaphore.addPermits(case.permits()) } })
        }
        "expirable_semaphore_acquire" -> client.expirableSemaphore("conformance").use { semaphore ->
            val waitMs = case.ms("wait_ms")
            val leaseMs = case.ms("lease_ms")
            listOf(
                expectThrows<LockException> { runBlocking { semaphore.acquire(waitMs, leaseMs) } },
                expectThrows<LockException> { semaphore.acquireBlocking(waitMs, leaseMs) },
            ).also { assertEquals(emptyList<String>(), semaphore.heldPermits()) }
        }
        "expirable_semaphore_release" -> client.expirableSemaphore("conformance").use { semaphore ->
            val permitId = case.getString("permit_id")
            listOf(
                expectThrows<LockException> { runBlocking { semaphore.release(permitId) } },
                expectThrows<LockException> { semaphore.releaseBlocking(permitId) },
            )
        }
        "expirable_semaphore_try_set_permits" -> client.expirableSemaphore("conformance").use { semaphore ->
            listOf(expectThrows<LockException> { runBlocking { semaphore.trySetPermits(case.permits()) } })
        }
        "fenced_set" -> listOf(
            expectThrows<LockException> {
                runBlocking { client.fencedSet(case.getString("key"), "v".toByteArray(), case.getLong("token")) }
            },
        )
        "fenced_delete" -> listOf(
            expectThrows<LockException> {
                runBlocking { client.fencedDelete(case.getString("key"), case.getLong("token")) }
            },
        )
        else -> error("unknown call in $case")
    }

    /** `permits` of a case as Kotlin's `Int` (absent: the table's default, 1, passed explicitly). */
    private fun JSONObject.permits(): Int = if (has("permits")) Math.toIntExact(getLong("permits")) else 1

    private fun acquireFailures(case: JSONObject, lock: Lock): List<LockException> = lock.use {
        val waitMs = case.ms("wait_ms")
        val leaseMs = case.ms("lease_ms")
        listOf(
            expectThrows<LockException> { runBlocking { lock.acquire(waitMs, leaseMs) } },
            expectThrows<LockException> { lock.acquireBlocking(waitMs, leaseMs) },
        ).also { assertFalse(lock.isHeld()) }
    }

    @TestFactory
    fun `the bad-input table`(): List<DynamicTest> {
        val expressible = cases.filter { it.getBoolean("integer_ms") }
        assertTrue(expressible.size >= 24, "the table lost its integer cases: $expressible")
        return expressible.map { case ->
            DynamicTest.dynamicTest(case.toString()) {
                val failures = failures(case)
                assertTrue(failures.isNotEmpty())
                for (failure in failures) {
                    // The case's kind is the name of the LockException subclass.
                    assertEquals(case.getString("kind"), failure::class.simpleName, "$case gave $failure")
                    assertEquals(case.getString("message"), failure.message, case.toString())
                }
                // Every key but the client record, written at connect.
                val keys = (redis.command("KEYS", "*") as List<*>).filterNot { (it as String).startsWith("polylock:client:") }
                assertEquals(emptyList<Any?>(), keys, "$case wrote to Redis")
            }
        }
    }
}
