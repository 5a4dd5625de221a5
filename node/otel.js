// @ts-check
'use strict'

// OpenTelemetry metrics and spans of a polylock Client (`@polylock/polylock/otel`), on the
// optional peer dependency @opentelemetry/api. The instruments and spans are those of every
// language (docs/observability.md): the counters and up-down counters are observable ones that
// read `client.metrics()` when a reader collects; the two histograms and the spans are made
// from the core's metric events, drained at each collection (an SDK runs the observable
// callbacks before it reads the synchronous instruments, so no recorded duration is late), on
// an unref'd timer every second (spans), and by flush() and shutdown().

/** @type {typeof import('@opentelemetry/api')} */
let api
try {
  api = require('@opentelemetry/api')
} catch (err) {
  throw Object.assign(
    new Error('@polylock/polylock/otel needs the package @opentelemetry/api: npm install @opentelemetry/api'),
    { code: 'MODULE_NOT_FOUND', cause: err })
}

const native = require('./native.js')
/** The internal export of ./index.js, not declared in index.d.ts. */
const { nativeClientOf } = /** @type {{ nativeClientOf(client: unknown): import('./native').Client | undefined }} */ (
  /** @type {unknown} */ (require('./index.js')))
const { version } = require('./package.json')

/** How often the events are drained for spans when no reader collects. */
const DRAIN_INTERVAL_MS = 1000

const CLIENT_NAME = 'polylock.client.name'
const LOCK_NAME = 'polylock.lock.name'
const LOCK_KIND = 'polylock.lock.kind'
const ACQUIRE_RESULT = 'polylock.acquire.result'

/**
 * The observable instruments: name, up-down or not, unit, description, and each data point's
 * value (with its extra attributes) from one lock's or the connection's metrics.
 * @typedef {import('./index').LockMetrics} LockMetrics
 * @typedef {import('./index').ConnectionMetrics} ConnectionMetrics
 * @type {Array<{ name: string, upDown: boolean, unit: string, description: string,
 *   lock?: (lock: LockMetrics) => Array<[number, Record<string, string>]>,
 *   connection?: (connection: ConnectionMetrics) => Array<[number, Record<string, string>]> }>}
 */
const OBSERVED = [
  {
    name: 'polylock.lock.acquires', upDown: false, unit: '{acquire}',
    description: 'Acquires that ended, by result',
    lock: (lock) => [
      [lock.acquired, { [ACQUIRE_RESULT]: 'acquired' }],
      [lock.timedOut, { [ACQUIRE_RESULT]: 'timed_out' }],
      [lock.cancelled, { [ACQUIRE_RESULT]: 'cancelled' }],
      [lock.failed, { [ACQUIRE_RESULT]: 'failed' }],
    ],
  },
  {
    name: 'polylock.lock.active_holds', upDown: true, unit: '{hold}',
    description: 'Holds current now',
    lock: (lock) => [[lock.holds, {}]],
  },
  {
    name: 'polylock.lock.queued_acquires', upDown: true, unit: '{acquire}',
    description: 'Acquires waiting now',
    lock: (lock) => [[lock.waiters, {}]],
  },
  {
    name: 'polylock.lock.handoffs', upDown: false, unit: '{handoff}',
    description: 'Acquires that got the lock from its releaser: handed over (grant) or woken by a message',
    lock: (lock) => [
      [lock.handoffsGranted, { 'polylock.handoff.type': 'grant' }],
      [lock.handoffsWoken, { 'polylock.handoff.type': 'message' }],
    ],
  },
  {
    name: 'polylock.lock.wakeups_found_taken', upDown: false, unit: '{wakeup}',
    description: 'Wake-ups of a waiting acquire that found the lock taken again',
    lock: (lock) => [[lock.wakeupsFoundTaken, {}]],
  },
  {
    name: 'polylock.lock.renewals', upDown: false, unit: '{renewal}',
    description: 'Lease renewals, by result',
    lock: (lock) => [
      [lock.renewals, { 'polylock.renewal.result': 'ok' }],
      [lock.renewalFailures, { 'polylock.renewal.result': 'failed' }],
    ],
  },
  {
    name: 'polylock.lock.leases_lost', upDown: false, unit: '{lease}',
    description: 'Holds lost, by reason',
    lock: (lock) => [
      [lock.lostExpired, { 'polylock.lost.reason': 'expired' }],
      [lock.lostTaken, { 'polylock.lost.reason': 'taken' }],
      [lock.lostConnection, { 'polylock.lost.reason': 'connection' }],
    ],
  },
  {
    name: 'polylock.lock.release_failures', upDown: false, unit: '{release}',
    description: 'Releases that ended with an error',
    lock: (lock) => [[lock.releaseFailures, {}]],
  },
  {
    name: 'polylock.lock.release_retries', upDown: false, unit: '{release}',
    description: 'Releases retried in the background after the call returned',
    lock: (lock) => [[lock.releaseRetries, {}]],
  },
  {
    name: 'polylock.client.server_calls', upDown: false, unit: '{call}',
    description: 'Commands and scripts sent to the server',
    connection: (connection) => [[connection.serverCalls, {}]],
  },
  {
    name: 'polylock.client.server_errors', upDown: false, unit: '{error}',
    description: 'Server calls that failed, by error kind',
    connection: (connection) => connection.serverErrors.map(({ kind, count }) => [count, { 'error.type': kind }]),
  },
  {
    name: 'polylock.client.subscriptions', upDown: true, unit: '{subscription}',
    description: 'Pub/sub channels subscribed now',
    connection: (connection) => [[connection.subscriptions, {}]],
  },
  {
    name: 'polylock.client.reconnects', upDown: false, unit: '{reconnect}',
    description: 'Reconnects of the command or pub/sub connections',
    connection: (connection) => [[connection.reconnects, {}]],
  },
]

