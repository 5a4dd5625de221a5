// @ts-check
'use strict'

// MultiLock and RedLock, over the native LockGroup (src/group.rs).

const native = require('../native.js')
const { codedError } = require('./errors.js')
const { acquireWithSignal } = require('./signal.js')
const { Lock, nativeLock } = require('./lock.js')

/**
 * What MultiLock and RedLock share: the lock API over a native LockGroup.
 */
class LockGroup {
  /** @type {import('../native').LockGroup} */
  #native
  /** @type {Set<AbortController> | undefined} */
  #running

  /**
   * @param {'multi' | 'red'} kind
   * @param {Lock[]} locks
   * @param {import('../native').AcquireOptions | null | undefined} defaults
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
   * @param {import('../index').AcquireOptions} [options]
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
   * @param {import('../index').AcquireOptions} [options]
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
   * @param {(error: import('../index').PolylockError) => void} callback
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
  /** @param {Lock[]} locks @param {import('../index').LockOptions | null} [defaults] */
  constructor(locks, defaults) {
    super('multi', locks, defaults)
  }
}

/** One lock per independent Redis master, held when a majority is (Redlock). */
class RedLock extends LockGroup {
  /** @param {Lock[]} locks @param {import('../index').LockOptions | null} [defaults] */
  constructor(locks, defaults) {
    super('red', locks, defaults)
  }
}

module.exports = { LockGroup, MultiLock, RedLock }
