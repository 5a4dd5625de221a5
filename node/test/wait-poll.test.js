'use strict'

// Waiting without pub/sub: `waitMode: 'poll'` passes through to the core, so a waiter under a
// Redis user that may not SUBSCRIBE still gets the lock after its release; bad poll options
// reject with the core's ERR_INVALID_ARGUMENT and message.

const assert = require('node:assert/strict')
const { after, before, test } = require('node:test')

const { Client } = require('..')
const { startRedis } = require('./redis.js')

let redis
let url
before(async () => {
  redis = await startRedis()
  const denied = ['~*', '&*', '+@all', '-subscribe', '-psubscribe', '-ssubscribe']
  assert.equal(await redis.command('ACL', 'SETUSER', 'nosub_node', 'on', '>secret', ...denied), 'OK')
  url = `redis://nosub_node:secret@127.0.0.1:${redis.port}`
})
after(async () => {
  await redis?.stop()
})

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

test('a poll waiter denied SUBSCRIBE gets the lock after the release', async () => {
  const holderClient = await Client.connect(`redis://127.0.0.1:${redis.port}`)
  const waiterClient = await Client.connect(url, { waitMode: 'poll', pollMinMs: 1, pollMaxMs: 50 })
  try {
    const holder = holderClient.lock('node-poll')
    assert.equal(await holder.acquire({ waitMs: 0, leaseMs: 60_000 }), true)
    const waiter = waiterClient.lock('node-poll')
    assert.equal(await waiter.acquire({ waitMs: 200 }), false)
    const started = Date.now()
    const waiting = waiter.acquire({ waitMs: 20_000 })
    await sleep(300)
    await holder.release()
    assert.equal(await waiting, true)
    // Woken by looking, long before the holder's 60 s lease.
    assert.ok(Date.now() - started < 10_000)
    await waiter.release()
  } finally {
    await holderClient.close()
    await waiterClient.close()
  }
})

test('the same user in pub/sub mode rejects with ERR_PERMISSION', async () => {
  const holderClient = await Client.connect(`redis://127.0.0.1:${redis.port}`)
  const waiterClient = await Client.connect(url)
  try {
    assert.equal(await holderClient.lock('node-pubsub').acquire({ waitMs: 0 }), true)
    await assert.rejects(waiterClient.lock('node-pubsub').acquire({ waitMs: 20_000 }), { code: 'ERR_PERMISSION' })
  } finally {
    await holderClient.close()
    await waiterClient.close()
  }
})

test('bad poll options reject with the core message', async () => {
  for (const [options, message] of [
    [{ waitMode: 'spin' }, "wait_mode must be 'pubsub' or 'poll', got 'spin'"],
    [{ waitMode: 'poll', pollMinMs: 50, pollMaxMs: 10 }, 'poll_max must be at least poll_min (50 ms), got 10 ms'],
    [{ pollMinMs: 5 }, "poll_min and poll_max apply only with wait_mode 'poll'"],
  ]) {
    await assert.rejects(Client.connect(`redis://127.0.0.1:${redis.port}`, options), {
      code: 'ERR_INVALID_ARGUMENT',
      message: `invalid argument: ${message}`,
    })
  }
})
