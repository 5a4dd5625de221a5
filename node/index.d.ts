/// <reference lib="esnext.disposable" />
/// <reference types="node" />

import type * as native from './native'

/** Options of {@link Client.connect} (declared in Rust). Times in milliseconds. */
export type ConnectOptions = native.ConnectOptions

/** What {@link Client.metrics} gives: everything one client counted since it connected. */
export type MetricsSnapshot = native.MetricsSnapshot
/** The counters, gauges and histograms of one lock name and kind. */
export type LockMetrics = native.LockMetrics
/** A histogram of durations in seconds (`bucketCounts` per bucket, not cumulative). */
export type Histogram = native.Histogram
/** The counters of a client's connections. */
export type ConnectionMetrics = native.ConnectionMetrics

/**
 * A lock's own options ({@link Client.lock}): the wait and lease its acquires, `using` and
 * `await using` take when they leave them out, and how its waiters wait (`waitMode`,
 * `pollMinMs`, `pollMaxMs`; left out: the client's). Declared in Rust; times in milliseconds.
 */
export type LockOptions = native.LockOptions

/**
 * Options of {@link Lock.acquire} and {@link Lock.using}. Times in milliseconds. An option left
 * out (or `null`) takes the lock's default; `waitMs: Infinity` waits without bound whatever the
 * default.
 */
export interface AcquireOptions extends native.AcquireOptions {
  /** Aborting it rejects the call with the signal's reason (an `AbortError`); no lock is left held. */
  signal?: AbortSignal
}

/** Options of {@link Client.withLock}: {@link Lock.using}'s, plus which kind of lock. */
export interface WithLockOptions extends AcquireOptions {
  /** `'lock'` (the default), `'fairLock'`, `'fifoLock'` or `'fencedLock'`: which client method makes the handle. */
  kind?: 'lock' | 'fairLock' | 'fifoLock' | 'fencedLock'
}

/** Options of {@link Client.jobLock} and {@link Client.runJob} (declared in Rust). Times in milliseconds. */
export type JobLockOptions = native.JobLockOptions

/** What {@link JobLock.run} and {@link Client.runJob} resolve to: whether the job ran here, and its result. */
export type JobRun<T> = { ran: true; value: T } | { ran: false; value?: undefined }

/** Options of {@link Semaphore.acquire}. Times in milliseconds. */
export interface SemaphoreAcquireOptions extends native.SemaphoreAcquireOptions {
  /** Aborting it rejects the call with the signal's reason (an `AbortError`); no permit is left taken. */
  signal?: AbortSignal
}

/** The levels of {@link setLogger}, most severe first. */
export type LogLevel = 'error' | 'warn' | 'info' | 'debug' | 'trace'

/**
 * A log hook: `message` is the event's text, `fields` its structured values (for a lost lease:
 * `lock`, `owner`, `error`).
 */
export type Logger = (level: LogLevel, message: string, fields: Record<string, string | number | boolean>) => void

/**
 * Sends polylock's log events (the Rust core's tracing events) at `level` and above (default
 * `'info'`) to `logger`; `null` stops it. One logger per process: a call replaces the last. A
 * lost lease is a `warn`. The logger runs on the main thread, never keeps the process alive,
 * and misses events when it falls thousands behind.
 */
export declare function setLogger(logger: Logger | null, level?: LogLevel): void

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
  | 'ERR_NOT_SYNCED'
  | 'ERR_PERMISSION'

