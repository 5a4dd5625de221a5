"""The blocking API: a Lock belongs to the calling thread, like threading.RLock."""

from __future__ import annotations

import os
import threading
import warnings
from types import TracebackType
from typing import Callable, Literal, Optional, Union

from . import _native
from ._native import DEFAULT, LockLostError, UseDefault

LostCallback = Callable[[LockLostError], object]

#: The kinds of lock with the :class:`Lock` API: which native handle a thread or task gets.
LockKind = Literal["lock", "fair", "fenced", "read", "write"]

#: An ``acquire`` argument: seconds, None (no bound / the watchdog lease), or left out
#: (:data:`polylock.DEFAULT`: the lock's own default).
Seconds = Union[float, None, UseDefault]


def handle_maker(
    client: _native.Client,
    kind: LockKind,
    name: str,
    timeout: Optional[float],
    lease: Optional[float],
) -> Callable[[int], _native.LockHandle]:
    """The native constructor of ``kind``'s handles on ``name`` with the per-lock defaults
    ``timeout`` and ``lease``, called with a holder id."""
    return lambda holder: client.lock_handle(kind, name, holder, timeout, lease)


def timed_out(name: str, timeout: Optional[float]) -> _native.TimeoutError:
    """The error of a ``with`` block whose lock's default timeout ran out: the core's
    :class:`polylock.TimeoutError`, with the message every polylock language gives there."""
    return _native.not_acquired_error(name, timeout or 0.0)


#: A TLS option: a PEM file path (str or path-like), or PEM text (``-----BEGIN ...``).
TlsSource = Union[str, "os.PathLike[str]"]


def tls_text(value: Optional[TlsSource]) -> Optional[str]:
    """A TLS option as the core takes it: a path as text, PEM text as it is."""
    return None if value is None else os.fspath(value)


def as_bytes(value: Union[bytes, str]) -> bytes:
    """A fenced write's value: bytes as they are, a str in UTF-8."""
    return value.encode() if isinstance(value, str) else value


