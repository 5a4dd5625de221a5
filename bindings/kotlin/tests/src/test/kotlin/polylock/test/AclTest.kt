package polylock.test

import java.io.File
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking
import org.json.JSONObject
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.LockException

/**
 * A Redis user without a permission polylock needs (tests/conformance/permission.json): Kotlin
 * throws `LockException.Permission` with the core's message, the same in every language, from
 * the suspending and the blocking acquire.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AclTest {
    private val case: JSONObject = run {
        val root = System.getProperty("polylock.repo.root") ?: error("system property polylock.repo.root is not set")
        JSONObject(File(root, "tests/conformance/permission.json").readText())
    }

    @Test
    fun `a user without a permission gets LockException Permission with the core message`() {
        RedisServer.start().use { redis ->
            val rule = case.getJSONArray("user_rule").let { rule -> List(rule.length()) { rule.getString(it) } }
            assertEquals("OK", redis.command("ACL", "SETUSER", "conformance_kt", "on", ">secret", *rule.toTypedArray()))
            val client = Client.connectBlocking("redis://conformance_kt:secret@127.0.0.1:${redis.port}/0")
            try {
                client.lock(case.getString("lock")).use { lock ->
                    val failures = listOf(
                        expectThrows<LockException.Permission> { runBlocking { lock.acquire(waitMs = 0) } },
                        expectThrows<LockException.Permission> { lock.acquireBlocking(waitMs = 0) },
                    )
                    for (failure in failures) {
                        assertEquals(case.getString("kind"), failure::class.simpleName)
                        assertEquals(case.getString("message"), failure.message)
                    }
                    assertFalse(lock.isHeld())
                }
            } finally {
                client.shutdown()
                client.close()
            }
        }
    }
}
