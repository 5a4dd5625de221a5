'use strict'

// The lock (client.lock) against a real redis-server: what is Node's own (handles as owners,
// abort signals, using, dispose, argument types).
// What every binding does alike (results, errors, Redisson's layout) is in the conformance cases
// (tests/conformance/behaviour.json, run by conformance-behaviour.test.js); this file keeps Node's own.

const assert = require('node:assert/strict')
const { once } = require('node:events')
const { describe, test } = require('node:test')

const { Client, Lock } = require('..')
const { freePort, serverAndClientPerFile, freshNames } = require('./redis.js')

/** Resolves after `ms`. */
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

describe('acquire and release', () => {
  test('a held lock excludes another handle and is free after release', async () => {
    const name = fresh('basic')
    const holder = client.lock(name)
    const other = client.lock(name)
    assert.equal(await holder.acquire(), true)
    assert.equal(holder.isHeld(), true)
    assert.equal(await holder.isLocked(), true)
    assert.equal(await other.acquire({ waitMs: 0 }), false, 'a second handle is a second owner')
    assert.equal(other.isHeld(), false)
    await holder.release()
    assert.equal(holder.isHeld(), false)
    assert.equal(await holder.isLocked(), false)
    assert.equal(await other.acquire({ waitMs: 0 }), true)
    await other.release()
  })

  test('waitMs: 0 is one attempt and a waitMs bound gives false when it runs out', async () => {
    const name = fresh('wait')
    const holder = client.lock(name)
    await holder.acquire()
    const waiter = client.lock(name)
    assert.equal(await waiter.acquire({ waitMs: 0 }), false)
    const started = Date.now()
    assert.equal(await waiter.acquire({ waitMs: 400 }), false)
    assert.ok(Date.now() - started >= 350, 'it waited for its bound before giving up')
    assert.equal(waiter.holdCount(), 0)
    await holder.release()
  })

  test('a waiter is woken by the release message long before a 60 s lease ends', async () => {
    const name = fresh('wake')
    const holder = client.lock(name)
    assert.equal(await holder.acquire({ leaseMs: 60_000 }), true)
    const waiter = client.lock(name)
    const started = Date.now()
    const waiting = waiter.acquire({ waitMs: 50_000 })
    await sleep(200)
    await holder.release()
    assert.equal(await waiting, true)
    assert.ok(Date.now() - started < 20_000, 'woken far sooner than the 60 s lease')
    await waiter.release()
  })

  test('Symbol.asyncDispose releases every level, and is a no-op when not held', async () => {
    const name = fresh('dispose')
    const lock = client.lock(name)
    await lock.acquire()
    await lock.acquire()
    await lock[Symbol.asyncDispose]()
    assert.equal(lock.holdCount(), 0)
    assert.equal(await lock.isLocked(), false)
    await lock[Symbol.asyncDispose]()
  })

  test('handles are made by client.lock only', () => {
    assert.throws(() => new Lock({}), { code: 'ERR_INVALID_ARGUMENT' })
    assert.throws(() => new Client({}), { code: 'ERR_INVALID_ARGUMENT' })
  })
})

describe('abort', () => {
  test('an already aborted signal rejects with AbortError and takes nothing', async () => {
    const name = fresh('abort-before')
    const lock = client.lock(name)
    const controller = new AbortController()
    controller.abort()
    const error = await lock.acquire({ signal: controller.signal }).then(() => null, (e) => e)
    assert.ok(error instanceof DOMException)
    assert.equal(error.name, 'AbortError')
    assert.equal(lock.holdCount(), 0)
    assert.equal(await lock.isLocked(), false, 'the free lock was not taken')
  })

  test('aborting during a wait rejects with AbortError and leaves no lock held', async () => {
    const name = fresh('abort-during')
    const holder = client.lock(name)
    await holder.acquire()
    const waiter = client.lock(name)
    const controller = new AbortController()
    const waiting = waiter.acquire({ signal: controller.signal })
    await sleep(200)
    controller.abort()
    await assert.rejects(within(10_000, waiting, 'aborted acquire'), { name: 'AbortError' })
    await holder.release()
    await sleep(300)
    assert.equal(waiter.holdCount(), 0)
    assert.equal(await waiter.isLocked(), false, 'the abandoned wait did not take the lock later')
  })

  test('a custom abort reason is the rejection, as with fetch', async () => {
    const controller = new AbortController()
    const reason = new Error('shutting down')
    controller.abort(reason)
    await assert.rejects(client.lock(fresh('abort-reason')).acquire({ signal: controller.signal }), (e) => e === reason)
  })
})

