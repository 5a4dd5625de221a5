// @ts-check
'use strict'

// JobLock and JobHold: the run-once job lock (src/job_lock.rs).

const native = require('../native.js')
const { codedError } = require('./errors.js')

class JobLock {
  /** @type {import('../native').JobLock} */
  #native

  /** @param {import('../native').JobLock} handle @internal */
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
   * @returns {Promise<import('../index').JobRun<T>>}
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
  /** @type {import('../native').JobHold} */
  #native

  /** @param {import('../native').JobHold} handle @internal */
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

module.exports = { JobLock, JobHold }
