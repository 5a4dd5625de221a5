'use strict'

// A Redis Cluster of real servers (`polylock-testkit up cluster` through redis.js): N primaries
// with R replicas each, created with `redis-cli --cluster create`, and the faults a test needs: killing a node (its
// replica takes over), a manual failover, a live slot migration. Nodes are named by port; every
// change waits until all running nodes agree.

const { Deployment, NotYet, serverArguments, tlsArguments, waitFor } = require('./redis')

// Beside the launcher's own cluster arguments (validity factor 0: any replica may take over
// however long it was cut off): a 2 s node timeout replaces a killed primary within a few
// seconds yet does not fail a live node on a busy machine; no replica migration keeps the
// layout a test set up; a full sync starts at once.
const NODE_ARGS = ['--cluster-node-timeout', '2000', '--cluster-allow-replica-migration', 'no',
  '--repl-diskless-sync-delay', '0']

/**
 * One node as the cluster sees it (a line of CLUSTER NODES).
 * @typedef {object} ClusterNode
 * @property {number} port
 * @property {string} id
 * @property {'primary' | 'replica'} role
 * @property {number | undefined} primaryPort the primary a replica follows
 * @property {string[]} slots ranges as CLUSTER NODES writes them: '0-5460', '7000'
 * @property {boolean} failed the cluster agreed that it is down (flag `fail`)
 */

/** @param {ClusterNode} node @param {number} slot */
function servesSlot(node, slot) {
  return node.slots.some((range) => {
    const [first, last = first] = range.split('-').map(Number)
    return first <= slot && slot <= last
  })
}

class RedisCluster {
  /** @param {import('./redis').Deployment} deployment */
  constructor(deployment) {
    this.deployment = deployment
    this.servers = deployment.servers
    /** Ports of the nodes killed by `kill` (and not restarted). @type {Set<number>} */
    this.killed = new Set()
  }

  /**
   * `primaries` primaries (3 or more) with `replicasPerPrimary` replicas each; resolves once
   * every node reports cluster_state:ok, all agree on the slot map and every replica replicates.
   * With `tlsDir` (makeTlsFiles) every node also serves TLS (`tlsUrl`), the cluster bus and
   * replication use TLS, and TLS clients are told the TLS ports; client certificates are
   * required when `tlsAuthClients`.
   */
  static async start({ primaries = 3, replicasPerPrimary = 1, tlsDir = undefined, tlsAuthClients = false } = {}) {
    if (primaries < 3) throw new Error('redis-cli --cluster create needs 3 primaries or more')
    const tls = tlsDir === undefined ? [] : tlsArguments(tlsDir, tlsAuthClients)
    const cluster = new RedisCluster(await Deployment.up(['cluster', `--primaries=${primaries}`,
      `--replicas=${replicasPerPrimary}`, ...tls, ...serverArguments(NODE_ARGS)]))
    try {
      await waitFor(`a new cluster of ${primaries} primaries with ${replicasPerPrimary} replicas each`, async () => {
        const nodes = await cluster.settled()
        const primaryPorts = nodes.filter((node) => node.role === 'primary').map((node) => node.port)
        const complete = primaryPorts.length === primaries && primaryPorts.every((port) =>
          nodes.filter((node) => node.primaryPort === port).length === replicasPerPrimary)
        if (!complete) throw new NotYet(`layout ${JSON.stringify(nodes)}`)
      })
    } catch (error) {
      await cluster.stop()
      throw error
    }
    return cluster
  }

