'use strict'

// The count-down latch (client.countDownLatch) against a real redis-server: a waiter woken by
// another client's count down long before its timeout, bounded waits, and the core's errors
// for bad input.
// What every binding does alike (results, errors, Redisson's layout) is in the conformance cases
// (tests/conformance/behaviour.json, run by conformance-behaviour.test.js); this file keeps Node's own.

const assert = require('node:assert/strict')
const { describe, test } = require('node:test')

const { Client, CountDownLatch } = require('..')
const { serverAndClientPerFile, freshNames } = require('./redis.js')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let redis
let client
serverAndClientPerFile((server, connected) => {
  redis = server
  client = connected
})
/** A name no other test uses. */
const fresh = freshNames()

describe('count-down latch', () => {

  test('a wait ends false at its timeout', async () => {
    const latch = client.countDownLatch(fresh('timeout'))
    assert.equal(await latch.trySetCount(1), true)
    const started = Date.now()
    assert.equal(await latch.awaitZero(300), false)
    assert.ok(Date.now() - started >= 290)
  })

  test('waiters wake when another client counts down to zero, long before their timeout', async () => {
    const name = fresh('wake')
    const other = await Client.connect(redis.url)
    try {
      assert.equal(await client.countDownLatch(name).trySetCount(2), true)
      const started = Date.now()
      const waiters = [client.countDownLatch(name).awaitZero(60_000), client.countDownLatch(name).awaitZero(60_000)]
      await sleep(300)
      await other.countDownLatch(name).countDown()
      await other.countDownLatch(name).countDown()
      assert.deepEqual(await Promise.all(waiters), [true, true])
      assert.ok(Date.now() - started < 30_000)
    } finally {
      await other.close()
    }
  })

  test('bad input is the core invalid argument', async () => {
    const latch = client.countDownLatch(fresh('bad'))
    assert.ok(latch instanceof CountDownLatch)
    for (const count of [0, -1, 2 ** 53]) {
      await assert.rejects(latch.trySetCount(count), {
        code: 'ERR_INVALID_ARGUMENT',
        message: `invalid argument: count must be from 1 to 9007199254740991, got ${count}`,
      })
    }
    for (const timeout of [-1, NaN, Infinity]) {
      await assert.rejects(latch.awaitZero(timeout), { code: 'ERR_INVALID_ARGUMENT', message: /timeout must be a finite number/ })
    }
    await assert.rejects(latch.trySetCount('3'), { code: 'ERR_INVALID_ARGUMENT', message: /count must be a number, not string/ })
  })

})
