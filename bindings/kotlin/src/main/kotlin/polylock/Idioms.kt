// Kotlin idioms over the generated binding (polylock.kt, whose API counts milliseconds):
// kotlin.time.Duration overloads, the scoped `withLock` and a lambda lost listener.
//
// Durations and the lock's defaults: a wait or lease that is `null` (or left out) takes the
// lock's default (`client.lock(name, wait, lease)`), which is no bound unless set;
// `Duration.INFINITE`, Kotlin's "no bound" (as in kotlinx.coroutines), asks for no bound
// whatever the default: wait without bound, or the watchdog lease renewed while held. Where a
// handle has no defaults (client factories, semaphores) `null` and `Duration.INFINITE` both mean
// no bound. Durations are handed over in whole milliseconds (truncated); the Rust core checks
// every value (a negative wait, a zero lease: `LockException.InvalidArgument`).
package polylock

import kotlin.time.Duration
import kotlin.time.Duration.Companion.milliseconds
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.flow
import kotlinx.coroutines.withContext

/** A lock's wait or lease for `acquireWith`: null is the lock's default, INFINITE no bound. */
internal fun Duration?.toBound(): Bound = when {
    this == null -> Bound.LockDefault
    this == Duration.INFINITE -> Bound.Unbounded
    else -> Bound.Millis(inWholeMilliseconds)
}

/** Milliseconds where there are no defaults: null and INFINITE are no bound. */
internal fun Duration?.toMillisOrNull(): Long? =
    if (this == null || this == Duration.INFINITE) null else inWholeMilliseconds

/**
 * The scoped hold of every hold (a lock, a multi-lock, a red-lock): [acquire], run [block],
 * [release] however it ends (see [Lock.withLock]).
 */
private suspend fun <T> holding(
    acquire: suspend () -> Unit,
    release: suspend () -> Unit,
    block: suspend () -> T,
): T {
    acquire()
    val result = try {
        block()
    } catch (failure: Throwable) {
        try {
            withContext(NonCancellable) { release() }
        } catch (releaseFailure: Throwable) {
            failure.addSuppressed(releaseFailure)
        }
        throw failure
    }
    withContext(NonCancellable) { release() }
    return result
}

/** A lambda as the generated binding's lost listener. */
private fun lostListener(callback: (LockException) -> Unit): LostListener = object : LostListener {
    override fun onLost(error: LockException) = callback(error)
}

// ---- Client: per-lock defaults ----

/**
 * A handle on the lock [name] whose `acquire`, `acquireBlocking` and `withLock` take [wait] and
 * [lease] when they leave them out. `null` or `Duration.INFINITE`: wait without bound, the
 * watchdog lease. No I/O; `LockException.InvalidArgument` for a default out of bounds.
 */
fun Client.lock(name: String, wait: Duration? = null, lease: Duration? = null): Lock =
    lock(name, wait.toMillisOrNull(), lease.toMillisOrNull())

/** [Client.lock] for the fair lock [name] (waiters served in arrival order). */
fun Client.fairLock(name: String, wait: Duration? = null, lease: Duration? = null): Lock =
    fairLock(name, wait.toMillisOrNull(), lease.toMillisOrNull())

/**
 * [Client.lock] for the FIFO lock [name] (polylock's own layout: waiters served in arrival order,
 * a release hands the lock to the next; Redisson clients do not see its line).
 */
fun Client.fifoLock(name: String, wait: Duration? = null, lease: Duration? = null): Lock =
    fifoLock(name, wait.toMillisOrNull(), lease.toMillisOrNull())

/** [Client.lock] for the fenced lock [name] (its `token()` is the fencing token of the hold). */
fun Client.fencedLock(name: String, wait: Duration? = null, lease: Duration? = null): Lock =
    fencedLock(name, wait.toMillisOrNull(), lease.toMillisOrNull())

// ---- Lock ----

/**
 * Acquires the lock, or re-enters it; `false` when [wait] ran out (`Duration.ZERO`: one
 * attempt). [lease]: a fixed lease, never renewed. `null`: the lock's default;
 * `Duration.INFINITE`: no bound (for the lease: the watchdog's, renewed while held).
 * Cancelling the coroutine leaves no lock held.
 */
suspend fun Lock.acquire(wait: Duration? = null, lease: Duration? = null): Boolean =
    acquireWith(wait.toBound(), lease.toBound())