/**
 * An `Error` from polylock (abort rejections are the signal's reason instead). An argument or
 * option of the wrong JavaScript type (`{ waitMs: '5' }`, which TypeScript refuses) is
 * `ERR_INVALID_ARGUMENT` too, naming it: `invalid argument: waitMs must be a number, not string`.
 */
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
  /** The client's name (the `name` option, default `host:pid`): tools and a timed-out `using` of another client name the holder of a lock by it. */
  readonly name: string
  /** The lease of watchdog-renewed locks, in milliseconds (the `watchdogTimeoutMs` option). */
  readonly watchdogTimeoutMs: number
  /**
   * What the locks of this client did since it connected: per lock name and kind, acquires by
   * result, current holds and waiters, wait and hold histograms, hand-offs, renewals, lost
   * leases, release failures; and the connection's calls, errors, subscriptions, reconnects.
   * No I/O; all zero when the client was made with `metrics: false`.
   */
  metrics(): MetricsSnapshot
  /**
   * A new handle on the lock `name`, and so a new owner: every call gives a different holder;
   * the same handle re-enters. No I/O. Throws `ERR_INVALID_ARGUMENT` for an empty name, or
   * for `defaults` an acquire would reject (the same message). `defaults` are the wait and
   * lease of its acquires when they leave them out, `client.lock(name, { waitMs: 5000,
   * leaseMs: 30000 })`; `waitMs: Infinity` in one call still waits without bound.
   * `waitMode: 'poll'` (with `pollMinMs`, `pollMaxMs`) or `'pubsub'` makes this lock's waiters
   * wait so instead of as the client's `waitMode` says.
   */
  lock(name: string, defaults?: LockOptions): Lock
  /**
   * A new handle on the fair lock `name` (Redisson's RFairLock layout): waiters are served in
   * arrival order and a release wakes only the next one. Same handle API as `lock`. No I/O.
   */
  fairLock(name: string, defaults?: LockOptions): Lock
  /**
   * A new handle on the FIFO lock `name` (polylock's own layout, not Redisson's): waiters are
   * served in arrival order and a release hands the lock to the next one directly, at about
   * half the server calls of {@link Client.fairLock}. It excludes every other lock of the same
   * name ({@link Client.lock}, Redisson's RLock), but Redisson clients do not see its line
   * (Redisson's RFairLock clients do not wait in it). Same handle API as `lock`. No I/O.
   */
  fifoLock(name: string, defaults?: LockOptions): Lock
  /**
   * A new handle on the fenced lock `name` (Redisson's RFencedLock layout): the lock API, plus
   * `lock.token`, which grows on every acquisition (across holders, and on reentry). No I/O.
   */
  fencedLock(name: string, defaults?: LockOptions): Lock
  /**
   * Runs `routine` under the lock `name` and resolves to its result: a new handle's
   * {@link Lock.using}, so concurrent calls exclude each other (same defaults; `ERR_TIMEOUT`
   * with the core's message naming the holder when `waitMs` runs out; released after the
   * routine returns or throws). `options.kind` picks the kind of lock.
   */
  withLock<T>(name: string, routine: (signal: AbortSignal) => Promise<T> | T, options?: WithLockOptions): Promise<T>
  /**
   * Sets `key` to `value` (a Redis string, no expiry) only if `token` is at least the highest
   * token already applied to `key` (equal is accepted); else rejects with `ERR_STALE_TOKEN` and
   * writes nothing. `token` is a `lock.token` of the one fenced lock that guards `key`; a
   * number that is not an integer is truncated.
   */
  fencedSet(key: string, value: string | Buffer, token: number): Promise<void>
  /** Deletes `key` under the rule of {@link Client.fencedSet}; resolves `true` when a key was deleted. */
  fencedDelete(key: string, token: number): Promise<boolean>
  /**
   * A new owner's handle on the read-write lock `name` (Redisson's RReadWriteLock layout). No I/O.
   * `defaults` are those of both its locks (see {@link Client.lock}).
   */
  readWriteLock(name: string, defaults?: native.AcquireOptions): ReadWriteLock
  /**
   * A handle on the semaphore `name` (Redisson's RSemaphore layout). Permits belong to nobody
   * and never expire: permits taken by a process that dies are lost. No I/O.
   */
  semaphore(name: string): Semaphore
  /**
   * A handle on the expirable semaphore `name` (Redisson's RPermitExpirableSemaphore layout):
   * each permit has an id and a lease, and comes back when its lease runs out. No I/O.
   */
  expirableSemaphore(name: string): ExpirableSemaphore
  /**
   * Stops the watchdog and the pub/sub connection. Resolves to the names of locks still held
   * through this client: they are not released and expire with their lease.
   */
  close(): Promise<string[]>
  /**
   * A run-once job lock on the lock `name` (ShedLock's semantics): held at most `atMostMs` (a
   * fixed lease: a node that dies holding it blocks the job no longer), at least `atLeastMs`
   * (default 0) from the job's start, so a node whose clock or schedule lags by less skips.
   * No I/O; `ERR_INVALID_ARGUMENT` with the core's message unless 0 < atMostMs and
   * atLeastMs <= atMostMs.
   */
  jobLock(name: string, options: JobLockOptions): JobLock
  /**
   * Runs `routine` once across the nodes that fire it (`client.jobLock(name, options).run(routine)`):
   * never waits; `{ ran: false }` when another node holds the lock, else `{ ran: true, value }`.
   */
  runJob<T>(name: string, routine: () => Promise<T> | T, options: JobLockOptions): Promise<JobRun<T>>
  /** A handle on the count-down latch `name` (Redisson's RCountDownLatch layout). No I/O. */
  countDownLatch(name: string): CountDownLatch
  /**
   * The leader election `name`: candidates campaign on the fenced lock `name`, whose token is
   * each leader's term. No I/O.
   */
  election(name: string): Election
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
  /** The lock's defaults from `client.lock(name, defaults)`; a field is absent when none was set. */
  readonly defaults: native.AcquireOptions
  /** Whether the current hold's lease was lost (no I/O). */
  isLost(): boolean
  /**
   * The holder's remaining lease in milliseconds (asks Redis, whoever holds it): `null` when
   * nobody holds the lock, `Infinity` when its key has no expiry.
   */
  remainingLease(): Promise<number | null>
  /**
   * Calls `callback` with an `ERR_LOCK_LOST` error each time a hold of this handle is lost (a
   * fixed lease ran out while held, or Redis could not be reached to renew it). The callback
   * never keeps the process alive. It must not reference this handle, or the handle could never
   * be garbage-collected.
   */
  onLost(callback: (error: PolylockError) => void): void
  /**
   * The fencing token of the current hold of a fenced lock ({@link Client.fencedLock}): the
   * token of its latest acquisition, reentrant ones included. Tokens grow by one per
   * acquisition, so they stay far below 2^53 and are exact as numbers. `null` when this handle
   * holds nothing (or lost its hold), and for other kinds of lock. No I/O.
   */
  readonly token: number | null
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