  /** Kills every node and removes their directories. */
  async stop() {
    await this.deployment.stop()
  }

  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,...`: every running node as a seed. */
  get url() {
    return `redis+cluster://${this.ports().map((port) => `127.0.0.1:${port}`).join(',')}`
  }

  /** `rediss+cluster://...`: every running node's TLS port (started with `tlsDir`). */
  get tlsUrl() {
    return `rediss+cluster://${this.liveServers().map((server) => `127.0.0.1:${server.tlsPort}`).join(',')}`
  }

  /** Ports of the running nodes (seeds for ioredis' Cluster). */
  ports() {
    return this.liveServers().map((server) => server.port)
  }

  /** The nodes as a running node sees them (killed ones included, marked `failed`). */
  async nodes() {
    return parseNodes(/** @type {string} */ (await this.liveServers()[0].command('CLUSTER', 'NODES')))
  }

  async primaries() {
    return (await this.nodes()).filter((node) => node.role === 'primary' && !this.killed.has(node.port))
      .map((node) => node.port)
  }

  async replicas() {
    return (await this.nodes()).filter((node) => node.role === 'replica' && !this.killed.has(node.port))
      .map((node) => node.port)
  }

  /** The node on `port` (for commands, kill_clients...). @param {number} port */
  server(port) {
    const server = this.servers.find((candidate) => candidate.port === port)
    if (server === undefined) throw new Error(`no cluster node on port ${port}`)
    return server
  }

  /** @param {string} key */
  async slotForKey(key) {
    return Number(await this.liveServers()[0].command('CLUSTER', 'KEYSLOT', key))
  }

  /** @param {string} key */
  async primaryForKey(key) {
    return this.primaryForSlot(await this.slotForKey(key))
  }

  /** @param {number} slot */
  async primaryForSlot(slot) {
    const nodes = await this.nodes()
    const owner = nodes.find((node) => node.role === 'primary' && !node.failed && servesSlot(node, slot))
    if (owner === undefined) throw new Error(`no primary serves slot ${slot}: ${JSON.stringify(nodes)}`)
    return owner.port
  }

  /** The port of a running replica of `primary`. @param {number} primary */
  async replicaOf(primary) {
    const nodes = await this.nodes()
    const replica = nodes.find((node) => node.primaryPort === primary && !this.killed.has(node.port))
    if (replica === undefined) throw new Error(`primary ${primary} has no running replica: ${JSON.stringify(nodes)}`)
    return replica.port
  }

  /**
   * Kills the node as a crash would; waits until the cluster marks it failed, a replica has
   * taken over its slots if it was a primary, and the cluster is ok again.
   * @param {number} port
   */
  async kill(port) {
    await this.server(port).kill()
    this.killed.add(port)
    await waitFor(`the cluster to mark node ${port} failed and replace it if it was a primary`, () => this.settled())
  }

  /**
   * Starts a killed node again with its nodes.conf: it rejoins (a former primary as a replica
   * of the node that took over). Waits until the cluster agrees.
   * @param {number} port
   */
  async restart(port) {
    await this.server(port).restart()
    this.killed.delete(port)
    await waitFor(`restarted node ${port} to rejoin`, () => this.settled())
  }

  /**
   * CLUSTER FAILOVER sent to `replica`: waits until it is a primary, its old primary (if
   * running) replicates from it, and the cluster agrees.
   * @param {number} replica
   */
  async failover(replica) {
    const oldPrimary = (await this.nodes()).find((node) => node.port === replica)?.primaryPort
    if (oldPrimary === undefined) throw new Error(`node ${replica} is not a replica`)
    await this.server(replica).command('CLUSTER', 'FAILOVER')
    await waitFor(`replica ${replica} to take over from primary ${oldPrimary}`, async () => {
      const nodes = await this.settled()
      const promoted = nodes.find((node) => node.port === replica)?.role === 'primary'
      const demoted = this.killed.has(oldPrimary) ||
        nodes.find((node) => node.port === oldPrimary)?.primaryPort === replica
      if (!(promoted && demoted)) throw new NotYet(JSON.stringify(nodes))
    })
  }

  /**
   * Moves `slot` with its keys to primary `to` while the cluster serves it, as
   * `redis-cli --cluster reshard` does: IMPORTING on the target, MIGRATING on the source,
   * MIGRATE of every key, then SETSLOT NODE on every primary. Waits until all agree.
   * @param {number} slot
   * @param {number} to
   */
  async migrateSlot(slot, to) {
    await this.waitUntilSettled()
    const source = await this.primaryForSlot(slot)
    if (source === to) return
    const ids = new Map((await this.nodes()).filter((node) => node.role === 'primary')
      .map((node) => [node.port, node.id]))
    await this.server(to).command('CLUSTER', 'SETSLOT', slot, 'IMPORTING', ids.get(source))
    await this.server(source).command('CLUSTER', 'SETSLOT', slot, 'MIGRATING', ids.get(to))
    for (;;) {
      const keys = /** @type {string[]} */ (await this.server(source).command('CLUSTER', 'GETKEYSINSLOT', slot, 100))
      if (keys.length === 0) break
      await this.server(source).command('MIGRATE', '127.0.0.1', to, '', 0, 5000, 'KEYS', ...keys)
    }
    // The target first, so that it owns the slot before the source redirects to it.
    const others = (await this.primaries()).filter((port) => port !== to && port !== source)
    for (const primary of [to, source, ...others]) {
      await this.server(primary).command('CLUSTER', 'SETSLOT', slot, 'NODE', ids.get(to))
    }
    await waitFor(`the cluster to agree that ${to} serves slot ${slot}`, async () => {
      const owners = (await this.settled()).filter((node) => node.role === 'primary' && servesSlot(node, slot))
        .map((node) => node.port)
      if (owners.length !== 1 || owners[0] !== to) throw new NotYet(`slot ${slot} is served by ${owners}`)
    })
  }

  /**
   * Waits until every running node reports cluster_state:ok, all see the same nodes, roles
   * and slots (killed nodes marked failed, nothing in handshake or migration), and every
   * running replica's link to its primary is up.
   */
  async waitUntilSettled() {
    await waitFor('the cluster to agree', () => this.settled())
  }

  liveServers() {
    return this.servers.filter((server) => !this.killed.has(server.port))
  }

  /** The agreed nodes, or throws NotYet with what disagrees. @returns {Promise<ClusterNode[]>} */
  async settled() {
    /** @type {[number, string] | undefined} */
    let agreed
    for (const server of this.liveServers()) {
      const info = /** @type {string} */ (await server.command('CLUSTER', 'INFO'))
      if (!info.split('\r\n').includes('cluster_state:ok')) throw new NotYet(`node ${server.port} is not ok: ${info}`)
      const view = comparableView(/** @type {string} */ (await server.command('CLUSTER', 'NODES')))
      if (agreed === undefined) agreed = [server.port, view]
      else if (agreed[1] !== view) {
        throw new NotYet(`nodes ${agreed[0]} and ${server.port} disagree:\n${agreed[1]}\n-- versus --\n${view}`)
      }
    }
    if (agreed === undefined) throw new Error('every node was killed')
    const nodes = parseNodes(agreed[1])
    for (const node of nodes) {
      const killed = this.killed.has(node.port)
      if (node.failed !== killed) {
        throw new NotYet(`node ${node.port} is ${killed ? 'killed' : 'running'} yet marked ` +
          `${node.failed ? 'failed' : 'not failed'}: ${agreed[1]}`)
      }
      if (node.role === 'replica' && !killed) {
        const link = await this.server(node.port).info('replication')
        if (link.master_link_status !== 'up') throw new NotYet(`replica ${node.port} is not linked: ${JSON.stringify(link)}`)
      }
    }
    const missing = this.ports().filter((port) => !nodes.some((node) => node.port === port))
    if (missing.length > 0) throw new NotYet(`nodes ${missing} are missing: ${agreed[1]}`)
    return nodes
  }
}