/** [Lock.acquire] for plain threads: blocks the calling thread. */
fun Lock.acquireBlocking(wait: Duration? = null, lease: Duration? = null): Boolean =
    acquireWithBlocking(wait.toBound(), lease.toBound())

/**
 * The holder's remaining lease (asks Redis): `null` when nobody holds the lock,
 * `Duration.INFINITE` when its key has no expiry.
 */
suspend fun Lock.remainingLease(): Duration? = remainingLeaseMs()?.let {
    if (it == Long.MAX_VALUE) Duration.INFINITE else it.milliseconds
}

/** The wait `acquire` takes when it leaves it out; `null`: no bound. */
val Lock.defaultWait: Duration? get() = defaults().waitMs?.milliseconds

/** The lease `acquire` takes when it leaves it out; `null`: the watchdog lease. */
val Lock.defaultLease: Duration? get() = defaults().leaseMs?.milliseconds

/**
 * Runs [block] holding the lock and releases it afterwards, however [block] ends (a result, an
 * exception, a cancellation: the release is not cancellable).
 *
 * [wait] and [lease] as for [Lock.acquire]. When the wait runs out the block does not run and
 * `LockException.Timeout` is thrown with the core's message, the same as Python's `with` and
 * Node's `using` (a typed error rather than a `null` result, which a caller could not tell
 * from a block that returned `null`). When [block] throws and the release
 * fails too (`LockException.LockLost`: the lease was lost meanwhile), the block's exception is
 * thrown with the release's attached as suppressed; when only the release fails, its exception
 * is thrown.
 */
suspend fun <T> Lock.withLock(wait: Duration? = null, lease: Duration? = null, block: suspend () -> T): T =
    holding({ acquireOrFail(wait.toBound(), lease.toBound()) }, { release() }, block)

/**
 * Runs [block] under the lock [name] and returns its result: a new handle's [Lock.withLock]
 * (so concurrent calls exclude each other, as different owners), closed afterwards. [wait] and
 * [lease] as for [Lock.acquire], with no per-lock defaults: `null` waits without bound and takes
 * the watchdog lease. `LockException.Timeout` (the block does not run) when [wait] runs out.
 */
suspend fun <T> Client.withLock(
    name: String,
    wait: Duration? = null,
    lease: Duration? = null,
    block: suspend () -> T,
): T = lock(name, null, null).use { lock -> lock.withLock(wait, lease, block) }

/**
 * Calls [callback] each time a hold of this handle is lost (`LockException.LockLost`), on a
 * background thread of polylock; what it throws is ignored.
 */
fun Lock.onLost(callback: (LockException) -> Unit) = onLost(lostListener(callback))

// ---- Semaphores ----

/**
 * Takes [permits] permits; `false` when [wait] ran out (`null` or `Duration.INFINITE`: no bound,
 * `Duration.ZERO`: one attempt). Cancelling the coroutine takes nothing.
 */
suspend fun Semaphore.acquire(permits: Int = 1, wait: Duration? = null): Boolean =
    acquire(permits, wait.toMillisOrNull())

/** [Semaphore.acquire] for plain threads: blocks the calling thread. */
fun Semaphore.acquireBlocking(permits: Int = 1, wait: Duration? = null): Boolean =
    acquireBlocking(permits, wait.toMillisOrNull())

/**
 * Takes one permit and returns its id, or `null` when [wait] ran out. [wait]: `null` or
 * `Duration.INFINITE` no bound; [lease]: `null` or `Duration.INFINITE` renewed by the watchdog,
 * else a fixed lease after which the permit comes back.
 */
suspend fun ExpirableSemaphore.acquire(wait: Duration? = null, lease: Duration? = null): String? =
    acquire(wait.toMillisOrNull(), lease.toMillisOrNull())

/** [ExpirableSemaphore.acquire] for plain threads: blocks the calling thread. */
fun ExpirableSemaphore.acquireBlocking(wait: Duration? = null, lease: Duration? = null): String? =
    acquireBlocking(wait.toMillisOrNull(), lease.toMillisOrNull())

/** The watchdog lease of this client's locks (see `ClientOptions.watchdogTimeoutMs`). */
val Client.watchdogTimeout: Duration get() = watchdogTimeoutMs().milliseconds

// ---- MultiLock and RedLock ----