/** What {@link MultiLock} and {@link RedLock} share: the lock API over several locks. */
export declare abstract class LockGroup {
  /** The distinct names of its locks, joined by ", ". */
  readonly name: string
  /** How many of its locks must be held: all (MultiLock) or `n / 2 + 1` (RedLock). */
  readonly quorum: number
  /**
   * Acquires (one more level of) the group: every lock in parallel, each waiting at most what
   * is left of `waitMs` (1.5 s per round without a bound); a round short of the quorum gives
   * back what it took and starts over. A `leaseMs` counts only if `lease - elapsed - drift`
   * (1 % + 2 ms) is positive. Resolves `false` when `waitMs` runs out, rejects with the signal's
   * reason when `signal` aborts (nothing held then).
   */
  acquire(options?: AcquireOptions): Promise<boolean>
  /** Releases one level, on every server: `ERR_NOT_HELD`, or `ERR_LOCK_LOST` when lost. */
  release(): Promise<void>
  /** As {@link Lock.using}: `ERR_TIMEOUT` when `waitMs` runs out; the signal aborts when lost. */
  using<T>(routine: (signal: AbortSignal) => Promise<T> | T, options?: AcquireOptions): Promise<T>
  /** Whether the group is held (no I/O). */
  isHeld(): boolean
  /** How many unreleased acquisitions the group has (no I/O). */
  holdCount(): number
  /** Whether the current hold was lost: MultiLock when any lock was, RedLock below its quorum. */
  isLost(): boolean
  /** Calls `callback` with an `ERR_LOCK_LOST` error each time a hold of the group is lost. */
  onLost(callback: (error: PolylockError) => void): void
  /** Releases every level the group holds. */
  [Symbol.asyncDispose](): Promise<void>
}

