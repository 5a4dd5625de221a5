// Node worker of `polylock demo` (same protocol as the Rust and Python workers).
//
// Usage: node worker.mjs URL LOCK STOCK_KEY MODE THINK_MS [EXTRA]
//   MODE lock, fair or none: the ticket sale (below).
//   Other MODEs: the other scenarios (STOCK_KEY is then the scenarios' key PREFIX and EXTRA a
//   JSON object of parameters), as described at the top of tests/demo/src/worker/scenarios.rs:
//   cache-rebuild(-unlocked), read-write(-unlocked), segmented / global, fencing / fencing-off.
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
const { Client } = require('../../../node/index.js')

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

async function readyAndWaitForGo () {
  emit({ event: 'ready' })
  if ((await firstLine()).trim() !== 'go') throw new Error('worker.mjs: no `go` from the demo parent')
}

const ms = (since) => Math.round((performance.now() - since) * 1000) / 1000
const getInt = async (redis, key) => Number((await redis.call('GET', key)) ?? 0)

// How long a worker waits for another worker's sign before it fails.
const SIGN_TIMEOUT_MS = 30000

async function waitFor (redis, key) {
  const deadline = performance.now() + SIGN_TIMEOUT_MS
  while ((await redis.call('GET', key)) === null) {
    if (performance.now() > deadline) throw new Error(`worker.mjs: ${key} did not appear within ${SIGN_TIMEOUT_MS} ms`)
    await sleep(5)
  }
}

async function cacheRebuild (client, redis, name, prefix, locked, extra) {
  const [cache, db, stop] = [`${prefix}:cache`, `${prefix}:db`, `${prefix}:stop`]
  const database = extra.db_ms ?? 50
  const lock = locked ? client.lock(name) : null
  await readyAndWaitForGo()
  let reads = 0
  while ((await redis.call('GET', stop)) === null) {
    if ((await redis.call('GET', cache)) !== null) {
      reads += 1
      await sleep(1)
      continue
    }
    // A miss: one worker rebuilds, the others wait on the lock and then read the cache.
    const started = performance.now()
    if (lock) await lock.acquire({})
    const waited = ms(started)
    let rebuilt = null
    try {
      if ((await redis.call('GET', cache)) === null) {
        rebuilt = (await redis.call('GET', db)) ?? ''
        await sleep(database)
        await redis.call('SET', cache, rebuilt)
      }
    } finally {
      if (lock) await lock.release()
    }
    if (rebuilt !== null) emit({ event: 'rebuild', value: rebuilt, wait_ms: waited })
    else {
      reads += 1
      emit({ event: 'served', wait_ms: waited })
    }
  }
  return { event: 'done', reads }
}

async function readWrite (client, redis, name, prefix, locked, extra, think) {
  const [cache, db, budget, readers] = ['cache', 'db', 'budget', 'readers'].map((key) => `${prefix}:${key}`)
  const writePercent = extra.write_percent ?? 20
  const rw = locked ? client.readWriteLock(name) : null
  await readyAndWaitForGo()
  let operations = 0
  while ((await redis.call('INCRBY', budget, '-1')) >= 0) {
    operations += 1
    const writing = Math.random() * 100 < writePercent
    const side = rw ? (writing ? rw.writeLock() : rw.readLock()) : null
    const started = performance.now()
    if (side) await side.acquire({})
    const waited = ms(started)
    let event
    try {
      if (writing) {
        const value = String((await getInt(redis, db)) + 1)
        await redis.call('SET', db, value)
        await sleep(think)
        await redis.call('SET', cache, value)
        event = { event: 'write', wait_ms: waited }
      } else {
        const inside = await redis.call('INCRBY', readers, '1')
        const cached = await redis.call('GET', cache)
        await sleep(think)
        const stored = await redis.call('GET', db)
        await redis.call('INCRBY', readers, '-1')
        event = { event: 'read', wait_ms: waited, inside, agree: cached === stored }
      }
    } finally {
      if (side) await side.release()
    }
    emit(event)
    await sleep(think) // gives the other workers a turn
  }
  return { event: 'done', operations }
}

async function segmented (client, redis, name, prefix, globalLock, extra, think) {
  const segments = Math.max(Number(extra.segments ?? 4), 1)
  const locks = globalLock
    ? [client.lock(name)]
    : Array.from({ length: segments }, (_, segment) => client.lock(`${name}:${segment}`))
  await readyAndWaitForGo()
  const left = Array.from({ length: segments }, (_, segment) => segment)
  let sold = 0
  while (left.length > 0) {
    const at = Math.floor(Math.random() * left.length)
    const segment = left[at]
    const lock = locks[Math.min(segment, locks.length - 1)]
    const key = `${prefix}:${segment}`
    const started = performance.now()
    await lock.acquire({})
    const waited = ms(started)
    let stock
    try {
      stock = await getInt(redis, key)
      if (stock > 0) {
        await sleep(think)
        await redis.call('SET', key, String(stock - 1))
      }
    } finally {
      await lock.release()
    }
    if (stock > 0) {
      sold += 1
      emit({ event: 'sale', wait_ms: waited, segment })
    } else {
      left[at] = left[left.length - 1]
      left.pop()
    }
  }
  return { event: 'done', sold }
}

