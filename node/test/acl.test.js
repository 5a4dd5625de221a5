'use strict'

// A Redis user without a permission polylock needs (tests/conformance/permission.json): Node
// rejects with code ERR_PERMISSION and the core's message, the same in every language.

const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { after, before, test } = require('node:test')

const { Client } = require('..')
const { startRedis } = require('./redis.js')

const CASE = JSON.parse(
  fs.readFileSync(path.join(__dirname, '..', '..', 'tests', 'conformance', 'permission.json'), 'utf8'),
)

let redis
before(async () => {
  redis = await startRedis()
})
after(async () => {
  await redis?.stop()
})

test('a user without a permission gets ERR_PERMISSION with the core message', async () => {
  assert.equal(CASE.kind, 'Permission')
  assert.equal(await redis.command('ACL', 'SETUSER', 'conformance_node', 'on', '>secret', ...CASE.user_rule), 'OK')
  const client = await Client.connect(`redis://conformance_node:secret@127.0.0.1:${redis.port}`)
  try {
    const lock = client.lock(CASE.lock)
    await assert.rejects(lock.acquire({ waitMs: 0 }), { code: 'ERR_PERMISSION', message: CASE.message })
    assert.equal(lock.isHeld(), false)
  } finally {
    await client.close()
  }
})
