'use strict'

// client.jobLock(name, { atMostMs, atLeastMs }) and client.runJob(name, routine, options): the
// run-once job lock (ShedLock's semantics). Against a real redis-server.

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
const fresh = freshNames('job-lock')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function untilGone(name) {
  const until = Date.now() + 10000
  while (Date.now() < until) {
    if (await redis.command('EXISTS', name) === 0) return
    await sleep(20)
  }
  assert.fail(`${name} was never released`)
}

describe('job lock', () => {
  test('a held job lock skips without waiting', async (t) => {
    const name = fresh('skip')
    const other = await Client.connect(redis.url)
    t.after(() => other.close())
    const hold = await client.jobLock(name, { atMostMs: 60000 }).tryAcquire()
    assert.ok(hold !== null && hold.isHeld)
    let calls = 0
    const started = Date.now()
    assert.deepEqual(await other.runJob(name, () => { calls += 1 }, { atMostMs: 60000 }), { ran: false })
    assert.equal(calls, 0)
    assert.ok(Date.now() - started < 10000, 'one look, not a wait for the 60 s lease')
    await hold.finish()
    assert.equal(hold.isHeld, false)
    assert.deepEqual(await other.runJob(name, () => 7, { atMostMs: 60000 }), { ran: true, value: 7 })
  })

  test('at least keeps the lock after a fast job; the next slot runs after it', async () => {
    const name = fresh('at-least')
    const options = { atMostMs: 10000, atLeastMs: 1500 }
    assert.deepEqual(await client.runJob(name, async () => 'fast', options), { ran: true, value: 'fast' })
    const ttl = await redis.command('PTTL', name)
    assert.ok(ttl > 0 && ttl <= 1500, `pttl ${ttl}`)
    assert.deepEqual(await client.runJob(name, () => 'late node', options), { ran: false })
    await untilGone(name)
    assert.deepEqual(await client.runJob(name, () => 'next slot', options), { ran: true, value: 'next slot' })
  })

  test('an error of the routine rejects after the at least handling', async () => {
    const name = fresh('error')
    const job = client.jobLock(name, { atMostMs: 10000, atLeastMs: 2000 })
    await assert.rejects(job.run(async () => { throw new Error('the job failed') }), /the job failed/)
    const ttl = await redis.command('PTTL', name)
    assert.ok(ttl > 0 && ttl <= 2000, `kept for at least, not released: pttl ${ttl}`)
  })

  test('a job longer than at least releases at once; Symbol.asyncDispose finishes', async () => {
    const name = fresh('long')
    const job = client.jobLock(name, { atMostMs: 30000, atLeastMs: 100 })
    const hold = await job.tryAcquire()
    assert.ok(hold)
    await sleep(200)
    // What `await using` calls at the end of its block (Node 20 has no `using` syntax).
    await hold[Symbol.asyncDispose]()
    assert.equal(await redis.command('EXISTS', name), 0)
  })

  test('a late finish does not touch the next holder\'s lock', async () => {
    const name = fresh('late')
    const hold = await client.jobLock(name, { atMostMs: 300, atLeastMs: 300 }).tryAcquire()
    await sleep(600)
    const next = client.lock(name)
    assert.ok(await next.acquire({ waitMs: 0, leaseMs: 60000 }))
    await hold.finish()
    assert.ok(await redis.command('PTTL', name) > 50000, 'the next holder\'s lease was changed')
    await next.release()
  })

  test('bad options reject with the core\'s message', async () => {
    const name = fresh('bad')
    for (const [options, message] of [
      [{ atMostMs: 0 }, 'invalid argument: at_most must be from 1 ms to 10 years, got 0 ms'],
      [{ atMostMs: 1000, atLeastMs: 2000 }, 'invalid argument: at_least (2000 ms) must not be longer than at_most (1000 ms)'],
      [{ atMostMs: -1000 }, 'invalid argument: at_most must be a finite number of milliseconds >= 0, got -1000'],
      [{}, 'invalid argument: at_most must be a finite number of milliseconds >= 0, got NaN'],
    ]) {
      assert.throws(() => client.jobLock(name, options), { code: 'ERR_INVALID_ARGUMENT', message })
      await assert.rejects(client.runJob(name, () => 1, options), { code: 'ERR_INVALID_ARGUMENT', message })
    }
    await assert.rejects(client.runJob(name, 'not a function', { atMostMs: 1 }), { code: 'ERR_INVALID_ARGUMENT' })
  })
})
