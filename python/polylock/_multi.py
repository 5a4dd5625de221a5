"""Locks made of several locks, possibly of clients of independent servers: MultiLock (all of
them) and RedLock (a majority), blocking and asyncio. A group belongs to the calling thread
(or task), as its locks do: it is made, per thread or task, of that holder's handles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Literal, Optional, TypeVar

from . import _native
from ._async import AsyncLock, claim
from ._native import DEFAULT
from ._shared import (
    Holders,
    LockBase,
    LostCallback,
    Seconds,
    TaskHolders,
    ThreadHolders,
    raise_timed_out,
    raise_timed_out_async,
)
from ._sync import Lock

GroupKind = Literal["multi", "red"]

AnyLock = TypeVar("AnyLock", bound=LockBase)


class _GroupBase(Generic[AnyLock]):
    """What the groups share, blocking or asyncio: a native group per holder (thread or task),
    made of that holder's handles on the locks."""

    _kind: GroupKind
    _lock_type: type[AnyLock]

    def __init__(
        self,
        locks: Sequence[AnyLock],
        *,
        timeout: Optional[float] = None,
        lease: Optional[float] = None,
    ) -> None:
        for lock in locks:
            if not isinstance(lock, self._lock_type):
                raise TypeError(
                    f"{type(self).__name__} takes {self._lock_type.__name__} objects, "
                    f"got {type(lock).__name__}"
                )
        self._locks = list(locks)
        self._timeout = timeout
        self._lease = lease
        # Checks the locks (none, or one twice) and the defaults now, with the core's messages.
        self._probe = self._make([lock._probe for lock in self._locks])
        self._holders = self._new_holders()

    def _new_holders(self) -> Holders[Any, _native.GroupHandle]:
        raise NotImplementedError

    def _make(self, handles: list[_native.LockHandle]) -> _native.GroupHandle:
        return _native.GroupHandle(self._kind, handles, self._timeout, self._lease)

    def _make_for_caller(self, _holder_id: int) -> _native.GroupHandle:
        return self._make([lock._handle() for lock in self._locks])

    def _group(self) -> _native.GroupHandle:
        return self._holders.of_caller()

    @property
    def name(self) -> str:
        """The distinct names of its locks, joined by ", "."""
        return self._probe.name

    @property
    def locks(self) -> list[AnyLock]:
        return list(self._locks)

    @property
    def quorum(self) -> int:
        """How many of its locks must be held: all (MultiLock) or a majority (RedLock)."""
        return self._probe.quorum

    def owned(self) -> bool:
        """Whether the calling thread (or task) holds the group (no I/O)."""
        group = self._holders.current()
        return group is not None and group.is_held()

    def hold_count(self) -> int:
        group = self._holders.current()
        return 0 if group is None else group.hold_count()

    @property
    def lost(self) -> bool:
        """Whether the calling thread's (or task's) hold was lost (MultiLock: any lock lost;
        RedLock: fewer than the quorum remain)."""
        group = self._holders.current()
        return group is not None and group.lost

    def on_lost(self, callback: LostCallback) -> None:
        """Calls ``callback(error)`` from a background thread (not an event loop) each time a
        hold is lost."""
        self._holders.on_lost(callback)

    def __repr__(self) -> str:
        return f"<polylock.{type(self).__name__} name={self.name!r}>"


class _Group(_GroupBase[Lock]):
    """What MultiLock and RedLock share: a native group per calling thread."""

    _lock_type = Lock

    def _new_holders(self) -> Holders[Any, _native.GroupHandle]:
        return ThreadHolders(self._make_for_caller)

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

    def __enter__(self) -> _Group:
        if not self.acquire():
            raise_timed_out(self._group(), self._probe.default_timeout)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


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


class _AsyncGroup(_GroupBase[AsyncLock]):
    """What AsyncMultiLock and AsyncRedLock share: a native group per asyncio task."""

    _lock_type = AsyncLock

    def _new_holders(self) -> Holders[Any, _native.GroupHandle]:
        return TaskHolders(self._make_for_caller)

    async def acquire(
        self, blocking: bool = True, timeout: Seconds = DEFAULT, lease: Seconds = DEFAULT
    ) -> bool:
        """As :meth:`polylock.MultiLock.acquire`, for the calling task. Cancelling the task
        while it waits leaves nothing held."""
        acquired, _ = await claim(self._group().acquire_async(blocking, timeout, lease))
        return acquired

    async def release(self) -> None:
        await self._group().release_async()

    async def __aenter__(self) -> _AsyncGroup:
        if not await self.acquire():
            await raise_timed_out_async(self._group(), self._probe.default_timeout)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release()


class AsyncMultiLock(_AsyncGroup):
    """:class:`polylock.MultiLock` over :class:`polylock.AsyncLock` objects, owned by the
    calling asyncio task."""

    _kind: GroupKind = "multi"


class AsyncRedLock(_AsyncGroup):
    """:class:`polylock.RedLock` over :class:`polylock.AsyncLock` objects, owned by the calling
    asyncio task."""

    _kind: GroupKind = "red"
