// @ts-check
'use strict'

// The public API of polylock for Node. The native classes (native.js, built by napi-rs) do
// the work and the argument checks; this layer adds what is JavaScript idiom rather than
// logic: AbortSignal in and out, `using`, and `Symbol.asyncDispose`. Its classes live in lib/,
// one module per object as the binding's Rust files in src/ are (lib/client.js for Client,
// lib/lock.js for Lock, ...); this file is the package's entry and exports them.

const { Client, nativeClient } = require('./lib/client.js')
const { Lock } = require('./lib/lock.js')
const { MultiLock, RedLock } = require('./lib/group.js')
const { ReadWriteLock } = require('./lib/read_write_lock.js')
const { Semaphore } = require('./lib/semaphore.js')
const { ExpirableSemaphore } = require('./lib/expirable_semaphore.js')
const { setLogger } = require('./lib/log.js')
const { JobLock, JobHold } = require('./lib/job_lock.js')
const { CountDownLatch } = require('./lib/latch.js')
const { Election, Leadership } = require('./lib/election.js')

exports.Client = Client
exports.Lock = Lock
exports.MultiLock = MultiLock
exports.RedLock = RedLock
exports.ReadWriteLock = ReadWriteLock
exports.Semaphore = Semaphore
exports.ExpirableSemaphore = ExpirableSemaphore
exports.setLogger = setLogger
exports.JobLock = JobLock
exports.JobHold = JobHold
exports.CountDownLatch = CountDownLatch
exports.Election = Election
exports.Leadership = Leadership
// For ./otel.js only: the native client behind a Client (not enumerable, not declared).
Object.defineProperty(exports, 'nativeClientOf', {
  value: (/** @type {unknown} */ client) => (client instanceof Client ? nativeClient(client) : undefined),
})
