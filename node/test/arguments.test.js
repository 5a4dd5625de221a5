'use strict'

// Arguments of the wrong JavaScript type, method by method: each is refused before any I/O
// with ERR_INVALID_ARGUMENT and a message naming the argument, what it must be and what it is
// (as Python's "argument 'lease': must be real number, not str"), never with napi's own
// conversion errors (NumberExpected, InvalidArg, ...). Values of the right type but out of
// range are the core's to check: tests/conformance/bad_input.json.

const assert = require('node:assert/strict')
const { describe, test } = require('node:test')

const { Client, MultiLock, RedLock, setLogger } = require('..')
const { freePort, serverAndClientPerFile, freshNames } = require('./redis.js')

let redis
let client
serverAndClientPerFile((server, connected) => {
  redis = server
  client = connected
})
const fresh = freshNames('args')

/** `invalid argument: <what> must be <expected>, not <type>`. */
const wrong = (what, expected, type) => `invalid argument: ${what} must be ${expected}, not ${type}`

/**
 * Wrong options of an acquire, as `acquire(options)` of any handle takes them (the permits of
 * a semaphore aside).
 */
const wrongAcquireOptions = [
  [5, wrong('options', 'an object', 'number')],
  ['fast', wrong('options', 'an object', 'string')],
  [{ leaseMs: '5' }, wrong('leaseMs', 'a number', 'string')],
  [{ waitMs: 'x' }, wrong('waitMs', 'a number', 'string')],
  [{ waitMs: 5n }, wrong('waitMs', 'a number', 'bigint')],
  [{ leaseMs: true }, wrong('leaseMs', 'a number', 'boolean')],
  [{ leaseMs: [1000] }, wrong('leaseMs', 'a number', 'object')],
]

/** Wrong `defaults` of a lock handle or group. */
const wrongDefaults = [
  [5, wrong('defaults', 'an object', 'number')],
  [{ leaseMs: '5' }, wrong('leaseMs', 'a number', 'string')],
  [{ waitMs: 'x' }, wrong('waitMs', 'a number', 'string')],
]

/** Asserts that `call()` throws or rejects with ERR_INVALID_ARGUMENT and exactly `message`. */
async function refuses(call, message) {
  const expected = { code: 'ERR_INVALID_ARGUMENT', message }
  let outcome
  try {
    outcome = call()
  } catch (error) {
    assert.throws(() => {
      throw error
    }, expected)
    return
  }
  assert.ok(outcome instanceof Promise, `expected a throw or a rejection, got ${outcome}`)
  await assert.rejects(outcome, expected)
}

describe('Client.connect', () => {
  const cases = [
    [[5], wrong('Redis URL', 'a string', 'number')],
    [[undefined], wrong('Redis URL', 'a string', 'undefined')],
    [['URL', 5], wrong('options', 'an object', 'number')],
    [['URL', 'fast'], wrong('options', 'an object', 'string')],
    [['URL', { watchdogTimeoutMs: '30000' }], wrong('watchdogTimeoutMs', 'a number', 'string')],
    [['URL', { connectTimeoutMs: '5' }], wrong('connectTimeoutMs', 'a number', 'string')],
    [['URL', { responseTimeoutMs: {} }], wrong('responseTimeoutMs', 'a number', 'object')],
    [['URL', { fairQueueTimeoutMs: 10n }], wrong('fairQueueTimeoutMs', 'a number', 'bigint')],
    [['URL', { replicaSyncTimeoutMs: false }], wrong('replicaSyncTimeoutMs', 'a number', 'boolean')],
    [['URL', { minReplicas: '1' }], wrong('minReplicas', 'a number', 'string')],
    [['URL', { syncReplicas: 'yes' }], wrong('syncReplicas', 'a boolean', 'string')],
    [['URL', { tlsCa: 5 }], wrong('tlsCa', 'a string', 'number')],
    [['URL', { tlsCert: Buffer.from('x') }], wrong('tlsCert', 'a string', 'object')],
    [['URL', { tlsKey: true }], wrong('tlsKey', 'a string', 'boolean')],
    [['URL', { tlsInsecure: 1 }], wrong('tlsInsecure', 'a boolean', 'number')],
  ]
  for (const [args, message] of cases) {
    test(message, async () => {
      // Nobody listens there: a connect that dialled would fail with ERR_CONNECTION instead.
      const url = `redis://127.0.0.1:${await freePort()}`
      await refuses(() => Client.connect(...args.map((arg) => (arg === 'URL' ? url : arg))), message)
    })
  }

  test('null and undefined options and fields are left out', async () => {
    const connected = await Client.connect(redis.url, { watchdogTimeoutMs: null, tlsCa: undefined, syncReplicas: null })
    assert.equal(connected.watchdogTimeoutMs, 30_000)
    await connected.close()
    await (await Client.connect(redis.url, null)).close()
  })
})

