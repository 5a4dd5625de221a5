'use strict'

// client.metrics() and client.name, and the options `name`-less default, `metrics` and
// `metricsMaxLockNames`, on a real redis-server.

const assert = require('node:assert/strict')
const os = require('node:os')
const { after, before, test } = require('node:test')

const { Client } = require('..')
const { freshNames, startRedis } = require('./redis.js')

const fresh = freshNames('node:metrics')
let redis

before(async () => {
  redis = await startRedis()
})

after(async () => {
  await redis?.stop()
})

/** A client connected with `options`, closed after `use` ends. */
async function withClient(options, use) {
  const client = await Client.connect(redis.url, options)
  try {
    return await use(client)
  } finally {
    await client.close()
  }
}

test('a snapshot counts acquires, holds and waits per lock, with camelCase fields', async () => {
  await withClient({}, async (client) => {
    const name = fresh('snapshot')
    const lock = client.lock(name)
    assert.equal(await lock.acquire(), true)
    assert.equal(await client.lock(name).acquire({ waitMs: 0 }), false)
    const holding = client.metrics().locks.find((entry) => entry.name === name)
    assert.equal(holding.holds, 1)
    await lock.release()

    const snapshot = client.metrics()
    assert.equal(snapshot.clientName, client.name)
    assert.equal(snapshot.eventsDropped, 0)
    const entry = snapshot.locks.find((found) => found.name === name)
    assert.deepEqual(Object.keys(entry).sort(), [
      'acquired', 'cancelled', 'failed', 'handoffsGranted', 'handoffsWoken', 'holdTime', 'holds', 'kind', 'lostConnection',
      'lostExpired', 'lostTaken', 'name', 'releaseFailures', 'releaseRetries', 'renewalFailures', 'renewals', 'timedOut',
      'waitTime', 'waiters', 'wakeupsFoundTaken',
    ])
    assert.equal(entry.kind, 'lock')
    assert.equal(entry.acquired, 1)
    assert.equal(entry.timedOut, 1)
    assert.equal(entry.holds, 0)
    assert.equal(entry.waiters, 0)
    assert.equal(entry.waitTime.count, 2)
    assert.equal(entry.holdTime.count, 1)
    assert.ok(entry.holdTime.sumSeconds > 0)
    assert.equal(entry.waitTime.bounds.length, 17)
    assert.equal(entry.waitTime.bucketCounts.length, 18)
    assert.equal(entry.waitTime.bucketCounts.reduce((sum, count) => sum + count, 0), 2)
    assert.ok(snapshot.connection.serverCalls >= 3, JSON.stringify(snapshot.connection))
    assert.deepEqual(snapshot.connection.serverErrors, [])
    assert.equal(typeof snapshot.connection.subscriptions, 'number')
    assert.equal(snapshot.connection.reconnects, 0)
  })
})

test('every kind is counted under its own name', async () => {
  await withClient({}, async (client) => {
    const name = fresh('kinds')
    const handles = [
      [client.fairLock(`${name}:fair`), 'fair_lock'],
      [client.fifoLock(`${name}:fifo`), 'fifo_lock'],
      [client.fencedLock(`${name}:fenced`), 'fenced_lock'],
      [client.readWriteLock(`${name}:rw`).writeLock(), 'read_write_lock'],
    ]
    for (const [lock] of handles) {
      assert.equal(await lock.acquire(), true)
      await lock.release()
    }
    const semaphore = client.semaphore(`${name}:semaphore`)
    await semaphore.trySetPermits(1)
    assert.equal(await semaphore.acquire(), true)
    await semaphore.release()
    const kinds = Object.fromEntries(client.metrics().locks.map((entry) => [entry.name, entry.kind]))
    for (const [lock, kind] of handles) assert.equal(kinds[lock.name], kind, lock.name)
    assert.equal(kinds[`${name}:semaphore`], 'semaphore')
  })
})

test('the default name is host:pid', async () => {
  await withClient({}, async (client) => {
    assert.equal(client.name, `${os.hostname()}:${process.pid}`)
  })
})

test('metrics: false counts nothing', async () => {
  await withClient({ metrics: false }, async (client) => {
    const lock = client.lock(fresh('off'))
    assert.equal(await lock.acquire(), true)
    await lock.release()
    const snapshot = client.metrics()
    assert.equal(snapshot.locks.reduce((sum, entry) => sum + entry.acquired, 0), 0)
    assert.equal(snapshot.connection.serverCalls, 0)
  })
})

test('names beyond metricsMaxLockNames are counted together as _other', async () => {
  await withClient({ metricsMaxLockNames: 2 }, async (client) => {
    const name = fresh('fold')
    for (const suffix of ['a', 'b', 'c', 'd']) {
      const lock = client.lock(`${name}:${suffix}`)
      assert.equal(await lock.acquire(), true)
      await lock.release()
    }
    const counted = client.metrics().locks.map((entry) => [entry.name, entry.acquired])
    assert.deepEqual(counted, [[`${name}:a`, 1], [`${name}:b`, 1], ['_other', 2]])
  })
})

test('bad metrics options are ERR_INVALID_ARGUMENT with the core\'s message', async () => {
  for (const [options, message] of [
    [{ metricsMaxLockNames: 0 }, 'invalid argument: metrics_max_lock_names must be a whole number from 1 to 100000, got 0'],
    [{ metricsMaxLockNames: 1.5 }, 'invalid argument: metrics_max_lock_names must be a whole number from 1 to 100000, got 1.5'],
    [{ metricsMaxLockNames: '10' }, 'invalid argument: metricsMaxLockNames must be a number, not string'],
    [{ metrics: 'yes' }, 'invalid argument: metrics must be a boolean, not string'],
  ]) {
    await assert.rejects(Client.connect(redis.url, /** @type {any} */ (options)), { code: 'ERR_INVALID_ARGUMENT', message },
      JSON.stringify(options))
  }
})
