// @ts-check
'use strict'

// The public API of polylock for Node. The native classes (native.js, built by napi-rs) do
// the work and all argument checks; this layer adds what is JavaScript idiom rather than
// logic: AbortSignal in and out, `using`, and `Symbol.asyncDispose`.

const native = require('./native.js')

/** An `Error` with a `code`, for the two failures this layer itself reports. */
function codedError(/** @type {string} */ code, /** @type {string} */ message) {
  return Object.assign(new Error(message), { code })
}

class Client {
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

  /**
   * A new handle, and so a new owner, on the lock `name`. No I/O.
   * @param {string} name
   * @returns {Lock}
   */
  lock(name) {
    return new Lock(this.#native.lock(name))
  }

  /**
   * A new handle on the fair lock `name` (Redisson's RFairLock layout): waiters are served in
   * arrival order and a release wakes only the next one. Same handle API as `lock`. No I/O.
   * @param {string} name
   * @returns {Lock}
   */
  fairLock(name) {
    return new Lock(this.#native.fairLock(name))
  }

  /**
   * Stops the watchdog and the pub/sub connection. Resolves to the names of locks still held
   * through this client: they are not released and expire with their lease.
   * @returns {Promise<string[]>}
   */
  async close() {
    return this.#native.close()
  }
}

class Lock {
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

  /** Whether the current hold's lease was lost (no I/O). */
  get lost() {
    return this.#native.lost
  }

  /**
   * Acquires the lock, or re-enters it. Resolves `false` when a `waitMs` bound runs out;
   * rejects with the signal's reason (an `AbortError`) when `signal` aborts, holding nothing.
   * @param {import('./index').AcquireOptions} [options]
   * @returns {Promise<boolean>}
   */
  async acquire(options) {
    // Anything else given as `signal` is rejected by the native argument check.
    const signal = options?.signal instanceof AbortSignal ? options.signal : undefined
    const cancellation = new native.Cancellation()
    const cancel = () => cancellation.cancel()
    // Already aborted: the native call still checks the arguments, then makes no attempt.
    if (signal?.aborted) cancel()
    else signal?.addEventListener('abort', cancel, { once: true })
    let acquired
    try {
      acquired = await this.#native.acquire(options, cancellation)
    } finally {
      signal?.removeEventListener('abort', cancel)
    }
    if (signal?.aborted) {
      // The abort came after the lock was taken: give it back, so an abort never leaves a hold.
      if (acquired) await this.#native.release()
      throw signal.reason
    }
    return acquired
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
    if (!(await this.acquire(options))) {
      throw codedError(
        'ERR_TIMEOUT',
        `lock '${this.name}' was not acquired within ${options?.waitMs} ms; using() did not run the routine`,
      )
    }
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

exports.Client = Client
exports.Lock = Lock
