'use strict'

// Real redis-server processes for the tests: each on a free loopback port, in a temporary
// directory, without persistence, killed by stop(). Commands go over ioredis.

const { spawn } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

const Redis = require('ioredis')

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

class RedisServer {
  constructor(port, dir, child) {
    this.port = port
    this.dir = dir
    this.child = child
    /** The connection `command` uses, opened on first use. @type {Redis | undefined} */
    this.client = undefined
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`
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

  async stop() {
    this.client?.disconnect()
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve))
      this.child.kill('SIGKILL')
      await exited
    }
    fs.rmSync(this.dir, { recursive: true, force: true })
  }
}

/**
 * Starts one redis-server on a free port and waits until it answers PING.
 * @param {string[]} [extraArgs] `--option value ...` after the test kit's own
 */
async function startRedis(extraArgs = []) {
  for (let attempt = 0; attempt < 5; attempt += 1) {
    const port = await freePort()
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `polylock-node-redis-${port}-`))
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--daemonize', 'no', '--loglevel', 'warning', ...extraArgs]
    const child = spawn('redis-server', args, { cwd: dir, stdio: 'ignore' })
    const server = new RedisServer(port, dir, child)
    const deadline = Date.now() + 10_000
    while (Date.now() < deadline && child.exitCode === null) {
      try {
        if ((await server.command('PING')) === 'PONG') return server
      } catch {
        // not listening yet
      }
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    await server.stop()
  }
  throw new Error('redis-server did not start; is it installed (apt-get install redis-server)?')
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

module.exports = { startRedis, freePort, connectRedis, serverAndClientPerFile, freshNames }
