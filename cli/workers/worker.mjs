// Node ticket buyer of `polylock demo` (same protocol as the Rust and Python workers).
//
// Usage: node worker.mjs URL LOCK STOCK_KEY MODE THINK_MS   (MODE: lock, fair or none)
//
// Prints {"event":"ready"} once connected, waits for a `go` line on stdin, then prints
// {"event":"sale","wait_ms":W} per ticket and {"event":"done","sold":N} at the end. A purchase
// reads the stock, waits THINK_MS ("payment") and writes stock-1: not atomic, so only the lock
// keeps the count exact. The stock is read and written with a tiny RESP client, so the demo
// needs no Redis library besides polylock.

import { createRequire } from 'node:module'
import net from 'node:net'
import readline from 'node:readline'
import { setTimeout as sleep } from 'node:timers/promises'

// The package built in node/ of this repository.
const require = createRequire(import.meta.url)
const { Client } = require('../../node/index.js')

/** Just enough of the Redis protocol for GET and SET, one command at a time. */
class Resp {
  static async connect (url) {
    const parsed = new URL(url)
    if (parsed.protocol !== 'redis:') {
      throw new Error(`worker.mjs: only redis:// URLs are supported here, got ${parsed.protocol}//`)
    }
    const socket = net.createConnection({ host: parsed.hostname || '127.0.0.1', port: Number(parsed.port || 6379) })
    await new Promise((resolve, reject) => {
      socket.once('connect', resolve)
      socket.once('error', reject)
    })
    const resp = new Resp(socket)
    if (parsed.password) {
      await resp.call('AUTH', decodeURIComponent(parsed.username || 'default'), decodeURIComponent(parsed.password))
    }
    const database = parsed.pathname.replace(/^\//, '')
    if (database) await resp.call('SELECT', database)
    return resp
  }

  constructor (socket) {
    this.socket = socket
    this.buffer = Buffer.alloc(0)
    this.pending = null
    socket.on('data', (chunk) => {
      this.buffer = Buffer.concat([this.buffer, chunk])
      this.settle()
    })
    socket.on('error', (error) => this.pending?.reject(error))
    socket.on('close', () => this.pending?.reject(new Error('Redis closed the connection')))
  }

  /** Parses one complete reply from the buffer, if there is one. */
  settle () {
    if (!this.pending) return
    const end = this.buffer.indexOf('\r\n')
    if (end < 0) return
    const kind = String.fromCharCode(this.buffer[0])
    const rest = this.buffer.subarray(1, end).toString()
    let value
    let used = end + 2
    if (kind === '+') value = rest
    else if (kind === ':') value = Number(rest)
    else if (kind === '-') value = new Error(`Redis error: ${rest}`)
    else if (kind === '$') {
      const length = Number(rest)
      if (length < 0) value = null
      else {
        if (this.buffer.length < used + length + 2) return
        value = this.buffer.subarray(used, used + length).toString()
        used += length + 2
      }
    } else value = new Error(`unexpected Redis reply ${JSON.stringify(rest)}`)
    this.buffer = this.buffer.subarray(used)
    const { resolve, reject } = this.pending
    this.pending = null
    if (value instanceof Error) reject(value)
    else resolve(value)
  }

  call (...args) {
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject }
      let request = `*${args.length}\r\n`
      for (const arg of args) request += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`
      this.socket.write(request)
    })
  }

  close () {
    this.socket.end()
  }
}

function emit (event) {
  process.stdout.write(JSON.stringify(event) + '\n')
}

/** Resolves with the first line of stdin. */
function firstLine () {
  return new Promise((resolve) => {
    const lines = readline.createInterface({ input: process.stdin })
    lines.once('line', (line) => {
      resolve(line) // before close(), which emits 'close' at once
      lines.close()
      process.stdin.destroy() // an open stdin would keep the process alive
    })
    lines.once('close', () => resolve(''))
  })
}

async function main () {
  const [url, lockName, stockKey, mode, thinkMs] = process.argv.slice(2)
  const think = Number(thinkMs)
  const client = await Client.connect(url)
  const redis = await Resp.connect(url)
  const lock = mode === 'lock' ? client.lock(lockName) : mode === 'fair' ? client.fairLock(lockName) : null
  emit({ event: 'ready' })
  if ((await firstLine()).trim() !== 'go') throw new Error('worker.mjs: no `go` from the demo parent')
  let sold = 0
  for (;;) {
    const started = performance.now()
    if (lock) await lock.acquire({})
    const waitedMs = performance.now() - started
    let stock
    try {
      stock = Number((await redis.call('GET', stockKey)) ?? 0)
      if (stock > 0) {
        await sleep(think)
        await redis.call('SET', stockKey, String(stock - 1))
      }
    } finally {
      if (lock) await lock.release()
    }
    if (stock <= 0) break
    sold += 1
    emit({ event: 'sale', wait_ms: Math.round(waitedMs * 1000) / 1000 })
    await sleep(think) // the customer leaves the counter
  }
  emit({ event: 'done', sold })
  redis.close()
  await client.close()
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`)
  process.exit(1)
})
