// @ts-check
'use strict'

// Client: a connection to one Redis server, and the maker of every handle (src/client.rs).

const native = require('../native.js')
const { codedError } = require('./errors.js')
const { Lock } = require('./lock.js')
const { ReadWriteLock } = require('./read_write_lock.js')
const { Semaphore } = require('./semaphore.js')
const { ExpirableSemaphore } = require('./expirable_semaphore.js')
const { CountDownLatch } = require('./latch.js')
const { JobLock } = require('./job_lock.js')
const { Election } = require('./election.js')

/** @type {(client: Client) => import('../native').Client} */
let nativeClient

class Client {
  static {
    nativeClient = (client) => client.#native
  }

  /** @type {import('../native').Client} */
  #native

  /** @param {import('../native').Client} handle @internal */
  constructor(handle) {
    if (!(handle instanceof native.Client)) {
      throw codedError('ERR_INVALID_ARGUMENT', 'use Client.connect(url) to make a client')
    }
    this.#native = handle
  }

  /**
   * @param {string} url
   * @param {import('../index').ConnectOptions} [options]
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
   * @returns {import('../index').MetricsSnapshot}
   */
  metrics() {
    return this.#native.metrics()
  }

  /**
   * A new handle, and so a new owner, on the lock `name`. No I/O.
   * @param {string} name
   * @param {import('../index').LockOptions} [defaults] the wait and lease of its acquires, and its own wait mode
   * @returns {Lock}
   */
  lock(name, defaults) {
    return new Lock(this.#native.lock(name, defaults))
  }

  /**
   * A new handle on the fair lock `name` (Redisson's RFairLock layout): waiters are served in
   * arrival order and a release wakes only the next one. Same handle API as `lock`. No I/O.
   * @param {string} name
   * @param {import('../index').LockOptions} [defaults] the wait and lease of its acquires, and its own wait mode
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
   * @param {import('../index').LockOptions} [defaults] the wait and lease of its acquires, and its own wait mode
   * @returns {Lock}
   */
  fifoLock(name, defaults) {
    return new Lock(this.#native.fifoLock(name, defaults))
  }

  /**
   * A new handle on the fenced lock `name` (Redisson's RFencedLock layout): the lock API, plus
   * `lock.token`, a number that grows on every acquisition. No I/O.
   * @param {string} name
   * @param {import('../index').LockOptions} [defaults] the wait and lease of its acquires, and its own wait mode
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
   * @param {import('../index').WithLockOptions} [options]
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
   * @param {import('../native').AcquireOptions} [defaults] the wait and lease of both its locks
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
   * Stops the watchdog and the pub/sub connection, and resolves once the client's record is
   * deleted (at most the response timeout), so a process that exits next leaves none behind.
   * Resolves to the names of locks still held through this client: they are not released and
   * expire with their lease.
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
   * @param {import('../index').JobLockOptions} options
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
   * @param {import('../index').JobLockOptions} options
   * @returns {Promise<import('../index').JobRun<T>>}
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

module.exports = { Client, nativeClient }
