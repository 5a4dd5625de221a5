"""The blocking API: a Lock belongs to the calling thread, like threading.RLock. What it shares
with the asyncio API is in ``_shared``."""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, Union

from . import _native
from ._election import Election
from ._native import DEFAULT
from ._shared import ClientBase, ExpirableSemaphoreBase, Holders, LockBase, ReadWriteLockBase
from ._shared import LockedKind, Seconds, SemaphoreBase, ThreadHolders, as_bytes, raise_timed_out
from ._job import JobLock, job_decorator

if TYPE_CHECKING:
    from typing_extensions import ParamSpec

    Params = ParamSpec("Params")

Result = TypeVar("Result")


class Lock(LockBase):
    """A distributed reentrant lock owned by the calling thread.

    Threads sharing one Lock exclude each other; a thread re-enters its own hold (also through
    another Lock object of the same name and client). Each thread gets its own core handle.
    """

    def _new_holders(
        self, make: Callable[[int], _native.LockHandle]
    ) -> Holders[Any, _native.LockHandle]:
        return ThreadHolders(make)

    def acquire(
        self,
        blocking: bool = True,
        timeout: Seconds = DEFAULT,
        lease: Seconds = DEFAULT,
    ) -> bool:
        """Acquires (or re-enters) the lock; True when acquired.

        ``blocking=False`` makes one attempt; ``timeout`` bounds the wait (None, -1 or
        ``math.inf``: no bound) and False is returned when it passes. ``lease=None`` takes a
        watchdog-renewed lease; a number of seconds is a fixed lease, never renewed. Left out,
        each takes the lock's default (``client.lock(name, timeout=..., lease=...)``). Ctrl-C
        interrupts the wait and leaves no lock held.
        """
        return self._handle().acquire(blocking, timeout, lease)

    def release(self) -> None:
        """Releases one level of the calling thread's hold. NotHeldError if it holds none,
        LockLostError if its lease was lost meanwhile."""
        self._handle().release()

    def locked(self) -> bool:
        """Whether anyone holds the lock (asks Redis)."""
        return self._probe.locked()

    def force_unlock(self) -> bool:
        """Deletes the lock whoever holds it (their hold is lost) and wakes a waiter. True when
        a lock was deleted."""
        return self._probe.force_unlock()

    def remaining_lease(self) -> Optional[float]:
        """The holder's remaining lease in seconds (asks Redis); None when nobody holds the
        lock, ``math.inf`` when its key has no expiry."""
        return self._probe.remaining_lease()

    def __enter__(self) -> Lock:
        """Acquires with the lock's defaults; :class:`polylock.TimeoutError` (and the block does
        not run) when its default timeout runs out."""
        if not self.acquire():
            raise_timed_out(self._handle(), self.default_timeout)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<polylock.Lock name={self._name!r} hold_count={self.hold_count()}>"


class ReadWriteLock(ReadWriteLockBase[Lock]):
    """A distributed read-write lock: any number of threads (of any process) hold the read
    lock together, a thread holding the write lock excludes every other. Both are
    :class:`Lock` objects owned by the calling thread and reentrant; the writer may also take
    the read lock (and keep it after releasing the write lock: a downgrade). A read lock cannot
    be upgraded: a thread holding only the read lock that asks for the write lock waits for
    itself, so give such a wait a timeout. Waiting writers go before new readers.
    """

    _lock_type = Lock


