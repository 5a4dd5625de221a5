// @ts-check
'use strict'

// The public API of polylock for Node. The native classes (native.js, built by napi-rs) do
// the work and the argument checks; this layer adds what is JavaScript idiom rather than
// logic: AbortSignal in and out, `using`, and `Symbol.asyncDispose`.

const native = require('./native.js')

/** An `Error` with a `code`, for the failures this layer itself reports. */
function codedError(/** @type {string} */ code, /** @type {string} */ message) {
  return Object.assign(new Error(message), { code })
}

/**
 * Runs a native acquire with a Cancellation fired by `options.signal`. Rejects with the signal's
 * reason when it aborts, holding nothing: what was taken after the abort is given back with
 * `giveBack`.
 * @template T
 * @param {{ signal?: AbortSignal } | null | undefined} options
 * @param {(cancellation: import('./native').Cancellation) => Promise<T>} acquire
 * @param {(taken: NonNullable<T>) => Promise<void>} giveBack called when `taken` is truthy
 * @returns {Promise<T>}
 */
async function acquireWithSignal(options, acquire, giveBack) {
  const signal = options?.signal ?? undefined
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw codedError('ERR_INVALID_ARGUMENT', 'invalid argument: signal must be an AbortSignal')
  }
  const cancellation = new native.Cancellation()
  const cancel = () => cancellation.cancel()
  // Already aborted: the native call still checks the other options, then makes no attempt.
  if (signal?.aborted) cancel()
  else signal?.addEventListener('abort', cancel, { once: true })
  let taken
  try {
    taken = await acquire(cancellation)
  } finally {
    signal?.removeEventListener('abort', cancel)
  }
  if (signal?.aborted) {
    // The abort came after the acquire succeeded: give it back, so an abort never leaves a hold.
    if (taken) await giveBack(taken)
    throw signal.reason
  }
  return taken
}

/** @type {(client: Client) => import('./native').Client} */
let nativeClient

class Client {
  static {
    nativeClient = (client) => client.#native
  }

  /** @type {import('./native').Client} */
  #native

  /** @param {import('./native').Client} handle @internal */
  constructor(handle) {
    if (!(handle instanceof native.Client)) {
      throw codedError('ERR_INVALID_ARGUMENT', 'use Client.connect(url) to make a client')
    }
    this.#native = handle
  }

  /**
   * @param {string} url
   * @param {import('./index').ConnectOptions} [options]
   * @returns {Promise<Client>}
   */
  static async connect(url, options) {
    return new Client(await native.Client.connect(url, options))
  }

  /** This client's id, the first half of every owner string it writes. */
  get id() {
    return this.#native.id
  }

  /** The client's name (the `name` option, default `host:pid`): tools and a timed-out `using` of another client name the holder of a lock by it. */
  get name() {
    return this.#native.name
  }

  /** The lease of watchdog-renewed locks, in milliseconds (the `watchdogTimeoutMs` option). */
  get watchdogTimeoutMs() {
    return this.#native.watchdogTimeoutMs
  }

  /**
   * What the locks of this client did since it connected: counters, current holds and waiters
   * and duration histograms per lock name and kind, and the connection's counters. No I/O.
   * @returns {import('./index').MetricsSnapshot}
   */
  metrics() {
    return this.#native.metrics()
  }

