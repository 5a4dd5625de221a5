// Type-checked (tsc --noEmit) against index.d.ts: the README's usage, plus misuses that must
// not compile (each `@ts-expect-error` fails the check if its line does compile).

import { Client, Lock, type AcquireOptions, type PolylockError } from 'polylock'

async function main(): Promise<void> {
  const client: Client = await Client.connect('redis://127.0.0.1:6379/0', {
    watchdogTimeoutMs: 30000,
    connectTimeoutMs: 5000,
    responseTimeoutMs: 5000,
    fairQueueTimeoutMs: 10000,
  })
  const lock: Lock = client.lock('orders:42')
  const fair: Lock = client.fairLock('orders:queue')
  const served: string = await fair.using(async () => 'in turn', { waitMs: 5000 })
  if (await fair.acquire({ waitMs: 0 })) await fair.release()
  console.log(served)

  const controller = new AbortController()
  const options: AcquireOptions = { waitMs: 5000, leaseMs: 10000, signal: controller.signal }
  if (await lock.acquire(options)) {
    try {
      const held: boolean = lock.isHeld()
      const count: number = lock.holdCount()
      const lost: boolean = lock.lost
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

  // @ts-expect-error waitMs is a number of milliseconds
  await lock.acquire({ waitMs: '5s' })
  // @ts-expect-error fairQueueTimeoutMs is a number of milliseconds
  await Client.connect('redis://127.0.0.1:6379/0', { fairQueueTimeoutMs: '10s' })
  // @ts-expect-error a fair lock has a name
  client.fairLock()
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
  // @ts-expect-error not a code polylock uses
  const bad: PolylockError['code'] = 'ERR_OTHER'
  console.log(wrong, bad)
}

void main