/**
 * CLUSTER NODES reduced to what all nodes must agree on, one sorted line per node, in the same
 * columns (so parseNodes reads it) with those each node fills in for itself (ping times, epoch,
 * link state) blanked. NotYet while a node is being met or only suspected down (`fail?`), or a
 * slot is migrating.
 * @param {string} text
 */
function comparableView(text) {
  const lines = []
  for (const line of text.split('\n')) {
    const fields = line.trim().split(/\s+/)
    if (fields[0] === '') continue
    const flags = fields[2].split(',').filter((flag) => flag !== 'myself')
    const unsettled = flags.find((flag) => ['handshake', 'noaddr', 'fail?'].includes(flag))
    if (unsettled !== undefined) throw new NotYet(`a node is in state ${unsettled}: ${line}`)
    if (fields.slice(8).some((slot) => slot.startsWith('['))) throw new NotYet(`a slot is migrating: ${line}`)
    lines.push([fields[0], fields[1], flags.join(','), fields[3], '- - - -', ...fields.slice(8)].join(' '))
  }
  return lines.sort().join('\n')
}

/** @param {string} text @returns {ClusterNode[]} */
function parseNodes(text) {
  const rows = text.split('\n').map((line) => line.trim().split(/\s+/)).filter((fields) => fields[0] !== '')
  const portOf = new Map(rows.map((fields) => [fields[0], Number(fields[1].split('@')[0].split(':').pop())]))
  return rows.map((fields) => {
    const flags = fields[2].split(',')
    const role = flags.includes('master') ? 'primary' : 'replica'
    return {
      port: /** @type {number} */ (portOf.get(fields[0])),
      id: fields[0],
      role,
      primaryPort: role === 'replica' ? portOf.get(fields[3]) : undefined,
      slots: fields.slice(8),
      failed: flags.includes('fail'),
    }
  })
}

module.exports = { RedisCluster, servesSlot }
