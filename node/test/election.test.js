'use strict'

// Leader election (client.election) through the Node binding, against a real redis-server:
// campaign, resign, terms, proclaim, leader(), observe(), a campaign aborted by its signal, the
// leadership's signal when the leader is cut off by the fault proxy, and a CLIENT KILL the
// leader survives.

const assert = require('node:assert/strict')
const { after, before, test } = require('node:test')

const { Client } = require('..')
const { FaultProxy } = require('./faults.js')
const { startRedis } = require('./redis.js')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const LONG_LEASE_MS = 60_000
const SHORT_LEASE_MS = 1500

/** Rejects after `ms` with `what`, so no test hangs without bound. */
function within(ms, promise, what) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

let redis
let names = 0
const fresh = (what) => `node:election:${what}:${process.pid}:${(names += 1)}`

before(async () => {
  redis = await startRedis()
})

after(async () => {
  await redis?.stop()
})

test('campaign, proclaim, resign: the next candidate leads with a higher term', async () => {
  const name = fresh('basic')
  const alice = await Client.connect(redis.url, { watchdogTimeoutMs: LONG_LEASE_MS, name: 'node-a' })
  const bob = await Client.connect(redis.url, { watchdogTimeoutMs: LONG_LEASE_MS, name: 'node-b' })
  try {
    const election = alice.election(name)
    assert.equal(await election.leader(), null)
    const first = await election.campaign('a:1')
    assert.ok(first.isLeader() && !first.signal.aborted)
    assert.deepEqual(await election.leader(), { value: 'a:1', term: first.term, owner: first.owner, clientName: 'node-a' })
    assert.equal(await election.campaign('again', { waitMs: 0 }), null)

    const waiting = bob.election(name).campaign('b:1')
    await sleep(200)
    await first.proclaim('a:2')
    assert.equal((await election.leader()).value, 'a:2')
    await first.resign()
    assert.ok(first.signal.aborted && !first.isLeader())
    // Woken by the resign, long before the 60 s lease.
    const second = await within(20_000, waiting, 'the next candidate')
    assert.ok(second.term > first.term, 'terms must strictly increase')
    await assert.rejects(first.proclaim('late'), { code: 'ERR_LOCK_LOST' })
    assert.equal((await election.leader()).clientName, 'node-b')
    await second.resign()
    await second.resign()
    assert.equal(await election.leader(), null)
  } finally {
    await alice.close()
    await bob.close()
  }
})

test('observe yields the leader now and each change', async () => {
  const name = fresh('observe')
  const client = await Client.connect(redis.url, { watchdogTimeoutMs: LONG_LEASE_MS })
  try {
    const election = client.election(name)
    const changes = election.observe()
    const next = async () => (await within(10_000, changes.next(), 'a change')).value
    assert.equal(await next(), null)
    const leadership = await election.campaign('x')
    assert.equal((await next()).term, leadership.term)
    await leadership.proclaim('y')
    assert.equal((await next()).value, 'y')
    await leadership.resign()
    assert.equal(await next(), null)
    await changes.return()
  } finally {
    await client.close()
  }
})

test('an aborted campaign rejects with the reason and holds nothing', async () => {
  const name = fresh('abort')
  const client = await Client.connect(redis.url, { watchdogTimeoutMs: LONG_LEASE_MS })
  try {
    const election = client.election(name)
    const leader = await election.campaign('leader')
    const controller = new AbortController()
    const waiting = election.campaign('waiter', { signal: controller.signal })
    await sleep(100)
    controller.abort(new Error('stop'))
    await assert.rejects(waiting, { message: 'stop' })
    await leader.resign()
    const next = await election.campaign('next', { waitMs: 5000 })
    assert.ok(next.term > leader.term)
    await next.resign()
  } finally {
    await client.close()
  }
})

test('a leader cut off by the network has its signal aborted with ERR_LOCK_LOST', async () => {
  const name = fresh('cut')
  const proxy = await FaultProxy.start(redis.port)
  const cut = await Client.connect(proxy.url, { watchdogTimeoutMs: SHORT_LEASE_MS, responseTimeoutMs: 10_000 })
  const other = await Client.connect(redis.url, { watchdogTimeoutMs: LONG_LEASE_MS })
  try {
    const leadership = await cut.election(name).campaign('cut')
    const aborted = new Promise((resolve) => leadership.signal.addEventListener('abort', resolve, { once: true }))
    await proxy.blackhole()
    await within(SHORT_LEASE_MS + 5000, aborted, 'the leadership signal')
    assert.equal(leadership.signal.reason.code, 'ERR_LOCK_LOST')
    assert.ok(!leadership.isLeader())
    await assert.rejects(leadership.proclaim('still me'), { code: 'ERR_LOCK_LOST' })
    const next = await other.election(name).campaign('other', { waitMs: SHORT_LEASE_MS + 5000 })
    assert.ok(next.term > leadership.term)
    await next.resign()
  } finally {
    await proxy.passThrough()
    await cut.close()
    await other.close()
    await proxy.stop()
  }
})

test('a killed connection keeps the leadership', async () => {
  const name = fresh('kill')
  const client = await Client.connect(redis.url, { watchdogTimeoutMs: SHORT_LEASE_MS })
  try {
    const leadership = await client.election(name).campaign('kept')
    assert.ok(await redis.command('CLIENT', 'KILL', 'TYPE', 'normal') >= 1)
    await sleep(SHORT_LEASE_MS * 2)
    assert.ok(leadership.isLeader() && !leadership.signal.aborted)
    await leadership.proclaim('still kept')
    assert.equal((await client.election(name).leader()).value, 'still kept')
    await leadership.resign()
  } finally {
    await client.close()
  }
})

test('a bad name is ERR_INVALID_ARGUMENT', async () => {
  const client = await Client.connect(redis.url)
  try {
    assert.throws(() => client.election(''), { code: 'ERR_INVALID_ARGUMENT' })
  } finally {
    await client.close()
  }
})
