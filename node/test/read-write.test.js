'use strict'

// The read-write lock (client.readWriteLock: readLock() and writeLock() are Locks), against a
// real redis-server.
// What every binding does alike (results, errors, Redisson's layout) is in the conformance cases
// (tests/conformance/behaviour.json, run by conformance-behaviour.test.js); this file keeps Node's own.

const assert = require('node:assert/strict')
const { once } = require('node:events')
const { describe, test } = require('node:test')

const { Client, Lock, ReadWriteLock } = require('..')
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
const fresh = freshNames()

describe('read-write lock', () => {
  test('readLock() and writeLock() are Locks, the same handle on every call', () => {
    const rw = client.readWriteLock(fresh('handles'))
    assert.ok(rw instanceof ReadWriteLock)
    assert.ok(rw.readLock() instanceof Lock)
    assert.ok(rw.writeLock() instanceof Lock)
    assert.equal(rw.readLock(), rw.readLock())
    assert.equal(rw.writeLock(), rw.writeLock())
    assert.equal(rw.readLock().owner, rw.writeLock().owner, 'one owner')
    assert.notEqual(client.readWriteLock(rw.name).readLock().owner, rw.readLock().owner, 'a new owner per call')
    assert.throws(() => new ReadWriteLock({}), { code: 'ERR_INVALID_ARGUMENT' })
  })

  test('a write release wakes every waiting reader long before a 60 s lease ends', async () => {
    const name = fresh('wake')
    const writer = client.readWriteLock(name)
    assert.equal(await writer.writeLock().acquire({ leaseMs: 60_000 }), true)
    const other = await Client.connect(redis.url)
    try {
      const readers = [client.readWriteLock(name), client.readWriteLock(name), other.readWriteLock(name)]
      let settled = 0
      const started = Date.now()
      const waiting = readers.map((reader) =>
        reader.readLock().acquire({ waitMs: 50_000 }).finally(() => { settled += 1 }))
      await sleep(300)
      assert.equal(settled, 0, 'the readers wait while the writer holds the lock')
      await writer.writeLock().release()
      assert.deepEqual(await within(30_000, Promise.all(waiting), 'readers'), [true, true, true])
      assert.ok(Date.now() - started < 20_000, 'woken far sooner than the 60 s lease')
      for (const reader of readers) await reader.readLock().release()
    } finally {
      await other.close()
    }
  })

  test('aborting a reader\'s wait rejects with AbortError and leaves nothing held', async () => {
    const name = fresh('abort')
    const writer = client.readWriteLock(name)
    await writer.writeLock().acquire()
    const reader = client.readWriteLock(name).readLock()
    const controller = new AbortController()
    const waiting = reader.acquire({ signal: controller.signal })
    await sleep(200)
    controller.abort()
    await assert.rejects(within(10_000, waiting, 'aborted acquire'), { name: 'AbortError' })
    await writer.writeLock().release()
    await sleep(300)
    assert.equal(reader.holdCount(), 0)
    assert.equal(await reader.isLocked(), false, 'the abandoned wait did not take the lock later')
  })

  test('using() on the read lock aborts its signal with ERR_LOCK_LOST when the key is deleted', async () => {
    const short = await Client.connect(redis.url, { watchdogTimeoutMs: 1500 })
    try {
      const name = fresh('lost')
      const read = short.readWriteLock(name).readLock()
      let reason
      const using = read.using(async (signal) => {
        await redis.command('DEL', name)
        if (!signal.aborted) await within(10_000, once(signal, 'abort'), 'lost signal')
        reason = signal.reason
      })
      await assert.rejects(using, { code: 'ERR_LOCK_LOST' })
      assert.equal(reason?.code, 'ERR_LOCK_LOST')
      assert.equal(read.holdCount(), 0)
    } finally {
      await short.close()
    }
  })

  test('bad names and options are ERR_INVALID_ARGUMENT', async () => {
    assert.throws(() => client.readWriteLock(''), { code: 'ERR_INVALID_ARGUMENT', message: /must not be empty/ })
    assert.throws(() => client.readWriteLock(null), { code: 'ERR_INVALID_ARGUMENT' })
    const rw = client.readWriteLock(fresh('bad'))
    await assert.rejects(rw.readLock().acquire({ leaseMs: 0 }), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(rw.writeLock().acquire({ signal: 'stop' }), { code: 'ERR_INVALID_ARGUMENT' })
  })
})
