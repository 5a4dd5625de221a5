'use strict'

// `@polylock/polylock/otel` read through the real OpenTelemetry SDK: a MetricReader the tests
// collect from and an InMemorySpanExporter. Each instrument and span is driven by its event for
// real on a real redis-server (through the fault proxy where the server must stop answering).

const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const { after, before, describe, test } = require('node:test')

const api = require('@opentelemetry/api')
const { MeterProvider, MetricReader } = require('@opentelemetry/sdk-metrics')
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base')

const { Client } = require('..')
const { instrument } = require('@polylock/polylock/otel')
const { FaultProxy } = require('./faults.js')
const { NotYet, connectRedis, freshNames, startRedis, waitFor } = require('./redis.js')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const fresh = freshNames('node:otel')

/** A reader the test collects from when it wants (cumulative, as every reader by default). */
class CollectingReader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}

/** Every instrument of the spec: name, unit, the SDK's instrument type. */
const INSTRUMENTS = [
  ['polylock.lock.acquires', '{acquire}', 'OBSERVABLE_COUNTER'],
  ['polylock.lock.acquire.time_in_queue', 's', 'HISTOGRAM'],
  ['polylock.lock.active_holds', '{hold}', 'OBSERVABLE_UP_DOWN_COUNTER'],
  ['polylock.lock.hold.duration', 's', 'HISTOGRAM'],
  ['polylock.lock.queued_acquires', '{acquire}', 'OBSERVABLE_UP_DOWN_COUNTER'],
  ['polylock.lock.handoffs', '{handoff}', 'OBSERVABLE_COUNTER'],
  ['polylock.lock.wakeups_found_taken', '{wakeup}', 'OBSERVABLE_COUNTER'],
  ['polylock.lock.renewals', '{renewal}', 'OBSERVABLE_COUNTER'],
  ['polylock.lock.leases_lost', '{lease}', 'OBSERVABLE_COUNTER'],
  ['polylock.lock.release_failures', '{release}', 'OBSERVABLE_COUNTER'],
  ['polylock.lock.release_retries', '{release}', 'OBSERVABLE_COUNTER'],
  ['polylock.client.server_calls', '{call}', 'OBSERVABLE_COUNTER'],
  ['polylock.client.server_errors', '{error}', 'OBSERVABLE_COUNTER'],
  ['polylock.client.subscriptions', '{subscription}', 'OBSERVABLE_UP_DOWN_COUNTER'],
  ['polylock.client.reconnects', '{reconnect}', 'OBSERVABLE_COUNTER'],
]

let redis
/** What a test opened, closed after it. */
let closing = []

before(async () => {
  redis = await startRedis()
})

after(async () => {
  await redis?.stop()
})

/**
 * A client (through `url`, default the server) instrumented with its own meter and tracer
 * providers: `collect()` reads every polylock instrument, `spans(name)` the finished spans.
 */
async function observed(options = {}, url = redis.url) {
  const client = await Client.connect(url, options)
  const reader = new CollectingReader()
  const meterProvider = new MeterProvider({ readers: [reader] })
  const exporter = new InMemorySpanExporter()
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  const instrumentation = instrument(client, { meterProvider, tracerProvider })
  closing.push(async () => {
    instrumentation.shutdown()
    await client.close()
    await meterProvider.shutdown()
    await tracerProvider.shutdown()
  })
  return {
    client,
    instrumentation,
    /** The polylock instruments of one collection, by name. */
    async collect() {
      const { resourceMetrics, errors } = await reader.collect()
      assert.deepEqual(errors, [])
      const metrics = new Map()
      for (const scope of resourceMetrics.scopeMetrics) {
        if (scope.scope.name !== 'polylock') continue
        for (const metric of scope.metrics) metrics.set(metric.descriptor.name, metric)
      }
      return metrics
    },
    /** The finished spans called `name` of the lock `lock` (after a flush). */
    spans(name, lock) {
      instrumentation.flush()
      return exporter.getFinishedSpans()
        .filter((span) => span.name === name && span.attributes['polylock.lock.name'] === lock)
    },
  }
}

