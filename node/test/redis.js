'use strict'

// Real redis-server processes for the tests: each on a free loopback port, in a temporary
// directory, without persistence, killed by stop(). Commands go over ioredis. The multi-server
// topologies (redis-cluster.js, redis-sentinel.js) are built of these servers. The binary is
// POLYLOCK_REDIS_SERVER (the server matrix points it at Redis 6.2, 8.2 or Valkey 8.1), else
// redis-server from PATH; a sentinel is that binary with --sentinel.

const { spawn } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

const Redis = require('ioredis')

/** The server binary every launcher runs, and the redis-cli that creates clusters. */
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

/** How long a topology wait (cluster agreement, a failover, sentinel discovery) may take. */
const WAIT_TIMEOUT_MS = 30_000

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

class RedisServer {
  /**
   * @param {number} port
   * @param {string} dir
   * @param {import('node:child_process').ChildProcess} child
   * @param {string[]} args everything after `redis-server` but the port, for `restart`
   */
  constructor(port, dir, child, args = []) {
    this.port = port
    this.dir = dir
    this.child = child
    this.args = args
    /** The connection `command` uses, opened on first use. @type {Redis | undefined} */
    this.client = undefined
    /** The port it also serves TLS on (`startRedisTls`). @type {number | undefined} */
    this.tlsPort = undefined
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
    return this.child.exitCode === null && this.child.signalCode === null
  }

  /** Kills the server at once, as a crash would (its directory stays, for `restart`). */
  async kill() {
    this.client?.disconnect()
    this.client = undefined
    if (this.running) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve))
      this.child.kill('SIGKILL')
      await exited
    }
  }

  /**
   * Kills the server and starts it again on its port with its arguments (its data is gone
   * unless its config keeps some, as a cluster node's nodes.conf).
   */
  async restart() {
    await this.kill()
    const deadline = Date.now() + 10_000
    for (;;) { // the port may stay busy for a moment after the kill
      const child = await launch(this.port, this.dir, this.args)
      if (child !== undefined) {
        this.child = child
        return
      }
      if (Date.now() >= deadline) throw new Error(`redis-server did not restart on port ${this.port}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }

  async stop() {
    await this.kill()
    fs.rmSync(this.dir, { recursive: true, force: true })
  }
}

/**
 * Spawns redis-server on `port` in `dir` and waits until it answers PING; undefined if it
 * exited (port taken) or never answered.
 * @param {number} port
 * @param {string} dir
 * @param {string[]} args a config file, if any, first
 */
async function launch(port, dir, args) {
  const [first, ...rest] = args
  const fullArgs = first !== undefined && !first.startsWith('--')
    ? [first, '--port', String(port), ...rest]
    : ['--port', String(port), ...args]
  const child = spawn(SERVER_PROGRAM, fullArgs, { cwd: dir, stdio: 'ignore' })
  const deadline = Date.now() + 10_000
  while (Date.now() < deadline && child.exitCode === null) {
    // A new connection per try: a refused one has ended for good (it does not reconnect).
    const probe = connectRedis(port)
    try {
      if ((await probe.call('PING')) === 'PONG') return child
    } catch {
      // not listening yet
    } finally {
      probe.disconnect()
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  if (child.exitCode === null) {
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGKILL')
    await exited
  }
  return undefined
}

/**
 * Starts one redis-server on a free port and waits until it answers PING.
 * @param {{extra?: string[], config?: string}} [options] extra `--option value` arguments;
 *   `config`: the text of a config file written into the server's directory and read first
 *   (a sentinel needs one it can rewrite)
 */
async function startRedis({ extra = [], config } = {}) {
  for (let attempt = 0; attempt < 5; attempt += 1) {
    const port = await freePort()
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `polylock-node-redis-${port}-`))
    const args = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no',
      '--loglevel', 'warning', ...extra]
    if (config !== undefined) {
      const file = path.join(dir, 'redis.conf')
      fs.writeFileSync(file, config)
      args.unshift(file)
    }
    const child = await launch(port, dir, args)
    if (child !== undefined) return new RedisServer(port, dir, child, args)
    fs.rmSync(dir, { recursive: true, force: true })
  }
  throw new Error('redis-server did not start; is it installed (apt-get install redis-server)?')
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
  for (let attempt = 0; attempt < 5; attempt += 1) {
    const tlsPort = await freePort()
    const args = ['--tls-port', String(tlsPort),
      '--tls-cert-file', path.join(tlsDir, `${cert}.crt`), '--tls-key-file', path.join(tlsDir, `${cert}.key`),
      '--tls-ca-cert-file', path.join(tlsDir, 'ca.crt'), '--tls-auth-clients', authClients ? 'yes' : 'no',
      '--tls-client-cert-file', path.join(tlsDir, 'client.crt'),
      '--tls-client-key-file', path.join(tlsDir, 'client.key'), ...extra]
    try {
      const server = await startRedis({ extra: args })
      server.tlsPort = tlsPort
      return server
    } catch {
      // the TLS port was taken: another one
    }
  }
  throw new Error('redis-server with TLS did not start; was it built with TLS?')
}

/**
 * `count` independent servers (e.g. for a RedLock over 3 or 5 masters); stop each with stop().
 * @param {number} count
 */
async function startMany(count) {
  /** @type {RedisServer[]} */
  const servers = []
  try {
    for (let index = 0; index < count; index += 1) servers.push(await startRedis())
  } catch (error) {
    await Promise.all(servers.map((server) => server.stop()))
    throw error
  }
  return servers
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
  RedisServer, SERVER_PROGRAM, CLI_PROGRAM, serverBuild, hasShardedPubsub,
}
