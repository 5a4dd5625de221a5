"""The asyncio API: an AsyncLock belongs to the calling asyncio task."""

from __future__ import annotations

import asyncio
import threading
import warnings
import weakref
from types import TracebackType
from typing import Optional, Union

from . import _native
from ._native import DEFAULT
from ._sync import (
    LockKind,
    LostCallback,
    Seconds,
    TlsSource,
    as_bytes,
    handle_maker,
    timed_out,
    tls_text,
)


class AsyncClient:
    """The asyncio client. ``AsyncClient(url, ...)`` connects in the constructor (blocking at most
    ``connect_timeout`` seconds); ``await AsyncClient.connect(url, ...)`` connects without blocking
    the event loop. Options as for :class:`polylock.Client`.
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

    @classmethod
    async def connect(
        cls,
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
    ) -> AsyncClient:
        native = await _native.Client.connect_async(
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
        client = cls.__new__(cls)
        client._native = native
        return client

    @property
    def id(self) -> str:
        return self._native.id

    @property
    def watchdog_timeout(self) -> float:
        return self._native.watchdog_timeout

    def lock(
        self, name: str, *, timeout: Optional[float] = None, lease: Optional[float] = None
    ) -> AsyncLock:
        """A reentrant lock named ``name``, owned by whichever asyncio task acquires it, with
        the defaults ``timeout`` and ``lease`` (as :meth:`polylock.Client.lock`). No I/O."""
        return AsyncLock(self._native, name, timeout=timeout, lease=lease)

    def fair_lock(
        self, name: str, *, timeout: Optional[float] = None, lease: Optional[float] = None
    ) -> AsyncLock:
        """A reentrant fair lock named ``name`` (Redisson RFairLock): waiting tasks are served in
        arrival order. Same API and defaults as :meth:`lock`. No I/O."""
        return AsyncLock(self._native, name, kind="fair", timeout=timeout, lease=lease)

    def fenced_lock(
        self, name: str, *, timeout: Optional[float] = None, lease: Optional[float] = None
    ) -> AsyncLock:
        """A reentrant fenced lock named ``name``: each acquisition gets a fencing token
        (:attr:`AsyncLock.token`). Same API and defaults as :meth:`lock`. No I/O."""
        return AsyncLock(self._native, name, kind="fenced", timeout=timeout, lease=lease)

    async def fenced_set(self, key: str, value: Union[bytes, str], token: int) -> None:
        """As :meth:`polylock.Client.fenced_set`."""
        await self._native.fenced_set_async(key, as_bytes(value), token)

    async def fenced_delete(self, key: str, token: int) -> bool:
        """As :meth:`polylock.Client.fenced_delete`."""
        return await self._native.fenced_delete_async(key, token)

    def read_write_lock(
        self, name: str, *, timeout: Optional[float] = None, lease: Optional[float] = None
    ) -> AsyncReadWriteLock:
        """As :meth:`polylock.Client.read_write_lock`, owned by asyncio tasks. No I/O."""
        return AsyncReadWriteLock(self._native, name, timeout=timeout, lease=lease)

    def semaphore(self, name: str) -> AsyncSemaphore:
        """As :meth:`polylock.Client.semaphore`. No I/O."""
        return AsyncSemaphore(self._native, name)

    def expirable_semaphore(self, name: str) -> AsyncExpirableSemaphore:
        """As :meth:`polylock.Client.expirable_semaphore`. No I/O."""
        return AsyncExpirableSemaphore(self._native, name)

    def close(self) -> list[str]:
        """As :meth:`polylock.Client.close` (no I/O, so not a coroutine)."""
        return self._native.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.close()

    def __enter__(self) -> AsyncClient:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<polylock.AsyncClient id={self.id}>"


def _current_task() -> asyncio.Task[object]:
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("polylock.AsyncLock must be used from inside an asyncio task")
    return task


class AsyncLock:
    """A distributed reentrant lock owned by the calling asyncio task.

    Tasks sharing one AsyncLock exclude each other; a task re-enters its own hold. A task that is
    garbage-collected while holding drops its hold (released in the background).
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
        self._probe = self._make_handle(0)
        self._name = name
        self._mutex = threading.Lock()
        self._handles: weakref.WeakKeyDictionary[asyncio.Task[object], _native.LockHandle] = (
            weakref.WeakKeyDictionary()
        )
        self._callbacks: list[LostCallback] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def owner(self) -> str:
        """``<client id>:<holder id>``: the hash field the calling task writes when it holds the
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
        task = _current_task()
        with self._mutex:
            handle = self._handles.get(task)
            if handle is None:
                handle = self._make_handle(id(task))
                for callback in self._callbacks:
                    handle.on_lost(callback)
                self._handles[task] = handle
            return handle

    def _current(self) -> Optional[_native.LockHandle]:
        task = asyncio.current_task()
        return None if task is None else self._handles.get(task)

    def _forget_if_idle(self, handle: _native.LockHandle) -> None:
        if handle.hold_count() == 0:
            task = _current_task()
            with self._mutex:
                if self._handles.get(task) is handle:
                    del self._handles[task]

    async def acquire(
        self,
        blocking: bool = True,
        timeout: Seconds = DEFAULT,
        lease: Seconds = DEFAULT,
    ) -> bool:
        """As :meth:`polylock.Lock.acquire`, for the calling task. Cancelling the task while it
        waits leaves no lock held."""
        handle = self._handle()
        pending = handle.acquire_async(blocking, timeout, lease)
        try:
            acquisition = await pending
        except BaseException:
            # Cancelled after the acquisition was delivered but before this task resumed:
            # nobody owns it; give it back now rather than whenever `pending` is collected.
            if pending.done() and not pending.cancelled() and pending.exception() is None:
                pending.result().abandon()
            self._forget_if_idle(handle)
            raise
        acquired = acquisition.claim()
        if not acquired:
            self._forget_if_idle(handle)
        return acquired

    async def release(self) -> None:
        """Releases one level of the calling task's hold (NotHeldError, LockLostError)."""
        handle = self._handle()
        try:
            await handle.release_async()
        finally:
            self._forget_if_idle(handle)

    async def locked(self) -> bool:
        """Whether anyone holds the lock (asks Redis)."""
        return await self._probe.locked_async()

    def owned(self) -> bool:
        """Whether the calling task holds the lock (no I/O)."""
        handle = self._current()
        return handle is not None and handle.is_held()

    async def force_unlock(self) -> bool:
        """As :meth:`polylock.Lock.force_unlock`."""
        return await self._probe.force_unlock_async()

    async def remaining_lease(self) -> Optional[float]:
        """As :meth:`polylock.Lock.remaining_lease`."""
        return await self._probe.remaining_lease_async()

    def hold_count(self) -> int:
        handle = self._current()
        return 0 if handle is None else handle.hold_count()

    @property
    def token(self) -> Optional[int]:
        """The fencing token of the calling task's hold of a fenced lock; None when it holds
        nothing or the lock is not fenced (no I/O)."""
        handle = self._current()
        return None if handle is None else handle.token

    @property
    def lost(self) -> bool:
        """Whether the calling task's hold was lost."""
        handle = self._current()
        return handle is not None and handle.lost

    def on_lost(self, callback: LostCallback) -> None:
        """Calls ``callback(error)`` from a background thread (not the event loop), once each
        time a hold of this lock (by any task) is lost. Use ``loop.call_soon_threadsafe`` to get
        back to the loop."""
        if not callable(callback):
            raise TypeError("on_lost expects a callable")
        with self._mutex:
            self._callbacks.append(callback)
            for handle in list(self._handles.values()):
                handle.on_lost(callback)

    async def __aenter__(self) -> AsyncLock:
        """Acquires with the lock's defaults; :class:`polylock.TimeoutError` (and the block does
        not run) when its default timeout runs out."""
        if not await self.acquire():
            raise timed_out(self._name, self.default_timeout)
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await self.release()

    def __del__(self) -> None:
        handles = getattr(self, "_handles", None)
        if handles is not None and any(h.is_held() for h in list(handles.values())):
            warnings.warn(
                f"polylock lock {self._name!r} was garbage-collected while held; "
                "releasing it in the background",
                ResourceWarning,
                stacklevel=2,
                source=self,
            )

    def __repr__(self) -> str:
        return f"<polylock.AsyncLock name={self._name!r}>"


