'use strict'

// The fenced lock (client.fencedLock: the lock API plus lock.token) and fenced writes
// (client.fencedSet / client.fencedDelete), against a real redis-server.

const assert = require('node:assert/strict')
const { describe, test } = require('node:test')

const { Client, Lock } = require('..')
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

  test('tokens grow across holders and on reentry; a partial release keeps the token', async () => {
    const name = fresh('monotonic')
    const first = client.fencedLock(name)
    const other = await Client.connect(redis.url)
    try {
      assert.equal(await first.acquire(), true)
      const t1 = first.token
      assert.equal(await first.acquire({ waitMs: 0 }), true, 'reentry')
      const t2 = first.token
      assert.ok(t2 > t1, `reentry token ${t2} > ${t1}`)
      await first.release()
      assert.equal(first.holdCount(), 1)
      assert.equal(first.token, t2, 'a partial release keeps the token')
      const second = other.fencedLock(name)
      assert.equal(await second.acquire({ waitMs: 0 }), false, 'still held by the first holder')
      assert.equal(second.token, null)
      await first.release()
      assert.equal(await second.acquire({ waitMs: 0 }), true)
      const t3 = second.token
      assert.ok(t3 > t2, `next holder's token ${t3} > ${t2}`)
      await second.release()
      const third = client.fencedLock(name)
      assert.equal(await third.acquire({ waitMs: 0 }), true)
      assert.ok(third.token > t3)
      await third.release()
    } finally {
      await other.close()
    }
  })

  test('a plain lock has no token', async () => {
    const lock = client.lock(fresh('plain'))
    await lock.acquire()
    assert.equal(lock.token, null)
    await lock.release()
  })

  test('a string key of the same name is ERR_WRONG_TYPE', async () => {
    const name = fresh('fenced-wrong-type')
    await redis.command('SET', name, 'not a lock')
    await assert.rejects(client.fencedLock(name).acquire({ waitMs: 0 }), { code: 'ERR_WRONG_TYPE' })
    assert.equal(await redis.command('GET', name), 'not a lock')
  })

  test('an empty name is ERR_INVALID_ARGUMENT', () => {
    assert.throws(() => client.fencedLock(''), { code: 'ERR_INVALID_ARGUMENT', message: /must not be empty/ })
    assert.throws(() => client.fencedLock(7), { code: 'ERR_INVALID_ARGUMENT' })
  })
})

describe('fenced writes', () => {
  test('a stale token is refused with ERR_STALE_TOKEN and the value stays', async () => {
    const name = fresh('guard')
    const key = fresh('value')
    const old = client.fencedLock(name)
    assert.equal(await old.acquire({ waitMs: 0 }), true)
    const stale = old.token
    // The old holder's hold ends behind its back (as when its lease runs out).
    assert.equal(await old.forceUnlock(), true)
    const current = client.fencedLock(name)
    assert.equal(await current.acquire({ waitMs: 0 }), true)
    const token = current.token
    assert.ok(token > stale)
    await client.fencedSet(key, 'new', token)
    await client.fencedSet(key, 'newer', token) // an equal token is accepted
    assert.equal(await redis.command('GET', key), 'newer')

    const error = await client.fencedSet(key, 'old', stale).then(() => null, (e) => e)
    assert.ok(error instanceof Error)
    assert.equal(error.code, 'ERR_STALE_TOKEN')
    assert.match(error.message, new RegExp(String(stale)))
    assert.equal(await redis.command('GET', key), 'newer', 'the refused write changed nothing')

    await assert.rejects(client.fencedDelete(key, stale), { code: 'ERR_STALE_TOKEN' })
    assert.equal(await redis.command('GET', key), 'newer', 'the refused delete changed nothing')
    assert.equal(await client.fencedDelete(key, token), true)
    assert.equal(await redis.command('EXISTS', key), 0)
    assert.equal(await client.fencedDelete(key, token), false, 'nothing left to delete')
    await assert.rejects(client.fencedSet(key, 'old', stale), { code: 'ERR_STALE_TOKEN' },
      'the fence outlives the deleted value')
    assert.equal(await redis.command('EXISTS', key), 0)
    await current.release()
  })

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

  test('a key of another type is ERR_WRONG_TYPE and is left alone', async () => {
    const key = fresh('list')
    await redis.command('RPUSH', key, 'a')
    await assert.rejects(client.fencedSet(key, 'v', 1), { code: 'ERR_WRONG_TYPE' })
    await assert.rejects(client.fencedDelete(key, 1), { code: 'ERR_WRONG_TYPE' })
    assert.equal(await redis.command('TYPE', key), 'list')
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
