'use strict'

// Real redis-server processes for the tests, started by the test kit's one launcher for every
// language, the Rust binary `polylock-testkit` (`up single|cluster|sentinel --json`, see
// docs/testing.md): on free loopback ports, without persistence; `kill`/`restart` lines go to
// its stdin, and closing its stdin (stop(), or this process dying) stops every server and
// removes their files. Commands go over ioredis. The multi-server topologies (redis-cluster.js,
// redis-sentinel.js) wrap `up cluster` and `up sentinel`. The launcher runs POLYLOCK_REDIS_SERVER
// (the server matrix points it at Redis 6.2, 8.2 or Valkey 8.1), else redis-server from PATH.

const { spawn } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const readline = require('node:readline')

const Redis = require('ioredis')

/** Built by the test build (`cargo build -p polylock-testkit --bins`), as the fault proxy is. */
const LAUNCHER = path.join(__dirname, '..', '..', 'target', 'debug', 'polylock-testkit')

/** The server binary the launcher runs, and the redis-cli that creates clusters. */
const SERVER_PROGRAM = process.env.POLYLOCK_REDIS_SERVER || 'redis-server'
const CLI_PROGRAM = process.env.POLYLOCK_REDIS_CLI || 'redis-cli'

/**
 * What SERVER_PROGRAM --version says: `{ name: 'redis', version: [7, 0, 15] }` or
 * `{ name: 'valkey', version: [8, 1, 8] }`.
 */
function serverBuild() {
  const line = require('node:child_process').execFileSync(SERVER_PROGRAM, ['--version'], { encoding: 'utf8' })
  const version = line.split(/\s+/).find((word) => word.startsWith('v=')).slice(2).split('.').map(Number)
  return { name: line.split(/\s+/)[0].toLowerCase(), version }
}

/**
 * SSUBSCRIBE/SPUBLISH came with Redis 7.0 (every Valkey has them); without them a cluster
 * client publishes with plain PUBLISH, which reaches every node (broadcast mode).
 */
function hasShardedPubsub() {
  const { name, version } = serverBuild()
  return name === 'valkey' || version[0] >= 7
}

/** A loopback port that is free now (a race with another process is retried by start). */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {net.AddressInfo} */ (server.address())
      server.close(() => resolve(port))
    })
  })
}

/**
 * An ioredis client for a loopback port that gives up on connecting or on a reply after 5 s,
 * and neither reconnects nor retries, so a test sees every failure. It connects with its
 * first command (or `connect()`).
 * @param {number} port
 * @param {import('ioredis').RedisOptions} [options] overrides
 */
function connectRedis(port, options = {}) {
  const client = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    connectTimeout: 5000,
    commandTimeout: 5000,
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    ...options,
  })
  // Failures reach the test as rejected commands; without a listener ioredis would also log
  // each one as an unhandled error event.
  client.on('error', () => {})
  return client
}

/**
 * How long a topology wait (cluster agreement, a failover, sentinel discovery) may take. A
 * Sentinel whose timer saw the process stall (a loaded machine) enters TILT mode and does
 * nothing for 30 s, a forced failover included: the bound leaves room for one TILT.
 */
const WAIT_TIMEOUT_MS = 90_000

/** Thrown by a `waitFor` check: the state is not reached yet; the message says what was seen. */
class NotYet extends Error {}

/**
 * Calls `check` every 50 ms until it resolves (a throw, e.g. NotYet or a refused connection,
 * means "not yet"), for at most WAIT_TIMEOUT_MS; then rejects with `what` it was waiting for
 * and what it last saw.
 * @template T
 * @param {string} what
 * @param {() => Promise<T>} check
 * @returns {Promise<T>}
 */
