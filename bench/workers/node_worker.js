'use strict'
// Benchmark worker for Node contenders, driven by bench/run.py.
//
// Usage: node node_worker.js <scenario> <contender> <redis-url> <lock-name> [options as JSON]
//   scenario:  uncontended | contended | many | rwmix | permits
//   contender: polylock | polylock-fair | polylock-fifo | redlock | redis-semaphore | raw
//              (rwmix: polylock only; permits: polylock and redis-semaphore)
//
// Protocol (the same as the Rust and Python workers): connect and warm up, print `ready` (or
// `unsupported <reason>` and exit); read `go <start-epoch-us> <duration-s>`, wait for the start,
// run, print one JSON line of results; exit when stdin closes.

const path = require('node:path')
const readline = require('node:readline')
const { performance } = require('node:perf_hooks')

const benchDir = path.join(__dirname, '..')
const benchRequire = (name) => require(require.resolve(name, { paths: [benchDir] }))
const Redis = benchRequire('ioredis')

// Peers without a watchdog get a fixed lease far longer than any hold.
const PEER_LEASE_MS = 30000
const TRIVIAL_SCRIPT = 'return 1'
// A writer's weight in the rwmix gauge (a reader's is 1): alone it reads exactly this.
const WRITER_WEIGHT = 1000000

// Wall-clock µs, comparable across processes: CLOCK_MONOTONIC (process.hrtime) plus the offset
// to wall-clock time the driver read once and gives every worker (`clock_offset_us`). Each
// process's own performance.timeOrigin is read at its start from two clocks, and on a loaded
// machine a process preempted between the two reads is off by a millisecond or more, which
// made the holds of two processes seem to overlap.
let clockOffsetUs = null
const nowUs = () =>
  clockOffsetUs === null
    ? Math.round((performance.timeOrigin + performance.now()) * 1000)
    : Number(process.hrtime.bigint() / 1000n) + clockOffsetUs
const sleepCell = new Int32Array(new SharedArrayBuffer(4))
// A blocking sleep, as the Python and Rust workers hold the lock: nothing else runs meanwhile.
const blockFor = (ms) => Atomics.wait(sleepCell, 0, 0, ms)

const lines = readline.createInterface({ input: process.stdin })
const nextLine = (() => {
  const queue = []
  const waiting = []
  let closed = false
  lines.on('line', (line) => (waiting.length ? waiting.shift()(line) : queue.push(line)))
  lines.on('close', () => {
    closed = true
    while (waiting.length) waiting.shift()(null)
  })
  return () => (queue.length ? Promise.resolve(queue.shift()) : closed ? Promise.resolve(null) : new Promise((resolve) => waiting.push(resolve)))
})()

function unsupported(reason) {
  process.stdout.write(`unsupported ${reason}\n`)
  process.exit(0)
}

/** Returns a factory: lock name -> { acquire(): token, release(token) } for one holder. */
async function makeContender(kind, url) {
  if (kind === 'polylock' || kind === 'polylock-fair' || kind === 'polylock-fifo') {
    const { Client } = require(path.join(benchDir, '..', 'node'))
    const client = await Client.connect(url)
    const factory = { polylock: 'lock', 'polylock-fair': 'fairLock', 'polylock-fifo': 'fifoLock' }[kind]
    if (typeof client[factory] !== 'function') {
      unsupported(`the Node binding has no ${factory}`)
    }
    return (name) => {
      const lock = client[factory](name)
      return { acquire: () => lock.acquire({}), release: () => lock.release() }
    }
  }
  const redis = new Redis(url)
  if (kind === 'redlock') {
    const Redlock = benchRequire('redlock').default
    // retryCount -1: wait without bound like the others (its default gives up after 10 tries).
    const redlock = new Redlock([redis], { retryCount: -1 })
    return (name) => ({
      acquire: () => redlock.acquire([name], PEER_LEASE_MS),
      release: (lock) => lock.release(),
    })
  }
  if (kind === 'redis-semaphore') {
    const { Mutex } = benchRequire('redis-semaphore')
    return (name) => {
      // acquireTimeout raised from its 10 s default so that 64 waiters never give up.
      const mutex = new Mutex(redis, name, { lockTimeout: PEER_LEASE_MS, acquireTimeout: 600000 })
      return { acquire: () => mutex.acquire(), release: () => mutex.release() }
    }
  }
  if (kind === 'raw') {
    const sha = await redis.script('LOAD', TRIVIAL_SCRIPT)
    return (name) => ({
      acquire: () => redis.evalsha(sha, 1, name),
      release: () => redis.evalsha(sha, 1, name),
    })
  }
  throw new Error(`unknown contender '${kind}'`)
}

async function handshake() {
  process.stdout.write('ready\n')
  const line = await nextLine()
  const words = (line || '').trim().split(/\s+/)
  if (words.length !== 3 || words[0] !== 'go') throw new Error(`expected 'go', got '${line}'`)
  const startUs = Number(words[1])
  const duration = Number(words[2])
  const delayMs = (startUs - nowUs()) / 1000
  if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs))
  return { startUs, duration }
}

async function uncontended(factory, name) {
  const handle = factory(name)
  for (let i = 0; i < 20; i++) await handle.release(await handle.acquire())
  const { duration } = await handshake()
  const cpuBefore = process.cpuUsage()
  const started = performance.now()
  const deadline = started + duration * 1000
  let cycles = 0
  while (performance.now() < deadline) {
    await handle.release(await handle.acquire())
    cycles++
  }
  const cpu = process.cpuUsage(cpuBefore)
  return { cycles, seconds: (performance.now() - started) / 1000, cpu_s: (cpu.user + cpu.system) / 1e6 }
}

