"""The asyncio API: an AsyncLock belongs to the calling asyncio task. What it shares with the
blocking API is in ``_shared``."""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Optional, TypeVar, Union

from . import _native
from ._election import AsyncElection
from ._native import DEFAULT
from ._shared import ClientBase, ClientOptions, ExpirableSemaphoreBase, Holders, LockBase
from ._shared import LockedKind, ReadWriteLockBase, Seconds, SemaphoreBase, TaskHolders, as_bytes
from ._shared import native_options, raise_timed_out_async
from ._job import AsyncJobLock, async_job_decorator

if TYPE_CHECKING:
    from typing_extensions import ParamSpec, Unpack

    Params = ParamSpec("Params")

Result = TypeVar("Result")


class _CoreFuture(asyncio.Future):  # type: ignore[type-arg]
    """The future of a call into the core (python/src/asyncio.rs makes them). Cancelled, it
    cancels the core's work through ``_polylock_cancel``: overriding ``cancel`` costs nothing
    per call, where a done callback would be one more loop callback for every call."""

    __slots__ = ("_polylock_cancel",)
    _polylock_cancel: Callable[[], None]

    def cancel(self, msg: Any = None) -> bool:
        cancelled = super().cancel(msg)
        if cancelled:
            self._polylock_cancel()
        return cancelled


async def claim(pending: asyncio.Future[_native.Acquisition]) -> tuple[bool, Optional[str]]:
    """Awaits an acquisition (a lock's, a group's, a semaphore's) and takes it over: (acquired,
    permit id). One whose task is cancelled after it was delivered but before the task resumed
    is given back at once, rather than whenever ``pending`` is collected."""
    try:
        acquisition = await pending
    except BaseException:
        give_back_delivered(pending)
        raise
    return acquisition.claim(), acquisition.permit_id


def give_back_delivered(pending: asyncio.Future[_native.Acquisition]) -> None:
    """Gives back at once the acquisition ``pending`` delivered to a task that was cancelled
    before it resumed (:func:`claim`)."""
    if pending.done() and not pending.cancelled() and pending.exception() is None:
        pending.result().abandon()


class AsyncLock(LockBase):
    """A distributed reentrant lock owned by the calling asyncio task.

    Tasks sharing one AsyncLock exclude each other; a task re-enters its own hold. A task that is
    garbage-collected while holding drops its hold (released in the background).
    """

    _holders: TaskHolders[_native.LockHandle]

    def _new_holders(
        self, make: Callable[[int], _native.LockHandle]
    ) -> Holders[Any, _native.LockHandle]:
        return TaskHolders(make)

    async def acquire(
        self,
        blocking: bool = True,
        timeout: Seconds = DEFAULT,
        lease: Seconds = DEFAULT,
    ) -> bool:
        """As :meth:`polylock.Lock.acquire`, for the calling task. Cancelling the task while it
        waits leaves no lock held."""
        # `claim`, written out: one coroutine fewer per acquire (many locks from one loop).
        pending = self._handle().acquire_async(blocking, timeout, lease)
        try:
            acquisition = await pending
        except BaseException:
            give_back_delivered(pending)
            raise
        return acquisition.claim()

    async def release(self) -> None:
        """Releases one level of the calling task's hold (NotHeldError, LockLostError)."""
        await self._handle().release_async()

    async def locked(self) -> bool:
        """Whether anyone holds the lock (asks Redis)."""
        return await self._probe.locked_async()

    async def force_unlock(self) -> bool:
        """As :meth:`polylock.Lock.force_unlock`."""
        return await self._probe.force_unlock_async()

    async def remaining_lease(self) -> Optional[float]:
        """As :meth:`polylock.Lock.remaining_lease`."""
        return await self._probe.remaining_lease_async()

    async def __aenter__(self) -> AsyncLock:
        """Acquires with the lock's defaults; :class:`polylock.TimeoutError` (and the block does
        not run) when its default timeout runs out."""
        if not await self.acquire():
            await raise_timed_out_async(self._handle(), self.default_timeout)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release()

    def __repr__(self) -> str:
        return f"<polylock.AsyncLock name={self._name!r}>"


class AsyncReadWriteLock(ReadWriteLockBase[AsyncLock]):
    """As :class:`polylock.ReadWriteLock`, with :class:`AsyncLock` objects owned by the calling
    asyncio task."""

    _lock_type = AsyncLock


class AsyncSemaphore(SemaphoreBase):
    """As :class:`polylock.Semaphore`, with awaitables; ``async with semaphore:`` takes one
    permit (waiting without bound) and releases it on exit. Cancelling a waiting acquire takes
    nothing."""

    async def try_set_permits(self, permits: int) -> bool:
        return await self._semaphore.try_set_permits_async(permits)

    async def add_permits(self, permits: int) -> None:
        await self._semaphore.add_permits_async(permits)

    async def acquire(self, permits: int = 1, timeout: Optional[float] = None) -> bool:
        """As :meth:`polylock.Semaphore.acquire`."""
        acquired, _ = await claim(self._semaphore.acquire_async(permits, timeout))
        return acquired

    async def release(self, permits: int = 1) -> None:
        await self._semaphore.release_async(permits)

    async def available_permits(self) -> int:
        return await self._semaphore.available_permits_async()

    async def __aenter__(self) -> AsyncSemaphore:
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release()