async function closeAll() {
  for (const close of closing.splice(0).reverse()) await close()
}

/** The value of the one data point of `name` whose attributes include `attributes`. */
function pointOf(metrics, name, attributes) {
  const metric = metrics.get(name)
  assert.ok(metric, `no data for ${name}; got ${[...metrics.keys()].join(', ')}`)
  const found = metric.dataPoints.filter((point) =>
    Object.entries(attributes).every(([key, value]) => point.attributes[key] === value))
  assert.equal(found.length, 1, `${name} ${JSON.stringify(attributes)}: ${JSON.stringify(metric.dataPoints)}`)
  return found[0].value
}

/** The attributes every lock instrument of `client`'s lock `name` (of `kind`) carries. */
function lockOf(client, name, kind = 'lock') {
  return { 'polylock.client.name': client.name, 'polylock.lock.name': name, 'polylock.lock.kind': kind }
}

/** Resolves `check()` once it stops throwing (`NotYet` or an assertion), for up to 60 s. */
function eventually(what, check) {
  return waitFor(what, async () => {
    try {
      return await check()
    } catch (err) {
      throw new NotYet(err.message)
    }
  })
}

/**
 * Resolves once `lock`'s acquire waits on the server: listed among the waiters and subscribed
 * to the channel its wake-up comes on (its own for a grant, the lock's for a message), so a
 * release from now on reaches it.
 */
function waitingOnServer(lock, { granted }) {
  const { name, owner } = lock
  return eventually(`${owner} waiting on the server`, async () => {
    assert.notEqual(await redis.command('ZSCORE', `polylock_lock_waiters:{${name}}`, owner), null)
    assert.equal(await redis.command('HEXISTS', `polylock_lock_grants:{${name}}`, owner), granted ? 1 : 0)
    const channel = granted ? `polylock_lock_told:{${name}}:${owner}` : `redisson_lock__channel:{${name}}`
    const [, subscribers] = await redis.command('PUBSUB', 'NUMSUB', channel)
    assert.ok(subscribers >= 1, `${channel}: ${subscribers} subscribers`)
  })
}

/**
 * Watches the server (MONITOR) for the check a waiter makes before it sleeps: after its look
 * listed it, it subscribes and reads that it is still listed (`nothing_missed`, whose last
 * command is a ZSCORE of its place; a look's commands are in scripts). A release before that
 * read makes it look again and take the lock granted to it before the grant's message is read:
 * neither hand-off. `asleep(lock)` waits for that check; `stop()` ends the watch.
 */
async function watchSleeps() {
  const connection = connectRedis(redis.port)
  const checks = []
  const monitored = await connection.monitor()
  monitored.on('monitor', (_time, args, source) => {
    if (source !== 'lua' && String(args[0]).toLowerCase() === 'zscore') checks.push(String(args[2]))
  })
  return {
    asleep: (lock) => waitFor(`${lock.owner} asleep`, async () => {
      if (!checks.includes(lock.owner)) throw new NotYet(`no ZSCORE of ${lock.owner} yet`)
    }),
    stop: () => monitored.disconnect(),
  }
}