async function waitFor(what, check) {
  const deadline = Date.now() + WAIT_TIMEOUT_MS
  for (;;) {
    try {
      return await check()
    } catch (seen) {
      if (Date.now() >= deadline) {
        const text = seen instanceof Error ? seen.message : String(seen)
        throw new Error(`gave up after ${WAIT_TIMEOUT_MS / 1000} s waiting for ${what}; last saw: ${text}`)
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/**
 * One `polylock-testkit up ...` process and the servers it started: `servers` (data nodes, in
 * the launcher's order) and `sentinels`. `stop()` closes its stdin, on which it stops every
 * server and removes their files; it does the same if this process dies.
 */
class Deployment {
  /**
   * @param {string[]} args what follows `up`: `single`, `cluster --replicas=0`, ...
   * @returns {Promise<Deployment>}
   */
  static async up(args) {
    try {
      fs.accessSync(LAUNCHER, fs.constants.X_OK)
    } catch {
      throw new Error(`${LAUNCHER} is missing: run \`cargo build -p polylock-testkit --bins\` (make test-node does)`)
    }
    const deployment = new Deployment(spawn(LAUNCHER, ['up', ...args, '--json'], { stdio: ['pipe', 'pipe', 'inherit'] }))
    let first
    try {
      first = await deployment.nextLine()
    } catch {
      throw new Error(`polylock-testkit up ${args.join(' ')} failed`)
    }
    deployment.description = JSON.parse(first)
    for (const node of deployment.description.nodes) {
      const server = new RedisServer(deployment, node)
      if (node.role === 'sentinel') deployment.sentinels.push(server)
      else deployment.servers.push(server)
    }
    return deployment
  }

  /** @param {import('node:child_process').ChildProcessWithoutNullStreams} child */
  constructor(child) {
    this.child = child
    /** @type {any} the JSON line the launcher printed */
    this.description = undefined
    /** @type {RedisServer[]} */
    this.servers = []
    /** @type {RedisServer[]} */
    this.sentinels = []
    /** Replies come back in the order control lines were sent: one waiting callback per line. */
    this.waiting = []
    this.exited = new Promise((resolve) => child.once('exit', resolve))
    child.stdin.on('error', () => {})
    readline.createInterface({ input: child.stdout }).on('line', (line) => {
      this.waiting.shift()?.resolve(line)
    })
    child.once('exit', (code, signal) => {
      for (const waiter of this.waiting.splice(0)) {
        waiter.reject(new Error(`polylock-testkit exited (${code ?? signal})`))
      }
    })
  }

  get url() {
    return this.description.url
  }

  /**
   * Sends one control line (`kill node0`, `restart 6379`, `status`); resolves to its JSON reply.
   * @param {string} line
   */
  async control(line) {
    const answer = this.nextLine()
    this.child.stdin.write(`${line}\n`)
    const reply = JSON.parse(await answer)
    if (!reply.ok) throw new Error(`polylock-testkit: ${line}: ${reply.error}`)
    return reply
  }

  /** Closes the launcher's stdin (its cue to stop every server) and waits for it to exit. */
  async stop() {
    for (const server of [...this.servers, ...this.sentinels]) server.disconnect()
    this.child.stdin.end()
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 30_000)
    await this.exited
    clearTimeout(timer)
  }

  nextLine() {
    if (this.child.exitCode !== null || this.child.signalCode !== null) {
      return Promise.reject(new Error('polylock-testkit is not running'))
    }
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }))
  }
}

