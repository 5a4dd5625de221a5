// Type-checked with tsc --noEmit --strict against the installed package (make test-dist-node).
import { Client, setLogger, type AcquireOptions, type LockOptions, type PolylockError } from '@polylock/polylock'

export async function run(url: string): Promise<number | null> {
  const client: Client = await Client.connect(url, { connectTimeoutMs: 1000, watchdogTimeoutMs: 30_000 })
  const defaults: LockOptions = { waitMs: 5000, leaseMs: 30_000 }
  const lock = client.lock('orders:42', defaults)
  lock.onLost((error: PolylockError) => console.error(error.code))
  setLogger((level, message, fields) => console.log(level, message, fields), 'warn')
  const once: AcquireOptions = { waitMs: Infinity, signal: AbortSignal.timeout(10_000) }
  const remaining = (await lock.acquire(once)) ? await lock.remainingLease() : null
  await lock.release()
  // @ts-expect-error waitMs is a number of milliseconds
  client.lock('x', { waitMs: '5s' })
  await client.close()
  return remaining
}