/**
 * All of several locks (handles of one or several clients, e.g. of independent servers),
 * acquired together or not at all (Redisson RedissonMultiLock). Lost when any of them is lost.
 * `ERR_INVALID_ARGUMENT` for no locks or one given twice.
 */
export declare class MultiLock extends LockGroup {
  constructor(locks: Lock[], defaults?: native.AcquireOptions | null)
}

/**
 * One lock per independent Redis master, held when a majority is (Redlock, Redisson
 * RedissonRedLock). Lost when fewer than the quorum remain held. Its safety rests on timing
 * assumptions: use a fenced lock where correctness matters.
 */
export declare class RedLock extends LockGroup {
  constructor(locks: Lock[], defaults?: native.AcquireOptions | null)
}

/**
 * One owner's handle on a read-write lock: readers share it, a writer excludes readers and
 * writers. The writer may take the read lock too, and keep it after releasing the write lock (a
 * downgrade). A reader asking for the write lock waits for itself: give that a bound.
 */
export declare class ReadWriteLock {
  private constructor()
  readonly name: string
  /** The read lock of this owner, with the whole {@link Lock} API (the same handle on every call). */
  readLock(): Lock
  /** The write lock of this owner, with the whole {@link Lock} API (the same handle on every call). */
  writeLock(): Lock
}

/**
 * A counting semaphore (Redisson's RSemaphore layout). Permits belong to nobody and never
 * expire: permits taken by a process that dies are gone until someone adds them back.
 */
export declare class Semaphore {
  private constructor()
  readonly name: string
  /** Sets the number of permits (0 to 2147483647) if it was never set; resolves `true` when set. */
  trySetPermits(permits: number): Promise<boolean>
  /** Adds permits; a negative number takes some away (even below zero). */
  addPermits(permits: number): Promise<void>
  /**
   * Takes `permits` permits (default 1), woken by release messages. Resolves `false` when a
   * `waitMs` bound runs out. Rejects with the signal's reason when `signal` aborts, taking nothing.
   */
  acquire(options?: SemaphoreAcquireOptions): Promise<boolean>
  /** Gives `permits` permits (default 1) back, whoever took them, and wakes waiters. */
  release(permits?: number): Promise<void>
  /** The permits available now (0 when never set). */
  availablePermits(): Promise<number>
}

/**
 * A semaphore whose permits have ids and leases (Redisson's RPermitExpirableSemaphore layout):
 * a permit whose holder dies comes back when its lease runs out.
 */
export declare class ExpirableSemaphore {
  private constructor()
  readonly name: string
  /** Sets the number of permits (0 to 2147483647) if it was never set; resolves `true` when set. */
  trySetPermits(permits: number): Promise<boolean>
  /** Adds permits; a negative number takes some away. */
  addPermits(permits: number): Promise<void>
  /**
   * Takes one permit and resolves to its id (32 hex characters), or `null` when a `waitMs`
   * bound runs out. No `leaseMs`: the permit is renewed by the watchdog while the client lives;
   * `leaseMs: n`: it comes back by itself after `n` ms. Rejects with the signal's reason when
   * `signal` aborts, taking nothing.
   */
  acquire(options?: AcquireOptions): Promise<string | null>
  /**
   * Releases the permit `permitId` (from any handle or client). `ERR_NOT_HELD` when nobody holds
   * it (released already, expired, never acquired), `ERR_LOCK_LOST` when it was this handle's and
   * was lost: its lease ran out (it is back in the semaphore all the same) or another client
   * released it. Reported once, for the handle's latest 1024 lost permits.
   */
  release(permitId: string): Promise<void>
  /** The permits available now, after permits whose lease ran out came back. */
  availablePermits(): Promise<number>
  /**
   * The ids of the permits this handle holds (no I/O). A permit leaves when released, or as soon
   * as its lease runs out (by this client's clock) or the watchdog finds it gone.
   */
  heldPermits(): string[]
}