/** One server of a deployment: its ports, commands over ioredis, `kill`/`restart` through the launcher. */
class RedisServer {
  /**
   * @param {Deployment} deployment
   * @param {any} node its entry in the launcher's JSON
   */
  constructor(deployment, node) {
    this.deployment = deployment
    this.name = node.name
    this.port = node.port
    /** The port it also serves TLS on (`startRedisTls`). @type {number | undefined} */
    this.tlsPort = node.tls_port ?? undefined
    /** @type {number | null} */
    this.pid = node.pid
    /** The connection `command` uses, opened on first use. @type {Redis | undefined} */
    this.client = undefined
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`
  }

  /** The `rediss://` URL of a server started by `startRedisTls`. */
  get tlsUrl() {
    if (this.tlsPort === undefined) throw new Error('not started with startRedisTls')
    return `rediss://127.0.0.1:${this.tlsPort}`
  }

  /**
   * Runs one command on this server's helper connection (opened again if it closed); resolves
   * to the reply as ioredis gives it: 'OK', a string for a bulk string, a number, null, an
   * array. Rejects on an error reply.
   */
  command(...args) {
    if (this.client === undefined || this.client.status === 'end') this.client = connectRedis(this.port)
    return this.client.call(...args)
  }

  /** The `field:value` lines of `INFO <section>`, as an object of strings. */
  async info(section) {
    const text = /** @type {string} */ (await this.command('INFO', section))
    /** @type {Record<string, string>} */
    const fields = {}
    for (const line of text.split('\r\n')) {
      const colon = line.indexOf(':')
      if (colon > 0) fields[line.slice(0, colon)] = line.slice(colon + 1)
    }
    return fields
  }

  get running() {
    return this.pid !== null
  }

  disconnect() {
    this.client?.disconnect()
    this.client = undefined
  }

  /** Kills the server at once, as a crash would. */
  async kill() {
    this.disconnect()
    this.pid = (await this.deployment.control(`kill ${this.name}`)).node.pid
  }

  /**
   * Kills the server and starts it again on its port with its arguments (its data is gone
   * unless its config keeps some, as a cluster node's nodes.conf).
   */
  async restart() {
    this.disconnect()
    this.pid = (await this.deployment.control(`restart ${this.name}`)).node.pid
  }

  /** Stops every server of its deployment (for a server of its own: this one); again is a no-op. */
  async stop() {
    await this.deployment.stop()
  }
}

/** `extra` server arguments as the launcher takes them (`--arg=--maxmemory`, `--arg=1mb`). */
function serverArguments(extra) {
  return extra.map((argument) => `--arg=${argument}`)
}

/**
 * Starts one redis-server of its own on a free port; stop it with stop().
 * @param {{extra?: string[]}} [options] extra `--option value` arguments
 */
async function startRedis({ extra = [] } = {}) {
  return (await Deployment.up(['single', ...serverArguments(extra)])).servers[0]
}

/**
 * Test certificates made with openssl into a new temporary directory by tests/tls/make-certs.sh
 * (the one generator the Rust, Python and Node test kits share): ca.crt, server.crt/key (for
 * 127.0.0.1 and localhost), client.crt/key, expired.crt/key, other-ca.crt. Returns the
 * directory; remove it with fs.rmSync(dir, { recursive: true }).
 */
function makeTlsFiles() {
  const { execFileSync } = require('node:child_process')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polylock-node-tls-'))
  execFileSync('sh', [path.join(__dirname, '..', '..', 'tests', 'tls', 'make-certs.sh'), dir])
  return dir
}

/** The launcher's options for TLS with the certificates of `tlsDir`. */
function tlsArguments(tlsDir, authClients) {
  return ['--tls', `--tls-dir=${tlsDir}`, ...(authClients ? ['--auth-clients'] : [])]
}

/**
 * A redis-server (as `startRedis`) that also serves TLS on a free port (`tlsUrl`) with the
 * certificate `cert` of `tlsDir`, trusting its CA for client certificates, which it requires
 * when `authClients`, with `extra` arguments. Its own outgoing TLS connections (cluster bus,
 * replication) present the client certificate. The plain port stays open for the kit's own
 * checks.
 * @param {string} tlsDir
 * @param {{cert?: string, authClients?: boolean, extra?: string[]}} [options]
 */
async function startRedisTls(tlsDir, { cert = 'server', authClients = false, extra = [] } = {}) {
  const args = ['single', ...tlsArguments(tlsDir, authClients), `--cert=${cert}`, ...serverArguments(extra)]
  return (await Deployment.up(args)).servers[0]
}

/**
 * `count` independent servers (e.g. for a RedLock over 3 or 5 masters); stop each with stop().
 * @param {number} count
 */
async function startMany(count) {
  return (await Deployment.up(['single', `--count=${count}`])).servers
}

/**
 * The set-up most test files share: one redis-server and one connected polylock Client for the
 * whole file, started before its tests and closed after them. `use(redis, client)` hands both
 * to the file's own variables.
 */
function serverAndClientPerFile(use) {
  const { after, before } = require('node:test')
  const { Client } = require('..')
  let redis
  let client
  before(async () => {
    redis = await startRedis()
    client = await Client.connect(redis.url)
    use(redis, client)
  })
  after(async () => {
    await client?.close()
    await redis?.stop()
  })
}

/** `fresh(what)`: a name no other test of this process uses (`<prefix>:<what>:<pid>:<n>`). */
function freshNames(prefix = 'node') {
  let names = 0
  return (what) => `${prefix}:${what}:${process.pid}:${(names += 1)}`
}

module.exports = {
  startRedis, startRedisTls, makeTlsFiles, startMany, freePort, connectRedis, serverAndClientPerFile, freshNames, waitFor, NotYet,
  RedisServer, Deployment, serverArguments, tlsArguments, SERVER_PROGRAM, CLI_PROGRAM, serverBuild, hasShardedPubsub,
}