/** A time in milliseconds since the epoch as OpenTelemetry's [seconds, nanoseconds]. */
function hrTime(/** @type {number} */ ms) {
  const seconds = Math.floor(ms / 1000)
  return /** @type {import('@opentelemetry/api').HrTime} */ ([seconds, Math.round((ms - seconds * 1000) * 1e6)])
}

/** `start` plus `seconds`, as [seconds, nanoseconds]. */
function after(/** @type {import('@opentelemetry/api').HrTime} */ start, /** @type {number} */ seconds) {
  const whole = Math.floor(seconds)
  let nanos = start[1] + Math.round((seconds - whole) * 1e9)
  let secs = start[0] + whole
  if (nanos >= 1e9) {
    secs += 1
    nanos -= 1e9
  }
  return /** @type {import('@opentelemetry/api').HrTime} */ ([secs, nanos])
}

/**
 * The span of one metric event, or none (a lost lease is counted, and ends its hold's span).
 * @param {import('./native').MetricEvent} event
 * @returns {{ name: string, attributes: Record<string, string | number | boolean>, error: boolean } | null}
 */
function spanOf(event) {
  const lockAttributes = { [LOCK_NAME]: event.lockName, [LOCK_KIND]: event.lockKind }
  switch (event.operation) {
    case 'acquire': {
      /** @type {Record<string, string | number | boolean>} */
      const attributes = {
        ...lockAttributes,
        [ACQUIRE_RESULT]: event.result ?? 'failed',
        'polylock.acquire.attempts': event.attempts ?? 0,
      }
      if (event.wokenBy != null) attributes['polylock.acquire.woken_by'] = event.wokenBy
      return { name: 'polylock.acquire', attributes, error: event.result === 'failed' }
    }
    case 'hold':
      return { name: 'polylock.hold', attributes: { ...lockAttributes, 'polylock.hold.lost': event.lost ?? false }, error: false }
    case 'release':
      return {
        name: 'polylock.release',
        attributes: { ...lockAttributes, 'polylock.release.ok': event.ok ?? false, 'polylock.release.retries': event.retries ?? 0 },
        error: !event.ok,
      }
    case 'renewal':
      return {
        name: 'polylock.renewal',
        attributes: { ...lockAttributes, 'polylock.renewal.result': event.ok ? 'ok' : 'failed' },
        error: !event.ok,
      }
    default:
      return null
  }
}

