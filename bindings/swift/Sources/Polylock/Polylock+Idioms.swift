// Swift idioms over the generated binding (polylock.swift, generated next to this file by
// build-xcframework.sh, whose API counts milliseconds): Duration overloads, the scoped
// `withLock` and a closure lost listener.
//
// Durations and the lock's defaults: a wait or lease that is `nil` (or left out) takes the
// lock's default (`client.lock(name:wait:lease:)`), which is no bound unless set;
// `Duration.infinite` asks for no bound whatever the default: wait without bound, or the
// watchdog lease renewed while held. Where a handle has no defaults (client factories,
// semaphores) `nil` and `.infinite` both mean no bound. Durations are handed over in whole
// milliseconds (truncated); the Rust core checks every value (a negative wait, a zero lease:
// `LockError.InvalidArgument`).

import Foundation

extension Duration {
    /// No bound: a wait without end, or a lease renewed by the watchdog while held.
    public static let infinite: Duration = .seconds(Int64.max)

    /// Whole milliseconds, truncated toward zero, saturating at the bounds of `Int64`.
    fileprivate var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        let (millis, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow {
            return seconds < 0 ? Int64.min : Int64.max
        }
        let (total, overflowSum) = millis.addingReportingOverflow(attoseconds / 1_000_000_000_000_000)
        if overflowSum {
            return millis < 0 ? Int64.min : Int64.max
        }
        return total
    }
}

/// A lock's wait or lease for `acquireWith`: nil is the lock's default, `.infinite` no bound.
private func bound(_ duration: Duration?) -> Bound {
    guard let duration else { return .lockDefault }
    if duration == .infinite { return .unbounded }
    return .millis(ms: duration.wholeMilliseconds)
}

/// Milliseconds where there are no defaults: nil and `.infinite` are no bound.
private func millisOrNil(_ duration: Duration?) -> Int64? {
    guard let duration, duration != .infinite else { return nil }
    return duration.wholeMilliseconds
}

private func duration(milliseconds: Int64) -> Duration {
    milliseconds == Int64.max ? .infinite : .milliseconds(milliseconds)
}

extension Client {
    /// A handle on the lock `name` whose acquires take `wait` and `lease` when they leave them
    /// out (nil or `.infinite`: wait without bound, the watchdog lease). No I/O;
    /// `LockError.InvalidArgument` for a default out of bounds.
    public func lock(name: String, wait: Duration?, lease: Duration? = nil) throws -> Lock {
        try lock(name: name, waitMs: millisOrNil(wait), leaseMs: millisOrNil(lease))
    }

    /// `lock(name:wait:lease:)` with a default lease only.
    public func lock(name: String, lease: Duration?) throws -> Lock {
        try lock(name: name, waitMs: nil, leaseMs: millisOrNil(lease))
    }

    /// `lock(name:wait:lease:)` for the fair lock `name` (waiters served in arrival order).
    public func fairLock(name: String, wait: Duration?, lease: Duration? = nil) throws -> Lock {
        try fairLock(name: name, waitMs: millisOrNil(wait), leaseMs: millisOrNil(lease))
    }

    /// `lock(name:wait:lease:)` for the FIFO lock `name` (polylock's own layout: waiters served in
    /// arrival order, a release hands the lock to the next; Redisson clients do not see its line).
    public func fifoLock(name: String, wait: Duration?, lease: Duration? = nil) throws -> Lock {
        try fifoLock(name: name, waitMs: millisOrNil(wait), leaseMs: millisOrNil(lease))
    }

    /// `lock(name:wait:lease:)` for the fenced lock `name` (`token()`: the fencing token).
    public func fencedLock(name: String, wait: Duration?, lease: Duration? = nil) throws -> Lock {
        try fencedLock(name: name, waitMs: millisOrNil(wait), leaseMs: millisOrNil(lease))
    }

    /// Runs `body` under the lock `name` and returns its result: a new handle's
    /// `withLock(wait:lease:_:)` (so concurrent calls exclude each other, as different owners),
    /// freed when it returns. `wait` and `lease` as for `acquire(wait:lease:)`, with no per-lock
    /// defaults: nil waits without bound and takes the watchdog lease. `LockError.Timeout` (and
    /// `body` does not run) when the wait runs out.
    public func withLock<T>(
        name: String,
        wait: Duration? = nil,
        lease: Duration? = nil,
        _ body: () async throws -> T
    ) async throws -> T {
        let lock = try lock(name: name, waitMs: nil, leaseMs: nil)
        return try await lock.withLock(wait: wait, lease: lease, body)
    }

    /// The lease of locks acquired without one, renewed every third of it.
    public var watchdogTimeout: Duration {
        .milliseconds(watchdogTimeoutMs())
    }
}

/// Adapts a closure to the generated `LostListener` protocol.
private final class LostCallback: LostListener {
    private let callback: @Sendable (LockError) -> Void

    init(_ callback: @escaping @Sendable (LockError) -> Void) {
        self.callback = callback
    }

    func onLost(error: LockError) {
        callback(error)
    }
}

/// What every hold of the generated binding offers (`Lock`, `MultiLock`, `RedLock`): the calls
/// the idioms below are written over, once for all of them.
public protocol Held: AnyObject {
    func acquireWith(wait: Bound, lease: Bound) async throws -> Bool
    func acquireWithBlocking(wait: Bound, lease: Bound) throws -> Bool
    func acquireOrFail(wait: Bound, lease: Bound) async throws
    func release() async throws
    func onLost(listener: LostListener)
}

extension Lock: Held {}
extension MultiLock: Held {}
extension RedLock: Held {}

