"""What the blocking API (``_sync``) and the asyncio API (``_async``) share: one base class per
object, and the native handles per holder. A subclass adds only what differs: blocking calls
or awaitables, and whether a holder is a thread or an asyncio task."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import warnings
import weakref
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any, Callable, Generic, Literal, NoReturn, Optional, TypeVar, Union

from . import _native
from ._native import InvalidArgumentError, LockLostError, UseDefault
from .metrics import MetricsSnapshot, snapshot_from_native

if TYPE_CHECKING:
    from typing_extensions import Protocol, TypedDict, Unpack

    from ._native import _MetricEvent
else:
    from typing import Protocol, TypedDict

LostCallback = Callable[[LockLostError], object]

#: The kinds of lock with the :class:`Lock` API: which native handle a thread or task gets.
LockKind = Literal["lock", "fair", "fifo", "fenced", "read", "write"]

#: The kinds of lock a ``@client.locked`` function runs under: which client method makes it.
LockedKind = Literal["lock", "fair_lock", "fifo_lock", "fenced_lock"]

#: A lock's own wait mode: "pubsub" or "poll", and for "poll" its bounds in seconds.
WaitOptions = tuple[Optional[Literal["pubsub", "poll"]], Optional[float], Optional[float]]

#: An ``acquire`` argument: seconds, None (no bound / the watchdog lease), or left out
#: (:data:`polylock.DEFAULT`: the lock's own default).
Seconds = Union[float, None, UseDefault]

#: A TLS option: a PEM file path (str or path-like), or PEM text (``-----BEGIN ...``).
TlsSource = Union[str, "os.PathLike[str]"]


class ClientOptions(TypedDict, total=False):
    """The options of :class:`polylock.Client` and :class:`polylock.AsyncClient` (seconds; an
    option left out, or None, takes the core's default)."""

    watchdog_timeout: Optional[float]
    connect_timeout: Optional[float]
    response_timeout: Optional[float]
    fair_queue_timeout: Optional[float]
    sync_replicas: bool
    replica_sync_timeout: Optional[float]
    #: With ``sync_replicas``: the fewest replicas an acquisition must reach (default 1, 0 to
    #: 100; 0 trusts the primary's own count); below it acquisitions raise NotSyncedError.
    min_replicas: Optional[int]
    tls_ca: Optional[TlsSource]
    tls_cert: Optional[TlsSource]
    tls_key: Optional[TlsSource]
    tls_insecure: bool
    name: Optional[str]
    metrics: bool
    metrics_max_lock_names: Optional[int]
    key_prefix: Optional[str]
    #: "pubsub" (default) or "poll": waiters never subscribe, they look again after a backoff
    #: from ``poll_min`` (default 0.001 s) doubling up to ``poll_max`` (default 0.128 s).
    wait_mode: Optional[Literal["pubsub", "poll"]]
    poll_min: Optional[float]
    poll_max: Optional[float]


def native_options(options: ClientOptions) -> dict[str, object]:
    """The options as ``_native.Client`` takes them: a TLS path as text, PEM text as it is."""
    native: dict[str, object] = dict(options)
    for tls in ("tls_ca", "tls_cert", "tls_key"):
        value = native.get(tls)
        if value is not None:
            native[tls] = os.fspath(value)  # type: ignore[call-overload]
    return native


def handle_maker(
    client: _native.Client,
    kind: LockKind,
    name: str,
    timeout: Optional[float],
    lease: Optional[float],
    wait: WaitOptions = (None, None, None),
) -> Callable[[int], _native.LockHandle]:
    """The native constructor of ``kind``'s handles on ``name`` with the per-lock defaults
    ``timeout`` and ``lease`` and wait mode ``wait`` (all None: the client's), called with a
    holder id."""
    return lambda holder: client.lock_handle(kind, name, holder, timeout, lease, *wait)


def raise_timed_out(hold: _native.LockHandle | _native.GroupHandle, timeout: Optional[float]) -> NoReturn:
    """Raises the error of a ``with`` block whose lock's default timeout ran out: the core's
    :class:`polylock.TimeoutError`, with the message every polylock language gives there (naming
    who holds the lock, as the holders' client records tell)."""
    hold.raise_not_acquired(timeout or 0.0)
    raise AssertionError("raise_not_acquired returned")


async def raise_timed_out_async(
    hold: _native.LockHandle | _native.GroupHandle, timeout: Optional[float]
) -> NoReturn:
    """:func:`raise_timed_out` without blocking the event loop."""
    await hold.raise_not_acquired_async(timeout or 0.0)
    raise AssertionError("raise_not_acquired_async returned")


def as_bytes(value: Union[bytes, str]) -> bytes:
    """A fenced write's value: bytes as they are, a str in UTF-8."""
    return value.encode() if isinstance(value, str) else value


class WarnsIfCollectedHolding:
    """Warns (``ResourceWarning``) when garbage-collected while still holding something, which
    the core then releases in the background."""

    #: The warning, formatted with the object's ``name``.
    _collected_warning: str

    def _holds_something(self) -> bool:
        raise NotImplementedError

    def __del__(self) -> None:
        try:
            holding = self._holds_something()
        except AttributeError:  # Its __init__ failed: it holds nothing.
            return
        if holding:
            message = self._collected_warning.format(name=getattr(self, "name", "?"))
            warnings.warn(message, ResourceWarning, stacklevel=2, source=self)


def current_task() -> asyncio.Task[object]:
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("polylock.AsyncLock must be used from inside an asyncio task")
    return task


class NativeHold(Protocol):
    """What :class:`Holders` needs of a native lock or group handle."""

    def on_lost(self, callback: LostCallback) -> None: ...
    def is_held(self) -> bool: ...
    def hold_count(self) -> int: ...


Holder = TypeVar("Holder")
Self = TypeVar("Self")
Handle = TypeVar("Handle", bound=NativeHold)


class Holders(Generic[Holder, Handle]):
    """The native handles of one lock or group, one per holder, each made on first use with
    the lost callbacks given so far. A subclass says what a holder is."""

    _handles: MutableMapping[Holder, Handle]

    def __init__(self, make: Callable[[int], Handle]) -> None:
        self._make = make
        self._mutex = threading.Lock()
        self._callbacks: list[LostCallback] = []

    def _caller(self) -> Holder:
        """The calling holder; raises when there is none."""
        raise NotImplementedError

    def _caller_if_any(self) -> Optional[Holder]:
        raise NotImplementedError

    def _holder_id(self, holder: Holder) -> int:
        raise NotImplementedError

    def _forget_ended(self) -> None:
        """Drops the idle handles of holders that have ended (when that is not automatic)."""

    def of_caller(self) -> Handle:
        """The calling holder's handle, made now if it has none."""
        holder = self._caller()
        # Found without the mutex (a lookup is atomic under the GIL): only making one needs it.
        handle = self._handles.get(holder)
        if handle is not None:
            return handle
        with self._mutex:
            handle = self._handles.get(holder)
            if handle is None:
                self._forget_ended()
                handle = self._make(self._holder_id(holder))
                for callback in self._callbacks:
                    handle.on_lost(callback)
                self._handles[holder] = handle
            return handle

    def current(self) -> Optional[Handle]:
        """The calling holder's handle, None if it has none (no handle is made)."""
        holder = self._caller_if_any()
        return None if holder is None else self._handles.get(holder)

    def on_lost(self, callback: LostCallback) -> None:
        if not callable(callback):
            raise TypeError("on_lost expects a callable")
        with self._mutex:
            self._callbacks.append(callback)
            for handle in list(self._handles.values()):
                handle.on_lost(callback)

    def any_held(self) -> bool:
        return any(handle.is_held() for handle in list(self._handles.values()))


# Holder ids: a number no other thread or task of this process gets, kept for the holder's
# life (threads and tasks draw from one count, so a thread's owner string is never a task's).
# Not a thread's ident nor id(task): both come back for a later thread or task, whose owner
# string would then be the ended one's: it would inherit what the ended one left held, and a
# dead task's background release or undo would take off the new task's level (its release then
# fails with LockLostError).
_next_holder_id = itertools.count(1)
_holder_ids_mutex = threading.Lock()
_task_ids: "weakref.WeakKeyDictionary[asyncio.Task[object], int]" = weakref.WeakKeyDictionary()
_thread_ids = threading.local()


def _new_holder_id() -> int:
    with _holder_ids_mutex:
        return next(_next_holder_id)


def task_holder_id(task: "asyncio.Task[object]") -> int:
    with _holder_ids_mutex:
        holder_id = _task_ids.get(task)
        if holder_id is None:
            holder_id = _task_ids[task] = next(_next_holder_id)
        return holder_id


def thread_holder_id() -> int:
    """The calling thread's holder id."""
    holder_id: Optional[int] = getattr(_thread_ids, "holder_id", None)
    if holder_id is None:
        holder_id = _thread_ids.holder_id = _new_holder_id()
    return holder_id


class ThreadHolders(Holders[int, Handle]):
    """Holders that are threads, by holder id (:func:`thread_holder_id`)."""

    def __init__(self, make: Callable[[int], Handle]) -> None:
        super().__init__(make)
        self._handles = {}
        # The thread of each holder id that has a handle: ended ones are forgotten.
        self._threads: dict[int, threading.Thread] = {}

    def _caller(self) -> int:
        holder_id = thread_holder_id()
        if holder_id not in self._threads:
            self._threads[holder_id] = threading.current_thread()
        return holder_id

    def _caller_if_any(self) -> Optional[int]:
        return thread_holder_id()

    def _holder_id(self, holder: int) -> int:
        return holder

    def _forget_ended(self) -> None:
        """Threads that come and go leave nothing behind. A live thread keeps its handle: a
        fair (or FIFO) lock's handle keeps its own queue channel subscribed between waits, which
        saves two commands per acquisition."""
        for holder_id, thread in list(self._threads.items()):
            handle = self._handles.get(holder_id)
            if not thread.is_alive() and (handle is None or handle.hold_count() == 0):
                self._handles.pop(holder_id, None)
                del self._threads[holder_id]


class TaskHolders(Holders["asyncio.Task[object]", Handle]):
    """Holders that are asyncio tasks. A live task keeps its handle between holds, as a live
    thread does (a handle made anew for every hold cost 13-18 % of 64 tasks' cycles/s); a task
    that is garbage-collected drops its handle (the core then releases what it held, in the
    background)."""

    def __init__(self, make: Callable[[int], Handle]) -> None:
        super().__init__(make)
        self._handles = weakref.WeakKeyDictionary()

    def _caller(self) -> asyncio.Task[object]:
        return current_task()

    def _caller_if_any(self) -> Optional[asyncio.Task[object]]:
        return asyncio.current_task()

    def _holder_id(self, holder: asyncio.Task[object]) -> int:
        return task_holder_id(holder)


class LockBase(WarnsIfCollectedHolding):
    """What :class:`polylock.Lock` and :class:`polylock.AsyncLock` share: a native handle per
    holder (thread or task), made by :meth:`_new_holders`."""

    def __init__(
        self,
        client: _native.Client,
        name: str,
        *,
        kind: LockKind = "lock",
        timeout: Optional[float] = None,
        lease: Optional[float] = None,
        wait: WaitOptions = (None, None, None),
    ) -> None:
        make_handle = handle_maker(client, kind, name, timeout, lease, wait)
        # Holder 0 is never a thread or task id; this handle only asks Redis, and checks the
        # name and the defaults now.
        self._probe = make_handle(0)
        self._name = name
        self._holders = self._new_holders(make_handle)

    def _new_holders(
        self, make: Callable[[int], _native.LockHandle]
    ) -> Holders[Any, _native.LockHandle]:
        raise NotImplementedError

    def _handle(self) -> _native.LockHandle:
        return self._holders.of_caller()

    @property
    def name(self) -> str:
        return self._name

    @property
    def owner(self) -> str:
        """``<client id>:<holder id>``: the hash field the calling thread (or task) writes when
        it holds the lock (no I/O)."""
        return self._handle().owner

    @property
    def default_timeout(self) -> Optional[float]:
        """The lock's default ``timeout`` in seconds (None: wait without bound)."""
        return self._probe.default_timeout

    @property
    def default_lease(self) -> Optional[float]:
        """The lock's default ``lease`` in seconds (None: renewed by the watchdog)."""
        return self._probe.default_lease

    def owned(self) -> bool:
        """Whether the calling thread (or task) holds the lock (no I/O)."""
        handle = self._holders.current()
        return handle is not None and handle.is_held()

    def hold_count(self) -> int:
        """How many times the calling thread (or task) has acquired without releasing (no
        I/O)."""
        handle = self._holders.current()
        return 0 if handle is None else handle.hold_count()

    @property
    def token(self) -> Optional[int]:
        """The fencing token of the calling thread's (or task's) current hold of a fenced lock
        (it grows on every acquisition, reentry included); None when it holds nothing or the
        lock is not fenced (no I/O)."""
        handle = self._holders.current()
        return None if handle is None else handle.token

    @property
    def lost(self) -> bool:
        """Whether the calling thread's (or task's) hold was lost (lease ran out, key deleted
        or taken)."""
        handle = self._holders.current()
        return handle is not None and handle.lost

    def on_lost(self, callback: LostCallback) -> None:
        """Calls ``callback(error)`` from a background thread (not an event loop), once each
        time a hold of this lock (by any thread or task) is lost. From asyncio, use
        ``loop.call_soon_threadsafe`` to get back to the loop."""
        self._holders.on_lost(callback)

    _collected_warning = (
        "polylock lock {name!r} was garbage-collected while held; releasing it in the background"
    )

    def _holds_something(self) -> bool:
        return self._holders.any_held()


AnyLock = TypeVar("AnyLock", bound=LockBase)


class ReadWriteLockBase(Generic[AnyLock]):
    """What :class:`polylock.ReadWriteLock` and :class:`polylock.AsyncReadWriteLock` share;
    a subclass names its type of lock."""

    _lock_type: type[AnyLock]

    def __init__(
        self,
        client: _native.Client,
        name: str,
        *,
        timeout: Optional[float] = None,
        lease: Optional[float] = None,
    ) -> None:
        self._name = name
        self._read = self._lock_type(client, name, kind="read", timeout=timeout, lease=lease)
        self._write = self._lock_type(client, name, kind="write", timeout=timeout, lease=lease)

    @property
    def name(self) -> str:
        return self._name

    def read_lock(self) -> AnyLock:
        """The read lock (the same object on every call)."""
        return self._read

    def write_lock(self) -> AnyLock:
        """The write lock (the same object on every call)."""
        return self._write

    def __repr__(self) -> str:
        return f"<polylock.{type(self).__name__} name={self._name!r}>"


class SemaphoreFamily:
    """The name and repr of the semaphores' wrappers, blocking or asyncio."""

    _semaphore: Union[_native.SemaphoreHandle, _native.ExpirableSemaphoreHandle]

    @property
    def name(self) -> str:
        return self._semaphore.name

    def __repr__(self) -> str:
        return f"<polylock.{type(self).__name__} name={self.name!r}>"


class SemaphoreBase(SemaphoreFamily):
    """What :class:`polylock.Semaphore` and :class:`polylock.AsyncSemaphore` share."""

    _semaphore: _native.SemaphoreHandle

    def __init__(self, client: _native.Client, name: str) -> None:
        self._semaphore = client.semaphore(name)


class ExpirableSemaphoreBase(SemaphoreFamily, WarnsIfCollectedHolding):
    """What :class:`polylock.ExpirableSemaphore` and :class:`polylock.AsyncExpirableSemaphore`
    share."""

    _semaphore: _native.ExpirableSemaphoreHandle

    def __init__(self, client: _native.Client, name: str) -> None:
        self._semaphore = client.expirable_semaphore(name)

    def held_permits(self) -> list[str]:
        """The ids of the permits acquired through this object and neither released nor lost
        (no I/O): a permit leaves as soon as its lease runs out (by this client's clock) or the
        watchdog finds it gone."""
        return self._semaphore.held_permits()

    _collected_warning = (
        "polylock expirable semaphore {name!r} was garbage-collected while holding permits; "
        "releasing them in the background"
    )

    def _holds_something(self) -> bool:
        return bool(self._semaphore.held_permits())


AnyReadWriteLock = TypeVar("AnyReadWriteLock", bound=ReadWriteLockBase)  # type: ignore[type-arg]
AnySemaphore = TypeVar("AnySemaphore", bound=SemaphoreBase)
AnyExpirableSemaphore = TypeVar("AnyExpirableSemaphore", bound=ExpirableSemaphoreBase)


class ClientBase(Generic[AnyLock, AnyReadWriteLock, AnySemaphore, AnyExpirableSemaphore]):
    """What :class:`polylock.Client` and :class:`polylock.AsyncClient` share; a subclass names
    the types of lock and semaphore it makes."""

    _lock_type: type[AnyLock]
    _read_write_lock_type: type[AnyReadWriteLock]
    _semaphore_type: type[AnySemaphore]
    _expirable_semaphore_type: type[AnyExpirableSemaphore]

    def __init__(self, url: str, **options: Unpack[ClientOptions]) -> None:
        self._native = _native.Client(url, **native_options(options))  # type: ignore[arg-type]

    @property
    def id(self) -> str:
        """This client's id (a UUID), the first half of every owner string it writes."""
        return self._native.id

    @property
    def name(self) -> str:
        """This client's name (the ``name`` option, default ``host:pid``): tools and a timed-out
        acquire of another client name the holder of a lock by it."""
        return self._native.name

    @property
    def watchdog_timeout(self) -> float:
        return self._native.watchdog_timeout

    def metrics(self) -> MetricsSnapshot:
        """What this client's locks did so far: counters, current holds and waiters, and
        wait and hold histograms per lock name and kind, plus the connection's counters (see
        :mod:`polylock.metrics`). No I/O; all zero with ``metrics=False``."""
        return snapshot_from_native(self._native.metrics())

    def _record_metric_events(self, on: bool) -> None:
        """Starts (True) or stops buffering metric events for :mod:`polylock.otel`."""
        self._native.record_metric_events(on)

    def _drain_metric_events(self) -> list[_MetricEvent]:
        """The metric events buffered since the last call, oldest first (see
        ``_native.Client.drain_metric_events``)."""
        return self._native.drain_metric_events()

    def lock(
        self,
        name: str,
        *,
        timeout: Optional[float] = None,
        lease: Optional[float] = None,
        wait_mode: Optional[Literal["pubsub", "poll"]] = None,
        poll_min: Optional[float] = None,
        poll_max: Optional[float] = None,
    ) -> AnyLock:
        """A reentrant lock named ``name``, owned by whichever thread (or asyncio task)
        acquires it. No I/O.

        ``timeout`` and ``lease`` are the lock's defaults, used by ``with lock:`` and by
        ``acquire`` when it leaves them out (None: wait without bound / a lease renewed by the
        watchdog). ``wait_mode`` ("pubsub" or "poll", with ``poll_min`` and ``poll_max`` as
        the client's options take them) is how this lock's waiters wait instead of the
        client's ``wait_mode`` (None: the client's); "pubsub" on a client connected with
        ``wait_mode="poll"`` fails each acquire with InvalidArgumentError, as that client has
        no pub/sub connection. Bad values raise InvalidArgumentError here."""
        wait = (wait_mode, poll_min, poll_max)
        return self._lock_type(self._native, name, timeout=timeout, lease=lease, wait=wait)

    def fair_lock(
        self,
        name: str,
        *,
        timeout: Optional[float] = None,
        lease: Optional[float] = None,
        wait_mode: Optional[Literal["pubsub", "poll"]] = None,
        poll_min: Optional[float] = None,
        poll_max: Optional[float] = None,
    ) -> AnyLock:
        """A reentrant fair lock named ``name`` (Redisson RFairLock): waiting threads (or tasks)
        are served in arrival order. Same API and defaults as :meth:`lock`. No I/O."""
        wait = (wait_mode, poll_min, poll_max)
        return self._lock_type(
            self._native, name, kind="fair", timeout=timeout, lease=lease, wait=wait
        )

    def fifo_lock(
        self,
        name: str,
        *,
        timeout: Optional[float] = None,
        lease: Optional[float] = None,
        wait_mode: Optional[Literal["pubsub", "poll"]] = None,
        poll_min: Optional[float] = None,
        poll_max: Optional[float] = None,
    ) -> AnyLock:
        """A reentrant FIFO lock named ``name`` (polylock's own layout, not Redisson's): waiting
        threads (or tasks) are served in arrival order, and a release hands the lock to the next
        one directly, at about half the server calls of :meth:`fair_lock`. It excludes every
        other hash lock of the same name (a :meth:`lock`, Redisson's RLock), but Redisson
        clients do not see its line (an RFairLock of the name does not wait in it). A waiter
        that stopped answering is skipped after the client's ``fair_queue_timeout``; a single
        try (``blocking=False``) takes no place in line. Same API and defaults as :meth:`lock`.
        No I/O."""
        wait = (wait_mode, poll_min, poll_max)
        return self._lock_type(
            self._native, name, kind="fifo", timeout=timeout, lease=lease, wait=wait
        )

    def fenced_lock(
        self,
        name: str,
        *,
        timeout: Optional[float] = None,
        lease: Optional[float] = None,
        wait_mode: Optional[Literal["pubsub", "poll"]] = None,
        poll_min: Optional[float] = None,
        poll_max: Optional[float] = None,
    ) -> AnyLock:
        """A reentrant fenced lock named ``name`` (Redisson RFencedLock): each acquisition,
        reentry included, gets a fencing token (``token``) higher than any earlier one of the
        name, whoever held it. Same API and defaults as :meth:`lock`. No I/O."""
        wait = (wait_mode, poll_min, poll_max)
        return self._lock_type(
            self._native, name, kind="fenced", timeout=timeout, lease=lease, wait=wait
        )

    def _lock_for_call(
        self, name: str, kind: LockedKind, timeout: Optional[float], lease: Optional[float]
    ) -> AnyLock:
        """A ``@client.locked`` function's lock of ``kind`` (one per call, so calls from
        threads or tasks exclude each other as any holders do)."""
        if kind == "lock":
            return self.lock(name, timeout=timeout, lease=lease)
        if kind == "fair_lock":
            return self.fair_lock(name, timeout=timeout, lease=lease)
        if kind == "fifo_lock":
            return self.fifo_lock(name, timeout=timeout, lease=lease)
        if kind == "fenced_lock":
            return self.fenced_lock(name, timeout=timeout, lease=lease)
        # InvalidArgumentError, as Node's ERR_INVALID_ARGUMENT for a bad kind.
        raise InvalidArgumentError(
            f"kind must be 'lock', 'fair_lock', 'fifo_lock' or 'fenced_lock', not {kind!r}"
        )

    def read_write_lock(
        self, name: str, *, timeout: Optional[float] = None, lease: Optional[float] = None
    ) -> AnyReadWriteLock:
        """A read-write lock named ``name`` (Redisson RReadWriteLock): readers share it, a
        writer excludes everyone else. ``timeout`` and ``lease``: the defaults of both its
        locks, as for :meth:`lock`. No I/O."""
        return self._read_write_lock_type(self._native, name, timeout=timeout, lease=lease)

    def semaphore(self, name: str) -> AnySemaphore:
        """A counting semaphore named ``name`` (Redisson RSemaphore). No I/O."""
        return self._semaphore_type(self._native, name)

    def expirable_semaphore(self, name: str) -> AnyExpirableSemaphore:
        """A semaphore named ``name`` whose permits have ids and leases (Redisson
        RPermitExpirableSemaphore). No I/O."""
        return self._expirable_semaphore_type(self._native, name)

    def close(self) -> list[str]:
        """Stops renewals and the pub/sub connection, then waits (at most the response timeout,
        without the GIL) until the client's record is deleted, so a process that exits next
        leaves none behind. Returns the names of locks still held; they are not released and
        expire with their lease. Later calls fail with ConnectionError."""
        return self._native.close()

    def __enter__(self: Self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<polylock.{type(self).__name__} id={self.id}>"

