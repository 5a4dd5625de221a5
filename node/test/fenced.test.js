'use strict'

// The fenced lock (client.fencedLock: the lock API plus lock.token) and fenced writes
// (client.fencedSet / client.fencedDelete), against a real redis-server.
// What every binding does alike (results, errors, Redisson's layout) is in the conformance cases
// (tests/conformance/behaviour.json, run by conformance-behaviour.test.js); this file keeps Node's own.

const assert = require('node:assert/strict')
const { describe, test } = require('node:test')

const { Lock } = require('..')
const { connectRedis, serverAndClientPerFile, freshNames } = require('./redis.js')

let redis
let client
serverAndClientPerFile((server, connected) => {
  redis = server
  client = connected
})
/** A name no other test uses. */
const fresh = freshNames()

describe('fenced lock', () => {
  test('is a Lock whose token is null until it is held', async () => {
    const lock = client.fencedLock(fresh('fenced'))
    assert.ok(lock instanceof Lock)
    assert.equal(lock.token, null)
    assert.equal(await lock.acquire({ waitMs: 0 }), true)
    assert.equal(typeof lock.token, 'number')
    assert.ok(Number.isSafeInteger(lock.token) && lock.token > 0, `token ${lock.token}`)
    await lock.release()
    assert.equal(lock.token, null, 'no hold, no token')
  })

  test('an empty name is ERR_INVALID_ARGUMENT', () => {
    assert.throws(() => client.fencedLock(''), { code: 'ERR_INVALID_ARGUMENT', message: /must not be empty/ })
    assert.throws(() => client.fencedLock(7), { code: 'ERR_INVALID_ARGUMENT' })
  })
})

describe('fenced writes', () => {

  test('a Buffer value is written byte for byte', async () => {
    const lock = client.fencedLock(fresh('bytes-guard'))
    await lock.acquire()
    const key = fresh('bytes')
    const bytes = Buffer.from([0, 1, 254, 255, 0x80])
    await client.fencedSet(key, bytes, lock.token)
    const raw = connectRedis(redis.port)
    try {
      assert.deepEqual(await raw.getBuffer(key), bytes)
    } finally {
      raw.disconnect()
    }
    await client.fencedSet(key, 'héllo', lock.token)
    assert.equal(await redis.command('GET', key), 'héllo')
    await lock.release()
  })

  test('values and tokens of the wrong type are ERR_INVALID_ARGUMENT', async () => {
    const key = fresh('bad')
    await assert.rejects(client.fencedSet(key, 5, 1), {
      code: 'ERR_INVALID_ARGUMENT',
      message: 'invalid argument: value must be a string or a Buffer, not number',
    })
    await assert.rejects(client.fencedSet(key, 'v', '1'), {
      code: 'ERR_INVALID_ARGUMENT',
      message: 'invalid argument: token must be a number, not string',
    })
    await assert.rejects(client.fencedDelete(key, 1n), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(client.fencedSet(key, 'v', Number.NaN), {
      code: 'ERR_INVALID_ARGUMENT',
      message: /token must be from 1 to 9223372036854775807 .* got 0/,
    })
    assert.equal(await redis.command('EXISTS', key), 0)
  })
})
