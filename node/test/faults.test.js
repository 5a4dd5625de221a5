'use strict'

// Faults seen through the Node binding: an acquire whose outcome is unknown (the server paused
// past the response timeout) leaves no lock behind, and closing a client ends the waits and
// holds made through it at once.

const assert = require('node:assert/strict')
const { once } = require('node:events')
const { after, before, test } = require('node:test')

const { Client } = require('..')
const { startRedis } = require('./redis.js')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const PAUSE_MS = 3000

/** Rejects after `ms` with `what`, so no test hangs without bound. */
function within(ms, promise, what) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** Polls `predicate` until it resolves true; false when `ms` pass first. */
async function waitUntil(predicate, ms) {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await predicate()) return true
    await sleep(20)
  }
  return predicate()
}

let redis
let names = 0
const fresh = (what) => `node:${what}:${process.pid}:${(names += 1)}`

before(async () => {
  redis = await startRedis()
})

after(async () => {
  await redis?.stop()
})

for (const waitMs of [0, 500]) {
  test(`an acquire (waitMs ${waitMs}) that times out while Redis is paused leaves no lock`, async () => {
    const name = fresh('paused')
    const client = await Client.connect(redis.url, { responseTimeoutMs: 1000 })
    try {
      const lock = client.lock(name)
      // Loads the acquire script, so the paused attempt is one EVALSHA that takes the lock
      // when the pause ends (a first attempt would get NOSCRIPT and the test could not fail).
      assert.equal(await lock.acquire({ waitMs: 5000 }), true)
      await lock.release()

      assert.equal(await redis.command('CLIENT', 'PAUSE', String(PAUSE_MS), 'ALL'), 'OK')
      const pauseEnds = Date.now() + PAUSE_MS
      const started = Date.now()
      const outcome = await lock.acquire({ waitMs, leaseMs: 30_000 }).then(
        (acquired) => acquired,
        (error) => error,
      )
      if (outcome instanceof Error) assert.equal(outcome.code, 'ERR_TIMEOUT', outcome.message)
      else assert.equal(outcome, false, 'acquired while the server was paused')
      assert.ok(Date.now() - started < PAUSE_MS, 'the acquire waited for the pause to end')
      assert.equal(lock.isHeld(), false)

      // The server runs the abandoned attempt when the pause ends; the core must undo it
      // (before the fix the key stayed for the whole 30 s lease).
      await sleep(Math.max(0, pauseEnds - Date.now()) + 200)
      const gone = await waitUntil(async () => (await redis.command('EXISTS', name)) === 0, 5000)
      assert.ok(gone, `the abandoned acquire still holds ${name}: PTTL ${await redis.command('PTTL', name)} ms`)
      const other = await Client.connect(redis.url)
      try {
        const next = other.lock(name)
        assert.equal(await next.acquire({ waitMs: 5000 }), true)
        await next.release()
      } finally {
        await other.close()
      }
      assert.equal(lock.isHeld(), false)
    } finally {
      await client.close()
    }
  })
}

test('close() ends a waiting acquire at once and marks the holds lost', async () => {
  const name = fresh('close')
  const client = await Client.connect(redis.url)
  const holder = client.lock(name)
  let holding
  const held = new Promise((resolve) => {
    holding = resolve
  })
  let reason
  // The routine's signal is Node's lost notification: it aborts when the hold is lost.
  const using = holder.using(async (signal) => {
    holding()
    if (!signal.aborted) await within(10_000, once(signal, 'abort'), 'lost signal')
    reason = signal.reason
  }).then(() => null, (error) => error) // settles as soon as the hold is lost
  await held
  const waiter = client.lock(name)
  const started = Date.now()
  let settled = false
  const waiting = waiter.acquire({ waitMs: 30_000 }).finally(() => {
    settled = true
  })
  await sleep(500)
  assert.equal(settled, false, 'the waiter waits while the lock is held')

  // Its outcome is taken before closing: close() resolves after the record's DEL, by which time
  // the waiter has already failed.
  const outcome = waiting.then(() => null, (e) => e)
  assert.deepEqual(await client.close(), [name])
  const error = await within(10_000, outcome, 'the waiter after close()')
  assert.ok(error instanceof Error, 'the waiter failed')
  assert.equal(error.code, 'ERR_CONNECTION', error.message)
  assert.match(error.message, /the client is closed/)
  assert.ok(Date.now() - started < 5000, 'at once, far from its 30 s bound')

  assert.equal(holder.isHeld(), false)
  assert.equal(holder.isLost(), true)
  const usingError = await within(10_000, using, 'using after close()')
  assert.equal(usingError?.code, 'ERR_LOCK_LOST', 'using() reports the lost hold')
  assert.ok(reason instanceof Error, 'the lost signal aborted')
  assert.equal(reason.code, 'ERR_LOCK_LOST')
  assert.match(reason.message, /closed/)
  // close() releases nothing: the key stays until its lease ends.
  assert.equal(await redis.command('EXISTS', name), 1)
  await redis.command('DEL', name)
})