extension Held {
    /// Acquires the lock (or re-enters it), or the group (all of a multi-lock's locks, a
    /// majority of a red-lock's); `false` when `wait` ran out (`.zero`: one attempt).
    /// `lease`: a fixed lease, never renewed. nil: the lock's default; `.infinite`: no bound
    /// (for the lease: the watchdog's, renewed while held).
    public func acquire(wait: Duration?, lease: Duration? = nil) async throws -> Bool {
        try await acquireWith(wait: bound(wait), lease: bound(lease))
    }

    /// `acquire(wait:lease:)` for plain threads: blocks the calling thread.
    public func acquireBlocking(wait: Duration?, lease: Duration? = nil) throws -> Bool {
        try acquireWithBlocking(wait: bound(wait), lease: bound(lease))
    }

    /// Runs `body` holding the lock (or the group) and releases it however `body` ends (a value
    /// or an error).
    ///
    /// `wait` and `lease` as for `acquire(wait:lease:)`. When the wait runs out, `body` does not
    /// run and `LockError.Timeout` is thrown with the core's message (as Python's `with`, Node's
    /// `using`). When `body` throws, its error is rethrown (a failing release is then dropped);
    /// when only the release fails (`LockError.LockLost`: the lease was lost meanwhile), its
    /// error is thrown.
    public func withLock<T>(
        wait: Duration? = nil,
        lease: Duration? = nil,
        _ body: () async throws -> T
    ) async throws -> T {
        try await acquireOrFail(wait: bound(wait), lease: bound(lease))
        let value: T
        do {
            value = try await body()
        } catch {
            _ = try? await release()
            throw error
        }
        try await release()
        return value
    }

    /// Calls `callback` each time a hold is lost (`LockError.LockLost`), on a background thread
    /// of polylock.
    public func onLost(_ callback: @escaping @Sendable (LockError) -> Void) {
        onLost(listener: LostCallback(callback))
    }
}

extension Lock {
    /// `acquire(wait:lease:)` with the lock's default wait.
    public func acquire(lease: Duration?) async throws -> Bool {
        try await acquireWith(wait: .lockDefault, lease: bound(lease))
    }

    /// The holder's remaining lease (asks Redis): nil when nobody holds the lock, `.infinite`
    /// when its key has no expiry.
    public func remainingLease() async throws -> Duration? {
        try await remainingLeaseMs().map { duration(milliseconds: $0) }
    }

    /// The wait an acquire takes when it leaves it out; nil: no bound.
    public var defaultWait: Duration? {
        defaults().waitMs.map { duration(milliseconds: $0) }
    }

    /// The lease an acquire takes when it leaves it out; nil: the watchdog lease.
    public var defaultLease: Duration? {
        defaults().leaseMs.map { duration(milliseconds: $0) }
    }
}

extension Semaphore {
    /// Takes `permits` permits; `false` when `wait` ran out (nil or `.infinite`: no bound,
    /// `.zero`: one attempt).
    public func acquire(permits: Int32 = 1, wait: Duration?) async throws -> Bool {
        try await acquire(permits: permits, waitMs: millisOrNil(wait))
    }

    /// `acquire(permits:wait:)` for plain threads: blocks the calling thread.
    public func acquireBlocking(permits: Int32 = 1, wait: Duration?) throws -> Bool {
        try acquireBlocking(permits: permits, waitMs: millisOrNil(wait))
    }
}

extension ExpirableSemaphore {
    /// Takes one permit and returns its id, or nil when `wait` ran out. `wait`: nil or
    /// `.infinite` no bound; `lease`: nil or `.infinite` renewed by the watchdog, else a fixed
    /// lease after which the permit comes back.
    public func acquire(wait: Duration?, lease: Duration? = nil) async throws -> String? {
        try await acquire(waitMs: millisOrNil(wait), leaseMs: millisOrNil(lease))
    }

    /// `acquire(wait:lease:)` without a bound on the wait.
    public func acquire(lease: Duration?) async throws -> String? {
        try await acquire(waitMs: nil, leaseMs: millisOrNil(lease))
    }

    /// `acquire(wait:lease:)` for plain threads: blocks the calling thread.
    public func acquireBlocking(wait: Duration?, lease: Duration? = nil) throws -> String? {
        try acquireBlocking(waitMs: millisOrNil(wait), leaseMs: millisOrNil(lease))
    }
}

extension Client {
    /// The run-once job lock `name` (ShedLock's semantics): held at most `atMost` (a fixed
    /// lease: a node that dies holding it blocks the job no longer), at least `atLeast` from
    /// the job's start (a node whose clock or schedule lags by less skips). No I/O;
    /// `LockError.InvalidArgument` unless 0 < atMost and atLeast <= atMost.
    public func jobLock(name: String, atMost: Duration, atLeast: Duration = .zero) throws -> JobLock {
        try jobLock(name: name, atMostMs: atMost.wholeMilliseconds, atLeastMs: atLeast.wholeMilliseconds)
    }

    /// Runs `body` once across the nodes that fire it: `jobLock(name:atMost:atLeast:).tryRun(body)`.
    public func runJob<T>(
        name: String,
        atMost: Duration,
        atLeast: Duration = .zero,
        _ body: () async throws -> T
    ) async throws -> T? {
        try await jobLock(name: name, atMost: atMost, atLeast: atLeast).tryRun(body)
    }
}

extension JobLock {
    /// Runs `body` if no other node holds the job lock and returns its result; nil, without
    /// running it, when another node holds it (never waits). However `body` ends, the lock is
    /// then kept until `atLeast` from the start, or released.
    public func tryRun<T>(_ body: () async throws -> T) async throws -> T? {
        guard let hold = try await tryAcquire() else { return nil }
        let result: T
        do {
            result = try await body()
        } catch {
            try? await hold.finish()
            throw error
        }
        try await hold.finish()
        return result
    }
}
