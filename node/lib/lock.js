// @ts-check
'use strict'

// Lock: one owner's handle on a lock of any kind (src/lock.rs).

const native = require('../native.js')
const { codedError } = require('./errors.js')
const { acquireWithSignal } = require('./signal.js')

/** @type {(lock: Lock) => import('../native').Lock} */
let nativeLock

class Lock {
  static {
    nativeLock = (lock) => lock.#native
  }

  /** @type {import('../native').Lock} */
  #native
  /**
   * The controllers of the `using` calls running now, aborted when the hold is lost. Kept
   * apart from `this` so the native lost callback does not keep this handle alive.
   * @type {Set<AbortController> | undefined}
   */
  #running

  /** @param {import('../native').Lock} handle @internal */
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
   * @param {(error: import('../index').PolylockError) => void} callback
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
   * @param {import('../index').AcquireOptions} [options]
   * @returns {Promise<boolean>}
   */
  acquire(options) {
    // Not an async function: the native promise is returned as it is, without one more
    // promise and its ticks per call (many locks from Node); a throw still rejects.
    try {
      return acquireWithSignal(options, (cancellation) => this.#native.acquire(options, cancellation),
        () => this.#native.release())
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /**
   * Releases one level of the hold.
   * @returns {Promise<void>}
   */
  release() {
    try {
      return this.#native.release()
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /**
   * Acquires, runs `routine`, and always releases. `routine` gets an AbortSignal that aborts
   * (with an `ERR_LOCK_LOST` error as reason) if the lease is lost meanwhile.
   * @template T
   * @param {(signal: AbortSignal) => Promise<T> | T} routine
   * @param {import('../index').AcquireOptions} [options]
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

module.exports = { Lock, nativeLock }
