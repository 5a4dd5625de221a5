'use strict'

// client.fifoLock's tests of its own: those it shares with client.fairLock run over both kinds in
// queue-locks.test.js, and queue-kinds.js describes its Redis layout (a line LIST of owners in
// arrival order and one waiter record per waiter, whose TTL, fairQueueTimeoutMs, its looks renew).

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const readline = require('node:readline')
const { describe, test } = require('node:test')

const { serverAndClientPerFile, freshNames } = require('./redis.js')
const { FIFO, queue, queueUntil } = require('./queue-kinds.js')

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
const recordKey = FIFO.recordKey
const line = (name) => queue(redis, FIFO, name)
const lineUntil = (name, check, ms, what) => queueUntil(redis, FIFO, name, check, ms, what)
/** The owners whose waiter records are still on the server. */
const records = (name) => FIFO.waiters(redis, name)

describe('FIFO lock', () => {
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

  test('per-lock defaults apply', async () => {
    const name = fresh('defaults')
    const holder = client.fifoLock(name, { leaseMs: 4000 })
    assert.equal(await holder.acquire(), true)
    const pttl = await redis.command('PTTL', name)
    assert.ok(pttl > 0 && pttl <= 4000, `the default lease of 4000 ms, not the watchdog's 30 s: ${pttl}`)
    assert.equal(await client.fifoLock(name, { waitMs: 0 }).acquire(), false, 'the default wait: one attempt')
    await holder.release()
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
})
