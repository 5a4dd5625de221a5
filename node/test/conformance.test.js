'use strict'

// The bad-input table every binding checks (tests/conformance/bad_input.json): Node gives the
// same kind (`ERR_INVALID_ARGUMENT`) and the same message as the core and every other binding.

const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { describe, test } = require('node:test')

const { Client } = require('..')
const { freePort, serverAndClientPerFile, freshNames } = require('./redis.js')

const table = JSON.parse(
  fs.readFileSync(path.join(__dirname, '..', '..', 'tests', 'conformance', 'bad_input.json'), 'utf8'),
)

/** The table's milliseconds: a number, or "NaN" / "Infinity" for those numbers. */
const ms = (value) => (value === undefined ? undefined : Number(value))

/** Each core option's name in `Client.connect`'s options. */
const OPTION = {
  watchdog_timeout: 'watchdogTimeoutMs',
  connect_timeout: 'connectTimeoutMs',
  response_timeout: 'responseTimeoutMs',
  fair_queue_timeout: 'fairQueueTimeoutMs',
  replica_sync_timeout: 'replicaSyncTimeoutMs',
  min_replicas: 'minReplicas',
  key_prefix: 'keyPrefix',
}

const sleep = (delay) => new Promise((resolve) => setTimeout(resolve, delay))

let redis
let client
serverAndClientPerFile((server, connected) => {
  redis = server
  client = connected
})
/** A name no other test uses. */
const fresh = freshNames()

describe('the bad-input table', () => {
  for (const c of table.cases) {
    const { kind, message, integer_ms: _, ...input } = c
    test(JSON.stringify(input), async () => {
      assert.equal(kind, 'InvalidArgument')
      const expected = { code: 'ERR_INVALID_ARGUMENT', message }
      const wait = { waitMs: ms(c.wait_ms), leaseMs: ms(c.lease_ms) }
      switch (c.call) {
        case 'lock':
          assert.throws(() => client.lock(c.name), expected)
          break
        case 'acquire': {
          const lock = client.lock(fresh('conformance'))
          await assert.rejects(lock.acquire(wait), expected)
          assert.equal(lock.isHeld(), false)
          break
        }
        case 'connect': {
          // Nobody listens there: a connect that dialled would fail with ERR_CONNECTION instead.
          const url = `redis://127.0.0.1:${await freePort()}`
          // A string `value` or a number `count` as it is, else milliseconds.
          const value = 'value' in c ? c.value : 'count' in c ? c.count : ms(c.ms)
          await assert.rejects(Client.connect(url, { [OPTION[c.option]]: value }), expected)
          break
        }
        case 'read_write_lock':
          assert.throws(() => client.readWriteLock(c.name), expected)
          break
        case 'read_lock_acquire':
        case 'write_lock_acquire': {
          const rw = client.readWriteLock('conformance')
          const lock = c.call === 'read_lock_acquire' ? rw.readLock() : rw.writeLock()
          await assert.rejects(lock.acquire(wait), expected)
          assert.equal(lock.isHeld(), false)
          break
        }
        case 'semaphore_acquire':
          await assert.rejects(
            client.semaphore('conformance').acquire({ permits: c.permits, waitMs: ms(c.wait_ms) }), expected)
          break
        case 'semaphore_release':
          await assert.rejects(client.semaphore('conformance').release(c.permits), expected)
          break
        case 'semaphore_try_set_permits':
          await assert.rejects(client.semaphore('conformance').trySetPermits(c.permits), expected)
          break
        case 'semaphore_add_permits':
          await assert.rejects(client.semaphore('conformance').addPermits(c.permits), expected)
          break
        case 'expirable_semaphore_acquire':
          await assert.rejects(client.expirableSemaphore('conformance').acquire(wait), expected)
          break
        case 'expirable_semaphore_release':
          await assert.rejects(client.expirableSemaphore('conformance').release(c.permit_id), expected)
          break
        case 'expirable_semaphore_try_set_permits':
          await assert.rejects(client.expirableSemaphore('conformance').trySetPermits(c.permits), expected)
          break
        case 'fenced_set':
          await assert.rejects(client.fencedSet(c.key, 'v', c.token), expected)
          break
        case 'fenced_delete':
          await assert.rejects(client.fencedDelete(c.key, c.token), expected)
          break
        default:
          assert.fail(`a call this test does not know: ${c.call}`)
      }
    })
  }

  test('nothing was written to Redis by any case', async () => {
    // Every key but the client record, written at connect.
    const keys = await redis.command('KEYS', '*')
    assert.deepEqual(keys.filter((key) => !key.startsWith('polylock:client:')), [])
  })
})

describe('accepted values', () => {
  test('waitMs: Infinity waits without bound, like no waitMs', async () => {
    const name = fresh('infinity')
    const free = client.lock(name)
    assert.equal(await free.acquire({ waitMs: Infinity }), true)
    const waiter = client.lock(name)
    let settled = false
    const waiting = waiter.acquire({ waitMs: Infinity }).finally(() => {
      settled = true
    })
    await sleep(500)
    assert.equal(settled, false, 'an infinite wait is not one attempt')
    await free.release()
    assert.equal(await waiting, true)
    await waiter.release()
  })

  test('fractional milliseconds are accepted', async () => {
    const name = fresh('fraction')
    const holder = client.lock(name)
    assert.equal(await holder.acquire({ leaseMs: 60_000.5 }), true)
    assert.equal(await client.lock(name).acquire({ waitMs: 1.5 }), false)
    await holder.release()
    const short = await Client.connect(redis.url, { watchdogTimeoutMs: 1500.5, responseTimeoutMs: 999.9 })
    await short.close()
  })

  test('bad lock defaults get the same messages as a bad acquire', async () => {
    for (const c of table.cases.filter((c) => c.call === 'acquire')) {
      const defaults = { waitMs: ms(c.wait_ms), leaseMs: ms(c.lease_ms) }
      const expected = { code: 'ERR_INVALID_ARGUMENT', message: c.message }
      assert.throws(() => client.lock(fresh('defaults'), defaults), expected)
      assert.throws(() => client.fairLock(fresh('defaults'), defaults), expected)
      assert.throws(() => client.fifoLock(fresh('defaults'), defaults), expected)
      assert.throws(() => client.fencedLock(fresh('defaults'), defaults), expected)
      assert.throws(() => client.readWriteLock(fresh('defaults'), defaults), expected)
    }
  })
})