class Client:
    """A connection to one Redis server, shared by every lock made from it.

    Connects in the constructor (at most ``connect_timeout`` seconds). Times are seconds; an
    option left out (or None) takes the core's default. ``watchdog_timeout`` (default 30) is the
    lease of locks acquired without one; it is renewed every third of it while held.
    ``connect_timeout`` and ``response_timeout`` (default 5 each) bound connecting and each
    command. ``fair_queue_timeout`` (default 10) is how long a fair-lock waiter that stopped
    answering (its process died) keeps its place in the queue. ``sync_replicas`` (default False)
    follows every acquire, renewal and release with Redis ``WAIT`` for the primary's replicas,
    waiting at most ``replica_sync_timeout`` (default 1) each time, so a lock survives a failover
    to a replica: an acquisition no replica acknowledged is undone and tried again within the
    acquire's timeout, then raises :class:`NotSyncedError`. A server that refuses ``WAIT`` turns
    it off for this client (with a warning in the log); locks keep working. Bad values raise
    InvalidArgumentError with the core's message, the same in every polylock language.

    TLS (with a ``rediss://`` URL): ``tls_ca`` trusts these CA certificates instead of the
    public web roots; ``tls_cert`` and ``tls_key`` give a client certificate and its key
    (mutual TLS); each is a PEM file path or PEM text. ``tls_insecure=True`` skips verifying
    the server's certificate: for development only (a warning is logged). A missing or bad
    file raises InvalidArgumentError; a refused handshake raises ConnectionError saying why
    (certificate not trusted, expired, client certificate required).
    """

    def __init__(
        self,
        url: str,
        *,
        watchdog_timeout: Optional[float] = None,
        connect_timeout: Optional[float] = None,
        response_timeout: Optional[float] = None,
        fair_queue_timeout: Optional[float] = None,
        sync_replicas: bool = False,
        replica_sync_timeout: Optional[float] = None,
        tls_ca: Optional[TlsSource] = None,
        tls_cert: Optional[TlsSource] = None,
        tls_key: Optional[TlsSource] = None,
        tls_insecure: bool = False,
    ) -> None:
        self._native = _native.Client(
            url,
            watchdog_timeout=watchdog_timeout,
            connect_timeout=connect_timeout,
            response_timeout=response_timeout,
            fair_queue_timeout=fair_queue_timeout,
            sync_replicas=sync_replicas,
            replica_sync_timeout=replica_sync_timeout,
            tls_ca=tls_text(tls_ca),
            tls_cert=tls_text(tls_cert),
            tls_key=tls_text(tls_key),
            tls_insecure=tls_insecure,
        )

    @property
    def id(self) -> str:
        """This client's id (a UUID), the first half of every owner string it writes."""
        return self._native.id

    @property
    def watchdog_timeout(self) -> float:
        return self._native.watchdog_timeout

    def lock(
        self, name: str, *, timeout: Optional[float] = None, lease: Optional[float] = None
    ) -> Lock:
        """A reentrant lock named ``name``, owned by whichever thread acquires it. No I/O.

        ``timeout`` and ``lease`` are the lock's defaults, used by ``with lock:`` and by
        :meth:`Lock.acquire` when it leaves them out (None: wait without bound / a lease renewed
        by the watchdog). Bad values raise InvalidArgumentError here."""
        return Lock(self._native, name, timeout=timeout, lease=lease)

    def fair_lock(
        self, name: str, *, timeout: Optional[float] = None, lease: Optional[float] = None
    ) -> Lock:
        """A reentrant fair lock named ``name`` (Redisson RFairLock): waiting threads are served
        in arrival order. Same API and defaults as :meth:`lock`. No I/O."""
        return Lock(self._native, name, kind="fair", timeout=timeout, lease=lease)

    def fenced_lock(
        self, name: str, *, timeout: Optional[float] = None, lease: Optional[float] = None
    ) -> Lock:
        """A reentrant fenced lock named ``name`` (Redisson RFencedLock): each acquisition,
        reentry included, gets a fencing token (:attr:`Lock.token`) higher than any earlier one
        of the name, whoever held it. Same API and defaults as :meth:`lock`. No I/O."""
        return Lock(self._native, name, kind="fenced", timeout=timeout, lease=lease)

    def fenced_set(self, key: str, value: Union[bytes, str], token: int) -> None:
        """Sets the Redis string ``key`` to ``value`` (a str is written in UTF-8) only if
        ``token`` (a fenced lock's :attr:`Lock.token`) is at least the highest token already
        applied to ``key``; otherwise raises :class:`StaleTokenError` and writes nothing."""
        self._native.fenced_set(key, as_bytes(value), token)

    def fenced_delete(self, key: str, token: int) -> bool:
        """Deletes ``key`` under the same rule as :meth:`fenced_set`; True when a key was
        deleted."""
        return self._native.fenced_delete(key, token)

    def read_write_lock(
        self, name: str, *, timeout: Optional[float] = None, lease: Optional[float] = None
    ) -> ReadWriteLock:
        """A read-write lock named ``name`` (Redisson RReadWriteLock): readers share it, a
        writer excludes everyone else. ``timeout`` and ``lease``: the defaults of both its
        locks, as for :meth:`lock`. No I/O."""
        return ReadWriteLock(self._native, name, timeout=timeout, lease=lease)

    def semaphore(self, name: str) -> Semaphore:
        """A counting semaphore named ``name`` (Redisson RSemaphore). No I/O."""
        return Semaphore(self._native, name)

    def expirable_semaphore(self, name: str) -> ExpirableSemaphore:
        """A semaphore named ``name`` whose permits have ids and leases (Redisson
        RPermitExpirableSemaphore). No I/O."""
        return ExpirableSemaphore(self._native, name)

    def close(self) -> list[str]:
        """Stops renewals and the pub/sub connection. Returns the names of locks still held;
        they are not released and expire with their lease. Later calls fail with ConnectionError."""
        return self._native.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<polylock.Client id={self.id}>"


