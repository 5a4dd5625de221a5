package polylock.test

import java.util.concurrent.TimeUnit
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.ClientOptions
import polylock.LockException

/**
 * `ClientOptions.syncReplicas` on real servers: a primary with one replica (`--replicaof`), the
 * same with the replica held still (`CLIENT PAUSE ... ALL` on a Redis 7 replica also stops it
 * applying and acknowledging the primary's stream), a primary with no replica (and
 * `minReplicas`), and a primary whose `WAIT` is renamed away.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class ReplicaSyncTest {
    /** A primary sends its first full sync at once, not after the default 5 s wait for more replicas. */
    private val primaryArgs = arrayOf("--repl-diskless-sync-delay", "0")

    /** A primary (with [extraArgs]) and a replica the primary counts online (so ROLE lists it, WAIT waits for it). */
    private fun withReplicatedPair(vararg extraArgs: String, block: suspend (RedisServer, RedisServer) -> Unit) =
        RedisServer.start(*primaryArgs, *extraArgs).use { primary ->
            RedisServer.start("--replicaof", "127.0.0.1", "${primary.port}").use { replica ->
                runBlocking {
                    withTimeout(60_000) {
                        while (!(primary.command("INFO", "replication") as String).contains("state=online")) delay(20)
                        block(primary, replica)
                    }
                }
            }
        }

    private fun notSynced(name: String) =
        "lock '$name' was acquired on the primary, but not all of its 1 replicas acknowledged it within 200 ms, " +
            "so a failover could hand it to a second holder; it was undone (sync_replicas)"

    @Test
    fun `an acquire returns once the replica has the lock, a release once it dropped it`() =
        withReplicatedPair { primary, replica ->
            Client.connectWith(primary.url, ClientOptions(syncReplicas = true)).use { client ->
                val lock = client.lock("synced")
                assertTrue(lock.acquire(waitMs = 30_000))
                assertEquals(1L, replica.command("EXISTS", "synced"))
                lock.release()
                assertEquals(0L, replica.command("EXISTS", "synced"))
            }
        }

    @Test
    fun `an acquisition no replica acknowledged is undone and fails with NotSynced`() =
        withReplicatedPair { primary, replica ->
            val options = ClientOptions(syncReplicas = true, replicaSyncTimeoutMs = 200)
            Client.connectWith(primary.url, options).use { client ->
                val lock = client.lock("unsynced")
                assertEquals("OK", replica.command("CLIENT", "PAUSE", "3000", "ALL"))
                val refused = expectThrows<LockException.NotSynced> { lock.acquire(waitMs = 0) }
                assertEquals(notSynced("unsynced"), refused.message)
                assertEquals(0L, primary.command("EXISTS", "unsynced"))
                assertFalse(lock.isHeld())
            }
        }

    @Test
    fun `a primary without replicas confirms nothing unless minReplicas is 0`(): Unit =
        // minReplicas (default 1): the acquisition cannot reach the one replica it must, so it is
        // undone; minReplicas = 0 trusts the primary's count (none: nothing to wait for).
        RedisServer.start(*primaryArgs).use { primary ->
            runBlocking {
                withTimeout(60_000) {
                    val strict = ClientOptions(syncReplicas = true, replicaSyncTimeoutMs = 200)
                    Client.connectWith(primary.url, strict).use { client ->
                        val lock = client.lock("no-replica")
                        val refused = expectThrows<LockException.NotSynced> { lock.acquire(waitMs = 0) }
                        assertEquals(notSynced("no-replica"), refused.message)
                        assertEquals(0L, primary.command("EXISTS", "no-replica"))
                        assertFalse(lock.isHeld())
                    }
                    val trusting = ClientOptions(syncReplicas = true, minReplicas = 0)
                    Client.connectWith(primary.url, trusting).use { client ->
                        val lock = client.lock("no-replica")
                        assertTrue(lock.acquire(waitMs = 0))
                        assertEquals(1L, primary.command("EXISTS", "no-replica"))
                        lock.release()
                        assertEquals(0L, primary.command("EXISTS", "no-replica"))
                    }
                }
            }
        }

    @Test
    fun `a server without WAIT turns it off and locks keep working`() =
        // A replica, so that ROLE counts one and the client does send WAIT (and is refused).
        withReplicatedPair("--rename-command", "WAIT", "") { primary, _ ->
            Client.connectWith(primary.url, ClientOptions(syncReplicas = true)).use { client ->
                val lock = client.lock("no-wait-command")
                assertTrue(lock.acquire(waitMs = 0))
                assertEquals(1L, primary.command("EXISTS", "no-wait-command"))
                lock.release()
                assertEquals(0L, primary.command("EXISTS", "no-wait-command"))
            }
        }
}
