import type { MeterProvider, TracerProvider } from '@opentelemetry/api'
import type { Client } from './index'

/** The providers {@link instrument} takes its meter and tracer (both named `polylock`) from. */
export interface InstrumentOptions {
  /** Default: the global one (`metrics.getMeterProvider()` of `@opentelemetry/api`). */
  meterProvider?: MeterProvider | null
  /** Default: the global one (`trace.getTracerProvider()` of `@opentelemetry/api`). */
  tracerProvider?: TracerProvider | null
}

/** A client's running OpenTelemetry export, made by {@link instrument}. */
export interface Instrumentation {
  /**
   * Records the durations and makes the spans of the acquires, holds, releases and renewals
   * that ended since the last collection (otherwise done at each collection and every second).
   * Exporting them is the providers' job (`forceFlush()`).
   */
  flush(): void
  /** Flushes, then stops: the instruments report nothing more and no events are kept. */
  shutdown(): void
}

/**
 * Exports `client`'s metrics and spans through OpenTelemetry: `polylock.lock.*` and
 * `polylock.client.*` instruments (counters read from `client.metrics()` at each collection,
 * histograms of time in queue and hold duration) and `polylock.acquire`, `polylock.hold`,
 * `polylock.release` and `polylock.renewal` spans with their exact start and duration. One
 * instrumentation per client. Throws `ERR_INVALID_ARGUMENT` when `client` is not a `Client`.
 */
export declare function instrument(client: Client, options?: InstrumentOptions): Instrumentation