  /**
   * A new handle, and so a new owner, on the lock `name`. No I/O.
   * @param {string} name
   * @param {import('./index').LockOptions} [defaults] the wait and lease of its acquires, and its own wait mode
   * @returns {Lock}
   */
  lock(name, defaults) {
    return new Lock(this.#native.lock(name, defaults))
  }

  /**
   * A new handle on the fair lock `name` (Redisson's RFairLock layout): waiters are served in
   * arrival order and a release wakes only the next one. Same handle API as `lock`. No I/O.
   * @param {string} name
   * @param {import('./index').LockOptions} [defaults] the wait and lease of its acquires, and its own wait mode
   * @returns {Lock}
   */
  fairLock(name, defaults) {
    return new Lock(this.#native.fairLock(name, defaults))
  }

  /**
   * A new handle on the FIFO lock `name` (polylock's own layout, not Redisson's): waiters are
   * served in arrival order and a release hands the lock to the next one directly, at about
   * half the server calls of `fairLock`. It excludes every other lock of the same name
   * (`lock`, Redisson's RLock), but Redisson clients do not see its line. Same handle API as
   * `lock`. No I/O.
   * @param {string} name
   * @param {import('./index').LockOptions} [defaults] the wait and lease of its acquires, and its own wait mode
   * @returns {Lock}
   */
  fifoLock(name, defaults) {
    return new Lock(this.#native.fifoLock(name, defaults))
  }

  /**
   * A new handle on the fenced lock `name` (Redisson's RFencedLock layout): the lock API, plus
   * `lock.token`, a number that grows on every acquisition. No I/O.
   * @param {string} name
   * @param {import('./index').LockOptions} [defaults] the wait and lease of its acquires, and its own wait mode
   * @returns {Lock}
   */
  fencedLock(name, defaults) {
    return new Lock(this.#native.fencedLock(name, defaults))
  }

  /**
   * Runs `routine` under the lock `name`: a new handle's `using(routine, options)`, so
   * concurrent calls exclude each other. `options.kind` picks the lock (`'lock'`, the default,
   * `'fairLock'`, `'fifoLock'` or `'fencedLock'`); the rest are `using`'s. Resolves to the
   * routine's result.
   * @template T
   * @param {string} name
   * @param {(signal: AbortSignal) => Promise<T> | T} routine
   * @param {import('./index').WithLockOptions} [options]
   * @returns {Promise<T>}
   */
  async withLock(name, routine, options) {
    if (typeof routine !== 'function') {
      throw codedError('ERR_INVALID_ARGUMENT', 'withLock(name, routine): routine must be a function')
    }
    const { kind = 'lock', ...acquireOptions } = options ?? {}
    /** @type {Lock} */
    let lock
    if (kind === 'lock') lock = this.lock(name)
    else if (kind === 'fairLock') lock = this.fairLock(name)
    else if (kind === 'fifoLock') lock = this.fifoLock(name)
    else if (kind === 'fencedLock') lock = this.fencedLock(name)
    else {
      throw codedError('ERR_INVALID_ARGUMENT',
        `withLock: kind must be 'lock', 'fairLock', 'fifoLock' or 'fencedLock', not ${JSON.stringify(kind)}`)
    }
    return lock.using(routine, acquireOptions)
  }

  /**
   * Sets `key` to `value` only if `token` is at least the highest token already applied to
   * `key`; else rejects with `ERR_STALE_TOKEN` and writes nothing.
   * @param {string} key
   * @param {string | Buffer} value
   * @param {number} token
   * @returns {Promise<void>}
   */
  async fencedSet(key, value, token) {
    return this.#native.fencedSet(key, value, token)
  }

  /**
   * Deletes `key` under the rule of `fencedSet`; resolves `true` when a key was deleted.
   * @param {string} key
   * @param {number} token
   * @returns {Promise<boolean>}
   */
  async fencedDelete(key, token) {
    return this.#native.fencedDelete(key, token)
  }

  /**
   * A new owner's handle on the read-write lock `name` (Redisson's RReadWriteLock layout). No I/O.
   * @param {string} name
   * @param {import('./native').AcquireOptions} [defaults] the wait and lease of both its locks
   * @returns {ReadWriteLock}
   */
  readWriteLock(name, defaults) {
    return new ReadWriteLock(this.#native.readWriteLock(name, defaults))
  }

  /**
   * A handle on the semaphore `name` (Redisson's RSemaphore layout). No I/O.
   * @param {string} name
   * @returns {Semaphore}
   */
  semaphore(name) {
    return new Semaphore(this.#native.semaphore(name))
  }

  /**
   * A handle on the expirable semaphore `name` (Redisson's RPermitExpirableSemaphore layout).
   * No I/O.
   * @param {string} name
   * @returns {ExpirableSemaphore}
   */
  expirableSemaphore(name) {
    return new ExpirableSemaphore(this.#native.expirableSemaphore(name))
  }

  /**
   * Stops the watchdog and the pub/sub connection. Resolves to the names of locks still held
   * through this client: they are not released and expire with their lease.
   * @returns {Promise<string[]>}
   */
  async close() {
    return this.#native.close()
  }

  /**
   * A handle on the count-down latch `name` (Redisson's RCountDownLatch layout). No I/O.
   * @param {string} name
   * @returns {CountDownLatch}
   */
  countDownLatch(name) {
    return new CountDownLatch(this.#native.countDownLatch(name))
  }

  /**
   * A run-once job lock on the lock `name` (ShedLock's semantics): a scheduled job that many
   * nodes fire runs on one of them. Held at most `atMostMs` (a fixed lease: a node that dies
   * holding it blocks the job no longer), at least `atLeastMs` (default 0) from the job's
   * start. No I/O; `ERR_INVALID_ARGUMENT` with the core's message for bad options.
   * @param {string} name
   * @param {import('./index').JobLockOptions} options
   * @returns {JobLock}
   */
  jobLock(name, options) {
    return new JobLock(this.#native.jobLock(name, options))
  }

  /**
   * Runs `routine` once across the nodes that fire it: `this.jobLock(name, options).run(routine)`.
   * Never waits: resolves `{ ran: false }` (and `routine` is not called) when another node holds
   * the lock, else `{ ran: true, value }`.
   * @template T
   * @param {string} name
   * @param {() => Promise<T> | T} routine
   * @param {import('./index').JobLockOptions} options
   * @returns {Promise<import('./index').JobRun<T>>}
   */
  async runJob(name, routine, options) {
    if (typeof routine !== 'function') {
      throw codedError('ERR_INVALID_ARGUMENT', 'runJob(name, routine, options): routine must be a function')
    }
    return this.jobLock(name, options).run(routine)
  }

  /**
   * The leader election `name`: candidates campaign on the fenced lock `name`, whose token is
   * each leader's term. No I/O.
   * @param {string} name
   * @returns {Election}
   */
  election(name) {
    return new Election(this.#native.election(name))
  }
}

/** @type {(lock: Lock) => import('./native').Lock} */
let nativeLock

class Lock {
  static {
    nativeLock = (lock) => lock.#native
  }

  /** @type {import('./native').Lock} */
  #native
  /**
   * The controllers of the `using` calls running now, aborted when the hold is lost. Kept
   * apart from `this` so the native lost callback does not keep this handle alive.
   * @type {Set<AbortController> | undefined}
   */
  #running

  /** @param {import('./native').Lock} handle @internal */
  constructor(handle) {
    if (!(handle instanceof native.Lock)) {
      throw codedError('ERR_INVALID_ARGUMENT', 'use client.lock(name) to make a lock handle')
    }
    this.#native = handle
  }

  get name() {
    return this.#native.name
  }

  /** `<client-id>:<holder-id>`, the owner this handle writes. */
  get owner() {
    return this.#native.owner
  }

  /** The lock's defaults from `client.lock(name, defaults)`; a field is absent when none was set. */
  get defaults() {
    return this.#native.defaults
  }

  /**
   * The fencing token of the current hold of a fenced lock (`client.fencedLock`): grows by one
   * on every acquisition, reentrant ones too, so it stays a safe integer. `null` when this
   * handle holds nothing, and for other kinds of lock. No I/O.
   * @returns {number | null}
   */
  get token() {
    return this.#native.token
  }

  /** Whether the current hold's lease was lost (no I/O). */
  isLost() {
    return this.#native.isLost()
  }

  /**
   * The holder's remaining lease in milliseconds (asks Redis): `null` when nobody holds the
   * lock, `Infinity` when its key has no expiry.
   * @returns {Promise<number | null>}
   */
  async remainingLease() {
    return this.#native.remainingLease()
  }

  /**
   * Calls `callback` with an `ERR_LOCK_LOST` error each time a hold of this handle is lost (its
   * lease ran out, or Redis could not be reached to renew it). It never keeps the process alive.
   * @param {(error: import('./index').PolylockError) => void} callback
   */
  onLost(callback) {
    if (typeof callback !== 'function') {
      throw codedError('ERR_INVALID_ARGUMENT', 'invalid argument: onLost(callback): callback must be a function')
    }
    this.#native.onLost(/** @type {(error: Error) => void} */ (callback))
  }

  /**
   * Acquires the lock, or re-enters it. Resolves `false` when a `waitMs` bound runs out;
   * rejects with the signal's reason (an `AbortError`) when `signal` aborts, holding nothing.
   * @param {import('./index').AcquireOptions} [options]
   * @returns {Promise<boolean>}
   */
  async acquire(options) {
    return acquireWithSignal(options, (cancellation) => this.#native.acquire(options, cancellation),
      () => this.#native.release())
  }

  /**
   * Releases one level of the hold.
   * @returns {Promise<void>}
   */
  async release() {
    return this.#native.release()
  }

  /**
   * Acquires, runs `routine`, and always releases. `routine` gets an AbortSignal that aborts
   * (with an `ERR_LOCK_LOST` error as reason) if the lease is lost meanwhile.
   * @template T
   * @param {(signal: AbortSignal) => Promise<T> | T} routine
   * @param {import('./index').AcquireOptions} [options]
   * @returns {Promise<T>}
   */
  async using(routine, options) {
    if (typeof routine !== 'function') {
      throw codedError('ERR_INVALID_ARGUMENT', 'using(routine): routine must be a function')
    }
    const running = this.#watchLost()
    // A wait that runs out rejects with ERR_TIMEOUT and the core's message; an abort throws its reason.
    await acquireWithSignal(options, (cancellation) => this.#native.acquireOrFail(options, cancellation),
      () => this.#native.release())
    const controller = new AbortController()
    running.add(controller)
    let result
    try {
      result = await routine(controller.signal)
    } catch (error) {
      running.delete(controller)
      // The routine's failure is the one to report; a lost lease also shows on its signal.
      await this.#native.release().catch(() => {})
      throw error
    }
    running.delete(controller)
    await this.#native.release()
    return result
  }

  /** @returns {Set<AbortController>} */
  #watchLost() {
    if (this.#running === undefined) {
      const running = new Set()
      this.#native.onLost((error) => {
        for (const controller of running) controller.abort(error)
      })
      this.#running = running
    }
    return this.#running
  }

  /** Whether this handle holds the lock (no I/O). */
  isHeld() {
    return this.#native.isHeld()
  }

  /** How many unreleased acquisitions this handle has (no I/O). */
  holdCount() {
    return this.#native.holdCount()
  }

  /**
   * Whether anyone holds the lock.
   * @returns {Promise<boolean>}
   */
  async isLocked() {
    return this.#native.isLocked()
  }

  /**
   * Deletes the lock whoever holds it; `true` when there was one.
   * @returns {Promise<boolean>}
   */
  async forceUnlock() {
    return this.#native.forceUnlock()
  }

  /**
   * Releases every level this handle holds (nothing when it holds none). Rejects with
   * `ERR_LOCK_LOST` if the hold had been lost.
   * @returns {Promise<void>}
   */
  async [Symbol.asyncDispose]() {
    while (this.#native.holdCount() > 0) await this.#native.release()
  }
}

/**
 * What MultiLock and RedLock share: the lock API over a native LockGroup.
 */
class LockGroup {
  /** @type {import('./native').LockGroup} */
  #native
  /** @type {Set<AbortController> | undefined} */
  #running

  /**
   * @param {'multi' | 'red'} kind
   * @param {Lock[]} locks
   * @param {import('./native').AcquireOptions | null | undefined} defaults
   */
  constructor(kind, locks, defaults) {
    if (!Array.isArray(locks) || !locks.every((lock) => lock instanceof Lock)) {
      throw codedError('ERR_INVALID_ARGUMENT', `invalid argument: ${new.target.name}(locks): locks must be an array of Lock handles`)
    }
    this.#native = new native.LockGroup(kind, locks.map(nativeLock), defaults)
  }

  /** The distinct names of its locks, joined by ", ". */
  get name() {
    return this.#native.name
  }

  /** How many of its locks must be held: all (MultiLock) or a majority (RedLock). */
  get quorum() {
    return this.#native.quorum
  }

  /**
   * Acquires (one more level of) the group. Resolves `false` when `waitMs` runs out; rejects
   * with the signal's reason when `signal` aborts, holding nothing.
   * @param {import('./index').AcquireOptions} [options]
   * @returns {Promise<boolean>}
   */
  async acquire(options) {
    return acquireWithSignal(options, (cancellation) => this.#native.acquire(options, cancellation),
      () => this.#native.release())
  }

  /**
   * Releases one level: every lock that acquisition took, on every server.
   * @returns {Promise<void>}
   */
  async release() {
    return this.#native.release()
  }

  /**
   * Acquires, runs `routine`, and always releases; `routine`'s signal aborts if the group is lost.
   * @template T
   * @param {(signal: AbortSignal) => Promise<T> | T} routine
   * @param {import('./index').AcquireOptions} [options]
   * @returns {Promise<T>}
   */
  async using(routine, options) {
    if (typeof routine !== 'function') {
      throw codedError('ERR_INVALID_ARGUMENT', 'using(routine): routine must be a function')
    }
    if (this.#running === undefined) {
      const running = new Set()
      this.#native.onLost((error) => {
        for (const controller of running) controller.abort(error)
      })
      this.#running = running
    }
    const running = this.#running
    await acquireWithSignal(options, (cancellation) => this.#native.acquireOrFail(options, cancellation),
      () => this.#native.release())
    const controller = new AbortController()
    running.add(controller)
    let result
    try {
      result = await routine(controller.signal)
    } catch (error) {
      running.delete(controller)
      await this.#native.release().catch(() => {})
      throw error
    }
    running.delete(controller)
    await this.#native.release()
    return result
  }

  /** Whether the group is held (no I/O). */
  isHeld() {
    return this.#native.isHeld()
  }

  /** How many unreleased acquisitions the group has (no I/O). */
  holdCount() {
    return this.#native.holdCount()
  }

  /** Whether the current hold was lost (no I/O). */
  isLost() {
    return this.#native.isLost()
  }

  /**
   * Calls `callback` with an `ERR_LOCK_LOST` error each time a hold of the group is lost.
   * @param {(error: import('./index').PolylockError) => void} callback
   */
  onLost(callback) {
    if (typeof callback !== 'function') {
      throw codedError('ERR_INVALID_ARGUMENT', 'invalid argument: onLost(callback): callback must be a function')
    }
    this.#native.onLost(/** @type {(error: Error) => void} */ (callback))
  }

  /**
   * Releases every level the group holds.
   * @returns {Promise<void>}
   */
  async [Symbol.asyncDispose]() {
    while (this.#native.holdCount() > 0) await this.#native.release()
  }
}

/** All of several locks (of one or several clients), acquired together or not at all. */
class MultiLock extends LockGroup {
  /** @param {Lock[]} locks @param {import('./index').LockOptions | null} [defaults] */
  constructor(locks, defaults) {
    super('multi', locks, defaults)
  }
}

/** One lock per independent Redis master, held when a majority is (Redlock). */
class RedLock extends LockGroup {
  /** @param {Lock[]} locks @param {import('./index').LockOptions | null} [defaults] */
  constructor(locks, defaults) {
    super('red', locks, defaults)
  }
}

class ReadWriteLock {
  /** @type {import('./native').ReadWriteLock} */
  #native
  /** @type {Lock} */
  #read
  /** @type {Lock} */
  #write

  /** @param {import('./native').ReadWriteLock} handle @internal */
  constructor(handle) {
    if (!(handle instanceof native.ReadWriteLock)) {
      throw codedError('ERR_INVALID_ARGUMENT', 'use client.readWriteLock(name) to make a read-write lock')
    }
    this.#native = handle
    this.#read = new Lock(handle.readLock())
    this.#write = new Lock(handle.writeLock())
  }

  get name() {
    return this.#native.name
  }

  /** The read lock of this owner (the same handle on every call): readers share it. */
  readLock() {
    return this.#read
  }

  /** The write lock of this owner (the same handle on every call): it excludes everyone else. */
  writeLock() {
    return this.#write
  }
}

/** What both semaphores share: the count of permits at the name (Redisson's layouts). */
class PermitCount {
  /** @type {import('./native').Semaphore | import('./native').ExpirableSemaphore} */
  #native

  /** @param {import('./native').Semaphore | import('./native').ExpirableSemaphore} handle @internal */
  constructor(handle) {
    this.#native = handle
  }

  get name() {
    return this.#native.name
  }

  /**
   * Sets the number of permits if it was never set; resolves `true` when set.
   * @param {number} permits
   * @returns {Promise<boolean>}
   */
  async trySetPermits(permits) {
    return this.#native.trySetPermits(permits)
  }

  /**
   * Adds permits (a negative number takes some away).
   * @param {number} permits
   * @returns {Promise<void>}
   */
  async addPermits(permits) {
    return this.#native.addPermits(permits)
  }

  /**
   * The permits available now (0 when never set; an expirable semaphore first takes back the
   * permits whose lease ran out).
   * @returns {Promise<number>}
   */
  async availablePermits() {
    return this.#native.availablePermits()
  }
}

class Semaphore extends PermitCount {
  /** @type {import('./native').Semaphore} */
  #native

  /** @param {import('./native').Semaphore} handle @internal */
  constructor(handle) {
    if (!(handle instanceof native.Semaphore)) {
      throw codedError('ERR_INVALID_ARGUMENT', 'use client.semaphore(name) to make a semaphore')
    }
    super(handle)
    this.#native = handle
  }

  /**
   * Takes `permits` permits (default 1). Resolves `false` when a `waitMs` bound runs out;
   * rejects with the signal's reason when `signal` aborts, taking nothing.
   * @param {import('./index').SemaphoreAcquireOptions} [options]
   * @returns {Promise<boolean>}
   */
  async acquire(options) {
    return acquireWithSignal(options, (cancellation) => this.#native.acquire(options, cancellation),
      () => this.#native.release(options?.permits))
  }

  /**
   * Gives `permits` permits (default 1) back, whoever took them.
   * @param {number} [permits]
   * @returns {Promise<void>}
   */
  async release(permits) {
    return this.#native.release(permits)
  }
}

class ExpirableSemaphore extends PermitCount {
  /** @type {import('./native').ExpirableSemaphore} */
  #native

  /** @param {import('./native').ExpirableSemaphore} handle @internal */
  constructor(handle) {
    if (!(handle instanceof native.ExpirableSemaphore)) {
      throw codedError('ERR_INVALID_ARGUMENT',
        'use client.expirableSemaphore(name) to make an expirable semaphore')
    }
    super(handle)
    this.#native = handle
  }

  /**
   * Takes one permit and resolves to its id, or `null` when a `waitMs` bound runs out; rejects
   * with the signal's reason when `signal` aborts, taking nothing.
   * @param {import('./index').AcquireOptions} [options]
   * @returns {Promise<string | null>}
   */
  async acquire(options) {
    return acquireWithSignal(options, (cancellation) => this.#native.acquire(options, cancellation),
      (permitId) => this.#native.release(permitId))
  }

  /**
   * Releases the permit `permitId` (from any handle or client).
   * @param {string} permitId
   * @returns {Promise<void>}
   */
  async release(permitId) {
    return this.#native.release(permitId)
  }

  /**
   * The ids of the permits this handle holds (no I/O); a lost permit leaves at once.
   * @returns {string[]}
   */
  heldPermits() {
    return this.#native.heldPermits()
  }
}

/** A count-down latch: a count set once, counted down by any client, awaited to reach zero. */
class CountDownLatch {
  /** @type {import('./native').CountDownLatch} */
  #native

  /** @param {import('./native').CountDownLatch} handle @internal */
  constructor(handle) {
    if (!(handle instanceof native.CountDownLatch)) {
      throw codedError('ERR_INVALID_ARGUMENT', 'use client.countDownLatch(name) to make a count-down latch')
    }
    this.#native = handle
  }

  get name() {
    return this.#native.name
  }

  /**
   * Sets the count (1 to 2**53 - 1) when none is set; resolves `true` when set.
   * @param {number} count
   * @returns {Promise<boolean>}
   */
  async trySetCount(count) {
    return this.#native.trySetCount(count)
  }

  /**
   * Takes one from the count; the one that reaches zero wakes every waiter.
   * @returns {Promise<void>}
   */
  async countDown() {
    return this.#native.countDown()
  }

  /**
   * The count now: 0 when open (never set, or counted down to zero).
   * @returns {Promise<number>}
   */
  async count() {
    return this.#native.count()
  }

  /**
   * Waits until the count is zero, at most `timeoutMs` (0: one look); resolves `true` when it
   * is. Woken by the zero message, and looks again after any wake-up and every few seconds.
   * @param {number} timeoutMs
   * @returns {Promise<boolean>}
   */
  async awaitZero(timeoutMs) {
    return this.#native.awaitZero(timeoutMs)
  }

  /**
   * Deletes the latch whatever its count (it is open then) and wakes its waiters; resolves
   * `true` when there was one.
   * @returns {Promise<boolean>}
   */
  async delete() {
    return this.#native.delete()
  }
}

class JobLock {
  /** @type {import('./native').JobLock} */
  #native

  /** @param {import('./native').JobLock} handle @internal */
  constructor(handle) {
    if (!(handle instanceof native.JobLock)) {
      throw codedError('ERR_INVALID_ARGUMENT', 'use client.jobLock(name, options) to make a job lock')
    }
    this.#native = handle
  }

  get name() {
    return this.#native.name
  }

  get atMostMs() {
    return this.#native.atMostMs
  }

  get atLeastMs() {
    return this.#native.atLeastMs
  }

  /**
   * One look, never waiting: a hold (lease `atMostMs`, never renewed), or `null` when another
   * node holds the lock.
   * @returns {Promise<JobHold | null>}
   */
  async tryAcquire() {
    const hold = await this.#native.tryAcquire()
    return hold === null ? null : new JobHold(hold)
  }

  /**
   * Runs `routine` if the lock is free: `{ ran: true, value }`; `{ ran: false }` (and `routine`
   * is not called) when another node holds it. After the routine (returned or threw) the lock
   * is kept until `atLeastMs` from the start, or released.
   * @template T
   * @param {() => Promise<T> | T} routine
   * @returns {Promise<import('./index').JobRun<T>>}
   */
  async run(routine) {
    if (typeof routine !== 'function') {
      throw codedError('ERR_INVALID_ARGUMENT', 'run(routine): routine must be a function')
    }
    const hold = await this.tryAcquire()
    if (hold === null) return { ran: false }
    try {
      return { ran: true, value: await routine() }
    } finally {
      await hold.finish()
    }
  }
}

class JobHold {
  /** @type {import('./native').JobHold} */
  #native

  /** @param {import('./native').JobHold} handle @internal */
  constructor(handle) {
    this.#native = handle
  }

  /** Whether the hold is within its `atMostMs` lease (no I/O); `false` once finished. */
  get isHeld() {
    return this.#native.isHeld
  }

  /**
   * Keeps the lock until `atLeastMs` from the job's start, or releases it; a job that outlived
   * `atMostMs` finds its lock lapsed (a warning is logged, nothing is written).
   * @returns {Promise<void>}
   */
  async finish() {
    return this.#native.finish()
  }

  /** `await using hold = ...`: finishes. */
  async [Symbol.asyncDispose]() {
    return this.finish()
  }
}

class Election {
  /** @type {import('./native').Election} */
  #native

  /** @param {import('./native').Election} handle @internal */
  constructor(handle) {
    this.#native = handle
  }

  /** @returns {string} */
  get name() {
    return this.#native.name
  }

  /**
   * Waits until this candidate leads, announcing `value`. Resolves `null` when a `waitMs` bound
   * runs out; rejects with the signal's reason when `signal` aborts, holding nothing.
   * @param {string} value
   * @param {{ waitMs?: number | null, signal?: AbortSignal } | null} [options]
   * @returns {Promise<Leadership | null>}
   */
  async campaign(value, options) {
    const won = await acquireWithSignal(
      options,
      (cancellation) => this.#native.campaign(value, options, cancellation),
      (leadership) => leadership.resign(),
    )
    return won ? new Leadership(won) : null
  }

  /**
   * The current leader (`{ value, term, owner, clientName }`), or `null` when nobody leads.
   * @returns {Promise<import('./native').Leader | null>}
   */
  async leader() {
    return this.#native.leader()
  }

  /**
   * The leader now, then each change (`null`: nobody leads), woken by the election's channel
   * and read again at least every second. `for await (const leader of election.observe())`.
   * @returns {AsyncGenerator<import('./native').Leader | null, void, undefined>}
   */
  async *observe() {
    const observer = await this.#native.observe()
    for (;;) yield await observer.next()
  }
}

class Leadership {
  /** @type {import('./native').Leadership} */
  #native
  #controller = new AbortController()

  /** @param {import('./native').Leadership} handle @internal */
  constructor(handle) {
    this.#native = handle
    const controller = this.#controller
    // The callback must not keep this object alive: it holds only the controller.
    handle.onLost((error) => controller.abort(error))
  }

  /** The term: higher than every earlier leader's (pass it to `client.fencedSet`). */
  get term() {
    return this.#native.term
  }

  /** The value this leader announced last. */
  get value() {
    return this.#native.value
  }

  get owner() {
    return this.#native.owner
  }

  /**
   * Aborted when the leadership ends: its lease lost (reason: an `ERR_LOCK_LOST` error, no
   * later than the lease can have ended on the server) or resigned.
   * @returns {AbortSignal}
   */
  get signal() {
    // A pause past the lease (SIGSTOP) ends it before the lost callback can run.
    if (!this.#controller.signal.aborted && !this.#native.isLeader()) {
      this.#controller.abort(codedError('ERR_LOCK_LOST', 'the leadership was lost'))
    }
    return this.#controller.signal
  }

  /** Whether this candidate still leads, as far as it knows (no I/O; reads the clock). */
  isLeader() {
    return this.#native.isLeader()
  }

  /**
   * Announces `value` instead; rejects with `ERR_LOCK_LOST` when no longer leading.
   * @param {string} value
   * @returns {Promise<void>}
   */
  async proclaim(value) {
    return this.#native.proclaim(value)
  }

  /**
   * Steps down: the next candidate is woken, and `signal` aborts. Resigning twice does nothing.
   * @returns {Promise<void>}
   */
  async resign() {
    try {
      await this.#native.resign()
    } finally {
      this.#controller.abort(codedError('ERR_NOT_HELD', 'the leadership was resigned'))
    }
  }

  async [Symbol.asyncDispose]() {
    await this.resign()
  }
}

/**
 * Sends polylock's log events (the Rust core's tracing events) at `level` and above to
 * `logger(level, message, fields)`; `null` stops it. A lost lease is a `warn`.
 * @param {import('./index').Logger | null} logger
 * @param {import('./index').LogLevel} [level] default `'info'`
 */
function setLogger(logger, level) {
  if (logger !== null && typeof logger !== 'function') {
    throw codedError('ERR_INVALID_ARGUMENT', 'invalid argument: setLogger(logger): logger must be a function or null')
  }
  native.setLogger(logger, level)
}

exports.Client = Client
exports.Lock = Lock
exports.MultiLock = MultiLock
exports.RedLock = RedLock
exports.ReadWriteLock = ReadWriteLock
exports.Semaphore = Semaphore
exports.ExpirableSemaphore = ExpirableSemaphore
exports.setLogger = setLogger
exports.JobLock = JobLock
exports.JobHold = JobHold
exports.CountDownLatch = CountDownLatch
exports.Election = Election
exports.Leadership = Leadership
// For ./otel.js only: the native client behind a Client (not enumerable, not declared).
Object.defineProperty(exports, 'nativeClientOf', {
  value: (/** @type {unknown} */ client) => (client instanceof Client ? nativeClient(client) : undefined),
})
