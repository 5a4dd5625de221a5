'use strict'

// The fault proxy helper (test/faults.js) with ioredis clients: each fault does to a client
// what it promises, and the server, seen directly, shows what really ran.

const assert = require('node:assert/strict')
const { once } = require('node:events')
const { after, afterEach, before, test } = require('node:test')

const { FaultProxy } = require('./faults.js')
const { connectRedis, startRedis } = require('./redis.js')

const REPLY_TIMEOUT_MS = 400
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls `check` every 10 ms for up to 20 s (a bound for a loaded machine); true once it holds. */
async function eventually(check) {
  const deadline = Date.now() + 20_000
  while (Date.now() < deadline) {
    if (await check()) return true
    await sleep(10)
  }
  return check()
}

let redis
let proxy
let names = 0
/** A key no other test uses. */
const fresh = (what) => `node:faults:${what}:${process.pid}:${(names += 1)}`
/** Clients a test opened, closed after it. */
let clients = []

/** An ioredis client through the proxy, connected (in pass mode) before the test's fault. */
async function throughProxy(options = {}) {
  const client = connectRedis(proxy.port, { commandTimeout: REPLY_TIMEOUT_MS, ...options })
  clients.push(client)
  await client.connect()
  return client
}

/**
 * Why connecting to `port` fails: ioredis emits the socket's error as an 'error' event,
 * while connect() itself only rejects with "Connection is closed".
 */
async function connectError(port) {
  const client = connectRedis(port)
  const error = once(client, 'error')
  await assert.rejects(client.connect())
  const [reason] = await error
  return reason
}

before(async () => {
  redis = await startRedis()
  proxy = await FaultProxy.start(redis.port)
})

afterEach(async () => {
  for (const client of clients.splice(0)) client.disconnect()
  await proxy.passThrough()
})

/**
 * Waits until the proxy holds no connection: a test that counts them must not count one that
 * an earlier test (or the proxy's own readiness probe) closed but the proxy has not yet seen
 * close (a CI run counted 2 !== 1 under load).
 */
async function noConnectionLeft() {
  assert.ok(await eventually(async () => (await proxy.connections()) === 0), 'earlier connections never closed')
}

after(async () => {
  await proxy?.stop()
  await redis?.stop()
})

test('dropReplies: the command runs but its reply never arrives', async () => {
  await noConnectionLeft()
  const client = await throughProxy()
  const key = fresh('drop')
  await proxy.dropReplies()
  await assert.rejects(client.set(key, 'ran'), /timed out/)
  assert.equal(await redis.command('GET', key), 'ran')
  assert.equal(await proxy.connections(), 1, 'the connection stays open')
})

test('blackhole: nothing reaches the server', async () => {
  const client = await throughProxy()
  const key = fresh('blackhole')
  await proxy.blackhole()
  await assert.rejects(client.set(key, 'lost'), /timed out/)
  assert.equal(await redis.command('EXISTS', key), 0)
})

test('cutAfterForward: the command runs, then the connection drops', async () => {
  await noConnectionLeft()
  const client = await throughProxy()
  const key = fresh('cut-after-forward')
  await proxy.cutAfterForward()
  await assert.rejects(client.incr(key), (error) => !/timed out/.test(error.message))
  assert.equal(await redis.command('GET', key), '1', 'INCR ran once')
  assert.ok(await eventually(async () => (await proxy.connections()) === 0))
})

test('delay: requests and replies both wait', async () => {
  const client = await throughProxy({ commandTimeout: 5000 })
  await proxy.delay(150)
  const started = Date.now()
  assert.equal(await client.ping(), 'PONG')
  assert.ok(Date.now() - started >= 300, `PING took ${Date.now() - started} ms`)
})

test('refuse, then passThrough listens again on the same port', async () => {
  const open = await throughProxy()
  const { port } = proxy
  await proxy.refuse()
  assert.equal(await proxy.connections(), 0)
  await assert.rejects(open.ping())
  assert.equal((await connectError(port)).code, 'ECONNREFUSED')
  await proxy.passThrough()
  assert.equal(proxy.port, port)
  assert.equal(await (await throughProxy()).ping(), 'PONG')
})

test('refuseFor passes again by itself', async () => {
  const started = Date.now()
  await proxy.refuseFor(500)
  assert.equal((await connectError(proxy.port)).code, 'ECONNREFUSED')
  assert.ok(await eventually(async () => {
    const client = connectRedis(proxy.port)
    try {
      return (await client.ping()) === 'PONG'
    } catch {
      return false
    } finally {
      client.disconnect()
    }
  }))
  assert.ok(Date.now() - started >= 500)
})

test('cut closes connections, and an ioredis client that may reconnect does', async () => {
  await noConnectionLeft()
  const client = await throughProxy({ retryStrategy: () => 10 })
  assert.equal(await proxy.connections(), 1)
  const reconnected = once(client, 'ready')
  await proxy.cut()
  assert.equal(await proxy.connections(), 0)
  await reconnected
  assert.equal(await client.ping(), 'PONG')
  assert.equal(await proxy.connections(), 1)
})

test('a command the proxy rejects is an error', async () => {
  await assert.rejects(proxy.delay(-1), /not a number of milliseconds/)
})
