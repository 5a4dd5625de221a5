package polylock.test

import io.prometheus.metrics.exporter.httpserver.HTTPServer
import io.prometheus.metrics.model.registry.MultiCollector
import io.prometheus.metrics.model.registry.PrometheusRegistry
import io.prometheus.metrics.model.snapshots.ClassicHistogramBuckets
import io.prometheus.metrics.model.snapshots.CounterSnapshot
import io.prometheus.metrics.model.snapshots.GaugeSnapshot
import io.prometheus.metrics.model.snapshots.HistogramSnapshot
import io.prometheus.metrics.model.snapshots.Labels
import io.prometheus.metrics.model.snapshots.MetricSnapshots
import java.net.URI
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client

// --- docs/kotlin-swift.md: metrics, Prometheus ---
/** Serves a polylock client's metrics to Prometheus: read from `client.metrics()` at each scrape. */
class PolylockCollector(private val client: Client) : MultiCollector {
    override fun collect(): MetricSnapshots {
        val snapshot = client.metrics()
        val acquires = CounterSnapshot.builder().name("polylock_lock_acquires").help("Acquires by result")
        val holds = GaugeSnapshot.builder().name("polylock_lock_active_holds").help("Holds current now")
        val waits = HistogramSnapshot.builder().name("polylock_lock_acquire_time_in_queue_seconds")
            .help("Time from an acquire's call to its end")
        for (lock in snapshot.locks) {
            val labels = Labels.of(
                "polylock_client_name", snapshot.clientName,
                "polylock_lock_name", lock.name,
                "polylock_lock_kind", lock.kind,
            )
            val results = listOf(
                "acquired" to lock.acquired, "timed_out" to lock.timedOut,
                "cancelled" to lock.cancelled, "failed" to lock.failed,
            )
            for ((result, count) in results) {
                acquires.dataPoint(
                    CounterSnapshot.CounterDataPointSnapshot.builder()
                        .labels(labels.add("polylock_acquire_result", result)).value(count.toDouble()).build(),
                )
            }
            holds.dataPoint(
                GaugeSnapshot.GaugeDataPointSnapshot.builder().labels(labels).value(lock.holds.toDouble()).build(),
            )
            val wait = lock.waitTime
            waits.dataPoint(
                HistogramSnapshot.HistogramDataPointSnapshot.builder().labels(labels).sum(wait.sumSeconds)
                    .classicHistogramBuckets(
                        ClassicHistogramBuckets.of(
                            wait.boundsSeconds + Double.POSITIVE_INFINITY,
                            wait.bucketCounts.map { it.toLong() },
                        ),
                    ).build(),
            )
        }
        return MetricSnapshots(acquires.build(), holds.build(), waits.build())
    }
}

fun servePrometheus(client: Client, port: Int): HTTPServer {
    val registry = PrometheusRegistry()
    registry.register(PolylockCollector(client))
    return HTTPServer.builder().port(port).registry(registry).buildAndStart() // GET /metrics
}
// --- end of docs/kotlin-swift.md: metrics, Prometheus ---

/** `client.metrics()`, Kotlin's accessor of the core's counters, on a real redis-server. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class MetricsTest {
    @Test
    fun `the snapshot counts acquires, timeouts and holds per lock name`() =
        RedisServer.start().use { redis ->
            runBlocking {
                withTimeout(60_000) {
                    Client.connect(redis.url).use { client ->
                        // The default name is host:pid.
                        assertTrue(client.name().endsWith(":${ProcessHandle.current().pid()}"), client.name())
                        val first = client.lock("metrics:kotlin")
                        val second = client.lock("metrics:kotlin")
                        assertTrue(first.acquire())
                        assertFalse(second.acquire(waitMs = 50))
                        var lock = client.metrics().locks.single { it.name == "metrics:kotlin" }
                        assertEquals("lock", lock.kind)
                        assertEquals(1uL, lock.acquired)
                        assertEquals(1uL, lock.timedOut)
                        assertEquals(1L, lock.holds)
                        assertEquals(0L, lock.waiters)
                        assertEquals(2uL, lock.waitTime.count)
                        assertEquals(lock.waitTime.boundsSeconds.size + 1, lock.waitTime.bucketCounts.size)
                        first.release()
                        lock = client.metrics().locks.single { it.name == "metrics:kotlin" }
                        assertEquals(0L, lock.holds)
                        assertEquals(1uL, lock.holdTime.count)
                        assertTrue(client.metrics().connection.serverCalls > 0uL)
                        first.close()
                        second.close()
                    }
                }
            }
        }

    @Test
    fun `the docs' Prometheus collector serves the snapshot to a scrape`() =
        RedisServer.start().use { redis ->
            runBlocking {
                withTimeout(60_000) {
                    Client.connect(redis.url).use { client ->
                        val first = client.lock("orders:42")
                        val second = client.lock("orders:42")
                        assertTrue(first.acquire())
                        assertFalse(second.acquire(waitMs = 20))
                        servePrometheus(client, 0).use { server ->
                            val scrape = URI("http://127.0.0.1:${server.port}/metrics").toURL().readText()
                            println(scrape) // the output shown in docs/kotlin-swift.md
                            val labels = "polylock_client_name=\"${client.name()}\",polylock_lock_kind=\"lock\"," +
                                "polylock_lock_name=\"orders:42\""
                            assertTrue(
                                "polylock_lock_acquires_total{polylock_acquire_result=\"acquired\",$labels} 1.0" in scrape,
                                scrape,
                            )
                            assertTrue(
                                "polylock_lock_acquires_total{polylock_acquire_result=\"timed_out\",$labels} 1.0" in scrape,
                                scrape,
                            )
                            assertTrue("polylock_lock_active_holds{$labels} 1.0" in scrape, scrape)
                            assertTrue(
                                "polylock_lock_acquire_time_in_queue_seconds_count{$labels} 2" in scrape,
                                scrape,
                            )
                        }
                        first.release()
                        first.close()
                        second.close()
                    }
                }
            }
        }
}
