'use strict'

// The Node worker of the history test (see README.md); the same behaviour as the Rust worker
// (core/examples/history_worker.rs) and the Python worker (worker.py).
//
// Usage: node tests/history/worker.js <redis-url> <journal-path> <worker-id> [seconds]
//
// The environment variable POLYLOCK_HISTORY_KIND picks the kind of lock: `lock` (the default,
// `client.lock`) or `fifo` (`client.fifoLock`).
//
// Until stdin closes (or `seconds` pass): acquire the lock `history` (watchdog lease 1500 ms,
// response timeout 500 ms, wait bound 10 s), journal `enter`, hold 1-20 ms (one time in 100:
// 500-1500 ms, so renewals meet the faults too), journal `leave` with the lock's lost flag,
// release. Transient errors are journaled and retried; any other acquire error ends the
// worker with exit code 3. Each journal line is one write() on a file opened with O_APPEND,
// stamped with process.hrtime.bigint() (CLOCK_MONOTONIC, as in the other workers).

const fs = require('node:fs')
const path = require('node:path')

const { Client } = require(path.join(__dirname, '..', '..', 'node'))

const LOCK_NAME = 'history'
// The kind of lock (set by run.py's --kind): `lock` or `fifo`.
const KIND_VARIABLE = 'POLYLOCK_HISTORY_KIND'
const LOCK_KINDS = ['lock', 'fifo']
const WATCHDOG_TIMEOUT_MS = 1500
const RESPONSE_TIMEOUT_MS = 500
const WAIT_BOUND_MS = 10_000
const TRANSIENT = new Set(['ERR_CONNECTION', 'ERR_TIMEOUT'])
const KINDS = {
  ERR_INVALID_ARGUMENT: 'InvalidArgument',
  ERR_NOT_HELD: 'NotHeld',
  ERR_LOCK_LOST: 'LockLost',
  ERR_CONNECTION: 'Connection',
  ERR_TIMEOUT: 'Timeout',
  ERR_WRONG_TYPE: 'WrongType',
  ERR_REDIS: 'Redis',
}

/** The core's error kind: ERR_LOCK_LOST -> LockLost. */
function kind(error) {
  return KINDS[error?.code] ?? `Other(${error?.code ?? error?.name ?? typeof error})`
}

/** 1-20 ms; one section in 100 holds 500-1500 ms, across watchdog renewals (every 500 ms). */
function holdMs() {
  if (Math.random() < 0.01) return 500 + Math.floor(Math.random() * 1001)
  return 1 + Math.floor(Math.random() * 20)
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function main() {
  const args = process.argv.slice(2)
  if (args.length < 3 || args.length > 4) {
    console.error('usage: node worker.js <redis-url> <journal-path> <worker-id> [seconds]')
    return 2
  }
  const [url, journalPath, worker] = args
  const lockKind = process.env[KIND_VARIABLE] ?? 'lock'
  if (!LOCK_KINDS.includes(lockKind)) {
    console.error(`${worker}: ${KIND_VARIABLE} must be ${LOCK_KINDS.join(' or ')}, not ${lockKind}`)
    return 2
  }
  const deadline = args.length === 4 ? Date.now() + Number(args[3]) * 1000 : undefined
  const fd = fs.openSync(journalPath, 'a')
  const journal = (event, seq, ...rest) => {
    const line = Buffer.from(`${[event, worker, seq, process.hrtime.bigint(), ...rest].join(' ')}\n`)
    if (fs.writeSync(fd, line) !== line.length) throw new Error('short write to the journal')
  }

  let closed = false
  process.stdin.on('end', () => { closed = true })
  process.stdin.on('close', () => { closed = true })
  process.stdin.on('error', () => { closed = true })
  process.stdin.resume()
  const stop = () => closed || (deadline !== undefined && Date.now() >= deadline)

  let client
  while (client === undefined) {
    if (stop()) return 0
    try {
      client = await Client.connect(url, {
        watchdogTimeoutMs: WATCHDOG_TIMEOUT_MS,
        responseTimeoutMs: RESPONSE_TIMEOUT_MS,
      })
    } catch (error) {
      if (!TRANSIENT.has(error?.code)) {
        console.error(`${worker}: connect failed:`, error)
        return 3
      }
      console.error(`${worker}: connect failed, retrying: ${error.message}`)
      await sleep(100)
    }
  }

  const lock = lockKind === 'fifo' ? client.fifoLock(LOCK_NAME) : client.lock(LOCK_NAME)
  console.error(`${worker}: kind ${lockKind}`)
  let seq = 0
  while (!stop()) {
    seq += 1
    const called = process.hrtime.bigint()
    try {
      if (!(await lock.acquire({ waitMs: WAIT_BOUND_MS }))) {
        journal('acquire-timeout', seq)
        continue
      }
    } catch (error) {
      journal('acquire-error', seq, kind(error))
      console.error(`${worker}: acquire failed: ${error?.message}`)
      if (!TRANSIENT.has(error?.code)) return 3
      await sleep(50)
      continue
    }
    journal('enter', seq, called)
    await sleep(holdMs())
    journal('leave', seq, `lost=${lock.lost ? 'true' : 'false'}`)
    try {
      await lock.release()
    } catch (error) {
      journal('release-error', seq, kind(error))
      console.error(`${worker}: release failed: ${error?.message}`)
    }
  }
  await client.close()
  return 0
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(error)
    process.exit(1)
  },
)
