// @ts-check
'use strict'

// ExpirableSemaphore: permits with ids and leases (src/expirable_semaphore.rs).

const native = require('../native.js')
const { codedError } = require('./errors.js')
const { acquireWithSignal } = require('./signal.js')
const { PermitCount } = require('./permits.js')

class ExpirableSemaphore extends PermitCount {
  /** @type {import('../native').ExpirableSemaphore} */
  #native

  /** @param {import('../native').ExpirableSemaphore} handle @internal */
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
   * @param {import('../index').AcquireOptions} [options]
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

module.exports = { ExpirableSemaphore }
