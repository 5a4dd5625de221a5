'use strict'

// client.fifoLock: polylock's own FIFO layout (not Redisson's): the lock hash `name`, a line
// LIST `polylock_fifo_line:{name}` of owners in arrival order, and one waiter record
// `polylock_fifo_waiter:{name}:<owner>` per waiter, whose TTL (fairQueueTimeoutMs) its looks
// renew. Waiters are served in arrival order, one that gives up leaves the line at once, and
// one whose record lapsed (its process died) is skipped.

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const readline = require('node:readline')
const { describe, test } = require('node:test')

const { Client } = require('..')
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

let redis
let client
serverAndClientPerFile((server, connected) => {
  redis = server
  client = connected
})
/** A name no other test uses. */
const fresh = freshNames('node:fifo')
const lineKey = (name) => `polylock_fifo_line:{${name}}`
const recordKey = (name, owner) => `polylock_fifo_waiter:{${name}}:${owner}`
const line = (name) => redis.command('LRANGE', lineKey(name), 0, -1)
/** The waiter records of `name` still on the server (the test server holds few keys). */
const records = (name) => redis.command('KEYS', `polylock_fifo_waiter:{${name}}:*`)

/** Polls the line LIST until `check(entries)` holds; fails after `ms`. */
async function lineUntil(name, check, ms, what) {
  const deadline = Date.now() + ms
  let entries = await line(name)
  while (!check(entries)) {
    if (Date.now() > deadline) assert.fail(`${what}: line is ${JSON.stringify(entries)} after ${ms} ms`)
    await sleep(10)
    entries = await line(name)
  }
  return entries
}

/** The kind this client's metrics give the lock `name`. */
const metricKind = (of, name) => of.metrics().locks.find((entry) => entry.name === name)?.kind