async function contended(factory, name, options, url) {
  const holdMs = (options.hold_us ?? 1000) / 1000
  const counter = options.counter
  const data = new Redis(url)
  const handle = factory(name)
  await handle.release(await handle.acquire())
  const { startUs, duration } = await handshake()
  const endUs = startUs + duration * 1e6
  const waits = []
  const holds = []
  while (nowUs() < endUs) {
    const asked = nowUs()
    const token = await handle.acquire()
    const got = nowUs()
    const value = Number((await data.get(counter)) ?? 0)
    blockFor(holdMs)
    await data.set(counter, value + 1)
    const releasing = nowUs()
    await handle.release(token)
    waits.push(got - asked)
    holds.push([got, releasing])
  }
  return { cycles: holds.length, waits_us: waits, holds }
}

async function many(factory, name, options) {
  const holders = options.holders ?? 64
  const handles = Array.from({ length: holders }, (_, index) => factory(`${name}:${index}`))
  const { duration } = await handshake()
  let stop = false
  let cycles = 0
  const started = performance.now()
  const loops = handles.map(async (handle) => {
    while (!stop) {
      await handle.release(await handle.acquire())
      cycles++
    }
  })
  await new Promise((resolve) => setTimeout(resolve, duration * 1000))
  stop = true
  await Promise.all(loops)
  return { cycles, seconds: (performance.now() - started) / 1000 }
}

/** The acquire and release of one holder of the rwmix (read or write lock) or permits scenario. */
async function kindHandle(scenario, kind, url, name, options) {
  if (scenario === 'permits' && kind === 'redis-semaphore') {
    const { Semaphore } = benchRequire('redis-semaphore')
    // acquireTimeout raised from its 10 s default so that no waiter gives up.
    const semaphore = new Semaphore(new Redis(url), name, options.permits, {
      lockTimeout: PEER_LEASE_MS,
      acquireTimeout: 600000,
    })
    return { role: 'holder', acquire: () => semaphore.acquire(), release: () => semaphore.release() }
  }
  if (kind !== 'polylock') unsupported(`no ${scenario} in ${kind}`)
  const { Client } = require(path.join(benchDir, '..', 'node'))
  const client = await Client.connect(url)
  if (scenario === 'rwmix') {
    const role = options.role === 'writer' ? 'writer' : 'reader'
    const readWrite = client.readWriteLock(name)
    const lock = role === 'writer' ? readWrite.writeLock() : readWrite.readLock()
    return { role, acquire: () => lock.acquire({}), release: () => lock.release() }
  }
  const semaphore = client.semaphore(name)
  return { role: 'holder', acquire: () => semaphore.acquire({}), release: () => semaphore.release() }
}

// RW and S: one holder per process on one read-write lock (readers check that the two data
// keys agree, writers update both) or one semaphore (holders count themselves in a gauge key).
async function kindScenario(scenario, kind, url, name, options) {
  const holdMs = (options.hold_us ?? 1000) / 1000
  const handle = await kindHandle(scenario, kind, url, name, options)
  const data = new Redis(url)
  const [a, b, gauge] = [`${name}:a`, `${name}:b`, `${name}:gauge`]
  await handle.acquire()
  await handle.release()
  const { startUs, duration } = await handshake()
  const endUs = startUs + duration * 1e6
  const waits = []
  const holds = []
  let mismatches = 0
  let crossed = 0
  let maxGauge = 0
  // Every holder adds its weight to the gauge for its hold: the server's count of who is inside,
  // exact whatever the processes' clocks say.
  const weight = handle.role === 'writer' ? WRITER_WEIGHT : 1
  while (nowUs() < endUs) {
    const asked = nowUs()
    await handle.acquire()
    const got = nowUs()
    const inside = await data.incrby(gauge, weight)
    maxGauge = Math.max(maxGauge, inside)
    if (handle.role === 'reader') {
      if (inside >= WRITER_WEIGHT) crossed++
      const [first, second] = await data.mget(a, b)
      blockFor(holdMs)
      if (first !== second) mismatches++
    } else if (handle.role === 'writer') {
      if (inside !== WRITER_WEIGHT) crossed++
      const value = Number((await data.get(a)) ?? 0) + 1
      await data.set(a, value)
      blockFor(holdMs)
      await data.set(b, value)
    } else {
      blockFor(holdMs)
    }
    await data.decrby(gauge, weight)
    const releasing = nowUs()
    await handle.release()
    waits.push(got - asked)
    holds.push([got, releasing])
  }
  return { role: handle.role, cycles: holds.length, waits_us: waits, holds, mismatches, crossed, max_gauge: maxGauge }
}

async function main() {
  const [scenario, kind, url, name, optionsText] = process.argv.slice(2)
  const options = optionsText ? JSON.parse(optionsText) : {}
  if (typeof options.clock_offset_us === 'number') clockOffsetUs = options.clock_offset_us
  let result
  if (scenario === 'rwmix' || scenario === 'permits') {
    result = await kindScenario(scenario, kind, url, name, options)
    process.stdout.write(JSON.stringify(result) + '\n')
    while ((await nextLine()) !== null) {
      // Keep connections open until the driver has read the counters.
    }
    process.exit(0)
  }
  const factory = await makeContender(kind, url)
  if (scenario === 'uncontended') result = await uncontended(factory, name)
  else if (scenario === 'contended') result = await contended(factory, name, options, url)
  else if (scenario === 'many') result = await many(factory, name, options)
  else throw new Error(`unknown scenario '${scenario}'`)
  process.stdout.write(JSON.stringify(result) + '\n')
  while ((await nextLine()) !== null) {
    // Keep connections open until the driver has read the counters.
  }
  process.exit(0)
}

main().catch((err) => {
  process.stderr.write(`node_worker: ${err && err.stack ? err.stack : err}\n`)
  process.exit(1)
})
