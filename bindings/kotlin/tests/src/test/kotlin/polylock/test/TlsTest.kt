package polylock.test

import java.io.File
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.ClientOptions
import polylock.LockException

/** TLS: locks over rediss:// with the test CA and with a client certificate (tests/tls/make-certs.sh). */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TlsTest {
    private val tlsDir: File = makeTlsFiles()
    private val server = RedisServer.startTls(tlsDir)
    private val mutualServer = RedisServer.startTls(tlsDir, authClients = true)

    @AfterAll
    fun stop() {
        server.close()
        mutualServer.close()
        tlsDir.deleteRecursively()
    }

    private fun path(name: String) = File(tlsDir, name).path

    private fun checkExclusion(url: String, options: ClientOptions) {
        runBlocking { exclusion(url, options) }
    }

    private suspend fun exclusion(url: String, options: ClientOptions) {
        Client.connectWith(url, options).use { first ->
            Client.connectWith(url, options).use { second ->
                val mine = first.lock("tls:kotlin")
                val theirs = second.lock("tls:kotlin")
                assertTrue(mine.acquire(waitMs = 0))
                assertFalse(theirs.acquire(waitMs = 0))
                mine.release()
                assertTrue(theirs.acquire(waitMs = 2_000))
                theirs.release()
            }
        }
    }

    @Test
    fun `a lock over rediss with a private CA`() {
        checkExclusion(server.tlsUrl, ClientOptions(tlsCa = path("ca.crt")))
    }

    @Test
    fun `mutual TLS with a client certificate`() {
        checkExclusion(
            mutualServer.tlsUrl,
            ClientOptions(tlsCa = path("ca.crt"), tlsCert = path("client.crt"), tlsKey = path("client.key")),
        )
    }

    @Test
    fun `a server signed by another CA is not trusted - the Connection error says so, as in Python and Node`() {
        val error = expectThrows<LockException.Connection> {
            runBlocking { Client.connectWith(server.tlsUrl, ClientOptions(tlsCa = path("other-ca.crt"))).close() }
        }
        assertTrue(error.message!!.contains("certificate is not trusted"), error.message)
    }

    @Test
    fun `an expired server certificate is refused - the Connection error says so, as in Python and Node`() {
        RedisServer.startTls(tlsDir, cert = "expired").use { expired ->
            val error = expectThrows<LockException.Connection> {
                runBlocking { Client.connectWith(expired.tlsUrl, ClientOptions(tlsCa = path("ca.crt"))).close() }
            }
            assertTrue(error.message!!.contains("has expired"), error.message)
        }
    }

    @Test
    fun `a server that wants a client certificate refuses one without`() {
        val error = expectThrows<LockException.Connection> {
            runBlocking { Client.connectWith(mutualServer.tlsUrl, ClientOptions(tlsCa = path("ca.crt"))).close() }
        }
        assertTrue(error.message!!.contains("client certificate"), error.message)
    }
}