class AsyncExpirableSemaphore(ExpirableSemaphoreBase):
    """As :class:`polylock.ExpirableSemaphore`, with awaitables. Cancelling a waiting acquire
    takes nothing."""

    async def try_set_permits(self, permits: int) -> bool:
        return await self._semaphore.try_set_permits_async(permits)

    async def add_permits(self, permits: int) -> None:
        await self._semaphore.add_permits_async(permits)

    async def acquire(
        self, timeout: Optional[float] = None, lease: Optional[float] = None
    ) -> Optional[str]:
        """As :meth:`polylock.ExpirableSemaphore.acquire`."""
        _, permit_id = await claim(self._semaphore.acquire_async(timeout, lease))
        return permit_id

    async def release(self, permit_id: str) -> None:
        await self._semaphore.release_async(permit_id)

    async def available_permits(self) -> int:
        return await self._semaphore.available_permits_async()


class AsyncCountDownLatch:
    """As :class:`polylock.CountDownLatch`, with awaitables. Cancelling a waiting
    :meth:`await_zero` only stops the wait."""

    def __init__(self, client: _native.Client, name: str) -> None:
        self._latch = client.count_down_latch(name)

    @property
    def name(self) -> str:
        return self._latch.name

    async def try_set_count(self, count: int) -> bool:
        return await self._latch.try_set_count_async(count)

    async def count_down(self) -> None:
        await self._latch.count_down_async()

    async def count(self) -> int:
        return await self._latch.count_async()

    async def await_zero(self, timeout: float) -> bool:
        """As :meth:`polylock.CountDownLatch.await_zero`."""
        return await self._latch.await_zero_async(timeout)

    async def delete(self) -> bool:
        return await self._latch.delete_async()

    def __repr__(self) -> str:
        return f"<polylock.AsyncCountDownLatch name={self.name!r}>"


class AsyncClient(ClientBase[AsyncLock, AsyncReadWriteLock, AsyncSemaphore, AsyncExpirableSemaphore]):
    """The asyncio client. ``AsyncClient(url, ...)`` connects in the constructor (blocking at most
    ``connect_timeout`` seconds); ``await AsyncClient.connect(url, ...)`` connects without blocking
    the event loop. Options as for :class:`polylock.Client`.
    """

    _lock_type = AsyncLock
    _read_write_lock_type = AsyncReadWriteLock
    _semaphore_type = AsyncSemaphore
    _expirable_semaphore_type = AsyncExpirableSemaphore

    @classmethod
    async def connect(cls, url: str, **options: Unpack[ClientOptions]) -> AsyncClient:
        native = await _native.Client.connect_async(url, **native_options(options))  # type: ignore[arg-type]
        client = cls.__new__(cls)
        client._native = native
        return client

    def locked(
        self,
        name: str,
        *,
        timeout: Optional[float] = None,
        lease: Optional[float] = None,
        kind: LockedKind = "lock",
    ) -> Callable[
        [Callable[Params, Coroutine[Any, Any, Result]]], Callable[Params, Coroutine[Any, Any, Result]]
    ]:
        """As :meth:`polylock.Client.locked`, for ``async def`` functions: each call runs
        inside ``async with client.lock(name, ...)``, so calls from any task, thread or process
        exclude each other. A plain function raises TypeError (use
        :meth:`polylock.Client.locked`)."""
        # Checks the name and times now, not at the first call.
        self._lock_for_call(name, kind, timeout, lease)

        def decorate(
            function: Callable[Params, Coroutine[Any, Any, Result]],
        ) -> Callable[Params, Coroutine[Any, Any, Result]]:
            if not inspect.iscoroutinefunction(function):
                raise TypeError(
                    f"{function.__qualname__} is not a coroutine function: decorate it with"
                    " Client.locked, not AsyncClient.locked"
                )

            @functools.wraps(function)
            async def run_locked(*args: Params.args, **kwargs: Params.kwargs) -> Result:
                async with self._lock_for_call(name, kind, timeout, lease):
                    return await function(*args, **kwargs)

            return run_locked

        return decorate

    async def fenced_set(self, key: str, value: Union[bytes, str], token: int) -> None:
        """As :meth:`polylock.Client.fenced_set`."""
        await self._native.fenced_set_async(key, as_bytes(value), token)

    async def fenced_delete(self, key: str, token: int) -> bool:
        """As :meth:`polylock.Client.fenced_delete`."""
        return await self._native.fenced_delete_async(key, token)

    def election(self, name: str) -> AsyncElection:
        """The leader election ``name`` (see :class:`polylock.AsyncElection`). No I/O."""
        return AsyncElection(self._native.election(name))

    def count_down_latch(self, name: str) -> AsyncCountDownLatch:
        """As :meth:`polylock.Client.count_down_latch`. No I/O."""
        return AsyncCountDownLatch(self._native, name)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def aclose(self) -> list[str]:
        """As :meth:`close`, awaiting the record's deletion instead of blocking the loop."""
        return await self._native.shutdown_async()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def job_lock(self, name: str, *, at_most: float, at_least: float = 0) -> AsyncJobLock:
        """As :meth:`polylock.Client.job_lock`, for asyncio: ``await job.run(coroutine_function)``."""
        return AsyncJobLock(self._native.job_lock(name, at_most, at_least))

    def job(
        self, name: str, *, at_most: float, at_least: float = 0
    ) -> Callable[
        [Callable[Params, Coroutine[Any, Any, Result]]],
        Callable[Params, Coroutine[Any, Any, Optional[Result]]],
    ]:
        """As :meth:`polylock.Client.job`, for ``async def`` functions. A plain function raises
        TypeError (use :meth:`polylock.Client.job`)."""
        return async_job_decorator(self.job_lock(name, at_most=at_most, at_least=at_least))
