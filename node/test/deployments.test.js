'use strict'

// The cluster and Sentinel scenarios of core/tests/cluster.rs and sentinel.rs, driven from
// Node: a 3-primary cluster with a replica each (exclusion across slots, sharded wake-ups, a
// slot migrated while a lock is held and waited on, a primary killed), and Sentinel with
// 1 primary, 2 replicas and 3 sentinels (a failover while a lock is held and waited on, with
// replica sync).

const assert = require('node:assert/strict')
const { after, before, describe, test } = require('node:test')

const { Client } = require('..')
const { NotYet, hasShardedPubsub, waitFor } = require('./redis')
const { RedisCluster } = require('./redis-cluster')
const { RedisSentinel } = require('./redis-sentinel')

/** A waiter woken long before this lease would end was woken by a message, not by expiry. */
const LONG_LEASE_MS = 60_000
/** A lease that outlasts a failover; a hold kept past it was renewed on the new primary. */
const FAILOVER_WATCHDOG_MS = 6000

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Waits (the kit's bound) until `count()` reaches 1 or more: someone subscribed. */
async function subscribed(what, count) {
  await waitFor(what, async () => {
    const seen = await count()
    if (seen < 1) throw new NotYet(`${seen} subscribers`)
  })
}

const channel = (name) => `redisson_lock__channel:{${name}}`

/** Starts waiting for `lock` (up to the long lease); the promise resolves with the outcome. */
function startWaiting(lock) {
  const waiter = { settled: false }
  waiter.outcome = lock.acquire({ waitMs: LONG_LEASE_MS }).finally(() => { waiter.settled = true })
  return waiter
}

describe('Redis Cluster', () => {
  /** @type {RedisCluster} */
  let cluster
  const clients = []
  before(async () => { cluster = await RedisCluster.start() })
  after(async () => {
    for (const client of clients) client.close()
    await cluster?.stop()
  })
  const connect = async (options = {}) => {
    const client = await Client.connect(cluster.url, { responseTimeoutMs: 2000, ...options })
    clients.push(client)
    return client
  }
  // The waiters' subscriptions to the lock's channel: on Redis 7+ and Valkey shard ones
  // (SSUBSCRIBE) on the node `port` of its slot; on Redis 6.2, which has no sharded pub/sub,
  // plain ones (SUBSCRIBE) on any node (broadcast mode).
  const waiterSubscriptions = async (port, name) => {
    if (hasShardedPubsub()) return Number((await cluster.server(port).command('PUBSUB', 'SHARDNUMSUB', channel(name)))[1])
    let plain = 0
    for (const node of cluster.servers) {
      // A node a test killed counts nobody.
      plain += await node.command('PUBSUB', 'NUMSUB', channel(name)).then((reply) => Number(reply[1]), () => 0)
    }
    return plain
  }
  const exists = async (port, name) => Number(await cluster.server(port).command('EXISTS', name)) === 1

  test('locks exclude across slots and waiters wake by sharded messages', async () => {
    const holder = await connect()
    const contender = await connect()
    const byPrimary = new Map()
    for (let n = 0; byPrimary.size < 3; n += 1) {
      const name = `node:exclusion:${n}`
      const primary = await cluster.primaryForKey(name)
      if (!byPrimary.has(primary)) byPrimary.set(primary, name)
    }
    const held = []
    for (const [primary, name] of byPrimary) {
      const lock = holder.lock(name)
      assert.equal(await lock.acquire({ waitMs: 0 }), true)
      assert.ok(await exists(primary, name), `${name} is on the primary serving its slot`)
      assert.equal(await contender.lock(name).acquire({ waitMs: 0 }), false)
      held.push(lock)
    }
    const [primary, name] = [...byPrimary][0]
    const waiting = contender.lock(name)
    const waiter = startWaiting(waiting)
    await subscribed('an SSUBSCRIBE on the slot\'s primary (SUBSCRIBE on 6.2)', () => waiterSubscriptions(primary, name))
    assert.equal(waiter.settled, false)
    const releasedAt = Date.now()
    await held[0].release()
    assert.equal(await waiter.outcome, true)
    assert.ok(Date.now() - releasedAt < LONG_LEASE_MS / 2, 'woken by expiry, not by the message')
    await waiting.release()
    for (const lock of held.slice(1)) await lock.release()
  })

  test('a slot migrated while a lock is held and waited on', async () => {
    // A lease long enough for a loaded machine: what is checked is that a renewal lands on the
    // new node, which the test waits for.
    const holder = await connect({ watchdogTimeoutMs: FAILOVER_WATCHDOG_MS })
    const contender = await connect()
    const name = 'node:migrating'
    const lock = holder.lock(name)
    assert.equal(await lock.acquire({ waitMs: 0 }), true)
    const waiting = contender.lock(name)
    const waiter = startWaiting(waiting)
    const source = await cluster.primaryForKey(name)
    await subscribed('an SSUBSCRIBE on the source (SUBSCRIBE on 6.2)', () => waiterSubscriptions(source, name))
    const target = (await cluster.primaries()).find((port) => port !== source)

    await cluster.migrateSlot(await cluster.slotForKey(name), target)

    assert.ok(await exists(target, name))
    // The TTL only goes down unless a renewal sets it again: seen going up, the hold was renewed
    // on the new node.
    const pttl = async () => Number(await cluster.server(target).command('PTTL', name))
    const movedTtl = await pttl()
    await waitFor('a renewal of the lock on its new node', async () => {
      const ttl = await pttl()
      if (ttl <= movedTtl) throw new NotYet(`PTTL ${ttl} (${movedTtl} after the migration)`)
    })
    assert.equal(lock.isLost(), false, 'the hold was not renewed on the new node')
    assert.equal(waiter.settled, false, 'the waiter got a lock that is held')
    const releasedAt = Date.now()
    await lock.release()
    assert.equal(await waiter.outcome, true)
    assert.ok(Date.now() - releasedAt < LONG_LEASE_MS / 2, 'woken by expiry, not by the message')
    await waiting.release()
  })

  test('a killed primary is replaced by its replica and a replicated lock survives', async () => {
    // Replica sync: the acquisition resolves once the replica has it, so the promotion keeps it.
    const holder = await connect({ watchdogTimeoutMs: FAILOVER_WATCHDOG_MS, syncReplicas: true })
    const contender = await connect()
    const name = 'node:killed-primary'
    const lock = holder.lock(name)
    assert.equal(await lock.acquire({ waitMs: 0 }), true)
    const primary = await cluster.primaryForKey(name)
    const replica = await cluster.replicaOf(primary)

    await cluster.kill(primary)

    assert.equal(await cluster.primaryForKey(name), replica)
    assert.ok(await exists(replica, name))
    const other = contender.lock(name)
    assert.equal(await other.acquire({ waitMs: 0 }), false)
    await sleep(FAILOVER_WATCHDOG_MS + 1000)
    assert.equal(lock.isLost(), false, 'the hold was not renewed on the promoted replica')
    await lock.release()
    assert.equal(await other.acquire({ waitMs: 10_000 }), true)
    await other.release()
  })
})

describe('Sentinel', () => {
  test('with syncReplicas a lock held and waited on survives a failover', async () => {
    const sentinel = await RedisSentinel.start()
    const clients = []
    try {
      const connect = async (options) => {
        const client = await Client.connect(sentinel.url, { responseTimeoutMs: 2000, syncReplicas: true, ...options })
        clients.push(client)
        return client
      }
      const holder = await connect({ watchdogTimeoutMs: FAILOVER_WATCHDOG_MS })
      const contender = await connect({})
      const name = 'node:failover'
      const lock = holder.lock(name)
      assert.equal(await lock.acquire({ waitMs: 0 }), true)
      const waiting = contender.lock(name)
      const waiter = startWaiting(waiting)
      const old = await sentinel.primary()
      await subscribed('the waiter\'s SUBSCRIBE', async () =>
        Number((await sentinel.server(old).command('PUBSUB', 'NUMSUB', channel(name)))[1]))

      const promoted = await sentinel.failover()

      assert.notEqual(promoted, old)
      assert.equal(Number(await sentinel.server(promoted).command('EXISTS', name)), 1)
      await sleep(FAILOVER_WATCHDOG_MS + 1000)
      assert.equal(lock.isLost(), false, 'the hold was not renewed on the new primary')
      assert.equal(waiter.settled, false, 'a second holder after the failover')
      const releasedAt = Date.now()
      await lock.release()
      assert.equal(await waiter.outcome, true)
      assert.ok(Date.now() - releasedAt < LONG_LEASE_MS / 2, 'woken by expiry, not by the message')
      await waiting.release()
    } finally {
      for (const client of clients) client.close()
      await sentinel.stop()
    }
  })
})
