/// <reference lib="esnext.disposable" />
/// <reference types="node" />

/** Options of {@link Client.connect}. Times in milliseconds. */
export interface ConnectOptions {
  /** The lease of locks acquired without `leaseMs`, renewed every third of it. Default 30000. */
  watchdogTimeoutMs?: number
  /** How long connecting may take before `ERR_CONNECTION`. Default 5000. */
  connectTimeoutMs?: number
  /** How long one Redis command may wait for its answer before `ERR_TIMEOUT`. Default 5000. */
  responseTimeoutMs?: number
  /** How long a fair-lock waiter that stopped answering (its process died) keeps its place. Default 10000. */
  fairQueueTimeoutMs?: number
}

/** Options of {@link Lock.acquire} and {@link Lock.using}. Times in milliseconds. */
export interface AcquireOptions {
  /** Longest wait: none or `Infinity` = no bound, 0 = one attempt. Fractions of a ms are accepted. */
  waitMs?: number
  /** A fixed lease, never renewed (1 ms to 10 years). None = the watchdog-renewed lease. */
  leaseMs?: number
  /** Aborting it rejects the call with the signal's reason (an `AbortError`); no lock is left held. */
  signal?: AbortSignal
}

/** The `code` of every error polylock rejects or throws with. */
export type PolylockErrorCode =
  | 'ERR_INVALID_ARGUMENT'
  | 'ERR_NOT_HELD'
  | 'ERR_LOCK_LOST'
  | 'ERR_CONNECTION'
  | 'ERR_TIMEOUT'
  | 'ERR_WRONG_TYPE'
  | 'ERR_REDIS'
  | 'ERR_STALE_TOKEN'

/** An `Error` from polylock (abort rejections are the signal's reason instead). */
export interface PolylockError extends Error {
  code: PolylockErrorCode
}

/** A connection to one Redis server, shared by every lock made from it. */
export declare class Client {
  private constructor()
  /** Connects; rejects with `ERR_CONNECTION` when the server cannot be reached in time. */
  static connect(url: string, options?: ConnectOptions): Promise<Client>
  /** This client's id, the first half of every owner string it writes. */
  readonly id: string
  /**
   * A new handle on the lock `name`, and so a new owner: every call gives a different holder;
   * the same handle re-enters. No I/O. Throws `ERR_INVALID_ARGUMENT` for an empty name.
   */
  lock(name: string): Lock
  /**
   * A new handle on the fair lock `name` (Redisson's RFairLock layout): waiters are served in
   * arrival order and a release wakes only the next one. Same handle API as `lock`. No I/O.
   */
  fairLock(name: string): Lock
  /**
   * Stops the watchdog and the pub/sub connection. Resolves to the names of locks still held
   * through this client: they are not released and expire with their lease.
   */
  close(): Promise<string[]>
}

/**
 * One owner's handle on one Redis lock (Redisson's reentrant lock layout). Give each concurrent
 * async flow its own handle: flows sharing a handle share its holds.
 */
export declare class Lock {
  private constructor()
  readonly name: string
  /** `<client-id>:<holder-id>`, the owner this handle writes. */
  readonly owner: string
  /** Whether the current hold's lease was lost (no I/O). */
  readonly lost: boolean
  /**
   * Acquires the lock, or re-enters it. Resolves `false` when a `waitMs` bound runs out.
   * Rejects with the signal's reason when `signal` aborts, also if it already had.
   */
  acquire(options?: AcquireOptions): Promise<boolean>
  /** Releases one level of the hold: `ERR_NOT_HELD` when not held, `ERR_LOCK_LOST` when lost. */
  release(): Promise<void>
  /**
   * Acquires, runs `routine`, and always releases; resolves to what `routine` resolves to.
   * `routine`'s signal aborts (reason: an `ERR_LOCK_LOST` error) if the lease is lost meanwhile.
   * Rejects with `ERR_TIMEOUT` without running `routine` when a `waitMs` bound runs out.
   * `options.signal` aborts the wait for the lock only, as in {@link Lock.acquire}.
   * When `routine` throws, that error is the one rejected with.
   */
  using<T>(routine: (signal: AbortSignal) => Promise<T> | T, options?: AcquireOptions): Promise<T>
  /** Whether this handle holds the lock (no I/O). */
  isHeld(): boolean
  /** How many unreleased acquisitions this handle has (no I/O). */
  holdCount(): number
  /** Whether anyone holds the lock. */
  isLocked(): Promise<boolean>
  /** Deletes the lock whoever holds it; `true` when there was one. */
  forceUnlock(): Promise<boolean>
  /** Releases every level this handle holds; rejects with `ERR_LOCK_LOST` if the hold was lost. */
  [Symbol.asyncDispose](): Promise<void>
}