class Semaphore(SemaphoreBase):
    """A distributed counting semaphore. Permits belong to nobody: any thread or process may
    release them, and permits taken by a process that dies are lost until someone adds them
    back (use :class:`ExpirableSemaphore` when holders may die). ``with semaphore:`` takes one
    permit, waiting without bound, and releases it on exit, like ``threading.Semaphore``.
    """

    def try_set_permits(self, permits: int) -> bool:
        """Sets the number of permits if it was never set; True when set."""
        return self._semaphore.try_set_permits(permits)

    def add_permits(self, permits: int) -> None:
        """Adds permits (a negative number takes some away, even below zero)."""
        self._semaphore.add_permits(permits)

    def acquire(self, permits: int = 1, timeout: Optional[float] = None) -> bool:
        """Takes ``permits`` permits; True when taken. ``timeout`` bounds the wait (None, -1
        or ``math.inf``: no bound; 0: one attempt) and False is returned when it passes. A
        waiter is woken by a release, not by polling. Ctrl-C interrupts the wait and takes
        nothing."""
        return self._semaphore.acquire(permits, timeout)

    def release(self, permits: int = 1) -> None:
        """Gives ``permits`` permits back (whoever took them) and wakes waiters."""
        self._semaphore.release(permits)

    def available_permits(self) -> int:
        """The permits available now (0 when never set)."""
        return self._semaphore.available_permits()

    def __enter__(self) -> Semaphore:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class ExpirableSemaphore(ExpirableSemaphoreBase):
    """A distributed semaphore whose permits each have an id and a lease: the permit of a
    holder that dies comes back when its lease runs out. ``lease=None`` renews the permit by
    the watchdog while this client lives (it then comes back ``watchdog_timeout`` after the
    holder's process died). A permit is released by its id, from any client. Keep this
    object while its permits are held: when it is garbage-collected, the permits it acquired
    are released in the background.
    """

    def try_set_permits(self, permits: int) -> bool:
        """Sets the number of permits if it was never set; True when set."""
        return self._semaphore.try_set_permits(permits)

    def add_permits(self, permits: int) -> None:
        """Adds permits (a negative number takes some away)."""
        self._semaphore.add_permits(permits)

    def acquire(self, timeout: Optional[float] = None, lease: Optional[float] = None) -> Optional[str]:
        """Takes one permit and returns its id (32 hex characters), or None when ``timeout``
        passed first (None, -1 or ``math.inf``: no bound; 0: one attempt). ``lease=None``: the
        permit is renewed by the watchdog; a number of seconds is a fixed lease, after which the
        permit comes back by itself."""
        return self._semaphore.acquire(timeout, lease)

    def release(self, permit_id: str) -> None:
        """Releases permit ``permit_id``. NotHeldError when nobody holds it (released already,
        lease ran out, never acquired); LockLostError when it was acquired here and was lost:
        its lease ran out (it is back in the semaphore all the same) or another client released
        it. Reported once, for this object's latest 1024 lost permits."""
        self._semaphore.release(permit_id)

    def available_permits(self) -> int:
        """The permits available now, after permits whose lease ran out came back."""
        return self._semaphore.available_permits()


class CountDownLatch:
    """A distributed count-down latch (Redisson RCountDownLatch): :meth:`try_set_count` sets a
    count once (while none is set), each :meth:`count_down` takes one from it, from any thread
    or process, and :meth:`await_zero` waits until it reaches zero. At zero the latch is open
    (its key is gone) and can be set again."""

    def __init__(self, client: _native.Client, name: str) -> None:
        self._latch = client.count_down_latch(name)

    @property
    def name(self) -> str:
        return self._latch.name

    def try_set_count(self, count: int) -> bool:
        """Sets the count (1 to 2**53 - 1) when none is set; True when set."""
        return self._latch.try_set_count(count)

    def count_down(self) -> None:
        """Takes one from the count; the one that reaches zero wakes every waiter."""
        self._latch.count_down()

    def count(self) -> int:
        """The count now: 0 when open (never set, or counted down to zero)."""
        return self._latch.count()

    def await_zero(self, timeout: float) -> bool:
        """Waits until the count is zero, at most ``timeout`` seconds (0: one look); True when
        it is. Woken by the zero message, and looks again after any wake-up and every few
        seconds. Ctrl-C interrupts the wait."""
        return self._latch.await_zero(timeout)

    def delete(self) -> bool:
        """Deletes the latch whatever its count (it is open then) and wakes its waiters; True
        when there was one."""
        return self._latch.delete()

    def __repr__(self) -> str:
        return f"<polylock.CountDownLatch name={self.name!r}>"


