"""The run-once job lock (ShedLock's lockAtMostFor / lockAtLeastFor), blocking and asyncio:
``client.job_lock(name, at_most=..., at_least=...)`` and the ``@client.job(...)`` decorator.
Everything but calling the job happens in the core: see docs/recipes.md."""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Optional, TypeVar

from . import _native

if TYPE_CHECKING:
    from typing_extensions import ParamSpec

    Params = ParamSpec("Params")

Result = TypeVar("Result")


class _JobHoldBase:
    """What the blocking and the asyncio hold share: the native hold and its state."""

    def __init__(self, native: _native.JobHoldHandle) -> None:
        self._native = native

    @property
    def is_held(self) -> bool:
        """Whether the hold is still within its at_most lease (no I/O); False once finished."""
        return self._native.is_held


class _JobLockBase:
    """What the blocking and the asyncio job lock share: the native lock and its options."""

    def __init__(self, native: _native.JobLockHandle) -> None:
        self._native = native

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def at_most(self) -> float:
        return self._native.at_most

    @property
    def at_least(self) -> float:
        return self._native.at_least

    def __repr__(self) -> str:
        return f"<polylock.{type(self).__name__} name={self.name!r} at_most={self.at_most} at_least={self.at_least}>"


class JobHold(_JobHoldBase):
    """A held job lock, from :meth:`JobLock.try_acquire`. Call :meth:`finish` after the job
    (or use it as a context manager); one collected unfinished is finished in the background."""

    def finish(self) -> None:
        """Keeps the lock until at_least from the job's start (its TTL cut to what is left,
        only while this hold owns it), or releases it when that moment has passed. A job that
        outlived at_most finds its lock lapsed: a warning is logged, nothing is written."""
        self._native.finish()

    def __enter__(self) -> JobHold:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.finish()


class JobLock(_JobLockBase):
    """A run-once job lock: :meth:`polylock.Client.job_lock`."""

    def try_acquire(self) -> Optional[JobHold]:
        """One look, never waiting: a :class:`JobHold` (lease: at_most, never renewed), or None
        when another node holds the lock."""
        native = self._native.try_acquire()
        return None if native is None else JobHold(native)

    def run(self, function: Callable[Params, Result], *args: Params.args, **kwargs: Params.kwargs) -> Optional[Result]:
        """Calls ``function(*args, **kwargs)`` if the lock is free and returns its result; None
        (and the function is not called) when another node holds it. The lock is then kept
        until at_least from the start, or released; an exception of the function is raised
        after the same."""
        hold = self.try_acquire()
        if hold is None:
            return None
        with hold:
            return function(*args, **kwargs)


class AsyncJobHold(_JobHoldBase):
    """:class:`JobHold` for asyncio."""

    async def finish(self) -> None:
        """As :meth:`JobHold.finish`."""
        await self._native.finish_async()

    async def __aenter__(self) -> AsyncJobHold:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.finish()


class AsyncJobLock(_JobLockBase):
    """:class:`JobLock` for asyncio: :meth:`polylock.AsyncClient.job_lock`."""

    async def try_acquire(self) -> Optional[AsyncJobHold]:
        """As :meth:`JobLock.try_acquire`."""
        native = await self._native.try_acquire_async()
        return None if native is None else AsyncJobHold(native)

    async def run(
        self,
        function: Callable[Params, Coroutine[Any, Any, Result]],
        *args: Params.args,
        **kwargs: Params.kwargs,
    ) -> Optional[Result]:
        """As :meth:`JobLock.run`, awaiting ``function(*args, **kwargs)``."""
        hold = await self.try_acquire()
        if hold is None:
            return None
        async with hold:
            return await function(*args, **kwargs)


def job_decorator(
    job: JobLock,
) -> Callable[[Callable[Params, Result]], Callable[Params, Optional[Result]]]:
    """``@client.job(...)``: each call runs the function through ``job.run``."""

    def decorate(function: Callable[Params, Result]) -> Callable[Params, Optional[Result]]:
        if inspect.iscoroutinefunction(function):
            raise TypeError(
                f"{function.__qualname__} is a coroutine function: decorate it with"
                " AsyncClient.job, not Client.job"
            )

        @functools.wraps(function)
        def run_job(*args: Params.args, **kwargs: Params.kwargs) -> Optional[Result]:
            return job.run(function, *args, **kwargs)

        return run_job

    return decorate


def async_job_decorator(
    job: AsyncJobLock,
) -> Callable[
    [Callable[Params, Coroutine[Any, Any, Result]]],
    Callable[Params, Coroutine[Any, Any, Optional[Result]]],
]:
    """``@async_client.job(...)``: each call runs the coroutine function through ``job.run``."""

    def decorate(
        function: Callable[Params, Coroutine[Any, Any, Result]],
    ) -> Callable[Params, Coroutine[Any, Any, Optional[Result]]]:
        if not inspect.iscoroutinefunction(function):
            raise TypeError(
                f"{function.__qualname__} is not a coroutine function: decorate it with"
                " Client.job, not AsyncClient.job"
            )

        @functools.wraps(function)
        async def run_job(*args: Params.args, **kwargs: Params.kwargs) -> Optional[Result]:
            return await job.run(function, *args, **kwargs)

        return run_job

    return decorate