class Lock:
    """A distributed reentrant lock owned by the calling thread.

    Threads sharing one Lock exclude each other; a thread re-enters its own hold (also through
    another Lock object of the same name and client). Each thread gets its own core handle.
    """

    def __init__(
        self,
        client: _native.Client,
        name: str,
        *,
        kind: LockKind = "lock",
        timeout: Optional[float] = None,
        lease: Optional[float] = None,
    ) -> None:
        self._make_handle = handle_maker(client, kind, name, timeout, lease)
        # Holder 0 is never a thread id; this handle only asks Redis, and checks the name and
        # the defaults now.
        self._probe = self._make_handle(0)
        self._name = name
        self._mutex = threading.Lock()
        self._handles: dict[int, _native.LockHandle] = {}
        self._callbacks: list[LostCallback] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def owner(self) -> str:
        """``<client id>:<holder id>``: the hash field the calling thread writes when it holds the
        lock (no I/O)."""
        return self._handle().owner

    @property
    def default_timeout(self) -> Optional[float]:
        """The lock's default ``timeout`` in seconds (None: wait without bound)."""
        return self._probe.default_timeout

    @property
    def default_lease(self) -> Optional[float]:
        """The lock's default ``lease`` in seconds (None: renewed by the watchdog)."""
        return self._probe.default_lease

    def _handle(self) -> _native.LockHandle:
        thread = threading.get_ident()
        with self._mutex:
            handle = self._handles.get(thread)
            if handle is None:
                self._forget_ended_threads()
                handle = self._make_handle(thread)
                for callback in self._callbacks:
                    handle.on_lost(callback)
                self._handles[thread] = handle
            return handle

    def _current(self) -> Optional[_native.LockHandle]:
        return self._handles.get(threading.get_ident())

    def _forget_ended_threads(self) -> None:
        """Drops the idle handles of threads that have ended, so threads that come and go leave
        nothing behind. A live thread keeps its handle: a fair lock's handle keeps its own
        queue channel subscribed between waits, which saves two commands per acquisition."""
        alive = {thread.ident for thread in threading.enumerate()}
        for thread, handle in list(self._handles.items()):
            if thread not in alive and handle.hold_count() == 0:
                del self._handles[thread]

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

    def owned(self) -> bool:
        """Whether the calling thread holds the lock (no I/O)."""
        handle = self._current()
        return handle is not None and handle.is_held()

    def force_unlock(self) -> bool:
        """Deletes the lock whoever holds it (their hold is lost) and wakes a waiter. True when
        a lock was deleted."""
        return self._probe.force_unlock()

    def remaining_lease(self) -> Optional[float]:
        """The holder's remaining lease in seconds (asks Redis); None when nobody holds the
        lock, ``math.inf`` when its key has no expiry."""
        return self._probe.remaining_lease()

    def hold_count(self) -> int:
        """How many times the calling thread has acquired without releasing (no I/O)."""
        handle = self._current()
        return 0 if handle is None else handle.hold_count()

    @property
    def token(self) -> Optional[int]:
        """The fencing token of the calling thread's current hold of a fenced lock (it grows
        on every acquisition, reentry included); None when the thread holds nothing or the
        lock is not fenced (no I/O)."""
        handle = self._current()
        return None if handle is None else handle.token

    @property
    def lost(self) -> bool:
        """Whether the calling thread's hold was lost (lease ran out, key deleted or taken)."""
        handle = self._current()
        return handle is not None and handle.lost

    def on_lost(self, callback: LostCallback) -> None:
        """Calls ``callback(error)`` from a background thread, once each time a hold of this lock
        (by any thread) is lost."""
        if not callable(callback):
            raise TypeError("on_lost expects a callable")
        with self._mutex:
            self._callbacks.append(callback)
            for handle in self._handles.values():
                handle.on_lost(callback)

    def __enter__(self) -> Lock:
        """Acquires with the lock's defaults; :class:`polylock.TimeoutError` (and the block does
        not run) when its default timeout runs out."""
        if not self.acquire():
            raise timed_out(self._name, self.default_timeout)
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.release()

    def __del__(self) -> None:
        handles = getattr(self, "_handles", None)
        if handles and any(h.is_held() for h in list(handles.values())):
            # The core releases a dropped handle's hold in the background.
            warnings.warn(
                f"polylock lock {self._name!r} was garbage-collected while held; "
                "releasing it in the background",
                ResourceWarning,
                stacklevel=2,
                source=self,
            )

    def __repr__(self) -> str:
        return f"<polylock.Lock name={self._name!r} hold_count={self.hold_count()}>"


class ReadWriteLock:
    """A distributed read-write lock: any number of threads (of any process) hold the read
    lock together, a thread holding the write lock excludes every other. Both are
    :class:`Lock` objects owned by the calling thread and reentrant; the writer may also take
    the read lock (and keep it after releasing the write lock: a downgrade). A read lock cannot
    be upgraded: a thread holding only the read lock that asks for the write lock waits for
    itself, so give such a wait a timeout. Waiting writers go before new readers.
    """

    def __init__(
        self,
        client: _native.Client,
        name: str,
        *,
        timeout: Optional[float] = None,
        lease: Optional[float] = None,
    ) -> None:
        self._name = name
        self._read = Lock(client, name, kind="read", timeout=timeout, lease=lease)
        self._write = Lock(client, name, kind="write", timeout=timeout, lease=lease)

    @property
    def name(self) -> str:
        return self._name

    def read_lock(self) -> Lock:
        """The read lock (the same object on every call)."""
        return self._read

    def write_lock(self) -> Lock:
        """The write lock (the same object on every call)."""
        return self._write

    def __repr__(self) -> str:
        return f"<polylock.ReadWriteLock name={self._name!r}>"