describe('FIFO lock', () => {
  test('10 waiters get the lock in the order they joined the line', async () => {
    const name = fresh('order')
    const holder = client.fifoLock(name)
    assert.equal(await holder.acquire(), true)
    const order = []
    const waiting = []
    const owners = []
    for (let i = 0; i < 10; i += 1) {
      const waiter = client.fifoLock(name)
      owners.push(waiter.owner)
      waiting.push(
        waiter.acquire({ waitMs: 60_000 }).then(async (acquired) => {
          assert.equal(acquired, true, `waiter ${i} acquired`)
          order.push(i)
          await waiter.release()
        }),
      )
      // Start the next one only once this one has its place at the tail of the line.
      await lineUntil(name, (entries) => entries.length === i + 1 && entries[i] === waiter.owner, 10_000,
        `waiter ${i} in line`)
    }
    assert.deepEqual(await line(name), owners, 'the line holds the owners in arrival order')
    assert.equal((await records(name)).length, 10, 'one record per waiter')
    await holder.release()
    await within(60_000, Promise.all(waiting), 'all waiters served')
    assert.deepEqual(order, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert.deepEqual(await line(name), [])
    assert.deepEqual(await records(name), [], 'no waiter record left behind')
    assert.equal(await redis.command('EXISTS', name, lineKey(name)), 0, 'nothing left behind')
    assert.equal(metricKind(client, name), 'fifo_lock')
  })

  test('a waiter whose waitMs runs out and one whose signal aborts leave the line at once', async () => {
    // A waiter left behind would keep its place for a minute (its record's TTL) and block the
    // one after it.
    const patientClient = await Client.connect(redis.url, { fairQueueTimeoutMs: 60_000 })
    try {
      const name = fresh('leave')
      const holder = patientClient.fifoLock(name)
      assert.equal(await holder.acquire(), true)

      const timingOut = patientClient.fifoLock(name)
      const timedOut = timingOut.acquire({ waitMs: 1500 })
      await lineUntil(name, (e) => e.length === 1, 10_000, 'timing-out waiter in line')
      const ttl = await redis.command('PTTL', recordKey(name, timingOut.owner))
      assert.ok(ttl > 0 && ttl <= 60_000, `its record lives for fairQueueTimeoutMs: ${ttl}`)

      const aborted = patientClient.fifoLock(name)
      const controller = new AbortController()
      const abortedWait = aborted.acquire({ signal: controller.signal })
      await lineUntil(name, (e) => e.length === 2, 10_000, 'aborted waiter in line')

      const patient = patientClient.fifoLock(name)
      const patientWait = patient.acquire({ waitMs: 50_000 })
      await lineUntil(name, (e) => e.length === 3, 10_000, 'patient waiter in line')
      assert.deepEqual(await line(name), [timingOut.owner, aborted.owner, patient.owner])

      assert.equal(await within(10_000, timedOut, 'timed-out acquire'), false)
      assert.deepEqual(await line(name), [aborted.owner, patient.owner], 'left when its wait ran out')
      assert.equal(await redis.command('EXISTS', recordKey(name, timingOut.owner)), 0, 'its record is gone')

      controller.abort()
      await assert.rejects(within(10_000, abortedWait, 'aborted acquire'), { name: 'AbortError' })
      // The abort rejects at once; the core leaves the line right behind it, in the background.
      await lineUntil(name, (e) => e.length === 1, 5_000, 'aborted waiter left')
      assert.deepEqual(await line(name), [patient.owner])
      assert.deepEqual(await records(name), [recordKey(name, patient.owner)])

      const released = Date.now()
      await holder.release()
      assert.equal(await within(55_000, patientWait, 'patient acquire'), true)
      assert.ok(Date.now() - released < 20_000, 'served long before the 60 s record of a waiter left behind')
      assert.equal(timingOut.holdCount() + aborted.holdCount(), 0)
      assert.deepEqual(await line(name), [])
      assert.deepEqual(await records(name), [])
      await patient.release()
      assert.equal(await redis.command('EXISTS', name), 0)
    } finally {
      await patientClient.close()
    }
  })

  test('the waiter after a killed one gets the lock once the dead one\'s record lapses', async () => {
    const name = fresh('killed')
    const holder = client.fifoLock(name)
    assert.equal(await holder.acquire({ leaseMs: 60_000 }), true)

    // The doomed waiter, in a process of its own with a 1 s fairQueueTimeoutMs, asks for a 60 s
    // lease: were the lock handed to it after its death, the next waiter would wait a minute.
    const child = spawn(process.execPath,
      [path.join(__dirname, 'fixtures', 'fifo-waiter.js'), redis.url, name, '1000'],
      { stdio: ['ignore', 'pipe', 'inherit'] })
    const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)))
    try {
      const lines = readline.createInterface({ input: child.stdout })
      const [deadOwner] = await within(30_000, new Promise((resolve) => lines.once('line', (l) => resolve([l]))),
        'the child printed its owner')
      await lineUntil(name, (e) => e.length === 1 && e[0] === deadOwner, 10_000, 'the child in line')
      const childTtl = await redis.command('PTTL', recordKey(name, deadOwner))
      assert.ok(childTtl > 0 && childTtl <= 1000, `its record lives for its fairQueueTimeoutMs, 1 s: ${childTtl}`)

      const next = client.fifoLock(name)
      const nextWait = next.acquire({ waitMs: 55_000 })
      await lineUntil(name, (e) => e.length === 2 && e[1] === next.owner, 10_000, 'the next waiter in line')

      const killed = Date.now()
      child.kill('SIGKILL')
      assert.equal(await within(10_000, exited, 'the child died'), 'SIGKILL')
      // Nobody renews its record any more: it lapses after fairQueueTimeoutMs (1 s).
      while (await redis.command('EXISTS', recordKey(name, deadOwner)) === 1) {
        assert.ok(Date.now() - killed < 5_000, 'the dead waiter\'s record lapsed within 5 s of its death')
        await sleep(50)
      }
      assert.equal(await redis.command('EXISTS', recordKey(name, next.owner)), 1, 'the live waiter\'s record is kept')

      const released = Date.now()
      await holder.release()
      assert.equal(await within(55_000, nextWait, 'the next waiter\'s acquire'), true)
      assert.ok(Date.now() - released < 10_000,
        `served ${Date.now() - released} ms after the release, long before the dead one's 60 s lease`)
      assert.equal(await redis.command('HEXISTS', name, deadOwner), 0, 'the dead waiter holds nothing')
      assert.equal(await redis.command('HGET', name, next.owner), '1')
      assert.deepEqual(await line(name), [], 'the dead waiter left the line')
      assert.deepEqual(await records(name), [])
      await next.release()
      assert.equal(await redis.command('EXISTS', name), 0)
    } finally {
      child.kill('SIGKILL')
    }
  })

  test('the same handle re-enters (the hash counts) without a place in line; a single try takes none', async () => {
    const name = fresh('reentrant')
    const lock = client.fifoLock(name)
    assert.equal(await lock.acquire(), true)
    assert.equal(await lock.acquire({ waitMs: 0 }), true)
    assert.equal(lock.holdCount(), 2)
    assert.equal(await redis.command('HGET', name, lock.owner), '2', 'the hash: owner -> count')
    const other = client.fifoLock(name)
    assert.equal(await other.acquire({ waitMs: 0 }), false, 'another handle is excluded')
    assert.deepEqual(await line(name), [], 'neither re-entry nor a single try takes a place in line')
    assert.equal(await redis.command('EXISTS', recordKey(name, other.owner)), 0, 'nor leaves a record')
    assert.equal(await client.lock(name).acquire({ waitMs: 0 }), false, 'a plain lock of the name is excluded')
    await lock.release()
    assert.equal(await redis.command('HGET', name, lock.owner), '1')
    assert.equal(await lock.isLocked(), true)
    await lock.release()
    assert.equal(lock.holdCount(), 0)
    assert.equal(await lock.isLocked(), false)
    await assert.rejects(lock.release(), { code: 'ERR_NOT_HELD' })

    // And the other way round: a plain lock's hold excludes the FIFO lock.
    const plain = client.lock(name)
    assert.equal(await plain.acquire(), true)
    assert.equal(await client.fifoLock(name).acquire({ waitMs: 0 }), false, 'a plain lock excludes it')
    await plain.release()
  })

  test('per-lock defaults apply', async () => {
    const name = fresh('defaults')
    const holder = client.fifoLock(name, { leaseMs: 4000 })
    assert.equal(await holder.acquire(), true)
    const pttl = await redis.command('PTTL', name)
    assert.ok(pttl > 0 && pttl <= 4000, `the default lease of 4000 ms, not the watchdog's 30 s: ${pttl}`)
    assert.equal(await client.fifoLock(name, { waitMs: 0 }).acquire(), false, 'the default wait: one attempt')
    await holder.release()
  })

  test('using and await-using dispose run under the FIFO lock and release it', async () => {
    const name = fresh('using')
    const lock = client.fifoLock(name)
    const result = await lock.using(async (signal) => {
      assert.equal(signal.aborted, false)
      assert.equal(lock.isHeld(), true)
      assert.equal(await redis.command('HGET', name, lock.owner), '1')
      assert.equal(await client.fifoLock(name).acquire({ waitMs: 0 }), false)
      return 'done'
    }, { waitMs: 5000 })
    assert.equal(result, 'done')
    assert.equal(lock.holdCount(), 0)
    assert.equal(await lock.isLocked(), false)

    // A waiter in line behind a `using` gets the lock when the routine ends.
    const waiter = client.fifoLock(name)
    let waiting
    await lock.using(async () => {
      waiting = waiter.acquire({ waitMs: 30_000 })
      await lineUntil(name, (e) => e.length === 1 && e[0] === waiter.owner, 10_000, 'waiter in line')
    })
    assert.equal(await within(30_000, waiting, 'waiter after using'), true)
    await waiter[Symbol.asyncDispose]()
    assert.equal(await waiter.isLocked(), false)
  })

  test('withLock with kind fifoLock makes a FIFO lock: it waits in the line', async () => {
    const name = fresh('with-lock')
    const holder = client.fifoLock(name)
    assert.equal(await holder.acquire(), true)
    let ran = false
    const running = client.withLock(name, async (signal) => {
      assert.equal(signal.aborted, false)
      ran = true
      assert.equal(await redis.command('EXISTS', name), 1, 'runs holding the lock')
      assert.equal(await client.fifoLock(name).acquire({ waitMs: 0 }), false)
      return 7
    }, { kind: 'fifoLock', waitMs: 30_000 })
    await lineUntil(name, (e) => e.length === 1, 10_000, 'withLock\'s handle in the FIFO line')
    assert.equal(ran, false, 'not run while the holder holds it')
    await holder.release()
    assert.equal(await within(30_000, running, 'withLock'), 7)
    assert.equal(ran, true)
    assert.equal(await redis.command('EXISTS', name), 0, 'released after the routine')
    assert.deepEqual(await line(name), [])

    const failure = new Error('routine failed')
    await assert.rejects(client.withLock(name, () => { throw failure }, { kind: 'fifoLock' }),
      (error) => error === failure)
    assert.equal(await redis.command('EXISTS', name), 0, 'released after the error')
  })

  test('a bad withLock kind names fifoLock among the kinds', async () => {
    await assert.rejects(client.withLock(fresh('bad-kind'), () => 1, { kind: 'fifo' }), {
      code: 'ERR_INVALID_ARGUMENT',
      message: `withLock: kind must be 'lock', 'fairLock', 'fifoLock' or 'fencedLock', not "fifo"`,
    })
  })

  test('bad input is ERR_INVALID_ARGUMENT', async () => {
    assert.throws(() => client.fifoLock(''), { code: 'ERR_INVALID_ARGUMENT', message: /must not be empty/ })
    assert.throws(() => client.fifoLock(42), { code: 'ERR_INVALID_ARGUMENT' })
    assert.throws(() => client.fifoLock(fresh('bad'), { waitMs: -1 }), { code: 'ERR_INVALID_ARGUMENT' })
  })
})

test('child processes exclude each other on a non-atomic GET/SET counter with fifoLock', async () => {
  const name = fresh('exclusion')
  const counter = `node:fifo:counter:${process.pid}`
  const processes = 4
  const rounds = 15
  const runs = Array.from({ length: processes }, () => {
    const child = spawn(process.execPath,
      [path.join(__dirname, 'fixtures', 'counter.js'), redis.url, name, counter, String(rounds), 'fifo'],
      { stdio: ['ignore', 'ignore', 'inherit'] })
    return within(120_000, new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal))),
      'counter process').finally(() => child.kill('SIGKILL'))
  })
  assert.deepEqual(await Promise.all(runs), Array(processes).fill(0))
  assert.equal(Number(await redis.command('GET', counter)), processes * rounds, 'no increment was lost')
  assert.equal(await redis.command('EXISTS', name, lineKey(name)), 0)
  assert.deepEqual(await records(name), [])
})