async def _claim(pending: asyncio.Future[_native.Acquisition]) -> tuple[bool, Optional[str]]:
    """Awaits a semaphore's acquisition and takes it over: (acquired, permit id). One whose
    task is cancelled after it was delivered is given back at once."""
    try:
        acquisition = await pending
    except BaseException:
        if pending.done() and not pending.cancelled() and pending.exception() is None:
            pending.result().abandon()
        raise
    return acquisition.claim(), acquisition.permit_id


class AsyncReadWriteLock:
    """As :class:`polylock.ReadWriteLock`, with :class:`AsyncLock` objects owned by the calling
    asyncio task."""

    def __init__(
        self,
        client: _native.Client,
        name: str,
        *,
        timeout: Optional[float] = None,
        lease: Optional[float] = None,
    ) -> None:
        self._name = name
        self._read = AsyncLock(client, name, kind="read", timeout=timeout, lease=lease)
        self._write = AsyncLock(client, name, kind="write", timeout=timeout, lease=lease)

    @property
    def name(self) -> str:
        return self._name

    def read_lock(self) -> AsyncLock:
        """The read lock (the same object on every call)."""
        return self._read

    def write_lock(self) -> AsyncLock:
        """The write lock (the same object on every call)."""
        return self._write

    def __repr__(self) -> str:
        return f"<polylock.AsyncReadWriteLock name={self._name!r}>"


