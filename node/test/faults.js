'use strict'

// The test kit's fault-injecting TCP proxy (the Rust binary `polylock-fault-proxy`) for the
// Node tests: put it between a client and redis-server, then switch faults on and off.

const { spawn } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const readline = require('node:readline')

const BINARY = path.join(__dirname, '..', '..', 'target', 'debug', 'polylock-fault-proxy')

/**
 * A proxy on a free loopback port in front of `127.0.0.1:upstreamPort`, passing traffic until
 * told otherwise. Each fault applies at once to open and new connections. Stopped by `stop()`;
 * it also stops if this process dies, because it exits when its stdin closes.
 */
class FaultProxy {
  /**
   * @param {number} upstreamPort
   * @param {string} [binary]
   * @returns {Promise<FaultProxy>}
   */
  static async start(upstreamPort, binary = BINARY) {
    try {
      fs.accessSync(binary, fs.constants.X_OK)
    } catch {
      throw new Error(`${binary} is missing: run \`cargo build -p polylock-testkit --bin polylock-fault-proxy\` (make test-node does)`)
    }
    const proxy = new FaultProxy(spawn(binary, ['--upstream', String(upstreamPort)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    }))
    const first = await proxy.nextLine()
    const match = /^listening (\d+)$/.exec(first)
    if (match === null) {
      await proxy.stop()
      throw new Error(`polylock-fault-proxy started with ${JSON.stringify(first)}`)
    }
    proxy.port = Number(match[1])
    return proxy
  }

  /** @param {import('node:child_process').ChildProcessWithoutNullStreams} child */
  constructor(child) {
    this.child = child
    this.port = 0
    /** Answers come back in the order commands were sent: one waiting callback per line. */
    this.waiting = []
    this.exited = new Promise((resolve) => child.once('exit', resolve))
    // Writing to a proxy that already exited fails with EPIPE; the exit itself is reported.
    child.stdin.on('error', () => {})
    readline.createInterface({ input: child.stdout }).on('line', (line) => {
      this.waiting.shift()?.resolve(line)
    })
    child.once('exit', (code, signal) => {
      for (const waiter of this.waiting.splice(0)) {
        waiter.reject(new Error(`polylock-fault-proxy exited (${code ?? signal})`))
      }
    })
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`
  }

  /** Forward both ways. */
  passThrough() {
    return this.send('pass')
  }

  /** Forward every chunk, both ways, `ms` milliseconds after it arrived (order kept). */
  delay(ms) {
    return this.send(`delay ${ms}`)
  }

  /** Forward requests (commands run) but discard every reply; connections stay open. */
  dropReplies() {
    return this.send('drop-replies')
  }

  /** Forward nothing either way; connections stay open and new ones are accepted. */
  blackhole() {
    return this.send('blackhole')
  }

  /** Forward requests; when a reply comes, discard it and close the connection. */
  cutAfterForward() {
    return this.send('cut-after-forward')
  }

  /** Close every connection and stop listening (connection refused) until another fault is
   * set; then it listens on the same port again. */
  refuse() {
    return this.send('refuse')
  }

  /** Refuse now, and pass again after `ms` unless another fault was set. */
  refuseFor(ms) {
    return this.send(`refuse-for ${ms}`)
  }

  /** Close every open connection now; new ones follow the current fault. */
  cut() {
    return this.send('cut')
  }

  /** How many proxied connections are open. */
  async connections() {
    return Number(await this.send('connections'))
  }

  /** Closes the proxy's stdin (its cue to stop) and waits for it to exit. */
  async stop() {
    this.child.stdin.end()
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000)
    await this.exited
    clearTimeout(timer)
  }

  /** Sends one command; resolves to what followed `ok` in the answer. */
  async send(line) {
    const answer = this.nextLine()
    this.child.stdin.write(`${line}\n`)
    const text = await answer
    const [status, ...rest] = text.split(' ')
    if (status !== 'ok') throw new Error(`fault proxy: ${JSON.stringify(line)}: ${text}`)
    return rest.join(' ')
  }

  nextLine() {
    if (this.child.exitCode !== null || this.child.signalCode !== null) {
      return Promise.reject(new Error('polylock-fault-proxy is not running'))
    }
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }))
  }
}

module.exports = { FaultProxy }
