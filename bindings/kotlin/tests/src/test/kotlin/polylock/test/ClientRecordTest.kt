package polylock.test

import java.net.InetAddress
import java.util.concurrent.TimeUnit
import kotlin.time.Duration.Companion.milliseconds
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.ClientOptions
import polylock.LockException
import polylock.acquire
import polylock.lock
import polylock.withLock

/**
 * Who holds it: the `name` option is recorded on the server (the client record,
 * `polylock:client:<client-id>`), and a `withLock` whose wait runs out names the holder in the
 * core's message, the same text as Rust, Python and Node.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class ClientRecordTest {
    private val pid = ProcessHandle.current().pid()

    /** The host name as the core reads it (gethostname), which `hostname` prints. */
    private val host: String =
        ProcessBuilder("hostname").start().inputStream.bufferedReader().readText().trim()
            .ifEmpty { InetAddress.getLocalHost().hostName }

    @Test
    fun `the name option is recorded and read back`() = RedisServer.start().use { redis ->
        runBlocking {
            withTimeout(60_000) {
                Client.connectWith(redis.url, ClientOptions(name = "worker-7")).use { client ->
                    assertEquals("worker-7", client.name())
                    assertEquals("worker-7", redis.command("HGET", "polylock:client:${client.id()}", "name"))
                    assertEquals(pid.toString(), redis.command("HGET", "polylock:client:${client.id()}", "pid"))
                }
                Client.connect(redis.url).use { unnamed -> assertEquals("$host:$pid", unnamed.name()) }
            }
        }
    }

    @Test
    fun `a withLock whose wait runs out names the holder`() = RedisServer.start().use { redis ->
        runBlocking {
            withTimeout(60_000) {
                Client.connectWith(redis.url, ClientOptions(name = "worker-7")).use { holder ->
                    Client.connect(redis.url).use { waiter ->
                        val held = holder.lock("orders:42")
                        assertTrue(held.acquire())
                        // Listed in the holder's record about a second after the acquisition.
                        while ((redis.command("HGET", "polylock:client:${holder.id()}", "holds") as String?) in listOf(null, "[]")) {
                            delay(50)
                        }
                        val error = try {
                            waiter.lock("orders:42").withLock(wait = 250.milliseconds) { error("the block ran") }
                        } catch (timeout: LockException.Timeout) {
                            timeout
                        }
                        val expected = Regex(
                            Regex.escape(
                                "lock 'orders:42' was not acquired within 250 ms: another owner held it all that time " +
                                    "(held by 'worker-7', pid $pid on $host, for ",
                            ) + """\d+\.\d s\)""",
                        )
                        assertTrue(expected.matches(error.message!!), error.message)
                        held.release()
                    }
                }
            }
        }
    }
}