describe('instruments', { concurrency: false }, () => {
  after(closeAll)

  test('every instrument has its name, unit, type and the bucket bounds of the core', async () => {
    const { client, collect } = await observed()
    const name = fresh('every')
    const lock = client.lock(name)
    assert.equal(await lock.acquire(), true)
    await lock.release()
    // A failed call, so that server_errors has a data point.
    await redis.command('SET', `${name}:wrong`, 'a string')
    await assert.rejects(client.lock(`${name}:wrong`).acquire(), { code: 'ERR_WRONG_TYPE' })

    const metrics = await collect()
    assert.deepEqual([...metrics.keys()].sort(), INSTRUMENTS.map(([instrument]) => instrument).sort())
    const bounds = client.metrics().locks[0].waitTime.bounds
    assert.equal(bounds.length, 17)
    for (const [instrument, unit, type] of INSTRUMENTS) {
      const { descriptor, dataPoints } = metrics.get(instrument)
      assert.equal(descriptor.unit, unit, instrument)
      assert.equal(descriptor.type, type, instrument)
      assert.ok(descriptor.description.length > 0, instrument)
      for (const point of dataPoints) {
        assert.equal(point.attributes['polylock.client.name'], client.name, instrument)
        if (instrument.startsWith('polylock.lock.')) {
          assert.equal(typeof point.attributes['polylock.lock.name'], 'string', instrument)
          assert.equal(point.attributes['polylock.lock.kind'], 'lock', instrument)
        }
        if (type === 'HISTOGRAM') assert.deepEqual(point.value.buckets.boundaries, bounds, instrument)
      }
    }
  })

  test('acquires by result, their time in queue, and their spans', async () => {
    const { client, collect, spans } = await observed()
    const name = fresh('acquires')
    const holder = client.lock(name)
    assert.equal(await holder.acquire(), true)
    assert.equal(await client.lock(name).acquire({ waitMs: 200 }), false)
    const controller = new AbortController()
    const cancelled = client.lock(name).acquire({ signal: controller.signal })
    await eventually('the cancelled acquire to wait', () => assert.equal(client.metrics().locks[0].waiters, 1))
    controller.abort()
    await assert.rejects(cancelled, { name: 'AbortError' })
    await holder.release()
    const wrong = `${name}:wrong`
    await redis.command('SET', wrong, 'a string')
    await assert.rejects(client.lock(wrong).acquire(), { code: 'ERR_WRONG_TYPE' })

    const metrics = await collect()
    const attributes = lockOf(client, name)
    const result = (value) => ({ ...attributes, 'polylock.acquire.result': value })
    assert.equal(pointOf(metrics, 'polylock.lock.acquires', result('acquired')), 1)
    assert.equal(pointOf(metrics, 'polylock.lock.acquires', result('timed_out')), 1)
    assert.equal(pointOf(metrics, 'polylock.lock.acquires', result('cancelled')), 1)
    assert.equal(pointOf(metrics, 'polylock.lock.acquires', result('failed')), 0)
    const failed = { ...lockOf(client, wrong), 'polylock.acquire.result': 'failed' }
    assert.equal(pointOf(metrics, 'polylock.lock.acquires', failed), 1)
    for (const value of ['acquired', 'timed_out', 'cancelled']) {
      assert.equal(pointOf(metrics, 'polylock.lock.acquire.time_in_queue', result(value)).count, 1, value)
    }
    // The timed-out acquire waited its 200 ms (a lower bound, not a speed).
    assert.ok(pointOf(metrics, 'polylock.lock.acquire.time_in_queue', result('timed_out')).sum >= 0.19)
    assert.equal(pointOf(metrics, 'polylock.lock.acquire.time_in_queue', failed).count, 1)

    const acquireSpans = spans('polylock.acquire', name)
    assert.deepEqual(acquireSpans.map((span) => span.attributes['polylock.acquire.result']).sort(),
      ['acquired', 'cancelled', 'timed_out'])
    for (const span of acquireSpans) {
      assert.equal(span.attributes['polylock.lock.kind'], 'lock')
      assert.ok(span.attributes['polylock.acquire.attempts'] >= 1, JSON.stringify(span.attributes))
      assert.equal(span.parentSpanContext, undefined, 'a root span')
    }
    const timedOut = acquireSpans.find((span) => span.attributes['polylock.acquire.result'] === 'timed_out')
    const seconds = timedOut.duration[0] + timedOut.duration[1] / 1e9
    assert.ok(seconds >= 0.19, `the span lasts the wait: ${seconds} s`)
    // Wall-clock start: within the minute of this test, not at the epoch or a monotonic origin.
    assert.ok(Math.abs(timedOut.startTime[0] * 1000 - Date.now()) < 60_000, String(timedOut.startTime))
    const [failedSpan] = spans('polylock.acquire', wrong)
    assert.equal(failedSpan.attributes['polylock.acquire.result'], 'failed')
    assert.equal(failedSpan.status.code, api.SpanStatusCode.ERROR)
  })

  test('holds and waiters now, hold durations, a granted hand-off, hold and release spans', async () => {
    const { client, collect, spans } = await observed()
    const name = fresh('holds')
    const attributes = lockOf(client, name)
    const first = client.lock(name)
    const second = client.lock(name)
    assert.equal(await first.acquire(), true)
    const sleeps = await watchSleeps()
    const waiting = second.acquire()
    await waitingOnServer(second, { granted: true })
    await sleeps.asleep(second).finally(sleeps.stop)
    // The client counts a subscription once it has read the server's reply: within the wait.
    const metrics = await eventually('one hold and one subscribed waiter', async () => {
      const now = await collect()
      assert.equal(pointOf(now, 'polylock.lock.queued_acquires', attributes), 1)
      const subscribed = pointOf(now, 'polylock.client.subscriptions', { 'polylock.client.name': client.name })
      assert.ok(subscribed >= 1, `the waiter is subscribed: ${subscribed}`)
      return now
    })
    assert.equal(pointOf(metrics, 'polylock.lock.active_holds', attributes), 1)
    await first.release()
    assert.equal(await waiting, true)
    await second.release()

    const done = await collect()
    assert.equal(pointOf(done, 'polylock.lock.active_holds', attributes), 0)
    assert.equal(pointOf(done, 'polylock.lock.queued_acquires', attributes), 0)
    assert.equal(pointOf(done, 'polylock.lock.hold.duration', attributes).count, 2)
    assert.equal(pointOf(done, 'polylock.lock.handoffs', { ...attributes, 'polylock.handoff.type': 'grant' }), 1)
    assert.equal(pointOf(done, 'polylock.lock.handoffs', { ...attributes, 'polylock.handoff.type': 'message' }), 0)
    const woken = spans('polylock.acquire', name).map((span) => span.attributes['polylock.acquire.woken_by'])
    assert.deepEqual(woken.sort(), ['grant', undefined].sort())
    const holds = spans('polylock.hold', name)
    assert.equal(holds.length, 2)
    for (const span of holds) assert.equal(span.attributes['polylock.hold.lost'], false)
    const releases = spans('polylock.release', name)
    assert.equal(releases.length, 2)
    for (const span of releases) {
      assert.equal(span.attributes['polylock.release.ok'], true)
      assert.equal(span.attributes['polylock.release.retries'], 0)
      assert.equal(span.attributes['polylock.lock.kind'], 'lock')
    }
  })

  test('a hand-off by message (a fixed-lease waiter is woken, not granted) and a wake-up that found the lock taken', async () => {
    const { client, collect, spans } = await observed()
    const name = fresh('message')
    const attributes = lockOf(client, name)
    const first = client.lock(name)
    const second = client.lock(name)
    assert.equal(await first.acquire(), true)
    // A waiter with a fixed lease registers for no grant: the release's message wakes it.
    const waiting = second.acquire({ leaseMs: 60_000 })
    await waitingOnServer(second, { granted: false })
    // An unlock message while the lock is still held: the waiter wakes and finds it taken.
    await redis.command('PUBLISH', `redisson_lock__channel:{${name}}`, '0')
    const metrics = await eventually('the wake-up', async () => {
      const now = await collect()
      assert.equal(pointOf(now, 'polylock.lock.wakeups_found_taken', attributes), 1)
      return now
    })
    assert.equal(pointOf(metrics, 'polylock.lock.queued_acquires', attributes), 1)
    await first.release()
    assert.equal(await waiting, true)
    await second.release()
    const done = await collect()
    assert.equal(pointOf(done, 'polylock.lock.handoffs', { ...attributes, 'polylock.handoff.type': 'message' }), 1)
    assert.equal(pointOf(done, 'polylock.lock.handoffs', { ...attributes, 'polylock.handoff.type': 'grant' }), 0)
    const woken = spans('polylock.acquire', name).map((span) => span.attributes['polylock.acquire.woken_by'])
    assert.deepEqual(woken.sort(), ['message', undefined].sort())
  })

  test('watchdog renewals and their spans; leases lost as expired and taken, with lost hold spans', async () => {
    const { client, collect, spans } = await observed({ watchdogTimeoutMs: 300 })
    const renewed = fresh('renewed')
    const lock = client.lock(renewed)
    assert.equal(await lock.acquire(), true)
    await eventually('two renewals', async () => {
      const now = await collect()
      assert.ok(pointOf(now, 'polylock.lock.renewals', { ...lockOf(client, renewed), 'polylock.renewal.result': 'ok' }) >= 2)
    })
    await lock.release()
    const renewals = spans('polylock.renewal', renewed)
    assert.ok(renewals.length >= 2)
    for (const span of renewals) assert.equal(span.attributes['polylock.renewal.result'], 'ok')

    const expiring = fresh('expired')
    const fixed = client.lock(expiring)
    const expired = new Promise((resolve) => fixed.onLost(resolve))
    assert.equal(await fixed.acquire({ leaseMs: 100 }), true)
    await expired
    const taken = fresh('taken')
    const watched = client.lock(taken)
    const lost = new Promise((resolve) => watched.onLost(resolve))
    assert.equal(await watched.acquire(), true)
    await redis.command('DEL', taken)
    await lost

    const metrics = await collect()
    const reason = (lockName, value) => ({ ...lockOf(client, lockName), 'polylock.lost.reason': value })
    assert.equal(pointOf(metrics, 'polylock.lock.leases_lost', reason(expiring, 'expired')), 1)
    assert.equal(pointOf(metrics, 'polylock.lock.leases_lost', reason(expiring, 'taken')), 0)
    assert.equal(pointOf(metrics, 'polylock.lock.leases_lost', reason(taken, 'taken')), 1)
    assert.equal(pointOf(metrics, 'polylock.lock.leases_lost', reason(taken, 'expired')), 0)
    for (const lockName of [expiring, taken]) {
      const holds = spans('polylock.hold', lockName)
      assert.equal(holds.length, 1, lockName)
      assert.equal(holds[0].attributes['polylock.hold.lost'], true, lockName)
    }
  })

  test('a server that stops answering: renewal failures, a lease lost to the connection, server errors', async () => {
    const proxy = await FaultProxy.start(redis.port)
    closing.push(() => proxy.stop())
    const { client, collect, spans } = await observed({ watchdogTimeoutMs: 1000, responseTimeoutMs: 200 }, proxy.url)
    const name = fresh('unreachable')
    const attributes = lockOf(client, name)
    const lock = client.lock(name)
    const lost = new Promise((resolve) => lock.onLost(resolve))
    assert.equal(await lock.acquire(), true)
    await proxy.blackhole()
    await lost
    await proxy.passThrough()

    const metrics = await collect()
    assert.equal(pointOf(metrics, 'polylock.lock.leases_lost', { ...attributes, 'polylock.lost.reason': 'connection' }), 1)
    assert.ok(pointOf(metrics, 'polylock.lock.renewals', { ...attributes, 'polylock.renewal.result': 'failed' }) >= 1)
    const errors = client.metrics().connection.serverErrors
    assert.ok(errors.length >= 1, JSON.stringify(errors))
    for (const { kind, count } of errors) {
      const exported = pointOf(metrics, 'polylock.client.server_errors', { 'polylock.client.name': client.name, 'error.type': kind })
      assert.ok(exported >= count, `${kind}: ${exported} exported, ${count} before`)
    }
    assert.ok(errors.some(({ kind }) => kind === 'timeout'), JSON.stringify(errors))
    const failedRenewals = spans('polylock.renewal', name).filter((span) => span.attributes['polylock.renewal.result'] === 'failed')
    assert.ok(failedRenewals.length >= 1)
    for (const span of failedRenewals) assert.equal(span.status.code, api.SpanStatusCode.ERROR)
  })

  test('a release that cannot reach the server fails and is retried in the background', async () => {
    const proxy = await FaultProxy.start(redis.port)
    closing.push(() => proxy.stop())
    const { client, collect, spans } = await observed({ responseTimeoutMs: 300 }, proxy.url)
    const name = fresh('release')
    const attributes = lockOf(client, name)
    const lock = client.lock(name)
    assert.equal(await lock.acquire({ leaseMs: 60_000 }), true)
    // Refused for a while: the caller's retries run out, the background ones get through later.
    await proxy.refuseFor(1200)
    const error = await lock.release().then(() => null, (err) => err)
    assert.ok(['ERR_TIMEOUT', 'ERR_CONNECTION'].includes(error?.code), String(error))
    // The background retry gets through: the lock is free long before its 60 s lease ends.
    await eventually('the background release', async () => assert.equal(await redis.command('EXISTS', name), 0))

    const metrics = await collect()
    assert.equal(pointOf(metrics, 'polylock.lock.release_failures', attributes), 1)
    assert.equal(pointOf(metrics, 'polylock.lock.release_retries', attributes), 1)
    const [release] = spans('polylock.release', name)
    assert.equal(release.attributes['polylock.release.ok'], false)
    assert.equal(release.status.code, api.SpanStatusCode.ERROR)
  })

  test('server calls, and a reconnect after the connections were cut', async () => {
    const proxy = await FaultProxy.start(redis.port)
    closing.push(() => proxy.stop())
    const { client, collect } = await observed({}, proxy.url)
    const name = fresh('reconnect')
    const lock = client.lock(name)
    assert.equal(await lock.acquire(), true)
    await lock.release()
    const calls = pointOf(await collect(), 'polylock.client.server_calls', { 'polylock.client.name': client.name })
    assert.ok(calls >= 2, `an acquire and a release were sent: ${calls}`)
    await proxy.cut()
    await eventually('a reconnect', async () => {
      // A call finds the connection cut and makes the client connect again.
      await lock.isLocked().catch(() => {})
      const now = await collect()
      assert.ok(pointOf(now, 'polylock.client.reconnects', { 'polylock.client.name': client.name }) >= 1)
    })
    const now = await collect()
    assert.ok(pointOf(now, 'polylock.client.server_calls', { 'polylock.client.name': client.name }) > calls)
  })
})

