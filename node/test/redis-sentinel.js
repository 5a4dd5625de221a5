'use strict'

// A Sentinel deployment of real servers (`polylock-testkit up sentinel` through redis.js): one
// primary, its replicas and the sentinels monitoring them (down after 1 s). Failovers go through
// the sentinels; servers are named by port.

const { Deployment, NotYet, serverArguments, waitFor } = require('./redis')

const MASTER_NAME = 'polylock-primary'

// Any server may become the primary: each starts a full sync at once, not after 5 s.
const DATA_ARGS = ['--repl-diskless-sync-delay', '0']

/**
 * A SENTINEL reply describing one instance (a flat list of pairs) as an object.
 * @param {unknown} reply
 * @returns {Record<string, string>}
 */
function asObject(reply) {
  const items = /** @type {string[]} */ (reply)
  /** @type {Record<string, string>} */
  const fields = {}
  for (let index = 0; index + 1 < items.length; index += 2) fields[items[index]] = items[index + 1]
  return fields
}

class RedisSentinel {
  /** @param {import('./redis').Deployment} deployment */
  constructor(deployment) {
    this.deployment = deployment
    /** The primary and its replicas. @type {import('./redis').RedisServer[]} */
    this.data = deployment.servers
    /** @type {import('./redis').RedisServer[]} */
    this.sentinels = deployment.sentinels
    /** Ports of the servers killed by `killPrimary`. @type {Set<number>} */
    this.killed = new Set()
    this.masterName = MASTER_NAME
  }

  /**
   * A primary with `replicas` replicas and `sentinels` sentinels (quorum: a majority); resolves
   * once the replicas are in sync and every sentinel knows every replica and the other
   * sentinels.
   */
  static async start({ replicas = 2, sentinels = 3 } = {}) {
    const deployment = new RedisSentinel(await Deployment.up(['sentinel', `--replicas=${replicas}`,
      `--sentinels=${sentinels}`, ...serverArguments(DATA_ARGS)]))
    try {
      await deployment.waitUntilSettled()
    } catch (error) {
      await deployment.stop()
      throw error
    }
    return deployment
  }

  /** Kills every process and removes their directories. */
  async stop() {
    await this.deployment.stop()
  }

  /** `redis+sentinel://127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3/<master name>`. */
  get url() {
    return `redis+sentinel://${this.sentinels.map((sentinel) => `127.0.0.1:${sentinel.port}`).join(',')}/${MASTER_NAME}`
  }

  /** `{host, port}` of every sentinel, as ioredis' `sentinels` option takes them. */
  sentinelAddresses() {
    return this.sentinels.map((sentinel) => ({ host: '127.0.0.1', port: sentinel.port }))
  }

  /** The port of the current primary, as the first sentinel that answers reports it. */
  async primary() {
    for (const sentinel of this.sentinels) {
      try {
        return await this.primaryAccordingTo(sentinel)
      } catch {
        // ask the next one
      }
    }
    throw new Error('no sentinel names a primary')
  }

  /** Ports of the running servers that are not the primary. */
  async replicas() {
    const primary = await this.primary()
    return this.liveData().map((server) => server.port).filter((port) => port !== primary)
  }

  /** The primary or replica on `port`. @param {number} port */
  server(port) {
    const server = this.data.find((candidate) => candidate.port === port)
    if (server === undefined) throw new Error(`no primary or replica on port ${port}`)
    return server
  }

  /**
   * SENTINEL FAILOVER: waits until the sentinels name a new primary, it answers as one, and
   * the old primary and the other replicas replicate from it. Resolves to its port.
   */
  async failover() {
    const oldPrimary = await this.primary()
    await this.sentinels[0].command('SENTINEL', 'FAILOVER', MASTER_NAME)
    return this.waitForNewPrimary(oldPrimary, 'a SENTINEL FAILOVER')
  }

  /**
   * Kills the primary as a crash would; waits until the sentinels have promoted a replica and
   * the other replicas replicate from it. Resolves to the new primary's port.
   */
  async killPrimary() {
    const oldPrimary = await this.primary()
    await this.server(oldPrimary).kill()
    this.killed.add(oldPrimary)
    return this.waitForNewPrimary(oldPrimary, 'the primary was killed')
  }

