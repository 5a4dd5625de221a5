package polylock.test

import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.ClientOptions

/** `ClientOptions(keyPrefix = ...)` reaches the core, against a real redis-server. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class KeyPrefixTest {
    @Test
    fun `different prefixes do not exclude each other and the same prefix does`() =
        RedisServer.start().use { redis ->
            runBlocking {
                withTimeout(60_000) {
                    Client.connectWith(redis.url, ClientOptions(keyPrefix = "a:")).use { tenantA ->
                        Client.connectWith(redis.url, ClientOptions(keyPrefix = "a:")).use { tenantAAgain ->
                            Client.connectWith(redis.url, ClientOptions(keyPrefix = "b:")).use { tenantB ->
                                val held = tenantA.lock("job")
                                assertTrue(held.acquire(waitMs = 0))
                                assertFalse(tenantAAgain.lock("job").acquire(waitMs = 0))
                                val other = tenantB.lock("job")
                                assertTrue(other.acquire(waitMs = 0))
                                assertEquals("hash", redis.command("TYPE", "a:job"))
                                other.release()
                                held.release()
                            }
                        }
                    }
                }
            }
        }
}
