'use strict'

// The semaphore (client.semaphore) and the expirable semaphore (client.expirableSemaphore),
// against a real redis-server; permit holders that die are child processes killed with SIGKILL.
// What every binding does alike (results, errors, Redisson's layout) is in the conformance cases
// (tests/conformance/behaviour.json, run by conformance-behaviour.test.js); this file keeps Node's own.

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const readline = require('node:readline')
const { describe, test } = require('node:test')

const { Client, Semaphore, ExpirableSemaphore } = require('..')
const { serverAndClientPerFile, freshNames } = require('./redis.js')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Rejects after `ms` with `what`, so no test hangs without bound. */
function within(ms, promise, what) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** Polls `check` every 50 ms until it resolves true or `ms` pass; resolves to its last answer. */
async function eventually(ms, check) {
  const deadline = Date.now() + ms
  for (;;) {
    if (await check()) return true
    if (Date.now() > deadline) return false
    await sleep(50)
  }
}

let redis
let client
serverAndClientPerFile((server, connected) => {
  redis = server
  client = connected
})
/** A name no other test uses. */
const fresh = freshNames()

describe('semaphore', () => {

  test('permits are conserved under many concurrent acquires and releases from two clients', async () => {
    const name = fresh('conserve')
    const other = await Client.connect(redis.url)
    try {
      const permits = 3
      assert.equal(await client.semaphore(name).trySetPermits(permits), true)
      let inside = 0
      let most = 0
      let done = 0
      const worker = async (i) => {
        const semaphore = (i % 2 === 0 ? client : other).semaphore(name)
        for (let round = 0; round < 3; round += 1) {
          assert.equal(await semaphore.acquire({ waitMs: 60_000 }), true)
          inside += 1
          most = Math.max(most, inside)
          assert.ok(inside <= permits, `${inside} holders of ${permits} permits`)
          await sleep(2)
          inside -= 1
          await semaphore.release()
          done += 1
        }
      }
      await within(90_000, Promise.all(Array.from({ length: 24 }, (_, i) => worker(i))), 'workers')
      assert.equal(done, 72)
      assert.ok(most <= permits)
      assert.equal(most, permits, 'the permits were used concurrently')
      assert.equal(await client.semaphore(name).availablePermits(), permits, 'no permit lost or made')
    } finally {
      await other.close()
    }
  })

  test('a waiter is woken by a release long before its wait bound', async () => {
    const name = fresh('wake')
    const holder = client.semaphore(name)
    await holder.trySetPermits(1)
    assert.equal(await holder.acquire(), true)
    const other = await Client.connect(redis.url)
    try {
      let settled = false
      const started = Date.now()
      const waiting = other.semaphore(name).acquire({ waitMs: 60_000 }).finally(() => { settled = true })
      await sleep(300)
      assert.equal(settled, false, 'the waiter waits while no permit is free')
      await holder.release()
      assert.equal(await within(30_000, waiting, 'waiter'), true)
      assert.ok(Date.now() - started < 20_000, 'woken far sooner than the 60 s wait bound')
      assert.equal(await holder.availablePermits(), 0)
    } finally {
      await other.close()
    }
  })

  test('aborting a wait rejects with AbortError and takes nothing', async () => {
    const name = fresh('abort')
    const semaphore = client.semaphore(name)
    await semaphore.trySetPermits(1)
    const controller = new AbortController()
    const waiting = semaphore.acquire({ permits: 2, signal: controller.signal })
    await sleep(200)
    controller.abort()
    await assert.rejects(within(10_000, waiting, 'aborted acquire'), { name: 'AbortError' })
    await semaphore.addPermits(1)
    await sleep(300)
    assert.equal(await semaphore.availablePermits(), 2, 'the abandoned wait did not take permits later')
    const aborted = new AbortController()
    aborted.abort()
    await assert.rejects(semaphore.acquire({ signal: aborted.signal }), { name: 'AbortError' })
    assert.equal(await semaphore.availablePermits(), 2, 'an aborted signal takes nothing')
  })

  test('bad input is ERR_INVALID_ARGUMENT', async () => {
    assert.throws(() => client.semaphore(''), { code: 'ERR_INVALID_ARGUMENT', message: /must not be empty/ })
    const semaphore = client.semaphore(fresh('bad'))
    assert.ok(semaphore instanceof Semaphore)
    await assert.rejects(semaphore.acquire({ permits: '2' }), {
      code: 'ERR_INVALID_ARGUMENT',
      message: 'invalid argument: permits must be a number, not string',
    })
    await assert.rejects(semaphore.acquire({ permits: 0 }), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(semaphore.acquire({ waitMs: -1 }), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(semaphore.acquire({ signal: {} }), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(semaphore.release(0), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(semaphore.trySetPermits(), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(semaphore.addPermits(2 ** 31), { code: 'ERR_INVALID_ARGUMENT' })
    assert.equal(await redis.command('EXISTS', semaphore.name), 0)
  })
})

describe('expirable semaphore', () => {

  test('a waiter is woken by a release long before its wait bound', async () => {
    const semaphore = client.expirableSemaphore(fresh('xwake'))
    await semaphore.trySetPermits(1)
    const permit = await semaphore.acquire({ leaseMs: 60_000 })
    const started = Date.now()
    const waiting = client.expirableSemaphore(semaphore.name).acquire({ waitMs: 60_000 })
    await sleep(300)
    await semaphore.release(permit)
    const next = await within(30_000, waiting, 'waiter')
    assert.match(next, /^[0-9a-f]{32}$/)
    assert.ok(Date.now() - started < 20_000, 'woken far sooner than the 60 s lease')
  })

  test('a fixed lease runs out: the permit comes back and its release is ERR_LOCK_LOST', async () => {
    const semaphore = client.expirableSemaphore(fresh('lease'))
    await semaphore.trySetPermits(1)
    const permit = await semaphore.acquire({ leaseMs: 300 })
    assert.notEqual(permit, null)
    assert.equal(await eventually(10_000, async () => (await semaphore.availablePermits()) === 1), true)
    await assert.rejects(semaphore.release(permit), { code: 'ERR_LOCK_LOST' })
  })

  test('permits whose fixed lease ran out leave heldPermits (the core drops them)', async () => {
    const semaphore = client.expirableSemaphore(fresh('xexpired'))
    await semaphore.trySetPermits(50)
    const permits = []
    for (let i = 0; i < 50; i++) permits.push(await semaphore.acquire({ waitMs: 0, leaseMs: 300 }))
    assert.ok(permits.every((permit) => permit !== null))
    const leasesEnd = Date.now() + 300
    assert.equal(await eventually(10_000, async () => (await semaphore.availablePermits()) === 50), true)
    // The client ends each lease by its own clock, no later than the server: seconds suffice.
    assert.equal(await eventually(Math.max(leasesEnd + 3_000 - Date.now(), 0),
      async () => semaphore.heldPermits().length === 0), true,
    `${semaphore.heldPermits().length} expired permits still held`)
    const other = await Client.connect(redis.url)
    try {
      const taker = other.expirableSemaphore(semaphore.name)
      for (let i = 0; i < 50; i++) assert.notEqual(await taker.acquire({ waitMs: 0, leaseMs: 60_000 }), null)
      await assert.rejects(semaphore.release(permits[0]), { code: 'ERR_LOCK_LOST' })
      await assert.rejects(semaphore.release(permits[0]), { code: 'ERR_NOT_HELD' })
      assert.equal(await taker.availablePermits(), 0)
      assert.equal(taker.heldPermits().length, 50)
    } finally {
      await other.close()
    }
  })

  test('aborting a wait rejects with AbortError and takes nothing', async () => {
    const semaphore = client.expirableSemaphore(fresh('xabort'))
    const controller = new AbortController()
    const waiting = semaphore.acquire({ signal: controller.signal })
    await sleep(200)
    controller.abort()
    await assert.rejects(within(10_000, waiting, 'aborted acquire'), { name: 'AbortError' })
    await semaphore.addPermits(1)
    await sleep(300)
    assert.equal(await semaphore.availablePermits(), 1)
    assert.deepEqual(semaphore.heldPermits(), [])
  })

  test('bad input is ERR_INVALID_ARGUMENT', async () => {
    assert.throws(() => client.expirableSemaphore(''), { code: 'ERR_INVALID_ARGUMENT' })
    const semaphore = client.expirableSemaphore(fresh('xbad'))
    assert.ok(semaphore instanceof ExpirableSemaphore)
    await assert.rejects(semaphore.release(42), {
      code: 'ERR_INVALID_ARGUMENT',
      message: 'invalid argument: permit id must be a string, not number',
    })
    await assert.rejects(semaphore.release('zz'), { code: 'ERR_INVALID_ARGUMENT', message: /32 hexadecimal/ })
    await assert.rejects(semaphore.acquire({ leaseMs: Infinity }), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(semaphore.trySetPermits(-1), { code: 'ERR_INVALID_ARGUMENT' })
  })
})

describe('permits of a holder process that dies', () => {
  /** Starts a permit-holder child; resolves when it holds its permits. */
  async function holder(args) {
    const child = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'permit-holder.js'), ...args], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)))
    const lines = readline.createInterface({ input: child.stdout })
    const first = await within(30_000, Promise.race([
      new Promise((resolve) => lines.once('line', resolve)),
      exited.then((code) => `exited ${code}`),
    ]), 'permit holder')
    assert.equal(first, 'held')
    return { child, exited }
  }

  for (const lease of ['1500', 'watchdog']) {
    test(`an expirable permit comes back after its holder is killed (${lease === 'watchdog'
      ? 'no leaseMs: the watchdog stops renewing it' : `leaseMs: ${lease}`}); a plain permit does not`, async () => {
      const sem = client.semaphore(fresh('plain'))
      const xsem = client.expirableSemaphore(fresh('expirable'))
      assert.equal(await sem.trySetPermits(1), true)
      assert.equal(await xsem.trySetPermits(1), true)
      const { child, exited } = await holder([redis.url, sem.name, xsem.name, lease, '1500'])
      try {
        assert.equal(await sem.availablePermits(), 0)
        assert.equal(await xsem.availablePermits(), 0)
        if (lease === 'watchdog') {
          // Renewed while its holder lives: still taken after twice the watchdog timeout.
          await sleep(3000)
          assert.equal(await xsem.availablePermits(), 0, 'the live holder keeps its permit')
        }
      } finally {
        child.kill('SIGKILL')
        assert.equal(await exited, 'SIGKILL')
      }
      const killed = Date.now()
      assert.equal(await eventually(20_000, async () => (await xsem.availablePermits()) === 1), true,
        'the expirable permit came back')
      const back = Date.now() - killed
      assert.ok(back < 15_000, `back ${back} ms after the kill`)
      assert.match(await xsem.acquire({ waitMs: 0 }), /^[0-9a-f]{32}$/)
      assert.equal(await sem.availablePermits(), 0, "the plain permit is lost with its holder")
      assert.equal(await sem.acquire({ waitMs: 500 }), false)
    })
  }
})