  /**
   * Waits until every sentinel names the same running primary, which answers as one with
   * every other running server as its replica (link up, not syncing), and every sentinel
   * knows those replicas as healthy and knows the other sentinels. Resolves to the primary.
   */
  waitUntilSettled() {
    return waitFor('the sentinels and replicas to agree on the primary', () => this.settled())
  }

  /** @param {number} oldPrimary @param {string} after */
  waitForNewPrimary(oldPrimary, after) {
    return waitFor(`a new primary after ${after} (it was ${oldPrimary})`, async () => {
      await this.demoteOldPrimary(oldPrimary)
      const primary = await this.settled()
      if (primary === oldPrimary) throw new NotYet(`still ${oldPrimary}`)
      return primary
    })
  }

  /**
   * Once a sentinel names a new primary, makes a still running old primary its replica. The
   * sentinels would do the same, but only some 10-20 s later (they re-check a former primary's
   * role every 10 s, after 8 s of grace).
   * @param {number} oldPrimary
   */
  async demoteOldPrimary(oldPrimary) {
    if (this.killed.has(oldPrimary)) return
    for (const sentinel of this.sentinels) {
      let named
      try {
        named = await this.primaryAccordingTo(sentinel)
      } catch {
        continue
      }
      if (named !== oldPrimary) {
        const old = this.server(oldPrimary)
        if ((await old.info('replication')).role === 'master') await old.command('REPLICAOF', '127.0.0.1', named)
        return
      }
    }
  }

  /** The agreed primary, or throws NotYet with what disagrees. @returns {Promise<number>} */
  async settled() {
    /** @type {number | undefined} */
    let primary
    for (const sentinel of this.sentinels) {
      const named = await this.primaryAccordingTo(sentinel)
      if (primary === undefined) primary = named
      else if (primary !== named) throw new NotYet(`sentinels disagree: ${primary} versus ${named} (sentinel ${sentinel.port})`)
      const master = asObject(await sentinel.command('SENTINEL', 'MASTER', MASTER_NAME))
      if (master.flags !== 'master') throw new NotYet(`sentinel ${sentinel.port} sees the primary as ${JSON.stringify(master)}`)
      const known = /** @type {unknown[]} */ (await sentinel.command('SENTINEL', 'REPLICAS', MASTER_NAME)).map(asObject)
      // Whom a replica follows is checked on the replica itself below: a sentinel refreshes
      // that only every 10 s.
      const healthy = new Set(known.filter((entry) => entry.flags === 'slave').map((entry) => Number(entry.port)))
      for (const replica of this.liveData()) {
        if (replica.port !== named && !healthy.has(replica.port)) {
          throw new NotYet(`sentinel ${sentinel.port} does not know replica ${replica.port} as healthy: ${JSON.stringify(known)}`)
        }
      }
      const peers = /** @type {unknown[]} */ (await sentinel.command('SENTINEL', 'SENTINELS', MASTER_NAME))
      if (peers.length + 1 !== this.sentinels.length) throw new NotYet(`sentinel ${sentinel.port} knows ${peers.length} other sentinels`)
    }
    if (primary === undefined) throw new Error('there are no sentinels')
    if (this.killed.has(primary)) throw new NotYet(`the sentinels still name the killed ${primary}`)
    const role = await this.server(primary).info('replication')
    const replicas = this.liveData().length - 1
    if (role.role !== 'master' || role.connected_slaves !== String(replicas)) {
      throw new NotYet(`primary ${primary} is not a primary of ${replicas} replicas: ${JSON.stringify(role)}`)
    }
    for (const replica of this.liveData()) {
      if (replica.port === primary) continue
      const link = await replica.info('replication')
      const following = link.role === 'slave' && link.master_port === String(primary) &&
        link.master_link_status === 'up' && link.master_sync_in_progress === '0'
      if (!following) throw new NotYet(`${replica.port} does not replicate from ${primary}: ${JSON.stringify(link)}`)
    }
    return primary
  }

  /** @param {import('./redis').RedisServer} sentinel */
  async primaryAccordingTo(sentinel) {
    const address = /** @type {string[] | null} */ (await sentinel.command('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME))
    if (address === null) throw new NotYet(`sentinel ${sentinel.port} names no primary`)
    return Number(address[1])
  }

  liveData() {
    return this.data.filter((server) => !this.killed.has(server.port))
  }
}

module.exports = { RedisSentinel, MASTER_NAME }
