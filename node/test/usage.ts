// Type-checked (tsc --noEmit) against index.d.ts: the usage docs/node.md shows, plus misuses that must
// not compile (each `@ts-expect-error` fails the check if its line does compile).

import {
  Client,
  ExpirableSemaphore,
  Lock,
  ReadWriteLock,
  Semaphore,
  setLogger,
  type AcquireOptions,
  type JobLockOptions,
  type JobRun,
  type LockMetrics,
  type LockOptions,
  type LogLevel,
  type MetricsSnapshot,
  type PolylockError,
  type SemaphoreAcquireOptions,
  type WithLockOptions,
} from '@polylock/polylock'
import { instrument, type Instrumentation } from '@polylock/polylock/otel'
import { metrics, trace } from '@opentelemetry/api'

async function main(): Promise<void> {
  const client: Client = await Client.connect('redis://127.0.0.1:6379/0', {
    watchdogTimeoutMs: 30000,
    connectTimeoutMs: 5000,
    responseTimeoutMs: 5000,
    fairQueueTimeoutMs: 10000,
    syncReplicas: true,
    replicaSyncTimeoutMs: 1000,
    minReplicas: 1,
  })
  const lock: Lock = client.lock('orders:42')
  const fair: Lock = client.fairLock('orders:queue')
  const served: string = await fair.using(async () => 'in turn', { waitMs: 5000 })
  if (await fair.acquire({ waitMs: 0 })) await fair.release()
  const fifo: Lock = client.fifoLock('orders:line', { waitMs: 5000, waitMode: 'poll' })
  const inLine: string = await fifo.using(async () => 'in line')
  console.log(served, inLine)

  const controller = new AbortController()
  const options: AcquireOptions = { waitMs: 5000, leaseMs: 10000, signal: controller.signal }
  if (await lock.acquire(options)) {
    try {
      const held: boolean = lock.isHeld()
      const count: number = lock.holdCount()
      const lost: boolean = lock.isLost()
      console.log(held, count, lost, lock.name, lock.owner)
    } finally {
      await lock.release()
    }
  }

  const total: number = await lock.using(async (signal: AbortSignal) => {
    signal.throwIfAborted()
    return 1
  }, { waitMs: 1000 })
  const label: string = await lock.using(() => 'sync routine')
  const report: string = await client.withLock('reports:nightly', async (signal: AbortSignal) => {
    signal.throwIfAborted()
    return 'built'
  }, { waitMs: 5000, leaseMs: 60000, kind: 'fairLock' })
  const withLockOptions: WithLockOptions = { kind: 'fencedLock', waitMs: 0 }
  const fifoOptions: WithLockOptions = { kind: 'fifoLock', waitMs: 5000 }
  const lined: number = await client.withLock('reports:nightly', () => 2, fifoOptions)
  console.log(lined)
  const count: number = await client.withLock('reports:nightly', () => 1, withLockOptions)
  // @ts-expect-error: a kind that is not a lock's
  await client.withLock('reports:nightly', () => 1, { kind: 'semaphore' })
  // @ts-expect-error: the result's type is the routine's
  const wrong: string = await client.withLock('reports:nightly', () => 1)
  console.log(report, count, wrong)

  const jobOptions: JobLockOptions = { atMostMs: 60000, atLeastMs: 5000 }
  const sent: JobRun<string> = await client.runJob('reports:hourly', async () => 'sent', jobOptions)
  if (sent.ran) console.log(sent.value.toUpperCase())
  const job = client.jobLock('reports:hourly', { atMostMs: 60000 })
  const hold = await job.tryAcquire()
  if (hold !== null) await hold.finish()
  // @ts-expect-error: atMostMs is required
  client.jobLock('reports:hourly', { atLeastMs: 1000 })
  // @ts-expect-error: a skipped run has no value
  const skipped: number = (await job.run(() => 1)).value
  console.log(skipped)
  console.log(total, label)

  await lock[Symbol.asyncDispose]()
  const locked: boolean = await lock.isLocked()
  const deleted: boolean = await lock.forceUnlock()
  const stillHeld: string[] = await client.close()
  console.log(locked, deleted, stillHeld, client.id)

  try {
    await lock.release()
  } catch (error) {
    const code: PolylockError['code'] = (error as PolylockError).code
    if (code === 'ERR_NOT_HELD' || code === 'ERR_LOCK_LOST') console.log(code)
  }

  // Metrics: the snapshot and the OpenTelemetry instrumentation.
  const metricsOn: Client = await Client.connect('redis://127.0.0.1:6379/0', { metrics: true, metricsMaxLockNames: 100 })
  const snapshot: MetricsSnapshot = metricsOn.metrics()
  const first: LockMetrics | undefined = snapshot.locks[0]
  const waited: number = (first?.waitTime.sumSeconds ?? 0) + snapshot.connection.serverCalls
  const errorKinds: string[] = snapshot.connection.serverErrors.map(({ kind }) => kind)
  const clientName: string = metricsOn.name
  const instrumentation: Instrumentation = instrument(metricsOn, {
    meterProvider: metrics.getMeterProvider(),
    tracerProvider: trace.getTracerProvider(),
  })
  instrumentation.flush()
  instrumentation.shutdown()
  instrument(metricsOn).shutdown()
  console.log(waited, errorKinds, clientName)
  // @ts-expect-error the cardinality bound is a number
  await Client.connect('redis://127.0.0.1:6379/0', { metricsMaxLockNames: '100' })
  // @ts-expect-error instrument takes a Client
  instrument('redis://127.0.0.1:6379/0')

  // Per-lock defaults, lease inspection, loss callback, logger.
  const defaults: LockOptions = { waitMs: 5000, leaseMs: 30000 }
  const orders: Lock = client.lock('orders:43', defaults)
  const fairDefaults: Lock = client.fairLock('orders:queue', { waitMs: 100 })
  const fencedDefaults: Lock = client.fencedLock('stock:8', { leaseMs: 1000 })
  const rwDefaults: ReadWriteLock = client.readWriteLock('catalog', { waitMs: 0 })
  orders.onLost((error: PolylockError) => console.log(error.code, error.message))
  if (await orders.acquire({ waitMs: Infinity })) {
    const remaining: number | null = await orders.remainingLease()
    console.log(remaining, orders.isLost(), fairDefaults.name, fencedDefaults.name, rwDefaults.name)
    await orders.release()
  }
  const level: LogLevel = 'warn'
  setLogger((lvl: LogLevel, message: string, fields: Record<string, string | number | boolean>) => {
    console.log(lvl, message, fields.lock)
  }, level)
  setLogger(null)

  // Fenced lock and fenced writes.
  const fenced: Lock = client.fencedLock('stock:7')
  if (await fenced.acquire({ waitMs: 5000 })) {
    const token: number | null = fenced.token
    if (token !== null) {
      await client.fencedSet('stock:7:count', '12', token)
      await client.fencedSet('stock:7:blob', Buffer.from([1, 2]), token)
      const removed: boolean = await client.fencedDelete('stock:7:blob', token)
      console.log(removed)
    }
    await fenced.release()
  }
  try {
    await client.fencedSet('stock:7:count', '11', 1)
  } catch (error) {
    if ((error as PolylockError).code === 'ERR_STALE_TOKEN') console.log('refused')
  }

  // Read-write lock: each side is a Lock.
  const rw: ReadWriteLock = client.readWriteLock('catalog')
  const reader: Lock = rw.readLock()
  const writer: Lock = rw.writeLock()
  await writer.using(async (signal) => {
    signal.throwIfAborted()
    await reader.acquire({ waitMs: 0, leaseMs: 1000, signal: controller.signal })
  })
  await reader[Symbol.asyncDispose]()
  console.log(rw.name)

  // Semaphores.
  const semaphore: Semaphore = client.semaphore('crawler:slots')
  const set: boolean = await semaphore.trySetPermits(4)
  await semaphore.addPermits(-1)
  const semOptions: SemaphoreAcquireOptions = { permits: 2, waitMs: 1000, signal: controller.signal }
  if (await semaphore.acquire(semOptions)) await semaphore.release(2)
  if (await semaphore.acquire()) await semaphore.release()
  const available: number = await semaphore.availablePermits()
  console.log(set, available, semaphore.name)

  const slots: ExpirableSemaphore = client.expirableSemaphore('crawler:leases')
  await slots.trySetPermits(4)
  await slots.addPermits(1)
  const permit: string | null = await slots.acquire({ waitMs: 5000, leaseMs: 60000 })
  if (permit !== null) await slots.release(permit)
  const held: string[] = slots.heldPermits()
  const free: number = await slots.availablePermits()
  console.log(held, free, slots.name)

  // @ts-expect-error a token is a number
  await client.fencedSet('k', 'v', '1')
  // @ts-expect-error a value is a string or a Buffer
  await client.fencedSet('k', 5, 1)
  // @ts-expect-error the token is a number or null, never undefined
  const noToken: number | undefined = fenced.token
  // @ts-expect-error a plain semaphore has no lease
  await semaphore.acquire({ leaseMs: 1000 })
  // @ts-expect-error a plain semaphore's acquire resolves to a boolean
  const notId: string = await semaphore.acquire()
  // @ts-expect-error an expirable permit is released by its id
  await slots.release()
  // @ts-expect-error an expirable acquire resolves to an id or null
  const notBool: boolean = await slots.acquire()
  // @ts-expect-error an expirable semaphore takes one permit at a time
  await slots.acquire({ permits: 2 })
  // @ts-expect-error handles come from the client
  new Semaphore()
  // @ts-expect-error handles come from the client
  new ReadWriteLock()
  console.log(noToken, notId, notBool)

  // @ts-expect-error waitMs is a number of milliseconds
  await lock.acquire({ waitMs: '5s' })
  // @ts-expect-error fairQueueTimeoutMs is a number of milliseconds
  await Client.connect('redis://127.0.0.1:6379/0', { fairQueueTimeoutMs: '10s' })
  // @ts-expect-error a fair lock has a name
  client.fairLock()
  // @ts-expect-error a FIFO lock has a name
  client.fifoLock()
  // @ts-expect-error a FIFO lock's name is a string
  client.fifoLock(42)
  // @ts-expect-error the option is waitMs
  await lock.acquire({ wait: 5 })
  // @ts-expect-error handles come from client.lock
  new Lock()
  // @ts-expect-error clients come from Client.connect
  new Client()
  // @ts-expect-error acquire resolves to a boolean
  const wrong: string = await lock.acquire()
  // @ts-expect-error the routine gets an AbortSignal
  await lock.using(async (signal: string) => signal)
  // @ts-expect-error lock defaults have no signal (it belongs to one call)
  client.lock('x', { signal: controller.signal })
  // @ts-expect-error not a log level
  setLogger(() => {}, 'verbose')
  // @ts-expect-error a lost callback gets an error
  orders.onLost((error: string) => error)
  // @ts-expect-error the remaining lease is a number or null
  const noLease: number = await orders.remainingLease()
  console.log(noLease)
  // @ts-expect-error not a code polylock uses
  const bad: PolylockError['code'] = 'ERR_OTHER'
  console.log(wrong, bad)
}

void main
