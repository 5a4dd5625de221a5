'use strict'

// The install test of the packed tarballs (make test-dist-node), run from a directory where
// only they are installed: requires @polylock/polylock, then takes and releases a lock against a
// redis-server started by the Node test kit (node/test/redis.js, given by POLYLOCK_NODE_TESTKIT).

const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const polylock = require('@polylock/polylock')
const { startRedis } = require(process.env.POLYLOCK_NODE_TESTKIT)

async function main() {
  assert.match(require.resolve('@polylock/polylock'), /node_modules[\\/]@polylock[\\/]polylock[\\/]index\.js$/)
  const addon = require.resolve('@polylock/polylock-linux-x64-gnu')
  assert.match(addon, /node_modules[\\/]@polylock[\\/]polylock-linux-x64-gnu[\\/]polylock\.linux-x64-gnu\.node$/)
  // The old unscoped names belong to other people's packages: nothing may resolve them.
  for (const unscoped of ['polylock', 'polylock-linux-x64-gnu']) {
    assert.throws(() => require.resolve(unscoped), { code: 'MODULE_NOT_FOUND' }, unscoped)
  }
  const installed = path.dirname(require.resolve('@polylock/polylock'))
  assert.deepEqual(fs.readdirSync(installed).filter((file) => file.endsWith('.node')), [],
    'the main package carries no addon')

  // The otel entry point is packed; without its optional peer @opentelemetry/api it says so.
  assert.throws(() => require('@polylock/polylock/otel'), {
    code: 'MODULE_NOT_FOUND',
    message: '@polylock/polylock/otel needs the package @opentelemetry/api: npm install @opentelemetry/api',
  })

  const redis = await startRedis()
  try {
    const client = await polylock.Client.connect(redis.url)
    const lock = client.lock('dist:smoke', { waitMs: 1000, leaseMs: 10_000 })
    assert.equal(await lock.acquire(), true)
    const left = await lock.remainingLease()
    assert.ok(left > 0 && left <= 10_000, `remaining lease ${left}`)
    assert.equal(await client.lock('dist:smoke').acquire({ waitMs: 0 }), false)
    await lock.release()
    assert.equal(await lock.isLocked(), false)
    assert.equal(await lock.using(async () => 'ran'), 'ran')
    assert.deepEqual(await client.close(), [])
    console.log('smoke: took and released a lock through the installed packages')
  } finally {
    await redis.stop()
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
