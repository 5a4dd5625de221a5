'use strict'

// The keyPrefix option reaches the core: clients under different prefixes share nothing, under
// the same prefix they share the lock, whose key is the prefixed name. Against a real redis-server.

const assert = require('node:assert/strict')
const { describe, test } = require('node:test')

const { Client } = require('..')
const { serverAndClientPerFile, freshNames } = require('./redis.js')

let redis
serverAndClientPerFile((server) => {
  redis = server
})
const fresh = freshNames('key-prefix')

describe('keyPrefix', () => {
  test('different prefixes do not exclude each other, the same prefix does', async () => {
    const name = fresh('job')
    const tenantA = await Client.connect(redis.url, { keyPrefix: 'a:' })
    const tenantAAgain = await Client.connect(redis.url, { keyPrefix: 'a:' })
    const tenantB = await Client.connect(redis.url, { keyPrefix: 'b:' })
    try {
      const held = tenantA.lock(name)
      assert.equal(await held.acquire({ waitMs: 0 }), true)
      assert.equal(await tenantAAgain.lock(name).acquire({ waitMs: 0 }), false)
      const other = tenantB.lock(name)
      assert.equal(await other.acquire({ waitMs: 0 }), true)
      assert.equal(await redis.command('TYPE', `a:${name}`), 'hash')
      await other.release()
      await held.release()
    } finally {
      await Promise.all([tenantA.close(), tenantAAgain.close(), tenantB.close()])
    }
  })

  test('a bad prefix is the core\'s InvalidArgument', async () => {
    await assert.rejects(Client.connect(redis.url, { keyPrefix: '{app}:' }), {
      code: 'ERR_INVALID_ARGUMENT',
      message: /key_prefix must not contain '\{'/,
    })
  })
})
