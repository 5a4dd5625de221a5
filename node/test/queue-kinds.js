'use strict'

// The two kinds of lock that serve their waiters in arrival order, client.fairLock and
// client.fifoLock: the same Node API over different Redis keys. queue-locks.test.js runs the
// tests they share over both descriptors; fifo.test.js has the FIFO lock's tests of its own.
//
// - fair: Redisson's RFairLock layout: the lock hash `name`, a queue LIST
//   `redisson_lock_queue:{name}` of owners in arrival order, a deadline ZSET
//   `redisson_lock_timeout:{name}` of the waiters, and one channel per waiter.
// - FIFO: polylock's own layout (not Redisson's): the lock hash `name`, a line LIST
//   `polylock_fifo_line:{name}` of owners in arrival order, and one waiter record
//   `polylock_fifo_waiter:{name}:<owner>` per waiter, whose TTL (fairQueueTimeoutMs) its looks
//   renew; one whose record lapsed (its process died) is skipped.

const assert = require('node:assert/strict')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * @typedef {object} QueueKind
 * @property {string} title the kind in test names
 * @property {'fairLock' | 'fifoLock'} method the client method that makes a handle
 * @property {'fair' | 'fifo'} counterKind the kind argument of fixtures/counter.js
 * @property {string} queueWord what the kind calls its queue, for test names and messages
 * @property {string} metricKind the kind the client's metrics give such a lock
 * @property {(name: string) => string} queueKey the LIST of waiting owners in arrival order
 * @property {(name: string) => string[]} keys every key of `name` that is gone once nobody holds or waits
 * @property {(redis: any, name: string) => Promise<string[]>} waiters the owners the server
 *   keeps a waiter's state for (fair: a deadline, FIFO: a record)
 * @property {(name: string, owner: string) => string} [recordKey] FIFO only: a waiter's record
 */

const fairTimeoutsKey = (name) => `redisson_lock_timeout:{${name}}`

/** @type {QueueKind} */
const FAIR = {
  title: 'fair lock',
  method: 'fairLock',
  counterKind: 'fair',
  queueWord: 'queue',
  metricKind: 'fair_lock',
  queueKey: (name) => `redisson_lock_queue:{${name}}`,
  keys: (name) => [name, FAIR.queueKey(name), fairTimeoutsKey(name)],
  waiters: (redis, name) => redis.command('ZRANGE', fairTimeoutsKey(name), 0, -1),
}

const fifoRecordPrefix = (name) => `polylock_fifo_waiter:{${name}}:`

/** @type {QueueKind} */
const FIFO = {
  title: 'FIFO lock',
  method: 'fifoLock',
  counterKind: 'fifo',
  queueWord: 'line',
  metricKind: 'fifo_lock',
  queueKey: (name) => `polylock_fifo_line:{${name}}`,
  keys: (name) => [name, FIFO.queueKey(name)],
  // The records still on the server (the test server holds few keys, so KEYS will do).
  waiters: async (redis, name) => {
    const prefix = fifoRecordPrefix(name)
    const records = await redis.command('KEYS', `${prefix}*`)
    return records.map((/** @type {string} */ key) => key.slice(prefix.length))
  },
  recordKey: (name, owner) => `${fifoRecordPrefix(name)}${owner}`,
}

const QUEUE_KINDS = [FAIR, FIFO]

/** The owners in the queue of `name`, head first. */
const queue = (redis, kind, name) => redis.command('LRANGE', kind.queueKey(name), 0, -1)

/** Polls the queue of `name` until `check(entries)` holds; fails after `ms`. */
async function queueUntil(redis, kind, name, check, ms, what) {
  const deadline = Date.now() + ms
  let entries = await queue(redis, kind, name)
  while (!check(entries)) {
    if (Date.now() > deadline) {
      assert.fail(`${what}: ${kind.queueWord} is ${JSON.stringify(entries)} after ${ms} ms`)
    }
    await sleep(10)
    entries = await queue(redis, kind, name)
  }
  return entries
}

module.exports = { FAIR, FIFO, QUEUE_KINDS, queue, queueUntil }
