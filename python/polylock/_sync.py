"""The blocking API: a Lock belongs to the calling thread, like threading.RLock."""

from __future__ import annotations

import threading
import warnings
from types import TracebackType
from typing import Callable, Optional, Union

from . import _native
from ._native import LockLostError

LostCallback = Callable[[LockLostError], object]


class Client:
    """A connection to one Redis server, shared by every lock made from it.

    Connects in the constructor (at most ``connect_timeout`` seconds). Times are seconds; an
    option left out (or None) takes the core's default. ``watchdog_timeout`` (default 30) is the
    lease of locks acquired without one; it is renewed every third of it while held.
    ``connect_timeout`` and ``response_timeout`` (default 5 each) bound connecting and each
    command. ``fair_queue_timeout`` (default 10) is how long a fair-lock waiter that stopped
    answering (its process died) keeps its place in the queue. Bad values raise
    InvalidArgumentError with the core's message, the same in every polylock language.
    """

    def __init__(
        self,
        url: str,
        *,
        watchdog_timeout: Optional[float] = None,
        connect_timeout: Optional[float] = None,
        response_timeout: Optional[float] = None,
        fair_queue_timeout: Optional[float] = None,
    ) -> None:
        self._native = _native.Client(
            url,
            watchdog_timeout=watchdog_timeout,
            connect_timeout=connect_timeout,
            response_timeout=response_timeout,
            fair_queue_timeout=fair_queue_timeout,
        )

    @property
    def id(self) -> str:
        """This client's id (a UUID), the first half of every owner string it writes."""
        return self._native.id

    @property
    def watchdog_timeout(self) -> float:
        return self._native.watchdog_timeout

    def lock(self, name: str) -> Lock:
        """A reentrant lock named ``name``, owned by whichever thread acquires it. No I/O."""
        return Lock(self._native, name)

    def fair_lock(self, name: str) -> Lock:
        """A reentrant fair lock named ``name`` (Redisson RFairLock): waiting threads are served
        in arrival order. Same API as :meth:`lock`. No I/O."""
        return Lock(self._native, name, fair=True)

    def fenced_lock(self, name: str) -> Lock:
        """A reentrant fenced lock named ``name``: each acquisition gets a fencing token
        (:attr:`Lock.token`), strictly higher than any earlier one. Same API as :meth:`lock`.
        No I/O."""
        return Lock(self._native, name, fenced=True)

    def fenced_set(self, key: str, value: Union[bytes, str], token: int) -> None:
        """Sets ``key`` to ``value`` only if ``token`` is at least the highest token already
        applied to ``key``; otherwise raises :class:`StaleTokenError` and writes nothing."""
        data = value.encode() if isinstance(value, str) else value
        self._native.fenced_set(key, data, token)

    def fenced_delete(self, key: str, token: int) -> bool:
        """Deletes ``key`` under the same rule as :meth:`fenced_set`; True when a key was
        deleted."""
        return self._native.fenced_delete(key, token)

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
        self, client: _native.Client, name: str, *, fair: bool = False, fenced: bool = False
    ) -> None:
        self._make_handle = (
            client.fair_lock_handle
            if fair
            else client.fenced_lock_handle
            if fenced
            else client.lock_handle
        )
        # Holder 0 is never a thread id; this handle only asks Redis and checks the name now.
        self._probe = self._make_handle(name, 0)
        self._name = name
        self._mutex = threading.Lock()
        self._handles: dict[int, _native.LockHandle] = {}
        self._callbacks: list[LostCallback] = []

    @property
    def name(self) -> str:
        return self._name

    def _handle(self) -> _native.LockHandle:
        thread = threading.get_ident()
        with self._mutex:
            handle = self._handles.get(thread)
            if handle is None:
                self._forget_ended_threads()
                handle = self._make_handle(self._name, thread)
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
        timeout: Optional[float] = None,
        lease: Optional[float] = None,
    ) -> bool:
        """Acquires (or re-enters) the lock; True when acquired.

        ``blocking=False`` makes one attempt; ``timeout`` bounds the wait (None, -1 or
        ``math.inf``: no bound) and False is returned when it passes. ``lease=None`` takes a watchdog-renewed lease; a
        number of seconds is a fixed lease, never renewed. Ctrl-C interrupts the wait and leaves
        no lock held.
        """
        return self._handle().acquire(blocking, timeout, lease)

    def release(self) -> None:
        """Releases one level of the calling thread's hold. NotHeldError if it holds none,
        LockLostError if its lease was lost meanwhile."""
        self._handle().release()

    def locked(self) -> bool:
        """Whether anyone holds the lock (asks Redis)."""
        return self._probe.locked()

    def is_held(self) -> bool:
        """Whether the calling thread holds the lock (no I/O)."""
        handle = self._current()
        return handle is not None and handle.is_held()

    def hold_count(self) -> int:
        """How many times the calling thread has acquired without releasing (no I/O)."""
        handle = self._current()
        return 0 if handle is None else handle.hold_count()

    @property
    def token(self) -> Optional[int]:
        """The fencing token of the calling thread's hold of a fenced lock; None when it holds
        nothing or the lock is not fenced (no I/O)."""
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
        self.acquire()
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