class AsyncSemaphore:
    """As :class:`polylock.Semaphore`, with awaitables; ``async with semaphore:`` takes one
    permit (waiting without bound) and releases it on exit. Cancelling a waiting acquire takes
    nothing."""

    def __init__(self, client: _native.Client, name: str) -> None:
        self._native = client.semaphore(name)

    @property
    def name(self) -> str:
        return self._native.name

    async def try_set_permits(self, permits: int) -> bool:
        return await self._native.try_set_permits_async(permits)

    async def add_permits(self, permits: int) -> None:
        await self._native.add_permits_async(permits)

    async def acquire(self, permits: int = 1, timeout: Optional[float] = None) -> bool:
        """As :meth:`polylock.Semaphore.acquire`."""
        acquired, _ = await _claim(self._native.acquire_async(permits, timeout))
        return acquired

    async def release(self, permits: int = 1) -> None:
        await self._native.release_async(permits)

    async def available_permits(self) -> int:
        return await self._native.available_permits_async()

    async def __aenter__(self) -> AsyncSemaphore:
        await self.acquire()
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await self.release()

    def __repr__(self) -> str:
        return f"<polylock.AsyncSemaphore name={self.name!r}>"


class AsyncExpirableSemaphore:
    """As :class:`polylock.ExpirableSemaphore`, with awaitables. Cancelling a waiting acquire
    takes nothing."""

    def __init__(self, client: _native.Client, name: str) -> None:
        self._native = client.expirable_semaphore(name)

    @property
    def name(self) -> str:
        return self._native.name

    async def try_set_permits(self, permits: int) -> bool:
        return await self._native.try_set_permits_async(permits)

    async def add_permits(self, permits: int) -> None:
        await self._native.add_permits_async(permits)

    async def acquire(
        self, timeout: Optional[float] = None, lease: Optional[float] = None
    ) -> Optional[str]:
        """As :meth:`polylock.ExpirableSemaphore.acquire`."""
        _, permit_id = await _claim(self._native.acquire_async(timeout, lease))
        return permit_id

    async def release(self, permit_id: str) -> None:
        await self._native.release_async(permit_id)

    async def available_permits(self) -> int:
        return await self._native.available_permits_async()

    def held_permits(self) -> list[str]:
        """As :meth:`polylock.ExpirableSemaphore.held_permits`."""
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
        return f"<polylock.AsyncExpirableSemaphore name={self.name!r}>"
