// @ts-check
'use strict'

// Election and Leadership: the leader election (src/election.rs).

const { codedError } = require('./errors.js')
const { acquireWithSignal } = require('./signal.js')

class Election {
  /** @type {import('../native').Election} */
  #native

  /** @param {import('../native').Election} handle @internal */
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
   * @returns {Promise<import('../native').Leader | null>}
   */
  async leader() {
    return this.#native.leader()
  }

  /**
   * The leader now, then each change (`null`: nobody leads), woken by the election's channel
   * and read again at least every second. `for await (const leader of election.observe())`.
   * @returns {AsyncGenerator<import('../native').Leader | null, void, undefined>}
   */
  async *observe() {
    const observer = await this.#native.observe()
    for (;;) yield await observer.next()
  }
}

class Leadership {
  /** @type {import('../native').Leadership} */
  #native
  #controller = new AbortController()

  /** @param {import('../native').Leadership} handle @internal */
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

module.exports = { Election, Leadership }
