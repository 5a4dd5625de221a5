'use strict'

// What users of node-redlock and ioredis expect: per-lock defaults, onLost, remainingLease,
// isLost, and a log hook.

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const { describe, test } = require('node:test')

const { setLogger } = require('..')
const { serverAndClientPerFile, freshNames } = require('./redis.js')

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
const fresh = freshNames('idioms')

describe('per-lock defaults', () => {
  test('a default wait bounds acquire() and using(); waitMs: Infinity still waits without bound', async () => {
    const name = fresh('wait')
    const holder = client.lock(name)
    assert.equal(await holder.acquire(), true)
    const waiter = client.lock(name, { waitMs: 200 })
    assert.deepEqual({ ...waiter.defaults }, { waitMs: 200 })
    assert.deepEqual({ ...holder.defaults }, {})
    assert.equal(await waiter.acquire(), false, 'the default wait of 200 ms ran out')
    await assert.rejects(waiter.using(async () => 'ran'), {
      code: 'ERR_TIMEOUT',
      // Then who held it (the holder's client record; client-record.test.js).
      message: new RegExp(`^lock '${name}' was not acquired within 200 ms: another owner held it all that time \\(held by '`),
    })
    const unbounded = waiter.acquire({ waitMs: Infinity })
    const released = holder.release()
    assert.equal(await within(10_000, unbounded, 'an unbounded wait'), true)
    await released
    assert.equal(waiter.isHeld(), true)
    await waiter.release()
  })

  test('a default lease is the lease of acquire() and using(); a call can set its own', async () => {
    const name = fresh('lease')
    const lock = client.lock(name, { leaseMs: 4000 })
    assert.equal(await lock.acquire(), true)
    const pttl = await redis.command('PTTL', name)
    assert.ok(pttl > 0 && pttl <= 4000, `the default lease of 4000 ms, not the watchdog's 30 s: ${pttl}`)
    await lock.release()
    const inside = await lock.using(async () => redis.command('PTTL', name))
    assert.ok(inside > 0 && inside <= 4000, `using() takes the default lease: ${inside}`)
    assert.equal(await lock.acquire({ leaseMs: 20_000 }), true)
    assert.ok((await redis.command('PTTL', name)) > 10_000, 'the call\'s leaseMs wins')
    await lock.release()
  })

  test('fairLock, fifoLock, fencedLock and readWriteLock take defaults too', async () => {
    const fenced = client.fencedLock(fresh('fenced'), { leaseMs: 3000 })
    assert.equal(await fenced.acquire(), true)
    const pttl = await redis.command('PTTL', fenced.name)
    assert.ok(pttl > 0 && pttl <= 3000, `fenced default lease: ${pttl}`)
    assert.equal(typeof fenced.token, 'number')
    await fenced.release()

    const fairName = fresh('fair')
    const fairHolder = client.fairLock(fairName)
    assert.equal(await fairHolder.acquire(), true)
    assert.equal(await client.fairLock(fairName, { waitMs: 0 }).acquire(), false, 'the fair default: one attempt')
    await fairHolder.release()

    const fifoName = fresh('fifo')
    const fifoHolder = client.fifoLock(fifoName, { leaseMs: 3000 })
    assert.equal(await fifoHolder.acquire(), true)
    const fifoPttl = await redis.command('PTTL', fifoName)
    assert.ok(fifoPttl > 0 && fifoPttl <= 3000, `fifo default lease: ${fifoPttl}`)
    assert.equal(await client.fifoLock(fifoName, { waitMs: 0 }).acquire(), false, 'the fifo default: one attempt')
    await fifoHolder.release()

    const rwName = fresh('rw')
    const writer = client.readWriteLock(rwName).writeLock()
    assert.equal(await writer.acquire(), true)
    const reader = client.readWriteLock(rwName, { waitMs: 0 }).readLock()
    assert.equal(await reader.acquire(), false, 'the read lock took the default wait')
    await writer.release()
  })

  test('async disposal releases a hold taken with the defaults', async () => {
    const name = fresh('dispose')
    // `await using lock = ...` (Node 24+, TypeScript 5.2+) calls the same method at block end.
    const lock = client.lock(name, { waitMs: 1000, leaseMs: 5000 })
    try {
      assert.equal(await lock.acquire(), true)
      assert.equal(await lock.acquire(), true)
      assert.equal(lock.holdCount(), 2)
    } finally {
      await lock[Symbol.asyncDispose]()
    }
    assert.equal(await redis.command('EXISTS', name), 0)
  })
})

