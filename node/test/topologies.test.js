'use strict'

// The test kit's multi-server topologies work, as ioredis' own Cluster and sentinel clients
// see them: each is started once and taken through its faults in order.

const assert = require('node:assert/strict')
const { after, before, describe, test } = require('node:test')

const Redis = require('ioredis')

const { startMany } = require('./redis')
const { RedisCluster } = require('./redis-cluster')
const { RedisSentinel } = require('./redis-sentinel')

/**
 * Writes `key` on the primary `server` and waits until `replicas` replicas have it, so that a
 * failover right after cannot lose it.
 * @param {import('./redis').RedisServer} server
 */
async function writeReplicated(server, key, value, replicas) {
  await server.command('SET', key, value)
  assert.equal(await server.command('WAIT', replicas, 5000), replicas)
}

describe('cluster', () => {
  /** @type {RedisCluster} */
  let cluster
  /** @type {import('ioredis').Cluster} */
  let client
  before(async () => {
    cluster = await RedisCluster.start()
    client = new Redis.Cluster(cluster.ports().map((port) => ({ host: '127.0.0.1', port })))
    client.on('error', () => {}) // failures reach the test as rejected commands
  })
  after(async () => {
    client?.disconnect()
    await cluster?.stop()
  })

  test('serves through a failover, a slot migration and a killed primary', async () => {
    assert.equal((await cluster.nodes()).length, 6)
    assert.equal((await cluster.primaries()).length, 3)
    assert.equal((await cluster.replicas()).length, 3)
    assert.match(cluster.url, /^redis\+cluster:\/\/(127\.0\.0\.1:\d+,){5}127\.0\.0\.1:\d+$/)
    await client.set('{failover}key', 'before')
    assert.equal(await client.get('{failover}key'), 'before')

    // A manual failover: the replica serves the slot; the client follows the MOVED.
    const oldPrimary = await cluster.primaryForKey('{failover}key')
    const replica = await cluster.replicaOf(oldPrimary)
    await cluster.failover(replica)
    assert.equal(await cluster.primaryForKey('{failover}key'), replica)
    const demoted = (await cluster.nodes()).find((node) => node.port === oldPrimary)
    assert.deepEqual([demoted?.role, demoted?.primaryPort], ['replica', replica])
    assert.equal(await client.get('{failover}key'), 'before')
    await client.set('{failover}key', 'after')
    assert.equal(await cluster.server(replica).command('GET', '{failover}key'), 'after')

    // A live slot migration moves the key; the client still reads it.
    await client.set('{moving}key', 'moved')
    const slot = await cluster.slotForKey('{moving}key')
    const source = await cluster.primaryForSlot(slot)
    const target = (await cluster.primaries()).find((port) => port !== source)
    assert.ok(target !== undefined)
    await cluster.migrateSlot(slot, target)
    assert.equal(await cluster.primaryForSlot(slot), target)
    assert.equal(await cluster.server(target).command('GET', '{moving}key'), 'moved')
    assert.equal(await client.get('{moving}key'), 'moved')

    // A killed primary: its replica takes over with the data; the client finds it.
    const doomed = await cluster.primaryForKey('{killed}key')
    const heir = await cluster.replicaOf(doomed)
    await writeReplicated(cluster.server(doomed), '{killed}key', 'kept', 1)
    await cluster.kill(doomed)
    assert.equal(await cluster.primaryForKey('{killed}key'), heir)
    assert.ok((await cluster.nodes()).some((node) => node.port === doomed && node.failed))
    assert.equal(await client.get('{killed}key'), 'kept')
    await client.set('{killed}key', 'rewritten')

    // Restarted, the killed node rejoins as a replica of its heir.
    await cluster.restart(doomed)
    const rejoined = (await cluster.nodes()).find((node) => node.port === doomed)
    assert.deepEqual([rejoined?.role, rejoined?.primaryPort], ['replica', heir])
  })
})

describe('sentinel', () => {
  /** @type {RedisSentinel} */
  let deployment
  /** @type {Redis} */
  let client
  before(async () => {
    deployment = await RedisSentinel.start()
    client = new Redis({
      sentinels: deployment.sentinelAddresses(),
      name: deployment.masterName,
      // ioredis' documented way to follow a failover: a write refused by the demoted primary
      // (READONLY) makes it reconnect, asking the sentinels for the primary, and resend.
      reconnectOnError: (error) => (error.message.startsWith('READONLY') ? 2 : false),
    })
    client.on('error', () => {}) // failures reach the test as rejected commands
  })
  after(async () => {
    client?.disconnect()
    await deployment?.stop()
  })

  test('follows a failover and a killed primary', async () => {
    const firstPrimary = await deployment.primary()
    assert.equal((await deployment.replicas()).length, 2)
    assert.equal(deployment.sentinels.length, 3)
    assert.match(deployment.url, new RegExp(`^redis\\+sentinel://(127\\.0\\.0\\.1:\\d+,){2}127\\.0\\.0\\.1:\\d+/${deployment.masterName}$`))
    await client.set('key', 'before')
    assert.equal(await client.get('key'), 'before')

    await writeReplicated(deployment.server(firstPrimary), 'key', 'before', 2)
    const secondPrimary = await deployment.failover()
    assert.notEqual(secondPrimary, firstPrimary)
    assert.ok((await deployment.replicas()).includes(firstPrimary), 'the old primary is a replica now')
    assert.equal((await deployment.server(secondPrimary).info('replication')).role, 'master')
    assert.equal(await client.get('key'), 'before')
    await client.set('key', 'after')
    assert.equal(await deployment.server(secondPrimary).command('GET', 'key'), 'after')

    await writeReplicated(deployment.server(secondPrimary), 'key', 'after', 2)
    const thirdPrimary = await deployment.killPrimary()
    assert.notEqual(thirdPrimary, secondPrimary)
    assert.equal((await deployment.replicas()).length, 1)
    assert.equal(await client.get('key'), 'after')
    await client.set('key', 'last')
    assert.equal(await deployment.server(thirdPrimary).command('GET', 'key'), 'last')
  })
})

test('startMany starts independent servers', async () => {
  const servers = await startMany(3)
  try {
    for (const [index, server] of servers.entries()) await server.command('SET', 'k', index)
    assert.deepEqual(await Promise.all(servers.map((server) => server.command('GET', 'k'))), ['0', '1', '2'])
  } finally {
    await Promise.all(servers.map((server) => server.stop()))
  }
})
