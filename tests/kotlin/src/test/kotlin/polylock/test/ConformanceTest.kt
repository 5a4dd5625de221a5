package polylock.test

import java.io.File
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
import polylock.LockException

/**
 * The bad-input table every binding checks (tests/conformance/bad_input.json), in Kotlin: each
 * case a `Long` of milliseconds can express (`integer_ms`) fails with
 * `LockException.InvalidArgument` whose message is the core's, unchanged (uniffi's flat error
 * carries the core's message without a prefix), through the suspending and the blocking calls.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class ConformanceTest {
    private lateinit var redis: RedisServer
    private lateinit var client: Client

    private val cases: List<JSONObject> = run {
        val root = System.getProperty("polylock.repo.root") ?: error("system property polylock.repo.root is not set")
        val cases = JSONObject(File(root, "tests/conformance/bad_input.json").readText()).getJSONArray("cases")
        List(cases.length()) { cases.getJSONObject(it) }
    }

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
        else -> error("unknown option $name")
    }

    /** The failures of the case's call, suspending and blocking. */
    private fun failures(case: JSONObject): List<LockException> = when (case.getString("call")) {
        "lock" -> listOf(expectThrows<LockException> { client.lock(case.getString("name")) })
        "acquire" -> client.lock("conformance").use { lock ->
            val waitMs = case.ms("wait_ms")
            val leaseMs = case.ms("lease_ms")
            listOf(
                expectThrows<LockException> { runBlocking { lock.acquire(waitMs, leaseMs) } },
                expectThrows<LockException> { lock.acquireBlocking(waitMs, leaseMs) },
            ).also { assertFalse(lock.isHeld()) }
        }
        "connect" -> {
            // Nobody listens there: a connect that dialled would fail with Connection instead.
            val url = "redis://127.0.0.1:${freePort()}/0"
            val options = option(case.getString("option"), case.getLong("ms"))
            listOf(
                expectThrows<LockException> { runBlocking { Client.connectWith(url, options) } },
                expectThrows<LockException> { Client.connectBlocking(url, options) },
            )
        }
        else -> error("unknown call in $case")
    }

    @TestFactory
    fun `the bad-input table`(): List<DynamicTest> {
        val expressible = cases.filter { it.getBoolean("integer_ms") }
        assertTrue(expressible.size >= 9, "the table lost its integer cases: $expressible")
        return expressible.map { case ->
            DynamicTest.dynamicTest(case.toString()) {
                assertEquals("InvalidArgument", case.getString("kind"))
                for (failure in failures(case)) {
                    assertTrue(failure is LockException.InvalidArgument, "$case gave $failure")
                    assertEquals(case.getString("message"), failure.message, case.toString())
                }
            }
        }
    }
}
