'use strict'

// syncReplicas on real servers: a primary with one replica (--replicaof), the same with the
// replica held still (CLIENT PAUSE ... ALL on a Redis 7 replica also stops it applying and
// acknowledging the primary's stream), and a primary whose WAIT is renamed away.

const assert = require('node:assert/strict')
const { afterEach, describe, test } = require('node:test')

const { Client } = require('..')
const { startRedis, freshNames } = require('./redis.js')

/** A primary sends its first full sync at once, not after the default 5 s wait for more replicas. */
const PRIMARY = ['--repl-diskless-sync-delay', '0']

const fresh = freshNames()
/** What each test started, stopped after it: servers and clients. */
let started = []

afterEach(async () => {
  for (const thing of started.reverse()) await (thing.close ?? thing.stop).call(thing)
  started = []
})

async function start(extraArgs) {
  const server = await startRedis({ extra: extraArgs })
  started.push(server)
  return server
}

async function connect(server, options) {
  const client = await Client.connect(server.url, options)
  started.push(client)
  return client
}

/** A replica of `primary`, once the primary counts it online (so ROLE lists it, WAIT waits for it). */
async function replicaOf(primary) {
  const replica = await start(['--replicaof', '127.0.0.1', String(primary.port)])
  const deadline = Date.now() + 20_000
  while (!(await primary.command('INFO', 'replication')).includes('state=online')) {
    assert.ok(Date.now() < deadline, `the replica on port ${replica.port} never came online`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return replica
}

const notSynced = (name) =>
  `lock '${name}' was acquired on the primary, but not all of its 1 replicas acknowledged it within ` +
  '200 ms, so a failover could hand it to a second holder; it was undone (sync_replicas)'

describe('syncReplicas', () => {
  test('an acquire resolves once the replica has the lock, a release once it dropped it', async () => {
    const primary = await start(PRIMARY)
    const replica = await replicaOf(primary)
    const client = await connect(primary, { syncReplicas: true })
    const name = fresh('synced')
    const lock = client.lock(name)

    assert.equal(await lock.acquire({ waitMs: 30_000 }), true)
    assert.equal(await replica.command('EXISTS', name), 1)
    await lock.release()
    assert.equal(await replica.command('EXISTS', name), 0)
  })

  test('an acquisition no replica acknowledged is undone and rejects with ERR_NOT_SYNCED', async () => {
    const primary = await start(PRIMARY)
    const replica = await replicaOf(primary)
    const client = await connect(primary, { syncReplicas: true, replicaSyncTimeoutMs: 200 })
    const name = fresh('unsynced')
    const lock = client.lock(name)

    assert.equal(await replica.command('CLIENT', 'PAUSE', '3000', 'ALL'), 'OK')
    await assert.rejects(lock.acquire({ waitMs: 0 }), { code: 'ERR_NOT_SYNCED', message: notSynced(name) })
    assert.equal(await primary.command('EXISTS', name), 0)
    assert.equal(lock.isHeld(), false)
  })

  test('a primary without replicas confirms nothing unless minReplicas is 0', async () => {
    // minReplicas (default 1): the acquisition cannot reach the one replica it must, so it is
    // undone; minReplicas: 0 trusts the primary's count (none: nothing to wait for).
    const primary = await start(PRIMARY)
    const name = fresh('no-replica')
    const strict = await connect(primary, { syncReplicas: true, replicaSyncTimeoutMs: 200 })
    const lock = strict.lock(name)
    await assert.rejects(lock.acquire({ waitMs: 0 }), { code: 'ERR_NOT_SYNCED', message: notSynced(name) })
    assert.equal(await primary.command('EXISTS', name), 0)
    assert.equal(lock.isHeld(), false)

    const trusting = await connect(primary, { syncReplicas: true, minReplicas: 0 })
    const other = trusting.lock(name)
    assert.equal(await other.acquire({ waitMs: 0 }), true)
    assert.equal(await primary.command('EXISTS', name), 1)
    await other.release()
    assert.equal(await primary.command('EXISTS', name), 0)
  })

  test('a server without WAIT turns it off and locks keep working', async () => {
    const primary = await start([...PRIMARY, '--rename-command', 'WAIT', ''])
    // A replica, so that ROLE counts one and the client does send WAIT (and is refused).
    await replicaOf(primary)
    const client = await connect(primary, { syncReplicas: true })
    const name = fresh('no-wait-command')
    const lock = client.lock(name)

    assert.equal(await lock.acquire({ waitMs: 0 }), true)
    assert.equal(await primary.command('EXISTS', name), 1)
    await lock.release()
    assert.equal(await primary.command('EXISTS', name), 0)
  })
})