/** A run-once job lock: {@link Client.jobLock}. */
export declare class JobLock {
  private constructor()
  readonly name: string
  readonly atMostMs: number
  readonly atLeastMs: number
  /** One look, never waiting: a hold (lease `atMostMs`), or `null` when another node holds the lock. */
  tryAcquire(): Promise<JobHold | null>
  /**
   * Runs `routine` if the lock is free: `{ ran: true, value }`; `{ ran: false }` when another
   * node holds it. Afterwards (returned or threw) the lock is kept until `atLeastMs` from the
   * start, or released.
   */
  run<T>(routine: () => Promise<T> | T): Promise<JobRun<T>>
}

/** A held job lock, from {@link JobLock.tryAcquire}; `await using` finishes it. */
export declare class JobHold {
  private constructor()
  /** Whether the hold is within its `atMostMs` lease (no I/O); `false` once finished. */
  readonly isHeld: boolean
  /** Keeps the lock until `atLeastMs` from the job's start, or releases it. */
  finish(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/**
 * A count-down latch (Redisson's RCountDownLatch layout): a count set once, counted down by any
 * client; at zero the latch is open (its key is gone) and can be set again.
 */
export declare class CountDownLatch {
  private constructor()
  readonly name: string
  /** Sets the count (1 to 2**53 - 1) when none is set; resolves `true` when set. */
  trySetCount(count: number): Promise<boolean>
  /** Takes one from the count; the one that reaches zero wakes every waiter. */
  countDown(): Promise<void>
  /** The count now: 0 when open (never set, or counted down to zero). */
  count(): Promise<number>
  /**
   * Waits until the count is zero, at most `timeoutMs` (0: one look); resolves `true` when it
   * is. Woken by the zero message, and looks again after any wake-up and every few seconds.
   */
  awaitZero(timeoutMs: number): Promise<boolean>
  /** Deletes the latch whatever its count (it is open then); resolves `true` when there was one. */
  delete(): Promise<boolean>
}

/** The leader of an election: its announced value, term, lock owner and client name. */
export type Leader = native.Leader

/** A leader election (`client.election(name)`). */
export declare class Election {
  readonly name: string
  /**
   * Waits until this candidate leads, announcing `value`. Resolves `null` when a `waitMs` bound
   * runs out; rejects with the signal's reason when `signal` aborts, holding nothing.
   */
  campaign(value: string, options?: { waitMs?: number | null, signal?: AbortSignal } | null): Promise<Leadership | null>
  /** The current leader, or `null` when nobody leads (a dead leader is never reported). */
  leader(): Promise<Leader | null>
  /** The leader now, then each change (`null`: nobody leads). */
  observe(): AsyncGenerator<Leader | null, void, undefined>
}

/** This candidate's term as leader. `await using` resigns at the end. */
export declare class Leadership {
  /** The term: higher than every earlier leader's (pass it to {@link Client.fencedSet}). */
  readonly term: number
  /** The value this leader announced last. */
  readonly value: string
  readonly owner: string
  /**
   * Aborted when the leadership ends: its lease lost (reason: an `ERR_LOCK_LOST` error, no
   * later than the lease can have ended on the server) or resigned.
   */
  readonly signal: AbortSignal
  /** Whether this candidate still leads, as far as it knows (no I/O; reads the clock). */
  isLeader(): boolean
  /** Announces `value` instead; rejects with `ERR_LOCK_LOST` when no longer leading. */
  proclaim(value: string): Promise<void>
  /** Steps down: the next candidate is woken, and `signal` aborts. */
  resign(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}
