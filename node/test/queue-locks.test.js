'use strict'

// What client.fairLock and client.fifoLock share (see queue-kinds.js for their Redis layouts):
// each test below runs once per kind, with the kind in its name. Waiters are served in arrival
// order, and one that gives up leaves the queue at once. The FIFO lock's own tests are in
// fifo.test.js.

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const { describe, test } = require('node:test')

const { Client } = require('..')
const { serverAndClientPerFile, freshNames } = require('./redis.js')
const { QUEUE_KINDS, queue, queueUntil } = require('./queue-kinds.js')

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
const fresh = freshNames('node:queue-locks')

/** The kind this client's metrics give the lock `name`. */
const metricKind = (of, name) => of.metrics().locks.find((entry) => entry.name === name)?.kind

for (const kind of QUEUE_KINDS) {
  /** A handle of this kind on the client `of`. */
  const lockOf = (of, name) => of[kind.method](name)
  const inQueue = (name) => queue(redis, kind, name)
  const untilQueue = (name, check, ms, what) => queueUntil(redis, kind, name, check, ms, what)
  const waiters = (name) => kind.waiters(redis, name)
  const q = kind.queueWord

  describe(kind.title, () => {
    test(`10 waiters get the lock in the order they joined the ${q}`, async () => {
      const name = fresh(`${kind.counterKind}:order`)
      const holder = lockOf(client, name)
      assert.equal(await holder.acquire(), true)
      const order = []
      const waiting = []
      const owners = []
      for (let i = 0; i < 10; i += 1) {
        const waiter = lockOf(client, name)
        owners.push(waiter.owner)
        waiting.push(
          waiter.acquire({ waitMs: 60_000 }).then(async (acquired) => {
            assert.equal(acquired, true, `waiter ${i} acquired`)
            order.push(i)
            await waiter.release()
          }),
        )
        // Start the next one only once this one has its place at the tail of the queue.
        await untilQueue(name, (entries) => entries.length === i + 1 && entries[i] === waiter.owner, 10_000,
          `waiter ${i} in the ${q}`)
      }
      assert.deepEqual(await inQueue(name), owners, `the ${q} holds the owners in arrival order`)
      assert.equal((await waiters(name)).length, 10, 'the server keeps each waiter\'s state')
      await holder.release()
      await within(60_000, Promise.all(waiting), 'all waiters served')
      assert.deepEqual(order, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
      assert.deepEqual(await inQueue(name), [])
      assert.deepEqual(await waiters(name), [], 'no waiter state left behind')
      assert.equal(await redis.command('EXISTS', ...kind.keys(name)), 0, 'nothing left behind')
      assert.equal(metricKind(client, name), kind.metricKind)
    })

    test(`a waiter whose waitMs runs out and one whose signal aborts leave the ${q} at once`, async () => {
      // A waiter left behind would keep its place for a minute (fairQueueTimeoutMs) and block
      // the one after it.
      const patientClient = await Client.connect(redis.url, { fairQueueTimeoutMs: 60_000 })
      try {
        const name = fresh(`${kind.counterKind}:leave`)
        const holder = lockOf(patientClient, name)
        assert.equal(await holder.acquire(), true)

        const timingOut = lockOf(patientClient, name)
        const timedOut = timingOut.acquire({ waitMs: 1500 })
        await untilQueue(name, (e) => e.length === 1, 10_000, `timing-out waiter in the ${q}`)
        if (kind.recordKey) {
          const ttl = await redis.command('PTTL', kind.recordKey(name, timingOut.owner))
          assert.ok(ttl > 0 && ttl <= 60_000, `its record lives for fairQueueTimeoutMs: ${ttl}`)
        }

        const aborted = lockOf(patientClient, name)
        const controller = new AbortController()
        const abortedWait = aborted.acquire({ signal: controller.signal })
        await untilQueue(name, (e) => e.length === 2, 10_000, `aborted waiter in the ${q}`)

        const patient = lockOf(patientClient, name)
        const patientWait = patient.acquire({ waitMs: 50_000 })
        await untilQueue(name, (e) => e.length === 3, 10_000, `patient waiter in the ${q}`)
        assert.deepEqual(await inQueue(name), [timingOut.owner, aborted.owner, patient.owner])

        assert.equal(await within(10_000, timedOut, 'timed-out acquire'), false)
        assert.deepEqual(await inQueue(name), [aborted.owner, patient.owner], 'left when its wait ran out')
        assert.ok(!(await waiters(name)).includes(timingOut.owner), 'its waiter state is gone')

        controller.abort()
        await assert.rejects(within(10_000, abortedWait, 'aborted acquire'), { name: 'AbortError' })
        // The abort rejects at once; the core leaves the queue right behind it, in the background.
        await untilQueue(name, (e) => e.length === 1, 5_000, 'aborted waiter left')
        assert.deepEqual(await inQueue(name), [patient.owner])
        assert.deepEqual(await waiters(name), [patient.owner])

        const released = Date.now()
        await holder.release()
        assert.equal(await within(55_000, patientWait, 'patient acquire'), true)
        assert.ok(Date.now() - released < 20_000, 'served long before the 60 s queue timeout')
        assert.equal(timingOut.holdCount() + aborted.holdCount(), 0)
        assert.deepEqual(await inQueue(name), [])
        assert.deepEqual(await waiters(name), [])
        await patient.release()
        assert.equal(await redis.command('EXISTS', name), 0)
      } finally {
        await patientClient.close()
      }
    })

    test(`the same handle re-enters (the hash counts) without a place in the ${q}; a single try takes none; `
      + 'each release undoes one', async () => {
      const name = fresh(`${kind.counterKind}:reentrant`)
      const lock = lockOf(client, name)
      assert.equal(await lock.acquire(), true)
      assert.equal(await lock.acquire({ waitMs: 0 }), true)
      assert.equal(lock.holdCount(), 2)
      assert.equal(await redis.command('HGET', name, lock.owner), '2', 'the hash (Redisson\'s layout): owner -> count')
      assert.equal(await lockOf(client, name).acquire({ waitMs: 0 }), false, 'another handle is excluded')
      assert.deepEqual(await inQueue(name), [], `neither re-entry nor a single try takes a place in the ${q}`)
      assert.deepEqual(await waiters(name), [], 'nor leaves waiter state')
      assert.equal(await client.lock(name).acquire({ waitMs: 0 }), false, 'a plain lock of the name is excluded')
      await lock.release()
      assert.equal(await redis.command('HGET', name, lock.owner), '1')
      assert.equal(await lock.isLocked(), true)
      await lock.release()
      assert.equal(lock.holdCount(), 0)
      assert.equal(await lock.isLocked(), false)
      await assert.rejects(lock.release(), { code: 'ERR_NOT_HELD' })

      // And the other way round: a plain lock's hold excludes this kind.
      const plain = client.lock(name)
      assert.equal(await plain.acquire(), true)
      assert.equal(await lockOf(client, name).acquire({ waitMs: 0 }), false, 'a plain lock excludes it')
      await plain.release()
    })

    test(`using and await-using dispose run under the ${kind.title} and release it`, async () => {
      const name = fresh(`${kind.counterKind}:using`)
      const lock = lockOf(client, name)
      const result = await lock.using(async (signal) => {
        assert.equal(signal.aborted, false)
        assert.equal(lock.isHeld(), true)
        assert.equal(await redis.command('HGET', name, lock.owner), '1')
        assert.equal(await lockOf(client, name).acquire({ waitMs: 0 }), false)
        return 'done'
      }, { waitMs: 5000 })
      assert.equal(result, 'done')
      assert.equal(lock.holdCount(), 0)
      assert.equal(await lock.isLocked(), false)

      // A waiter queued behind a `using` gets the lock when the routine ends.
      const waiter = lockOf(client, name)
      let waiting
      await lock.using(async () => {
        waiting = waiter.acquire({ waitMs: 30_000 })
        await untilQueue(name, (e) => e.length === 1 && e[0] === waiter.owner, 10_000, `waiter in the ${q}`)
      })
      assert.equal(await within(30_000, waiting, 'waiter after using'), true)
      await waiter[Symbol.asyncDispose]()
      assert.equal(await waiter.isLocked(), false)
    })

    test('bad input is ERR_INVALID_ARGUMENT', async () => {
      assert.throws(() => lockOf(client, ''), { code: 'ERR_INVALID_ARGUMENT', message: /must not be empty/ })
      assert.throws(() => lockOf(client, 42), { code: 'ERR_INVALID_ARGUMENT' })
      assert.throws(() => client[kind.method](fresh(`${kind.counterKind}:bad`), { waitMs: -1 }),
        { code: 'ERR_INVALID_ARGUMENT' })
      // fairQueueTimeoutMs: how long the server keeps a waiter that stopped looking, for both kinds.
      await assert.rejects(Client.connect(redis.url, { fairQueueTimeoutMs: -1 }), { code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(Client.connect(redis.url, { fairQueueTimeoutMs: 1.5 }), { code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(Client.connect(redis.url, { fairQueueTimeoutMs: 0 }), { code: 'ERR_INVALID_ARGUMENT' })
    })
  })

  test(`child processes exclude each other on a non-atomic GET/SET counter with ${kind.method}`, async () => {
    const name = fresh(`${kind.counterKind}:exclusion`)
    const counter = `node:${kind.counterKind}:counter:${process.pid}`
    const processes = 4
    const rounds = 15
    const runs = Array.from({ length: processes }, () => {
      const child = spawn(process.execPath,
        [path.join(__dirname, 'fixtures', 'counter.js'), redis.url, name, counter, String(rounds), kind.counterKind],
        { stdio: ['ignore', 'ignore', 'inherit'] })
      return within(120_000, new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal))),
        'counter process').finally(() => child.kill('SIGKILL'))
    })
    assert.deepEqual(await Promise.all(runs), Array(processes).fill(0))
    assert.equal(Number(await redis.command('GET', counter)), processes * rounds, 'no increment was lost')
    assert.equal(await redis.command('EXISTS', ...kind.keys(name)), 0)
    assert.deepEqual(await waiters(name), [])
  })
}
