package consumer

import java.net.ServerSocket
import java.net.Socket
import java.nio.file.Files
import java.util.concurrent.TimeUnit
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import polylock.Client
import polylock.lock
import polylock.withLock

/** The installed package: the native library comes from the jar, a real redis-server serves. */
class ConsumerTest {
    @Test
    fun `takes and releases a lock with the library from the jar`() {
        assertNull(System.getProperty("jna.library.path"), "the library must come from the jar")
        val port = ServerSocket(0).use { it.localPort }
        val dir = Files.createTempDirectory("polylock-consumer-redis-").toFile()
        val redis = ProcessBuilder(
            "redis-server", "--port", "$port", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
        ).directory(dir).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start()
        val pid = redis.pid()
        try {
            waitForPort(port)
            runBlocking {
                Client.connect("redis://127.0.0.1:$port/0").use { client ->
                    val lock = client.lock("consumer-lock", wait = 5.seconds, lease = 10.seconds)
                    val inside = lock.withLock {
                        assertTrue(lock.isHeld())
                        assertTrue(lock.isLocked())
                        "done"
                    }
                    assertEquals("done", inside)
                    assertFalse(lock.isLocked())
                }
            }
        } finally {
            ProcessHandle.of(pid).ifPresent { it.destroy() }
            redis.waitFor(5, TimeUnit.SECONDS)
            dir.deleteRecursively()
        }
    }

    private fun waitForPort(port: Int) {
        val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10)
        while (System.nanoTime() < deadline) {
            if (runCatching { Socket("127.0.0.1", port).close() }.isSuccess) return
            Thread.sleep(20)
        }
        error("redis-server did not listen on port $port")
    }
}
