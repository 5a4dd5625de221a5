'use strict'

// MultiLock and RedLock over three independent redis-servers, one killed while held.

const assert = require('node:assert/strict')
const { afterEach, beforeEach, test } = require('node:test')

const { Client, MultiLock, RedLock } = require('..')
const { startRedis, freshNames } = require('./redis.js')

const fresh = freshNames('node-multi')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let servers
let clients
beforeEach(async () => {
  servers = await Promise.all([startRedis(), startRedis(), startRedis()])
  clients = await Promise.all(servers.map((server) =>
    Client.connect(server.url, { watchdogTimeoutMs: 600, responseTimeoutMs: 2000 })))
})
afterEach(async () => {
  await Promise.all(clients.map((client) => client.close()))
  await Promise.all(servers.map((server) => server.stop()))
})

/** How many owners hold `name` on each server: the lock hash's fields, polylock's own
 * (`polylock:level:*`, `polylock:waiters`; docs/PROTOCOL.md) left out. */
const holders = (list, name) =>
  Promise.all(
    list.map(async (server) =>
      (await server.command('HKEYS', name)).filter((field) => !field.startsWith('polylock:')).length,
    ),
  )

/** Polls `check` every 20 ms for up to `ms`; whether it held. */
async function eventually(ms, check) {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await check()) return true
    await sleep(20)
  }
  return false
}

test('a multi-lock takes all of its locks or none', async () => {
  const name = fresh('all')
  const multi = new MultiLock(clients.map((client) => client.lock(name)))
  const other = clients[1].lock(name)
  assert.equal(await other.acquire({ waitMs: 0 }), true)
  assert.equal(await multi.acquire({ waitMs: 300 }), false)
  assert.deepEqual(await holders(servers, name), [0, 1, 0])
  await other.release()
  assert.equal(await multi.acquire({ waitMs: 2000 }), true)
  assert.deepEqual(await holders(servers, name), [1, 1, 1])
  await multi.release()
  assert.deepEqual(await holders(servers, name), [0, 0, 0])
  await assert.rejects(multi.release(), { code: 'ERR_NOT_HELD' })
})

test('a server killed mid-hold loses the multi-lock but not the red-lock', async () => {
  const name = fresh('killed')
  const red = new RedLock(clients.map((client) => client.lock(`${name}:red`)))
  const multi = new MultiLock(clients.map((client) => client.lock(`${name}:multi`)))
  assert.equal(red.quorum, 2)
  const lost = []
  multi.onLost((error) => lost.push(error))
  assert.equal(await red.acquire({ waitMs: 2000 }), true)
  assert.equal(await multi.acquire({ waitMs: 2000 }), true)
  await servers[2].stop()
  assert.ok(await eventually(10_000, () => multi.isLost()))
  assert.ok(await eventually(5000, () => lost.length === 1))
  assert.equal(lost[0].code, 'ERR_LOCK_LOST')
  assert.ok(red.isHeld() && !red.isLost())
  await red.release()
  await assert.rejects(multi.release(), { code: 'ERR_LOCK_LOST' })
  assert.deepEqual(await holders(servers.slice(0, 2), `${name}:red`), [0, 0])
  assert.deepEqual(await holders(servers.slice(0, 2), `${name}:multi`), [0, 0])
})

test('a red-lock with one server down runs using() and times out for a second owner', async () => {
  const name = fresh('using')
  await servers[0].stop()
  const red = new RedLock(clients.map((client) => client.lock(name)), { waitMs: 1000 })
  const result = await red.using(async () => {
    assert.deepEqual(await holders(servers.slice(1), name), [1, 1])
    const other = new RedLock(clients.map((client) => client.lock(name)))
    await assert.rejects(other.using(() => 'never', { waitMs: 300 }), {
      code: 'ERR_TIMEOUT',
      // Then who held it, lock by lock (the holders' client records).
      message: new RegExp(`^lock '${name}' was not acquired within 300 ms: another owner held it all that time \\('${name}' held by '`),
    })
    return 'ran'
  })
  assert.equal(result, 'ran')
  assert.deepEqual(await holders(servers.slice(1), name), [0, 0])
  // What `await using` calls at the end of its block (Node 20 has no `using` syntax).
  const held = new RedLock(clients.map((client) => client.lock(name)))
  assert.equal(await held.acquire(), true)
  assert.equal(await held.acquire(), true)
  await held[Symbol.asyncDispose]()
  assert.equal(held.holdCount(), 0)
  assert.deepEqual(await holders(servers.slice(1), name), [0, 0])
})

test('bad groups get the core error', () => {
  assert.throws(() => new MultiLock([]), {
    code: 'ERR_INVALID_ARGUMENT',
    message: 'invalid argument: a multi-lock needs at least one lock, got none',
  })
  const name = fresh('bad')
  const lock = clients[0].lock(name)
  assert.throws(() => new RedLock([lock, lock]), {
    code: 'ERR_INVALID_ARGUMENT',
    message: `invalid argument: a red-lock takes each lock once, but lock '${name}' of one client is given twice (it would wait for itself)`,
  })
  assert.throws(() => new MultiLock([{}]), { code: 'ERR_INVALID_ARGUMENT' })
})