describe('the makers of lock handles', () => {
  for (const maker of ['lock', 'fairLock', 'fifoLock', 'fencedLock', 'readWriteLock']) {
    test(`client.${maker}`, async () => {
      await refuses(() => client[maker](42), wrong('lock name', 'a string', 'number'))
      await refuses(() => client[maker](null), wrong('lock name', 'a string', 'null'))
      for (const [defaults, message] of wrongDefaults) {
        await refuses(() => client[maker](fresh(maker), defaults), message)
      }
    })
  }

  for (const maker of ['semaphore', 'expirableSemaphore']) {
    test(`client.${maker}`, async () => {
      await refuses(() => client[maker](7), wrong('semaphore name', 'a string', 'number'))
      await refuses(() => client[maker]({}), wrong('semaphore name', 'a string', 'object'))
    })
  }

  for (const Group of [MultiLock, RedLock]) {
    test(`new ${Group.name}`, async () => {
      for (const [defaults, message] of wrongDefaults) {
        await refuses(() => new Group([client.lock(fresh('group'))], defaults), message)
      }
    })
  }
})

describe('acquire options', () => {
  /** Every handle whose acquire takes AcquireOptions, made anew for each case. */
  const handles = {
    lock: () => client.lock(fresh('lock')),
    fairLock: () => client.fairLock(fresh('fair')),
    fifoLock: () => client.fifoLock(fresh('fifo')),
    fencedLock: () => client.fencedLock(fresh('fenced')),
    readLock: () => client.readWriteLock(fresh('rw')).readLock(),
    writeLock: () => client.readWriteLock(fresh('rw')).writeLock(),
    MultiLock: () => new MultiLock([client.lock(fresh('multi'))]),
    RedLock: () => new RedLock([client.lock(fresh('red'))]),
  }
  for (const [kind, make] of Object.entries(handles)) {
    test(`${kind}: acquire and using`, async () => {
      for (const [options, message] of wrongAcquireOptions) {
        const handle = make()
        await refuses(() => handle.acquire(options), message)
        await refuses(() => handle.using(async () => assert.fail('ran without the lock'), options), message)
        assert.equal(handle.isHeld(), false)
      }
    })
  }

  test('expirableSemaphore: acquire', async () => {
    const semaphore = client.expirableSemaphore(fresh('xsem'))
    for (const [options, message] of wrongAcquireOptions) {
      await refuses(() => semaphore.acquire(options), message)
    }
    assert.deepEqual(semaphore.heldPermits(), [])
  })
})

describe('semaphores', () => {
  test('semaphore: acquire, release, trySetPermits, addPermits', async () => {
    const semaphore = client.semaphore(fresh('sem'))
    const cases = [
      [() => semaphore.acquire(5), wrong('options', 'an object', 'number')],
      [() => semaphore.acquire({ permits: '2' }), wrong('permits', 'a number', 'string')],
      [() => semaphore.acquire({ waitMs: 'x' }), wrong('waitMs', 'a number', 'string')],
      [() => semaphore.acquire({ permits: [2] }), wrong('permits', 'a number', 'object')],
      [() => semaphore.release('2'), wrong('permits', 'a number', 'string')],
      [() => semaphore.trySetPermits('3'), wrong('permits', 'a number', 'string')],
      [() => semaphore.trySetPermits(), wrong('permits', 'a number', 'undefined')],
      [() => semaphore.addPermits(true), wrong('permits', 'a number', 'boolean')],
    ]
    for (const [call, message] of cases) await refuses(call, message)
    assert.equal(await redis.command('EXISTS', semaphore.name), 0)
  })

  test('expirableSemaphore: release, trySetPermits, addPermits', async () => {
    const semaphore = client.expirableSemaphore(fresh('xsem'))
    const cases = [
      [() => semaphore.release(42), wrong('permit id', 'a string', 'number')],
      [() => semaphore.release(), wrong('permit id', 'a string', 'undefined')],
      [() => semaphore.trySetPermits(null), wrong('permits', 'a number', 'null')],
      [() => semaphore.addPermits('1'), wrong('permits', 'a number', 'string')],
    ]
    for (const [call, message] of cases) await refuses(call, message)
    assert.equal(await redis.command('EXISTS', semaphore.name), 0)
  })
})

describe('fenced writes and the logger', () => {
  test('fencedSet and fencedDelete', async () => {
    const key = fresh('fenced-key')
    const cases = [
      [() => client.fencedSet(5, 'v', 1), wrong('fenced key', 'a string', 'number')],
      [() => client.fencedSet(key, 5, 1), wrong('value', 'a string or a Buffer', 'number')],
      [() => client.fencedSet(key, { v: 1 }, 1), wrong('value', 'a string or a Buffer', 'object')],
      [() => client.fencedSet(key, 'v', '1'), wrong('token', 'a number', 'string')],
      [() => client.fencedDelete(key, 1n), wrong('token', 'a number', 'bigint')],
      [() => client.fencedDelete(null, 1), wrong('fenced key', 'a string', 'null')],
    ]
    for (const [call, message] of cases) await refuses(call, message)
    assert.equal(await redis.command('EXISTS', key), 0)
  })

  test('setLogger', async () => {
    await refuses(() => setLogger(() => {}, 5), wrong('log level', 'a string', 'number'))
    setLogger(null)
  })
})