class Semaphore:
    """A distributed counting semaphore. Permits belong to nobody: any thread or process may
    release them, and permits taken by a process that dies are lost until someone adds them
    back (use :class:`ExpirableSemaphore` when holders may die). ``with semaphore:`` takes one
    permit, waiting without bound, and releases it on exit, like ``threading.Semaphore``.
    """

    def __init__(self, client: _native.Client, name: str) -> None:
        self._native = client.semaphore(name)

    @property
    def name(self) -> str:
        return self._native.name

    def try_set_permits(self, permits: int) -> bool:
        """Sets the number of permits if it was never set; True when set."""
        return self._native.try_set_permits(permits)

    def add_permits(self, permits: int) -> None:
        """Adds permits (a negative number takes some away, even below zero)."""
        self._native.add_permits(permits)

    def acquire(self, permits: int = 1, timeout: Optional[float] = None) -> bool:
        """Takes ``permits`` permits; True when taken. ``timeout`` bounds the wait (None, -1
        or ``math.inf``: no bound; 0: one attempt) and False is returned when it passes. A
        waiter is woken by a release, not by polling. Ctrl-C interrupts the wait and takes
        nothing."""
        return self._native.acquire(permits, timeout)

    def release(self, permits: int = 1) -> None:
        """Gives ``permits`` permits back (whoever took them) and wakes waiters."""
        self._native.release(permits)

    def available_permits(self) -> int:
        """The permits available now (0 when never set)."""
        return self._native.available_permits()

    def __enter__(self) -> Semaphore:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<polylock.Semaphore name={self.name!r}>"


class ExpirableSemaphore:
    """A distributed semaphore whose permits each have an id and a lease: the permit of a
    holder that dies comes back when its lease runs out. ``lease=None`` renews the permit by
    the watchdog while this client lives (it then comes back ``watchdog_timeout`` after the
    holder's process died). A permit is released by its id, from any client. Keep this
    object while its permits are held: when it is garbage-collected, the permits it acquired
    are released in the background.
    """

    def __init__(self, client: _native.Client, name: str) -> None:
        self._native = client.expirable_semaphore(name)

    @property
    def name(self) -> str:
        return self._native.name

    def try_set_permits(self, permits: int) -> bool:
        """Sets the number of permits if it was never set; True when set."""
        return self._native.try_set_permits(permits)

    def add_permits(self, permits: int) -> None:
        """Adds permits (a negative number takes some away)."""
        self._native.add_permits(permits)

    def acquire(self, timeout: Optional[float] = None, lease: Optional[float] = None) -> Optional[str]:
        """Takes one permit and returns its id (32 hex characters), or None when ``timeout``
        passed first (None, -1 or ``math.inf``: no bound; 0: one attempt). ``lease=None``: the
        permit is renewed by the watchdog; a number of seconds is a fixed lease, after which the
        permit comes back by itself."""
        return self._native.acquire(timeout, lease)

    def release(self, permit_id: str) -> None:
        """Releases permit ``permit_id``. NotHeldError when nobody holds it (released already,
        lease ran out, never acquired); LockLostError when it was acquired here and was lost:
        its lease ran out (it is back in the semaphore all the same) or another client released
        it. Reported once, for this object's latest 1024 lost permits."""
        self._native.release(permit_id)

    def available_permits(self) -> int:
        """The permits available now, after permits whose lease ran out came back."""
        return self._native.available_permits()

    def held_permits(self) -> list[str]:
        """The ids of the permits acquired through this object and neither released nor lost
        (no I/O): a permit leaves as soon as its lease runs out (by this client's clock) or the
        watchdog finds it gone."""
        return self._native.held_permits()

    def __del__(self) -> None:
        native = getattr(self, "_native", None)
        if native is not None and native.held_permits():
            warnings.warn(
                f"polylock expirable semaphore {native.name!r} was garbage-collected while "
                "holding permits; releasing them in the background",
                ResourceWarning,
                stacklevel=2,
                source=self,
            )

    def __repr__(self) -> str:
        return f"<polylock.ExpirableSemaphore name={self.name!r}>"
