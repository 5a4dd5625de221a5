// @ts-check
'use strict'

// PermitCount: what Semaphore and ExpirableSemaphore share (src/permits.rs).

/** What both semaphores share: the count of permits at the name (Redisson's layouts). */
class PermitCount {
  /** @type {import('../native').Semaphore | import('../native').ExpirableSemaphore} */
  #native

  /** @param {import('../native').Semaphore | import('../native').ExpirableSemaphore} handle @internal */
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

module.exports = { PermitCount }
