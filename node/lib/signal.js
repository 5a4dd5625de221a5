// @ts-check
'use strict'

// An AbortSignal as the native Cancellation (src/cancellation.rs) of an acquire: what every
// handle's acquire shares.

const native = require('../native.js')
const { codedError } = require('./errors.js')

/**
 * Runs a native acquire with a Cancellation fired by `options.signal`. Rejects with the signal's
 * reason when it aborts, holding nothing: what was taken after the abort is given back with
 * `giveBack`. Without a signal, the native acquire runs as it is (no Cancellation: the hot path
 * of many locks allocates none). Every caller turns a throw here into a rejection (an async
 * method, or `Lock`'s try/catch).
 * @template T
 * @param {{ signal?: AbortSignal } | null | undefined} options
 * @param {(cancellation: import('../native').Cancellation | undefined) => Promise<T>} acquire
 * @param {(taken: NonNullable<T>) => Promise<void>} giveBack called when `taken` is truthy
 * @returns {Promise<T>}
 */
function acquireWithSignal(options, acquire, giveBack) {
  const signal = options?.signal ?? undefined
  if (signal === undefined) return acquire(undefined)
  if (!(signal instanceof AbortSignal)) {
    throw codedError('ERR_INVALID_ARGUMENT', 'invalid argument: signal must be an AbortSignal')
  }
  return acquireCancellable(signal, acquire, giveBack)
}

/**
 * {@link acquireWithSignal} with a signal.
 * @template T
 * @param {AbortSignal} signal
 * @param {(cancellation: import('../native').Cancellation | undefined) => Promise<T>} acquire
 * @param {(taken: NonNullable<T>) => Promise<void>} giveBack
 * @returns {Promise<T>}
 */
async function acquireCancellable(signal, acquire, giveBack) {
  const cancellation = new native.Cancellation()
  const cancel = () => cancellation.cancel()
  // Already aborted: the native call still checks the other options, then makes no attempt.
  if (signal.aborted) cancel()
  else signal.addEventListener('abort', cancel, { once: true })
  let taken
  try {
    taken = await acquire(cancellation)
  } finally {
    signal.removeEventListener('abort', cancel)
  }
  if (signal.aborted) {
    // The abort came after the acquire succeeded: give it back, so an abort never leaves a hold.
    if (taken) await giveBack(taken)
    throw signal.reason
  }
  return taken
}

module.exports = { acquireWithSignal }