/** A token as JSON can carry it (the binding may give a BigInt). */
const shown = (token) => (token === null || token === undefined ? null : Number(token))

/** Writes KEY = WHO with fencedSet and the token (false when refused), or a plain SET. */
async function writeValue (client, redis, fenced, key, who, token) {
  if (!fenced) {
    await redis.call('SET', key, who)
    return true
  }
  if (token === null || token === undefined) throw new Error('worker.mjs: the fenced lock gave no token')
  try {
    await client.fencedSet(key, who, token)
    return true
  } catch (error) {
    if (error?.code === 'ERR_STALE_TOKEN') return false
    throw error
  }
}

async function fencing (client, redis, name, prefix, fenced, extra) {
  const role = extra.role
  const lease = Number(extra.lease_ms ?? 200)
  const lock = fenced ? client.fencedLock(name) : client.lock(name)
  const valueKey = `${prefix}:value`
  await readyAndWaitForGo()
  if (role === 'slow') {
    if (!(await lock.acquire({ waitMs: SIGN_TIMEOUT_MS, leaseMs: lease }))) throw new Error('worker.mjs: the slow worker never got the lock')
    const token = fenced ? lock.token : null
    await redis.call('SET', `${prefix}:slow-holds`, '1')
    emit({ event: 'acquired', role: 'slow', token: shown(token) })
    // A pause (a GC, a stalled VM) longer than the lease: the lock expires meanwhile.
    await sleep(lease * 3)
    await waitFor(redis, `${prefix}:fast-wrote`)
    const accepted = await writeValue(client, redis, fenced, valueKey, 'slow', token)
    emit({ event: 'late_write', token: shown(token), accepted })
    try {
      await lock.release() // the hold is gone (its lease ran out): the release says so
    } catch (error) {
      if (error?.code !== 'ERR_LOCK_LOST' && error?.code !== 'ERR_NOT_HELD') throw error
    }
    return { event: 'done', role: 'slow' }
  }
  if (role === 'fast') {
    await waitFor(redis, `${prefix}:slow-holds`)
    const started = performance.now()
    if (!(await lock.acquire({ waitMs: SIGN_TIMEOUT_MS }))) throw new Error('worker.mjs: the fast worker never got the lock')
    const waited = ms(started)
    const token = fenced ? lock.token : null
    try {
      await writeValue(client, redis, fenced, valueKey, 'fast', token)
    } finally {
      await redis.call('SET', `${prefix}:fast-wrote`, '1')
      await lock.release()
    }
    emit({ event: 'write', role: 'fast', token: shown(token), wait_ms: waited })
    return { event: 'done', role: 'fast' }
  }
  throw new Error(`worker.mjs: unknown fencing role ${JSON.stringify(role)}`)
}

async function scenario (client, redis, name, prefix, mode, think, extra) {
  let done
  if (mode === 'cache-rebuild' || mode === 'cache-rebuild-unlocked') done = await cacheRebuild(client, redis, name, prefix, mode === 'cache-rebuild', extra)
  else if (mode === 'read-write' || mode === 'read-write-unlocked') done = await readWrite(client, redis, name, prefix, mode === 'read-write', extra, think)
  else if (mode === 'segmented' || mode === 'global') done = await segmented(client, redis, name, prefix, mode === 'global', extra, think)
  else if (mode === 'fencing' || mode === 'fencing-off') done = await fencing(client, redis, name, prefix, mode === 'fencing', extra)
  else throw new Error(`worker.mjs: unknown mode ${JSON.stringify(mode)}`)
  emit(done)
  redis.close()
  await client.close()
}

async function main () {
  const [url, lockName, stockKey, mode, thinkMs, extraJson] = process.argv.slice(2)
  const think = Number(thinkMs)
  const extra = extraJson ? JSON.parse(extraJson) : {}
  const client = await Client.connect(url)
  const redis = await Resp.connect(url)
  if (!['lock', 'fair', 'none'].includes(mode)) return scenario(client, redis, lockName, stockKey, mode, think, extra)
  const lock = mode === 'lock' ? client.lock(lockName) : mode === 'fair' ? client.fairLock(lockName) : null
  await readyAndWaitForGo()
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
