'use strict'

// client.fairLock: Redisson's RFairLock layout (queue LIST, deadline ZSET, one channel per
// waiter). Waiters are served in arrival order, and one that gives up leaves the queue at once.

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const { describe, test } = require('node:test')

const { Client } = require('..')
const { serverAndClientPerFile, freshNames } = require('./redis.js')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Rejects after `ms` with `what`, so no test hangs without bound. */
function within(ms, promise, what) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

let redis
let client
serverAndClientPerFile((server, connected) => {
  redis = server
  client = connected
})
/** A name no other test uses. */
const fresh = freshNames('node:fair')
const queueKey = (name) => `redisson_lock_queue:{${name}}`
const timeoutsKey = (name) => `redisson_lock_timeout:{${name}}`
const queue = (name) => redis.command('LRANGE', queueKey(name), 0, -1)

/** Polls the queue LIST until `check(entries)` holds; fails after `ms`. */
async function queueUntil(name, check, ms, what) {
  const deadline = Date.now() + ms
  let entries = await queue(name)
  while (!check(entries)) {
    if (Date.now() > deadline) assert.fail(`${what}: queue is ${JSON.stringify(entries)} after ${ms} ms`)
    await sleep(10)
    entries = await queue(name)
  }
  return entries
}

describe('fair lock', () => {
  test('10 waiters get the lock in the order they queued', async () => {
    const name = fresh('fifo')
    const holder = client.fairLock(name)
    assert.equal(await holder.acquire(), true)
    const order = []
    const waiting = []
    for (let i = 0; i < 10; i += 1) {
      const waiter = client.fairLock(name)
      waiting.push(
        waiter.acquire({ waitMs: 60_000 }).then(async (acquired) => {
          assert.equal(acquired, true, `waiter ${i} acquired`)
          order.push(i)
          await waiter.release()
        }),
      )
      // Start the next one only once this one has its place at the tail of the queue.
      await queueUntil(name, (entries) => entries.length === i + 1 && entries[i] === waiter.owner, 10_000,
        `waiter ${i} queued`)
    }
    await holder.release()
    await within(60_000, Promise.all(waiting), 'all waiters served')
    assert.deepEqual(order, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert.deepEqual(await queue(name), [])
    assert.equal(await redis.command('EXISTS', name, timeoutsKey(name)), 0, 'nothing left behind')
  })

  test('a waiter whose waitMs runs out and one whose signal aborts leave the queue at once', async () => {
    // A waiter left behind would hold its place for a minute and block the one after it.
    const patientClient = await Client.connect(redis.url, { fairQueueTimeoutMs: 60_000 })
    try {
      const name = fresh('leave')
      const holder = patientClient.fairLock(name)
      assert.equal(await holder.acquire(), true)

      const timingOut = patientClient.fairLock(name)
      const timedOut = timingOut.acquire({ waitMs: 1500 })
      await queueUntil(name, (e) => e.length === 1, 10_000, 'timing-out waiter queued')

      const aborted = patientClient.fairLock(name)
      const controller = new AbortController()
      const abortedWait = aborted.acquire({ signal: controller.signal })
      await queueUntil(name, (e) => e.length === 2, 10_000, 'aborted waiter queued')

      const patient = patientClient.fairLock(name)
      const patientWait = patient.acquire({ waitMs: 50_000 })
      await queueUntil(name, (e) => e.length === 3, 10_000, 'patient waiter queued')
      assert.deepEqual(await queue(name), [timingOut.owner, aborted.owner, patient.owner])

      assert.equal(await within(10_000, timedOut, 'timed-out acquire'), false)
      assert.deepEqual(await queue(name), [aborted.owner, patient.owner], 'left when its wait ran out')

      controller.abort()
      await assert.rejects(within(10_000, abortedWait, 'aborted acquire'), { name: 'AbortError' })
      // The abort rejects at once; the core leaves the queue right behind it, in the background.
      await queueUntil(name, (e) => e.length === 1, 5_000, 'aborted waiter left')
      assert.deepEqual(await queue(name), [patient.owner])
      assert.deepEqual(await redis.command('ZRANGE', timeoutsKey(name), 0, -1), [patient.owner])

      const released = Date.now()
      await holder.release()
      assert.equal(await within(55_000, patientWait, 'patient acquire'), true)
      assert.ok(Date.now() - released < 20_000, 'served long before the 60 s queue timeout')
      assert.equal(timingOut.holdCount() + aborted.holdCount(), 0)
      assert.deepEqual(await queue(name), [])
      await patient.release()
      assert.equal(await redis.command('EXISTS', name), 0)
    } finally {
      await patientClient.close()
    }
  })

  test('the same handle re-enters (the hash counts) without queueing; each release undoes one', async () => {
    const name = fresh('reentrant')
    const lock = client.fairLock(name)
    assert.equal(await lock.acquire(), true)
    assert.equal(await lock.acquire({ waitMs: 0 }), true)
    assert.equal(lock.holdCount(), 2)
    assert.equal(await redis.command('HGET', name, lock.owner), '2', 'Redisson layout: owner -> count')
    assert.equal(await client.fairLock(name).acquire({ waitMs: 0 }), false, 'another handle is excluded')
    assert.deepEqual(await queue(name), [], 'neither re-entry nor a one-attempt acquire stays queued')
    await lock.release()
    assert.equal(await redis.command('HGET', name, lock.owner), '1')
    assert.equal(await lock.isLocked(), true)
    await lock.release()
    assert.equal(lock.holdCount(), 0)
    assert.equal(await lock.isLocked(), false)
    await assert.rejects(lock.release(), { code: 'ERR_NOT_HELD' })
  })

  test('using runs the routine under the fair lock and releases it', async () => {
    const name = fresh('using')
    const lock = client.fairLock(name)
    const result = await lock.using(async (signal) => {
      assert.equal(signal.aborted, false)
      assert.equal(lock.isHeld(), true)
      assert.equal(await redis.command('HGET', name, lock.owner), '1')
      assert.equal(await client.fairLock(name).acquire({ waitMs: 0 }), false)
      return 'done'
    }, { waitMs: 5000 })
    assert.equal(result, 'done')
    assert.equal(lock.holdCount(), 0)
    assert.equal(await lock.isLocked(), false)

    // A waiter queued behind a `using` gets the lock when the routine ends.
    const waiter = client.fairLock(name)
    let waiting
    await lock.using(async () => {
      waiting = waiter.acquire({ waitMs: 30_000 })
      await queueUntil(name, (e) => e.length === 1 && e[0] === waiter.owner, 10_000, 'waiter queued')
    })
    assert.equal(await within(30_000, waiting, 'waiter after using'), true)
    await waiter[Symbol.asyncDispose]()
    assert.equal(await waiter.isLocked(), false)
  })

  test('bad input is ERR_INVALID_ARGUMENT', async () => {
    assert.throws(() => client.fairLock(''), { code: 'ERR_INVALID_ARGUMENT', message: /must not be empty/ })
    assert.throws(() => client.fairLock(42), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(Client.connect(redis.url, { fairQueueTimeoutMs: -1 }), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(Client.connect(redis.url, { fairQueueTimeoutMs: 1.5 }), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(Client.connect(redis.url, { fairQueueTimeoutMs: 0 }), { code: 'ERR_INVALID_ARGUMENT' })
  })
})

test('child processes exclude each other on a non-atomic GET/SET counter with fairLock', async () => {
  const name = fresh('exclusion')
  const counter = `node:fair:counter:${process.pid}`
  const processes = 4
  const rounds = 15
  const runs = Array.from({ length: processes }, () => {
    const child = spawn(process.execPath,
      [path.join(__dirname, 'fixtures', 'counter.js'), redis.url, name, counter, String(rounds), 'fair'],
      { stdio: ['ignore', 'ignore', 'inherit'] })
    return within(120_000, new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal))),
      'counter process').finally(() => child.kill('SIGKILL'))
  })
  assert.deepEqual(await Promise.all(runs), Array(processes).fill(0))
  assert.equal(Number(await redis.command('GET', counter)), processes * rounds, 'no increment was lost')
  assert.equal(await redis.command('EXISTS', name, queueKey(name), timeoutsKey(name)), 0)
})
