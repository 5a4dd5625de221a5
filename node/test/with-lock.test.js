'use strict'

// client.withLock(name, routine, options): a function run under a lock, as redlock-universal
// and Redisson users expect. Against a real redis-server.

const assert = require('node:assert/strict')
const { describe, test } = require('node:test')

const { Client } = require('..')
const { serverAndClientPerFile, freshNames } = require('./redis.js')

let redis
let client
serverAndClientPerFile((server, connected) => {
  redis = server
  client = connected
})
const fresh = freshNames('with-lock')


const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

describe('client.withLock', () => {
  test('concurrent calls never overlap', async () => {
    const name = fresh('overlap')
    let inside = 0
    let most = 0
    let calls = 0
    const critical = () => client.withLock(name, async () => {
      inside += 1
      calls += 1
      most = Math.max(most, inside)
      await sleep(20) // a window another caller would enter without the lock
      inside -= 1
    })
    await Promise.all(Array.from({ length: 4 }, async () => {
      for (let round = 0; round < 5; round += 1) await critical()
    }))
    assert.equal(calls, 20)
    assert.equal(most, 1)
  })

  for (const kind of [undefined, 'lock', 'fairLock', 'fifoLock', 'fencedLock']) {
    test(`the result and the error pass through and the lock is released (kind ${kind})`, async () => {
      const name = fresh('through')
      const options = kind === undefined ? undefined : { kind, waitMs: 5000 }
      const result = await client.withLock(name, async (signal) => {
        assert.equal(signal.aborted, false)
        assert.equal(await redis.command('EXISTS', name), 1, 'runs holding the lock')
        return 42
      }, options)
      assert.equal(result, 42)
      assert.equal(await redis.command('EXISTS', name), 0)
      const failure = new Error('routine failed')
      await assert.rejects(client.withLock(name, () => { throw failure }, options), (error) => error === failure)
      assert.equal(await redis.command('EXISTS', name), 0, 'released after the error')
      assert.equal(await client.withLock(name, () => 'again', options), 'again')
    })
  }

  test('a held lock makes a short wait fail with ERR_TIMEOUT naming the holder', async () => {
    const name = fresh('timeout')
    const holderClient = await Client.connect(redis.url, { name: 'with-lock-holder' })
    const holder = holderClient.lock(name)
    assert.equal(await holder.acquire({ leaseMs: 30000 }), true)
    let ran = false
    await assert.rejects(client.withLock(name, () => { ran = true }, { waitMs: 200 }), {
      code: 'ERR_TIMEOUT',
      // The core's message, as a timed-out `lock.using` gives it.
      message: new RegExp(`^lock '${name}' was not acquired within 200 ms: another owner held it all that time \\(held by 'with-lock-holder'`),
    })
    assert.equal(ran, false)
    await holder.release()
    await holderClient.close()
    assert.equal(await client.withLock(name, () => 'free', { waitMs: 5000 }), 'free')
  })

  test('bad arguments are ERR_INVALID_ARGUMENT', async () => {
    await assert.rejects(client.withLock(fresh('bad'), 'not a function'), {
      code: 'ERR_INVALID_ARGUMENT', message: /routine must be a function/,
    })
    await assert.rejects(client.withLock(fresh('bad'), () => 1, { kind: 'semaphore' }), {
      code: 'ERR_INVALID_ARGUMENT',
      message: `withLock: kind must be 'lock', 'fairLock', 'fifoLock' or 'fencedLock', not "semaphore"`,
    })
    await assert.rejects(client.withLock('', () => 1), { code: 'ERR_INVALID_ARGUMENT' })
  })
})