describe('using', () => {
  test('runs the routine under the lock and resolves to its result', async () => {
    const name = fresh('using')
    const lock = client.lock(name)
    const result = await lock.using(async (signal) => {
      assert.ok(signal instanceof AbortSignal)
      assert.equal(signal.aborted, false)
      assert.equal(lock.isHeld(), true)
      assert.equal(await client.lock(name).acquire({ waitMs: 0 }), false)
      return 42
    })
    assert.equal(result, 42)
    assert.equal(lock.isHeld(), false)
    assert.equal(await lock.isLocked(), false)
  })

  test('releases when the routine throws, and rejects with its error', async () => {
    const name = fresh('using-throw')
    const lock = client.lock(name)
    await assert.rejects(
      lock.using(async () => {
        assert.equal(lock.isHeld(), true)
        throw new Error('boom')
      }),
      /boom/,
    )
    assert.equal(lock.holdCount(), 0)
    assert.equal(await lock.isLocked(), false)
  })

  test('rejects with ERR_TIMEOUT without running the routine when the wait runs out', async () => {
    const name = fresh('using-busy')
    const holder = client.lock(name)
    await holder.acquire()
    let ran = false
    await assert.rejects(
      client.lock(name).using(() => {
        ran = true
      }, { waitMs: 100 }),
      { code: 'ERR_TIMEOUT', message: /not acquired within 100 ms/ },
    )
    assert.equal(ran, false)
    await holder.release()
  })

  test('the signal aborts with ERR_LOCK_LOST when the key is deleted behind the holder', async () => {
    const short = await Client.connect(redis.url, { watchdogTimeoutMs: 1500 })
    try {
      assert.equal(short.watchdogTimeoutMs, 1500)
      const name = fresh('lost')
      const lock = short.lock(name)
      let reason
      let lostSeen
      const using = lock.using(async (signal) => {
        assert.equal(lock.isLost(), false)
        await redis.command('DEL', name)
        if (!signal.aborted) await within(10_000, once(signal, 'abort'), 'lost signal')
        reason = signal.reason
        lostSeen = lock.isLost()
      })
      await assert.rejects(using, { code: 'ERR_LOCK_LOST' }, 'the release after a lost hold reports it')
      assert.ok(reason instanceof Error)
      assert.equal(reason.code, 'ERR_LOCK_LOST')
      assert.equal(lostSeen, true)
      assert.equal(lock.holdCount(), 0)
    } finally {
      await short.close()
    }
  })
})

describe('bad input', () => {
  test('an empty or non-string lock name is ERR_INVALID_ARGUMENT', () => {
    assert.throws(() => client.lock(''), { code: 'ERR_INVALID_ARGUMENT', message: /must not be empty/ })
    assert.throws(() => client.lock(42), { code: 'ERR_INVALID_ARGUMENT' })
  })

  test('bad waitMs, leaseMs, signal and options are ERR_INVALID_ARGUMENT', async () => {
    const lock = client.lock(fresh('bad'))
    for (const options of [
      { waitMs: -1 },
      { waitMs: -Infinity },
      { waitMs: Number.NaN },
      { leaseMs: 0 },
      { leaseMs: -5 },
      { leaseMs: Infinity },
      { leaseMs: 0.5 },
      { signal: 5 },
    ]) {
      await assert.rejects(lock.acquire(options), { code: 'ERR_INVALID_ARGUMENT' }, JSON.stringify(options))
    }
    // A value of the wrong JavaScript type too (every method's table: arguments.test.js).
    await assert.rejects(lock.acquire({ waitMs: '5' }), {
      code: 'ERR_INVALID_ARGUMENT',
      message: 'invalid argument: waitMs must be a number, not string',
    })
    await assert.rejects(lock.acquire('fast'), {
      code: 'ERR_INVALID_ARGUMENT',
      message: 'invalid argument: options must be an object, not string',
    })
    await assert.rejects(lock.using('not a function'), { code: 'ERR_INVALID_ARGUMENT' })
    assert.equal(await lock.isLocked(), false)
  })

  test('arguments are checked before any I/O (a closed client still says ERR_INVALID_ARGUMENT)', async () => {
    const closed = await Client.connect(redis.url)
    const lock = closed.lock(fresh('closed'))
    await closed.close()
    await assert.rejects(lock.acquire({ waitMs: -1 }), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(lock.acquire({ waitMs: 0 }), { code: 'ERR_CONNECTION', message: /closed/ })
  })

  test('an unreachable server is ERR_CONNECTION', async () => {
    const port = await freePort()
    await assert.rejects(
      within(20_000, Client.connect(`redis://127.0.0.1:${port}`, { connectTimeoutMs: 1000 }), 'connect'),
      { code: 'ERR_CONNECTION' },
    )
  })

  test('bad connect options and URLs are ERR_INVALID_ARGUMENT', async () => {
    await assert.rejects(Client.connect(redis.url, { watchdogTimeoutMs: -1 }), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(Client.connect(redis.url, { watchdogTimeoutMs: 10 }), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(Client.connect('not a url'), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(Client.connect(redis.url, 'fast'), {
      code: 'ERR_INVALID_ARGUMENT',
      message: 'invalid argument: options must be an object, not string',
    })
  })
})
