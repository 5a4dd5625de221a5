"""Leader election (``client.election(name)``): the sync and asyncio faces of the core's
election. Candidates campaign on the fenced lock of the name; the lock's fencing token is the
leader's term, so terms strictly increase from one leader to the next."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Optional

from . import _native


@dataclass(frozen=True)
class Leader:
    """The current leader of an election: its announced value, its term (the fencing token of
    its hold), its lock owner and its client's name."""

    value: str
    term: int
    owner: str
    client_name: str


def _leader(row: Optional[tuple[str, int, str, str]]) -> Optional[Leader]:
    return None if row is None else Leader(*row)


class LostSignal:
    """Set when the leadership ended: its lease lost (no later than the moment it can have
    ended on the server) or resigned. Like :class:`threading.Event`, without ``set``."""

    def __init__(self, native: _native.LeadershipHandle) -> None:
        self._native = native

    def is_set(self) -> bool:
        """True once the leadership ended (reads the clock: a process resumed after a pause
        past its lease sees it here at once)."""
        return not self._native.is_leader()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the leadership ends; False when ``timeout`` seconds ran out first."""
        return self._native.wait_lost(timeout)


class AsyncLostSignal:
    """:class:`LostSignal` for asyncio: ``await leadership.lost.wait()``."""

    def __init__(self, native: _native.LeadershipHandle) -> None:
        self._native = native

    def is_set(self) -> bool:
        return not self._native.is_leader()

    async def wait(self) -> bool:
        """Returns True once the leadership ended (cancel it, or use ``asyncio.wait_for``, to
        bound it)."""
        return await self._native.wait_lost_async()


class _LeadershipBase:
    def __init__(self, native: _native.LeadershipHandle) -> None:
        self._native = native

    @property
    def term(self) -> int:
        """The term: higher than every earlier leader's. Pass it to ``client.fenced_set`` so a
        later leader's writes refuse this one's."""
        return self._native.term

    @property
    def value(self) -> str:
        """The value this leader announced last."""
        return self._native.value

    @property
    def owner(self) -> str:
        return self._native.owner

    def is_leader(self) -> bool:
        """Whether this candidate still leads, as far as it knows (no I/O; reads the clock)."""
        return self._native.is_leader()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} term={self.term} leader={self.is_leader()}>"


class Leadership(_LeadershipBase):
    """This candidate's term as leader (from :meth:`Election.campaign`). ``with leadership:``
    resigns at the end."""

    @property
    def lost(self) -> LostSignal:
        return LostSignal(self._native)

    def proclaim(self, value: str) -> None:
        """Announces ``value`` instead; :class:`polylock.LockLostError` when this candidate no
        longer leads (checked on the server against the lock's holder)."""
        self._native.proclaim(value)

    def resign(self) -> None:
        """Steps down: the next candidate is woken. Resigning twice does nothing."""
        self._native.resign()

    def __enter__(self) -> Leadership:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.resign()


class AsyncLeadership(_LeadershipBase):
    """:class:`Leadership` for asyncio; ``async with leadership:`` resigns at the end."""

    @property
    def lost(self) -> AsyncLostSignal:
        return AsyncLostSignal(self._native)

    async def proclaim(self, value: str) -> None:
        await self._native.proclaim_async(value)

    async def resign(self) -> None:
        await self._native.resign_async()

    async def __aenter__(self) -> AsyncLeadership:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await self.resign()


class Election:
    """The leader election ``name`` (from :meth:`polylock.Client.election`)."""

    def __init__(self, native: _native.ElectionHandle) -> None:
        self._native = native

    @property
    def name(self) -> str:
        return self._native.name

    def campaign(self, value: str, timeout: Optional[float] = None) -> Optional[Leadership]:
        """Blocks until this candidate leads, announcing ``value``; None when ``timeout``
        seconds ran out (None: no bound). Each campaign is a new candidate."""
        native = self._native.campaign(value, timeout)
        return None if native is None else Leadership(native)

    def leader(self) -> Optional[Leader]:
        """The current leader, or None when nobody leads (a dead leader is never reported)."""
        return _leader(self._native.leader())

    def observe(self, timeout: Optional[float] = None) -> Iterator[Optional[Leader]]:
        """Yields the leader now, then each change (a new leader or value, or None: nobody
        leads). With ``timeout``, the iteration ends when no change came for that long."""
        observer = self._native.observe()
        while True:
            changed, row = observer.next(timeout)
            if not changed:
                return
            yield _leader(row)


class AsyncElection:
    """:class:`Election` for asyncio (from :meth:`polylock.AsyncClient.election`)."""

    def __init__(self, native: _native.ElectionHandle) -> None:
        self._native = native

    @property
    def name(self) -> str:
        return self._native.name

    async def campaign(
        self, value: str, timeout: Optional[float] = None
    ) -> Optional[AsyncLeadership]:
        """As :meth:`Election.campaign`; cancelling it leaves nothing held."""
        native = await self._native.campaign_async(value, timeout)
        return None if native is None else AsyncLeadership(native)

    async def leader(self) -> Optional[Leader]:
        return _leader(await self._native.leader_async())

    async def observe(self) -> AsyncIterator[Optional[Leader]]:
        """``async for leader in election.observe():`` the leader now, then each change."""
        observer = await self._native.observe_async()
        while True:
            yield _leader(await observer.next_async())