describe('the instrumentation', { concurrency: false }, () => {
  after(closeAll)

  test('after shutdown the instruments stop reading the client', async () => {
    const { client, collect, instrumentation, spans } = await observed()
    const name = fresh('shutdown')
    const lock = client.lock(name)
    assert.equal(await lock.acquire(), true)
    await lock.release()
    const calls = () => pointOf(metrics, 'polylock.client.server_calls', { 'polylock.client.name': client.name })
    let metrics = await collect()
    const before = calls()
    assert.ok(before > 0)
    instrumentation.shutdown()
    instrumentation.shutdown() // twice is harmless
    assert.equal(spans('polylock.acquire', name).length, 1, 'shutdown flushed')
    assert.equal(await lock.acquire(), true)
    await lock.release()
    metrics = await collect()
    // A cumulative reader keeps the last values of a series; they no longer move.
    assert.equal(calls(), before)
    assert.equal(pointOf(metrics, 'polylock.lock.acquires', { ...lockOf(client, name), 'polylock.acquire.result': 'acquired' }), 1)
    assert.equal(pointOf(metrics, 'polylock.lock.hold.duration', lockOf(client, name)).count, 1)
    assert.equal(spans('polylock.acquire', name).length, 1)
    assert.ok(client.metrics().connection.serverCalls > before, 'the client still counts')
  })

  test('the timer drains the events into spans without a collection or a flush', async () => {
    const client = await Client.connect(redis.url)
    const exporter = new InMemorySpanExporter()
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
    const instrumentation = instrument(client, { tracerProvider, meterProvider: new MeterProvider() })
    closing.push(async () => {
      instrumentation.shutdown()
      await client.close()
    })
    const name = fresh('timer')
    const lock = client.lock(name)
    assert.equal(await lock.acquire(), true)
    await lock.release()
    await eventually('the spans', () => {
      const names = exporter.getFinishedSpans()
        .filter((span) => span.attributes['polylock.lock.name'] === name).map((span) => span.name).sort()
      assert.deepEqual(names, ['polylock.acquire', 'polylock.hold', 'polylock.release'])
    })
    instrumentation.shutdown()
    assert.equal(await lock.acquire(), true)
    await lock.release()
    await sleep(1500) // longer than the timer's period: nothing more may come
    assert.equal(exporter.getFinishedSpans().filter((span) => span.attributes['polylock.lock.name'] === name).length, 3)
  })

  test('the global providers when none is given', async () => {
    const reader = new CollectingReader()
    const meterProvider = new MeterProvider({ readers: [reader] })
    const exporter = new InMemorySpanExporter()
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
    assert.ok(api.metrics.setGlobalMeterProvider(meterProvider))
    assert.ok(api.trace.setGlobalTracerProvider(tracerProvider))
    const client = await Client.connect(redis.url)
    const instrumentation = instrument(client)
    closing.push(async () => {
      instrumentation.shutdown()
      await client.close()
      api.metrics.disable()
      api.trace.disable()
    })
    const name = fresh('global')
    const lock = client.lock(name)
    assert.equal(await lock.acquire(), true)
    await lock.release()
    instrumentation.flush()
    assert.equal(exporter.getFinishedSpans().filter((span) => span.attributes['polylock.lock.name'] === name).length, 3)
    const { resourceMetrics } = await reader.collect()
    const scope = resourceMetrics.scopeMetrics.find((metrics) => metrics.scope.name === 'polylock')
    assert.ok(scope.metrics.some((metric) => metric.descriptor.name === 'polylock.lock.acquires'))
  })

  test('instrument(notAClient) is ERR_INVALID_ARGUMENT', () => {
    for (const value of [undefined, {}, 'client']) {
      assert.throws(() => instrument(/** @type {any} */ (value)), {
        code: 'ERR_INVALID_ARGUMENT',
        message: 'invalid argument: instrument(client): client must be a Client',
      })
    }
  })
})

test('without @opentelemetry/api the package loads and the otel module says what to install', () => {
  // A process in which the optional peer cannot be resolved, as in a project that lacks it.
  const script = `
    const Module = require('node:module')
    const resolve = Module._resolveFilename
    Module._resolveFilename = function (request, ...rest) {
      if (request === '@opentelemetry/api') throw Object.assign(new Error('not installed'), { code: 'MODULE_NOT_FOUND' })
      return resolve.call(this, request, ...rest)
    }
    console.log(typeof require('@polylock/polylock').Client.connect)
    try { require('@polylock/polylock/otel') } catch (err) { console.log(err.code + ': ' + err.message) }
  `
  const result = spawnSync(process.execPath, ['-e', script], { cwd: __dirname, encoding: 'utf8', timeout: 60_000 })
  assert.equal(result.stdout, 'function\nMODULE_NOT_FOUND: @polylock/polylock/otel needs the package @opentelemetry/api: npm install @opentelemetry/api\n',
    result.stderr)
})
