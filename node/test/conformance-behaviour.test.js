'use strict'

// The behaviour cases every binding runs (tests/conformance/behaviour.json, whose "about"
// describes the format), through Node's API on a redis-server of its own: each step's call, its
// result, or its error code and message (the core's). Node's unit is the file's: milliseconds.

const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { after, before, test } = require('node:test')

const { Client } = require('..')
const { startRedis } = require('./redis.js')

const { cases } = JSON.parse(
  fs.readFileSync(path.join(__dirname, '..', '..', 'tests', 'conformance', 'behaviour.json'), 'utf8'),
)

/** `wait_ms` and `lease_ms` as acquire's options; one left out is not passed. */
const timing = (args) => ({ waitMs: args.wait_ms, leaseMs: args.lease_ms })

/** Each call of the file on a handle of a kind, given the step's args; results may be promises. */
const LOCK = {
  acquire: (lock, args) => lock.acquire(timing(args)),
  release: (lock) => lock.release(),
  is_locked: (lock) => lock.isLocked(),
  is_held: (lock) => lock.isHeld(),
  hold_count: (lock) => lock.holdCount(),
  force_unlock: (lock) => lock.forceUnlock(),
  token: (lock) => lock.token,
  remaining_lease: (lock) => lock.remainingLease(),
}
const PERMIT_COUNTER = {
  try_set_permits: (semaphore, args) => semaphore.trySetPermits(args.permits),
  add_permits: (semaphore, args) => semaphore.addPermits(args.permits),
  available_permits: (semaphore) => semaphore.availablePermits(),
}
const SEMAPHORE = {
  ...PERMIT_COUNTER,
  acquire: (semaphore, args) => semaphore.acquire({ permits: args.permits, waitMs: args.wait_ms }),
  release: (semaphore, args) => semaphore.release(args.permits),
}
const EXPIRABLE_SEMAPHORE = {
  ...PERMIT_COUNTER,
  acquire: (semaphore, args) => semaphore.acquire(timing(args)),
  release: (semaphore, args) => semaphore.release(args.permit_id),
  held_permits: (semaphore) => semaphore.heldPermits(),
}
const LATCH = {
  try_set_count: (latch, args) => latch.trySetCount(args.count),
  count_down: (latch) => latch.countDown(),
  count: (latch) => latch.count(),
  await_zero: (latch, args) => latch.awaitZero(args.timeout_ms),
  delete: (latch) => latch.delete(),
}
const CLIENT = {
  fenced_set: (client, args) => client.fencedSet(args.key, args.value, args.token),
  fenced_delete: (client, args) => client.fencedDelete(args.key, args.token),
}

/**
 * Each kind of handle: how a client opens it and its calls. `rw` is the client's one read-write
 * lock of the name (its read and write locks are one holder).
 */
const KINDS = {
  lock: [(client, name) => client.lock(name), LOCK],
  fair_lock: [(client, name) => client.fairLock(name), LOCK],
  fifo_lock: [(client, name) => client.fifoLock(name), LOCK],
  fenced_lock: [(client, name) => client.fencedLock(name), LOCK],
  read_lock: [(client, name, rw) => rw().readLock(), LOCK],
  write_lock: [(client, name, rw) => rw().writeLock(), LOCK],
  semaphore: [(client, name) => client.semaphore(name), SEMAPHORE],
  expirable_semaphore: [(client, name) => client.expirableSemaphore(name), EXPIRABLE_SEMAPHORE],
  count_down_latch: [(client, name) => client.countDownLatch(name), LATCH],
}

/** `NotHeld` -> `ERR_NOT_HELD`: the error code of a core error kind. */
const errorCode = (kind) => `ERR_${kind.replace(/(?<!^)([A-Z])/g, '_$1').toUpperCase()}`

/**
 * A message or a `redis` step's word as the file writes it: `{case}` is the case's name,
 * `{owner:h}` handle h's owner, `{$x}` the result saved as x.
 */
function asWritten(template, name, handles, saved) {
  let message = template.replaceAll('{case}', name)
  for (const [id, [handle, calls]] of Object.entries(handles)) {
    if (calls === LOCK) message = message.replaceAll(`{owner:${id}}`, handle.owner)
  }
  for (const [key, value] of Object.entries(saved)) message = message.replaceAll(`{$${key}}`, String(value))
  return message
}

/** Whether `actual` is what `expected` (a value or a matcher) asks for. */
function matches(expected, actual, saved) {
  if (expected === null || typeof expected !== 'object') return actual === expected
  const [[matcher, operand]] = Object.entries(expected)
  const value = (operand) => (typeof operand === 'string' ? saved[operand.slice(1)] : operand)
  switch (matcher) {
    case 'between':
      return actual !== null && value(operand[0]) <= actual && actual <= value(operand[1])
    case 'at_least':
      return actual !== null && actual >= value(operand)
    case 'greater_than':
      return actual !== null && actual > value(operand)
    case 'matches':
      return typeof actual === 'string' && new RegExp(operand).test(actual)
    case 'length':
      return actual.length === operand
    default:
      assert.fail(`unknown matcher ${matcher}`)
  }
}

let redis
before(async () => {
  redis = await startRedis()
})
after(async () => {
  await redis?.stop()
})

for (const c of cases) {
  test(c.name, async () => {
    const prefix = `${c.name}/`
    const clients = {}
    for (const name of c.clients) clients[name] = await Client.connect(redis.url)
    try {
      const readWrite = new Map()
      const handles = {}
      for (const [id, { client, kind, name }] of Object.entries(c.handles)) {
        const [open, calls] = KINDS[kind]
        const key = `${client}\n${name}`
        const rw = () => {
          if (!readWrite.has(key)) readWrite.set(key, clients[client].readWriteLock(prefix + name))
          return readWrite.get(key)
        }
        handles[id] = [open(clients[client], prefix + name, rw), calls]
      }
      for (const [name, client] of Object.entries(clients)) handles[name] = [client, CLIENT]
      const saved = {}
      handles.redis = [redis, { command: (server, args) => server.command(...args.command.map((word) => asWritten(word, c.name, handles, saved))) }]
      for (const [index, step] of c.steps.entries()) {
        const at = `${c.name} step ${index}: ${JSON.stringify(step)}`
        const args = Object.fromEntries(Object.entries(step.args ?? {}).map(([key, value]) => [
          key,
          typeof value === 'string' && value.startsWith('$') ? saved[value.slice(1)] : value,
        ]))
        if ('key' in args) args.key = prefix + args.key
        const [target, calls] = handles[step.on]
        const call = calls[step.call]
        assert.ok(call, `${at}: no such call`)
        if (step.error) {
          await assert.rejects(async () => call(target, args), (error) => {
            assert.ok(error instanceof Error, at)
            assert.equal(error.code, errorCode(step.error.kind), at)
            assert.equal(error.message, asWritten(step.error.message, c.name, handles, saved), at)
            return true
          })
          continue
        }
        const actual = await call(target, args)
        assert.ok(matches(step.result, actual ?? null, saved), `${at}: got ${JSON.stringify(actual)}`)
        if (step.save) saved[step.save] = actual
      }
    } finally {
      for (const client of Object.values(clients)) await client.close()
    }
  })
}
