"""Locks made of several locks, possibly of clients of independent servers: MultiLock (all of
them) and RedLock (a majority), blocking and asyncio. A group belongs to the calling thread
(or task), as its locks do: it is made, per thread or task, of that holder's handles."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Sequence
from types import TracebackType
from typing import Literal, Optional

from . import _native
from ._async import AsyncLock, _current_task
from ._native import DEFAULT
from ._sync import Lock, LostCallback, Seconds, timed_out

GroupKind = Literal["multi", "red"]


def _checked(kind: str, locks: Sequence[object], lock_type: type) -> None:
    for lock in locks:
        if not isinstance(lock, lock_type):
            raise TypeError(f"{kind} takes {lock_type.__name__} objects, got {type(lock).__name__}")


class _Group:
    """What MultiLock and RedLock share: a native group per calling thread."""

    _kind: GroupKind

    def __init__(
        self,
        locks: Sequence[Lock],
        *,
        timeout: Optional[float] = None,
        lease: Optional[float] = None,
    ) -> None:
        _checked(type(self).__name__, locks, Lock)
        self._locks = list(locks)
        self._timeout = timeout
        self._lease = lease
        # Checks the locks (none, or one twice) and the defaults now, with the core's messages.
        self._probe = self._make([lock._probe for lock in self._locks])
        self._mutex = threading.Lock()
        self._groups: dict[int, _native.GroupHandle] = {}
        self._callbacks: list[LostCallback] = []

    def _make(self, handles: list[_native.LockHandle]) -> _native.GroupHandle:
        return _native.GroupHandle(self._kind, handles, self._timeout, self._lease)

    def _group(self) -> _native.GroupHandle:
        thread = threading.get_ident()
        with self._mutex:
            group = self._groups.get(thread)
            if group is None:
                alive = {t.ident for t in threading.enumerate()}
                for ended in [t for t, g in self._groups.items() if t not in alive and g.hold_count() == 0]:
                    del self._groups[ended]
                group = self._make([lock._handle() for lock in self._locks])
                for callback in self._callbacks:
                    group.on_lost(callback)
                self._groups[thread] = group
            return group

    @property
    def name(self) -> str:
        """The distinct names of its locks, joined by ", "."""
        return self._probe.name

    @property
    def locks(self) -> list[Lock]:
        return list(self._locks)

    @property
    def quorum(self) -> int:
        """How many of its locks must be held: all (MultiLock) or a majority (RedLock)."""
        return self._probe.quorum

    def acquire(
        self, blocking: bool = True, timeout: Seconds = DEFAULT, lease: Seconds = DEFAULT
    ) -> bool:
        """Acquires the group for the calling thread; True when acquired. Arguments as for
        :meth:`polylock.Lock.acquire`: ``timeout`` bounds the whole acquisition; a ``lease`` is
        set on each lock and an acquisition counts only if some of it is left after the time
        taken and the clock drift allowance (1 % + 2 ms). Ctrl-C leaves nothing held."""
        return self._group().acquire(blocking, timeout, lease)

    def release(self) -> None:
        """Releases every lock the calling thread's latest acquisition took, on every server.
        NotHeldError if it holds none; LockLostError if the group was lost meanwhile."""
        self._group().release()

    def owned(self) -> bool:
        """Whether the calling thread holds the group (no I/O)."""
        group = self._groups.get(threading.get_ident())
        return group is not None and group.is_held()

    def hold_count(self) -> int:
        group = self._groups.get(threading.get_ident())
        return 0 if group is None else group.hold_count()

    @property
    def lost(self) -> bool:
        """Whether the calling thread's hold was lost (MultiLock: any lock lost; RedLock: fewer
        than the quorum remain)."""
        group = self._groups.get(threading.get_ident())
        return group is not None and group.lost

    def on_lost(self, callback: LostCallback) -> None:
        """Calls ``callback(error)`` from a background thread each time a hold is lost."""
        if not callable(callback):
            raise TypeError("on_lost expects a callable")
        with self._mutex:
            self._callbacks.append(callback)
            for group in self._groups.values():
                group.on_lost(callback)

    def __enter__(self) -> _Group:
        if not self.acquire():
            raise timed_out(self.name, self._probe.default_timeout)
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<polylock.{type(self).__name__} name={self.name!r}>"


class MultiLock(_Group):
    """All of several :class:`polylock.Lock` objects (of one or several clients), acquired
    together or not at all (Redisson RedissonMultiLock). Lost when any of them is lost.
    ``timeout`` and ``lease`` are its defaults, as for :meth:`polylock.Client.lock`."""

    _kind: GroupKind = "multi"


class RedLock(_Group):
    """One :class:`polylock.Lock` per independent Redis master, held when a majority
    (``len(locks) // 2 + 1``) is: the Redlock algorithm. Lost when fewer than the quorum remain
    held. Its safety rests on timing assumptions; use a fenced lock where correctness matters."""

    _kind: GroupKind = "red"


class _AsyncGroup:
    """What AsyncMultiLock and AsyncRedLock share: a native group per asyncio task."""

    _kind: GroupKind

    def __init__(
        self,
        locks: Sequence[AsyncLock],
        *,
        timeout: Optional[float] = None,
        lease: Optional[float] = None,
    ) -> None:
        _checked(type(self).__name__, locks, AsyncLock)
        self._locks = list(locks)
        self._timeout = timeout
        self._lease = lease
        self._probe = self._make([lock._probe for lock in self._locks])
        self._mutex = threading.Lock()
        self._groups: weakref.WeakKeyDictionary[asyncio.Task[object], _native.GroupHandle] = (
            weakref.WeakKeyDictionary()
        )
        self._callbacks: list[LostCallback] = []

    def _make(self, handles: list[_native.LockHandle]) -> _native.GroupHandle:
        return _native.GroupHandle(self._kind, handles, self._timeout, self._lease)

    def _group(self) -> _native.GroupHandle:
        task = _current_task()
        with self._mutex:
            group = self._groups.get(task)
            if group is None:
                group = self._make([lock._handle() for lock in self._locks])
                for callback in self._callbacks:
                    group.on_lost(callback)
                self._groups[task] = group
            return group

    def _current(self) -> Optional[_native.GroupHandle]:
        task = asyncio.current_task()
        return None if task is None else self._groups.get(task)

    @property
    def name(self) -> str:
        return self._probe.name

    @property
    def locks(self) -> list[AsyncLock]:
        return list(self._locks)

    @property
    def quorum(self) -> int:
        return self._probe.quorum

    async def acquire(
        self, blocking: bool = True, timeout: Seconds = DEFAULT, lease: Seconds = DEFAULT
    ) -> bool:
        """As :meth:`polylock.MultiLock.acquire`, for the calling task. Cancelling the task
        while it waits leaves nothing held."""
        pending = self._group().acquire_async(blocking, timeout, lease)
        try:
            acquisition = await pending
        except BaseException:
            if pending.done() and not pending.cancelled() and pending.exception() is None:
                pending.result().abandon()
            raise
        return acquisition.claim()

    async def release(self) -> None:
        await self._group().release_async()

    def owned(self) -> bool:
        group = self._current()
        return group is not None and group.is_held()

    def hold_count(self) -> int:
        group = self._current()
        return 0 if group is None else group.hold_count()

    @property
    def lost(self) -> bool:
        group = self._current()
        return group is not None and group.lost

    def on_lost(self, callback: LostCallback) -> None:
        """Calls ``callback(error)`` from a background thread (not the event loop) each time a
        hold is lost."""
        if not callable(callback):
            raise TypeError("on_lost expects a callable")
        with self._mutex:
            self._callbacks.append(callback)
            for group in list(self._groups.values()):
                group.on_lost(callback)

    async def __aenter__(self) -> _AsyncGroup:
        if not await self.acquire():
            raise timed_out(self.name, self._probe.default_timeout)
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await self.release()

    def __repr__(self) -> str:
        return f"<polylock.{type(self).__name__} name={self.name!r}>"


class AsyncMultiLock(_AsyncGroup):
    """:class:`polylock.MultiLock` over :class:`polylock.AsyncLock` objects, owned by the
    calling asyncio task."""

    _kind: GroupKind = "multi"


class AsyncRedLock(_AsyncGroup):
    """:class:`polylock.RedLock` over :class:`polylock.AsyncLock` objects, owned by the calling
    asyncio task."""

    _kind: GroupKind = "red"