describe('lease inspection and loss', () => {
  test('remainingLease: null when free, the lease left when held, Infinity without expiry', async () => {
    const name = fresh('remaining')
    const lock = client.lock(name)
    assert.equal(await lock.remainingLease(), null)
    assert.equal(await lock.acquire({ leaseMs: 10_000 }), true)
    const left = await lock.remainingLease()
    assert.ok(left > 0 && left <= 10_000, `remaining ${left}`)
    const seenByOther = await client.lock(name).remainingLease()
    assert.ok(seenByOther > 0 && seenByOther <= left, `another handle asks Redis too: ${seenByOther}`)
    await redis.command('PERSIST', name)
    assert.equal(await lock.remainingLease(), Infinity)
    assert.equal(await lock.forceUnlock(), true)
    assert.equal(await lock.remainingLease(), null)
  })

  test('onLost is called with ERR_LOCK_LOST when a fixed lease runs out; isLost() turns true', async () => {
    const name = fresh('lost')
    const lock = client.lock(name)
    const lost = new Promise((resolve) => lock.onLost(resolve))
    assert.equal(await lock.acquire({ leaseMs: 100 }), true)
    assert.equal(lock.isLost(), false)
    const error = await within(10_000, lost, 'the lost callback')
    assert.equal(error.code, 'ERR_LOCK_LOST')
    assert.match(error.message, new RegExp(`lock '${name}' was lost`))
    assert.equal(lock.isLost(), true)
    await assert.rejects(lock.release(), { code: 'ERR_LOCK_LOST' })
    assert.throws(() => lock.onLost('not a function'), { code: 'ERR_INVALID_ARGUMENT' })
  })
})

describe('setLogger', () => {
  test('a fixed 100 ms lease that runs out reaches the logger as a warn', async () => {
    const name = fresh('logged')
    const events = []
    let seen
    const warned = new Promise((resolve) => {
      seen = resolve
    })
    setLogger((level, message, fields) => {
      events.push({ level, message, fields })
      if (level === 'warn' && fields.lock === name) seen({ level, message, fields })
    }, 'warn')
    try {
      const lock = client.lock(name)
      assert.equal(await lock.acquire({ leaseMs: 100 }), true)
      const event = await within(10_000, warned, 'the warn event')
      assert.equal(event.message, 'lock lost')
      assert.equal(event.fields.owner, lock.owner)
      assert.match(String(event.fields.error), /was lost: its fixed lease of 100ms ran out/)
      assert.ok(events.every((e) => e.level === 'warn' || e.level === 'error'), 'nothing below warn')
    } finally {
      setLogger(null)
    }
  })

  test('at the default level acquires, hand-offs and releases log nothing; trace shows their steps', async () => {
    const name = fresh('quiet')
    const events = []
    let sentinelSeen
    const sentinel = new Promise((resolve) => {
      sentinelSeen = resolve
    })
    const logger = (level, message, fields) => {
      events.push({ level, message, fields })
      if (fields.lock === `${name}:sentinel`) sentinelSeen()
    }
    setLogger(logger)
    try {
      const first = client.lock(name)
      const second = client.lock(name)
      for (let round = 0; round < 5; round += 1) {
        assert.equal(await first.acquire(), true)
        const waiting = second.acquire()
        await first.release()
        assert.equal(await waiting, true)
        await second.release()
      }
      assert.equal(await first.acquire({ waitMs: 0 }), true)
      assert.equal(await second.acquire({ waitMs: 100 }), false)
      await first.release()
      // A lost lease is a warn: once it arrives, every earlier event has (one queue, in order).
      const lost = client.lock(`${name}:sentinel`)
      assert.equal(await lost.acquire({ leaseMs: 100 }), true)
      await within(10_000, sentinel, 'the lost-lease warn')
      // Another test's handle that the GC collects while held logs its drop whenever that
      // happens: only the events of this test's locks (and those of no lock) count.
      const ours = (event) => event.fields.lock === undefined || String(event.fields.lock).startsWith(name)
      assert.deepEqual(events.filter(ours).map((event) => `${event.level} ${event.message}`), ['warn lock lost'])

      events.length = 0
      setLogger(logger, 'trace')
      assert.equal(await first.acquire(), true)
      await first.release()
      const traced = async () => {
        while (!events.some((event) => event.message === 'release reply')) await new Promise((resolve) => setTimeout(resolve, 20))
      }
      await within(10_000, traced(), 'the trace events of an acquire and a release')
      assert.ok(events.some((event) => event.level === 'trace' && event.message === 'attempt sent'))
    } finally {
      setLogger(null)
    }
  })

  test('null stops the logger; a bad level is ERR_INVALID_ARGUMENT', async () => {
    let calls = 0
    setLogger(() => {
      calls += 1
    }, 'warn')
    setLogger(null)
    const lock = client.lock(fresh('unlogged'))
    const lost = new Promise((resolve) => lock.onLost(resolve))
    await lock.acquire({ leaseMs: 100 })
    await within(10_000, lost, 'the lost callback')
    // The warn is sent before the lost callbacks run; give the event loop a turn to deliver it.
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(calls, 0)
    assert.throws(() => setLogger(() => {}, 'verbose'), {
      code: 'ERR_INVALID_ARGUMENT',
      message: "invalid argument: log level must be one of 'error', 'warn', 'info', 'debug', 'trace', got 'verbose'",
    })
    assert.throws(() => setLogger('console'), { code: 'ERR_INVALID_ARGUMENT' })
  })

  test('a logger neither keeps the process alive nor crashes it on exit', async () => {
    const name = fresh('exit')
    const child = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'logger-exit.js'), redis.url, name], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    child.stdout.on('data', (chunk) => {
      output += chunk
    })
    child.stderr.on('data', (chunk) => {
      output += chunk
    })
    const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)))
    try {
      assert.equal(await within(30_000, exited, 'the logging process exiting'), 0, output)
      assert.equal(output, 'warned\ndone\n')
    } finally {
      child.kill('SIGKILL')
    }
  })
})
