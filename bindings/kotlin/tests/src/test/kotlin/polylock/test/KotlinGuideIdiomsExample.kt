package polylock.test

import java.util.concurrent.atomic.AtomicInteger
import kotlin.time.Duration
import kotlin.time.Duration.Companion.seconds
import polylock.*

// The idioms example of docs/kotlin-swift.md, verbatim apart from the URL: a top-level function
// as in the docs, run by DocsExamplesTest.

/** How many times the examples' critical sections ran. */
internal val processedOrders = AtomicInteger()

internal fun processOrder() {
    processedOrders.incrementAndGet()
}

suspend fun main(url: String) = Client.connect(url).use { client ->
    val lock = client.lock("orders:42", wait = 5.seconds, lease = 30.seconds) // per-lock defaults
    lock.withLock { processOrder() }    // Timeout (the block does not run) if the 5 s run out
    if (lock.acquire(wait = Duration.INFINITE)) lock.release()   // INFINITE: no bound
    println(lock.remainingLease())      // null when free
}
