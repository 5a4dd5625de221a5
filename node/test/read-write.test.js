'use strict'

// The read-write lock (client.readWriteLock: readLock() and writeLock() are Locks), against a
// real redis-server.

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

  test('a writer excludes readers and other writers', async () => {
    const name = fresh('exclusive')
    const writer = client.readWriteLock(name)
    const other = client.readWriteLock(name)
    assert.equal(await writer.writeLock().acquire({ waitMs: 0 }), true)
    assert.equal(await other.readLock().acquire({ waitMs: 0 }), false)
    assert.equal(await other.writeLock().acquire({ waitMs: 100 }), false)
    assert.equal(await redis.command('HGET', name, 'mode'), 'write', "Redisson's layout")
    await writer.writeLock().release()
    assert.equal(await other.readLock().acquire({ waitMs: 0 }), true)
    await other.readLock().release()
    assert.equal(await redis.command('EXISTS', name), 0)
  })

  test('readers share the lock and keep writers out', async () => {
    const name = fresh('shared')
    const readers = [client.readWriteLock(name), client.readWriteLock(name), client.readWriteLock(name)]
    for (const reader of readers) assert.equal(await reader.readLock().acquire({ waitMs: 0 }), true)
    const writer = client.readWriteLock(name)
    assert.equal(await writer.writeLock().acquire({ waitMs: 0 }), false)
    for (const reader of readers.slice(0, 2)) await reader.readLock().release()
    assert.equal(await writer.writeLock().acquire({ waitMs: 0 }), false, 'one reader is still inside')
    await readers[2].readLock().release()
    assert.equal(await writer.writeLock().acquire({ waitMs: 0 }), true)
    await writer.writeLock().release()
  })

  test('both sides are reentrant', async () => {
    const name = fresh('reentrant')
    const rw = client.readWriteLock(name)
    const read = rw.readLock()
    assert.equal(await read.acquire(), true)
    assert.equal(await read.acquire({ waitMs: 0 }), true)
    assert.equal(read.holdCount(), 2)
    await read.release()
    assert.equal(await read.isLocked(), true)
    await read[Symbol.asyncDispose]()
    assert.equal(read.holdCount(), 0)
    assert.equal(await read.isLocked(), false)

    const write = rw.writeLock()
    assert.equal(await write.acquire(), true)
    assert.equal(await write.acquire({ waitMs: 0 }), true)
    assert.equal(write.holdCount(), 2)
    await write.release()
    assert.equal(await client.readWriteLock(name).readLock().acquire({ waitMs: 0 }), false)
    await write.release()
    await assert.rejects(write.release(), { code: 'ERR_NOT_HELD' })
  })

  test('the writer may take the read lock and keep it after the write release (downgrade)', async () => {
    const name = fresh('downgrade')
    const rw = client.readWriteLock(name)
    assert.equal(await rw.writeLock().acquire(), true)
    assert.equal(await rw.readLock().acquire({ waitMs: 0 }), true, "the writer's own read")
    const other = client.readWriteLock(name)
    assert.equal(await other.readLock().acquire({ waitMs: 0 }), false, 'still write-locked')
    await rw.writeLock().release()
    assert.equal(rw.readLock().isHeld(), true)
    assert.equal(await other.readLock().acquire({ waitMs: 0 }), true, 'readers share the downgraded lock')
    assert.equal(await other.writeLock().acquire({ waitMs: 0 }), false, 'no writer while reading')
    await other.readLock().release()
    await rw.readLock().release()
    assert.equal(await redis.command('EXISTS', name), 0)
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

  test('a string key of the same name is ERR_WRONG_TYPE on either side', async () => {
    const name = fresh('wrong-type')
    await redis.command('SET', name, 'not a lock')
    const rw = client.readWriteLock(name)
    await assert.rejects(rw.readLock().acquire({ waitMs: 0 }), { code: 'ERR_WRONG_TYPE' })
    await assert.rejects(rw.writeLock().acquire({ waitMs: 0 }), { code: 'ERR_WRONG_TYPE' })
    assert.equal(await redis.command('GET', name), 'not a lock')
  })

  test('bad names and options are ERR_INVALID_ARGUMENT', async () => {
    assert.throws(() => client.readWriteLock(''), { code: 'ERR_INVALID_ARGUMENT', message: /must not be empty/ })
    assert.throws(() => client.readWriteLock(null), { code: 'ERR_INVALID_ARGUMENT' })
    const rw = client.readWriteLock(fresh('bad'))
    await assert.rejects(rw.readLock().acquire({ leaseMs: 0 }), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(rw.writeLock().acquire({ signal: 'stop' }), { code: 'ERR_INVALID_ARGUMENT' })
  })
})
