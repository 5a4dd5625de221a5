'use strict'

// Real redis-server processes for the tests: each on a free loopback port, in a temporary
// directory, without persistence, killed by stop(). Commands go over a tiny RESP client.

const { spawn } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

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

/** Encodes a command as a RESP array of bulk strings. */
function encode(args) {
  let out = `*${args.length}\r\n`
  for (const arg of args) {
    const text = String(arg)
    out += `$${Buffer.byteLength(text)}\r\n${text}\r\n`
  }
  return out
}

/** Parses one RESP reply at the start of `buffer`: `{ value, rest }` or null when incomplete. */
function parse(buffer) {
  const end = buffer.indexOf('\r\n')
  if (end < 0) return null
  const kind = buffer[0]
  const line = buffer.slice(1, end)
  const rest = buffer.slice(end + 2)
  if (kind === '+') return { value: line, rest }
  if (kind === '-') return { value: new Error(line), rest }
  if (kind === ':') return { value: Number(line), rest }
  if (kind === '$') {
    const length = Number(line)
    if (length < 0) return { value: null, rest }
    if (Buffer.byteLength(rest) < length + 2) return null
    return { value: rest.slice(0, length), rest: rest.slice(length + 2) }
  }
  if (kind === '*') {
    const count = Number(line)
    const values = []
    let remaining = rest
    for (let i = 0; i < count; i += 1) {
      const item = parse(remaining)
      if (item === null) return null
      values.push(item.value)
      remaining = item.rest
    }
    return { value: values, rest: remaining }
  }
  throw new Error(`unexpected RESP reply: ${buffer}`)
}

/** Sends one command on a fresh connection; resolves to its reply (rejects on -ERR). */
function command(port, ...args) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1')
    let received = ''
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new Error(`redis on ${port}: no reply to ${args[0]} within 5 s`))
    }, 5000)
    socket.setEncoding('utf8')
    socket.on('connect', () => socket.write(encode(args)))
    socket.on('data', (chunk) => {
      received += chunk
      const reply = parse(received)
      if (reply === null) return
      clearTimeout(timer)
      socket.end()
      if (reply.value instanceof Error) reject(reply.value)
      else resolve(reply.value)
    })
    socket.on('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
  })
}

class RedisServer {
  constructor(port, dir, child) {
    this.port = port
    this.dir = dir
    this.child = child
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`
  }

  command(...args) {
    return command(this.port, ...args)
  }

  async stop() {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve))
      this.child.kill('SIGKILL')
      await exited
    }
    fs.rmSync(this.dir, { recursive: true, force: true })
  }
}

/** Starts one redis-server on a free port and waits until it answers PING. */
async function startRedis() {
  for (let attempt = 0; attempt < 5; attempt += 1) {
    const port = await freePort()
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `polylock-node-redis-${port}-`))
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--daemonize', 'no', '--loglevel', 'warning']
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

module.exports = { startRedis, freePort, command }