/**
 * Exports `client`'s metrics and spans through OpenTelemetry: the meter and tracer `polylock`
 * of the given providers, else of the global ones (`@opentelemetry/api`'s `metrics` and
 * `trace`). One instrumentation per client: two would share its events between them.
 * @param {import('./index').Client} client
 * @param {import('./otel').InstrumentOptions} [options]
 * @returns {import('./otel').Instrumentation}
 */
function instrument(client, options) {
  const found = nativeClientOf(client)
  if (found === undefined) {
    throw Object.assign(new Error('invalid argument: instrument(client): client must be a Client'),
      { code: 'ERR_INVALID_ARGUMENT' })
  }
  const handle = found
  const meterProvider = options?.meterProvider ?? api.metrics.getMeterProvider()
  const tracerProvider = options?.tracerProvider ?? api.trace.getTracerProvider()
  const meter = meterProvider.getMeter('polylock', version)
  const tracer = tracerProvider.getTracer('polylock', version)
  const clientAttributes = { [CLIENT_NAME]: handle.name }
  const bounds = native.metricsBucketBoundsSeconds()

  const timeInQueue = meter.createHistogram('polylock.lock.acquire.time_in_queue', {
    unit: 's',
    description: 'Time from an acquire\'s call to its end, by result',
    advice: { explicitBucketBoundaries: bounds },
  })
  const holdDuration = meter.createHistogram('polylock.lock.hold.duration', {
    unit: 's',
    description: 'Time from an acquire to the release or loss of that hold',
    advice: { explicitBucketBoundaries: bounds },
  })
  const observed = OBSERVED.map((spec) => {
    const make = spec.upDown ? meter.createObservableUpDownCounter : meter.createObservableCounter
    return { spec, instrument: make.call(meter, spec.name, { unit: spec.unit, description: spec.description }) }
  })

  /** Feeds the histograms and makes the spans of the events buffered since the last drain. */
  function drain() {
    for (const event of handle.drainMetricEvents()) {
      const lockAttributes = { ...clientAttributes, [LOCK_NAME]: event.lockName, [LOCK_KIND]: event.lockKind }
      if (event.operation === 'acquire') {
        timeInQueue.record(event.durationSeconds, { ...lockAttributes, [ACQUIRE_RESULT]: event.result ?? 'failed' })
      } else if (event.operation === 'hold') {
        holdDuration.record(event.durationSeconds, lockAttributes)
      }
      const made = spanOf(event)
      if (made === null) continue
      const start = hrTime(event.startedMs)
      // A root span: the drain runs outside the caller's context, so a parent would be a guess.
      const span = tracer.startSpan(made.name, { startTime: start, attributes: made.attributes, root: true })
      if (made.error) span.setStatus({ code: api.SpanStatusCode.ERROR })
      span.end(after(start, event.durationSeconds))
    }
  }

  /** @type {import('@opentelemetry/api').BatchObservableCallback} */
  const observe = (result) => {
    drain()
    const snapshot = handle.metrics()
    for (const { spec, instrument } of observed) {
      if (spec.lock) {
        for (const lock of snapshot.locks) {
          const lockAttributes = { ...clientAttributes, [LOCK_NAME]: lock.name, [LOCK_KIND]: lock.kind }
          for (const [value, extra] of spec.lock(lock)) result.observe(instrument, value, { ...lockAttributes, ...extra })
        }
      } else if (spec.connection) {
        for (const [value, extra] of spec.connection(snapshot.connection)) {
          result.observe(instrument, value, { ...clientAttributes, ...extra })
        }
      }
    }
  }

  handle.recordMetricEvents(true)
  const instruments = observed.map(({ instrument }) => instrument)
  meter.addBatchObservableCallback(observe, instruments)
  const timer = setInterval(drain, DRAIN_INTERVAL_MS)
  timer.unref()
  let stopped = false

  return {
    flush() {
      if (!stopped) drain()
    },
    shutdown() {
      if (stopped) return
      stopped = true
      clearInterval(timer)
      drain()
      handle.recordMetricEvents(false)
      meter.removeBatchObservableCallback(observe, instruments)
    },
  }
}

exports.instrument = instrument
