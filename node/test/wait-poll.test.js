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

/** `holder` holds with a 60 s lease: `waiter` gets the lock soon after its release, long before that lease. */
async function assertWaiterGetsItAfterTheRelease(holder, waiter) {
  const started = Date.now()
  const waiting = waiter.acquire({ waitMs: 20_000 })
  await sleep(300)
  await holder.release()
  assert.equal(await waiting, true)
  assert.ok(Date.now() - started < 10_000)
  await waiter.release()
}

test('a poll waiter denied SUBSCRIBE gets the lock after the release', async () => {
  const holderClient = await Client.connect(`redis://127.0.0.1:${redis.port}`)
  const waiterClient = await Client.connect(url, { waitMode: 'poll', pollMinMs: 1, pollMaxMs: 50 })
  try {
    const holder = holderClient.lock('node-poll')
    assert.equal(await holder.acquire({ waitMs: 0, leaseMs: 60_000 }), true)
    const waiter = waiterClient.lock('node-poll')
    assert.equal(await waiter.acquire({ waitMs: 200 }), false)
    await assertWaiterGetsItAfterTheRelease(holder, waiter)
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

for (const kind of ['lock', 'fairLock', 'fifoLock', 'fencedLock']) {
  test(`a ${kind} of its own poll mode waits without subscribing on a pub/sub client`, async () => {
    // The per-lock wait mode: the user and client whose pub/sub waiter is refused above get the
    // lock by polling when only the lock says 'poll'.
    const holderClient = await Client.connect(`redis://127.0.0.1:${redis.port}`)
    const waiterClient = await Client.connect(url)
    const name = `node-own-poll-${kind}`
    try {
      const holder = holderClient[kind](name)
      assert.equal(await holder.acquire({ waitMs: 0, leaseMs: 60_000 }), true)
      const waiter = waiterClient[kind](name, { waitMode: 'poll', pollMinMs: 1, pollMaxMs: 50 })
      await assertWaiterGetsItAfterTheRelease(holder, waiter)
    } finally {
      await holderClient.close()
      await waiterClient.close()
    }
  })
}

test('a pub/sub lock on a poll client rejects each acquire', async () => {
  const client = await Client.connect(`redis://127.0.0.1:${redis.port}`, { waitMode: 'poll' })
  try {
    const lock = client.lock('node-own-pubsub', { waitMode: 'pubsub' })
    await assert.rejects(lock.acquire({ waitMs: 1000 }), {
      code: 'ERR_INVALID_ARGUMENT',
      message:
        "invalid argument: lock 'node-own-pubsub': wait_mode pubsub needs a pub/sub connection, " +
        'which a client connected with wait_mode poll does not open',
    })
    // The client's own mode still serves its other locks.
    const other = client.lock('node-own-pubsub-other')
    assert.equal(await other.acquire({ waitMs: 1000 }), true)
    await other.release()
  } finally {
    await client.close()
  }
})

test('bad per-lock poll options throw the core message at creation', async () => {
  const client = await Client.connect(`redis://127.0.0.1:${redis.port}`)
  try {
    for (const [options, message] of [
      [{ waitMode: 'spin' }, "wait_mode must be 'pubsub' or 'poll', got 'spin'"],
      [{ waitMode: 'poll', pollMinMs: 50, pollMaxMs: 10 }, 'poll_max must be at least poll_min (50 ms), got 10 ms'],
      [{ pollMinMs: 5 }, "poll_min and poll_max apply only with wait_mode 'poll'"],
    ]) {
      assert.throws(() => client.lock('node-bad-own-poll', options), {
        code: 'ERR_INVALID_ARGUMENT',
        message: `invalid argument: ${message}`,
      })
    }
  } finally {
    await client.close()
  }
})