/** Acquires the multi-lock (all of its locks); `false` when [wait] ran out. As [Lock.acquire]. */
suspend fun MultiLock.acquire(wait: Duration? = null, lease: Duration? = null): Boolean =
    acquireWith(wait.toBound(), lease.toBound())

/** [MultiLock.acquire] for plain threads: blocks the calling thread. */
fun MultiLock.acquireBlocking(wait: Duration? = null, lease: Duration? = null): Boolean =
    acquireWithBlocking(wait.toBound(), lease.toBound())

/** Runs [block] holding the multi-lock, as [Lock.withLock] (`LockException.Timeout` when [wait] runs out). */
suspend fun <T> MultiLock.withLock(wait: Duration? = null, lease: Duration? = null, block: suspend () -> T): T =
    holding({ acquireOrFail(wait.toBound(), lease.toBound()) }, { release() }, block)

/** Calls [callback] each time a hold of the multi-lock is lost (any of its locks lost). */
fun MultiLock.onLost(callback: (LockException) -> Unit) = onLost(lostListener(callback))

/** Acquires the red-lock (a majority of its locks); `false` when [wait] ran out. As [Lock.acquire]. */
suspend fun RedLock.acquire(wait: Duration? = null, lease: Duration? = null): Boolean =
    acquireWith(wait.toBound(), lease.toBound())

/** [RedLock.acquire] for plain threads: blocks the calling thread. */
fun RedLock.acquireBlocking(wait: Duration? = null, lease: Duration? = null): Boolean =
    acquireWithBlocking(wait.toBound(), lease.toBound())

/** Runs [block] holding the red-lock, as [Lock.withLock] (`LockException.Timeout` when [wait] runs out). */
suspend fun <T> RedLock.withLock(wait: Duration? = null, lease: Duration? = null, block: suspend () -> T): T =
    holding({ acquireOrFail(wait.toBound(), lease.toBound()) }, { release() }, block)

/** Calls [callback] each time a hold of the red-lock is lost (fewer than its quorum held). */
fun RedLock.onLost(callback: (LockException) -> Unit) = onLost(lostListener(callback))

// ---- Run-once job lock ----

/**
 * The run-once job lock [name] (ShedLock's semantics): held at most [atMost] (a fixed lease:
 * a node that dies holding it blocks the job no longer), at least [atLeast] from the job's
 * start (a node whose clock or schedule lags by less skips). No I/O;
 * `LockException.InvalidArgument` unless 0 < atMost and atLeast <= atMost.
 */
fun Client.jobLock(name: String, atMost: Duration, atLeast: Duration = Duration.ZERO): JobLock =
    jobLock(name, atMost.inWholeMilliseconds, atLeast.inWholeMilliseconds)

/**
 * Runs [block] if no other node holds the job lock and returns its result; `null`, without
 * running it, when another node holds it (never waits). However [block] ends (a result, an
 * exception, a cancellation: the finish is not cancellable), the lock is then kept until
 * `atLeast` from the start, or released. (Not `run`: Kotlin's scope function `run` would
 * silently take its place where this one is not imported.)
 */
suspend fun <T> JobLock.tryRun(block: suspend () -> T): T? {
    val hold = tryAcquire() ?: return null
    return hold.use { holding({}, { hold.finish() }, block) }
}

/** Runs [block] once across the nodes that fire it: `client.jobLock(name, atMost, atLeast).tryRun(block)`. */
suspend fun <T> Client.runJob(
    name: String,
    atMost: Duration,
    atLeast: Duration = Duration.ZERO,
    block: suspend () -> T,
): T? = jobLock(name, atMost, atLeast).use { job -> job.tryRun(block) }

/** The leader now, then each change of the election (`null`: nobody leads), as a cold [Flow]. */
fun ElectionObserver.changes(): Flow<Leader?> = flow {
    while (true) emit(next())
}

// ---- CountDownLatch ----

/** Waits until the latch's count is zero, at most [timeout]; `true` when it is. */
suspend fun CountDownLatch.awaitZero(timeout: Duration): Boolean =
    awaitZero(timeout.inWholeMilliseconds)

/** [CountDownLatch.awaitZero] for plain threads: blocks the calling thread. */
fun CountDownLatch.awaitZeroBlocking(timeout: Duration): Boolean =
    awaitZeroBlocking(timeout.inWholeMilliseconds)
