// @ts-check
'use strict'

// CountDownLatch (src/latch.rs).

const native = require('../native.js')
const { codedError } = require('./errors.js')

/** A count-down latch: a count set once, counted down by any client, awaited to reach zero. */
class CountDownLatch {
  /** @type {import('../native').CountDownLatch} */
  #native

  /** @param {import('../native').CountDownLatch} handle @internal */
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

module.exports = { CountDownLatch }