class Client(ClientBase[Lock, ReadWriteLock, Semaphore, ExpirableSemaphore]):
    """A connection to one Redis server, shared by every lock made from it.

    Connects in the constructor (at most ``connect_timeout`` seconds). Times are seconds; an
    option left out (or None) takes the core's default. ``watchdog_timeout`` (default 30) is the
    lease of locks acquired without one; it is renewed every third of it while held.
    ``connect_timeout`` and ``response_timeout`` (default 5 each) bound connecting and each
    command. ``fair_queue_timeout`` (default 10) is how long a fair-lock (or FIFO-lock) waiter
    that stopped answering (its process died) keeps its place in the queue.
    ``sync_replicas`` (default False) follows every acquire, renewal and release with Redis
    ``WAIT`` for the primary's replicas, waiting at most ``replica_sync_timeout`` (default 1)
    each time, so a lock survives a failover to a replica: an acquisition no replica
    acknowledged is undone and tried again within the acquire's timeout, then raises
    :class:`NotSyncedError`. ``min_replicas`` (default 1, 0 to 100) is the fewest replicas an
    acquisition must reach whatever the primary reports (as Redis's ``min-replicas-to-write``):
    a primary with fewer raises :class:`NotSyncedError`; 0 trusts the primary's own count. A
    server that refuses ``WAIT`` turns it off for this client (with a warning in the log); locks
    keep working. Bad values raise InvalidArgumentError with the core's message, the same in
    every polylock language.

    ``name`` (default ``"host:pid"``) is recorded on the server beside this client's locks, so
    that ``polylock inspect`` and a timed-out ``with`` of another client name the holder.

    TLS (with a ``rediss://`` URL): ``tls_ca`` trusts these CA certificates instead of the
    public web roots; ``tls_cert`` and ``tls_key`` give a client certificate and its key
    (mutual TLS); each is a PEM file path or PEM text. ``tls_insecure=True`` skips verifying
    the server's certificate: for development only (a warning is logged). A missing or bad
    file raises InvalidArgumentError; a refused handshake raises ConnectionError saying why
    (certificate not trusted, expired, client certificate required).
    """

    _lock_type = Lock
    _read_write_lock_type = ReadWriteLock
    _semaphore_type = Semaphore
    _expirable_semaphore_type = ExpirableSemaphore

    def locked(
        self,
        name: str,
        *,
        timeout: Optional[float] = None,
        lease: Optional[float] = None,
        kind: LockedKind = "lock",
    ) -> Callable[[Callable[Params, Result]], Callable[Params, Result]]:
        """A decorator: each call of the function runs inside ``with client.lock(name,
        timeout=timeout, lease=lease):`` (or ``fair_lock``, ``fifo_lock``, ``fenced_lock`` as
        ``kind`` says), so calls from any thread or process exclude each other. Same defaults
        as :meth:`lock`; :class:`polylock.TimeoutError` (and the function does not run) when
        ``timeout`` runs out. The function's result and exceptions pass through; the lock is
        released either way. Bad values raise InvalidArgumentError here; an ``async def``
        function raises TypeError (use :meth:`polylock.AsyncClient.locked`)."""
        # Checks the name and times now, not at the first call.
        self._lock_for_call(name, kind, timeout, lease)

        def decorate(function: Callable[Params, Result]) -> Callable[Params, Result]:
            if inspect.iscoroutinefunction(function):
                raise TypeError(
                    f"{function.__qualname__} is a coroutine function: decorate it with"
                    " AsyncClient.locked, not Client.locked"
                )

            @functools.wraps(function)
            def run_locked(*args: Params.args, **kwargs: Params.kwargs) -> Result:
                with self._lock_for_call(name, kind, timeout, lease):
                    return function(*args, **kwargs)

            return run_locked

        return decorate

    def fenced_set(self, key: str, value: Union[bytes, str], token: int) -> None:
        """Sets the Redis string ``key`` to ``value`` (a str is written in UTF-8) only if
        ``token`` (a fenced lock's :attr:`Lock.token`) is at least the highest token already
        applied to ``key``; otherwise raises :class:`StaleTokenError` and writes nothing."""
        self._native.fenced_set(key, as_bytes(value), token)

    def fenced_delete(self, key: str, token: int) -> bool:
        """Deletes ``key`` under the same rule as :meth:`fenced_set`; True when a key was
        deleted."""
        return self._native.fenced_delete(key, token)

    def job_lock(self, name: str, *, at_most: float, at_least: float = 0) -> JobLock:
        """A run-once job lock on the lock ``name`` (ShedLock's semantics): a scheduled job
        that many nodes fire runs on one of them. :meth:`JobLock.run` never waits: it skips
        (returns None) when another node holds the lock. The lock is held at most ``at_most``
        seconds (a fixed lease: a node that dies holding it blocks the job no longer), and at
        least ``at_least`` seconds from the job's start (a node whose clock or schedule lags by
        less than that skips). InvalidArgumentError unless 0 < at_most and at_least <= at_most,
        with the core's message. No I/O."""
        return JobLock(self._native.job_lock(name, at_most, at_least))

    def job(
        self, name: str, *, at_most: float, at_least: float = 0
    ) -> Callable[[Callable[Params, Result]], Callable[Params, Optional[Result]]]:
        """A decorator for a scheduled function: each call runs it through
        ``client.job_lock(name, at_most=..., at_least=...).run``, so it returns the function's
        result, or None when another node holds the lock (the function did not run). An
        ``async def`` function raises TypeError (use :meth:`polylock.AsyncClient.job`)."""
        return job_decorator(self.job_lock(name, at_most=at_most, at_least=at_least))

    def election(self, name: str) -> Election:
        """The leader election ``name`` (see :class:`polylock.Election`). No I/O."""
        return Election(self._native.election(name))

    def count_down_latch(self, name: str) -> CountDownLatch:
        """A count-down latch named ``name`` (Redisson RCountDownLatch). No I/O."""
        return CountDownLatch(self._native, name)
