// @ts-check
'use strict'

// Semaphore: counted permits that belong to nobody (src/semaphore.rs).

const native = require('../native.js')
const { codedError } = require('./errors.js')
const { acquireWithSignal } = require('./signal.js')
const { PermitCount } = require('./permits.js')

class Semaphore extends PermitCount {
  /** @type {import('../native').Semaphore} */
  #native

  /** @param {import('../native').Semaphore} handle @internal */
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
   * @param {import('../index').SemaphoreAcquireOptions} [options]
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

module.exports = { Semaphore }
