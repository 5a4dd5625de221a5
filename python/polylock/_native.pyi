"""The compiled core binding. Use the public API in ``polylock`` instead."""

import asyncio
import builtins
from collections.abc import Callable
from typing import final

__all__ = [
    "Client",
    "LockHandle",
    "Acquisition",
    "LockError",
    "NotHeldError",
    "LockLostError",
    "InvalidArgumentError",
    "WrongTypeError",
    "ConnectionError",
    "TimeoutError",
    "RedisError",
    "StaleTokenError",
]

class LockError(Exception):
    """Base class of every polylock error."""

class NotHeldError(LockError, RuntimeError):
    """Released a lock the caller does not hold."""

class LockLostError(LockError):
    """The lease ran out, or the key was deleted or taken, while the lock was held."""

class InvalidArgumentError(LockError, ValueError):
    """A bad argument, rejected before any I/O."""

class WrongTypeError(LockError):
    """The lock's name holds a Redis key that is not a lock."""

class ConnectionError(LockError, builtins.ConnectionError):
    """Redis could not be reached, the connection broke, or the client is closed or was made
    before a fork."""

class TimeoutError(LockError, builtins.TimeoutError):
    """Redis did not answer within the response timeout."""

class RedisError(LockError):
    """Redis answered with an unexpected error."""

class StaleTokenError(LockError):
    """A fenced write was refused: its token is lower than one already applied to the key."""

@final
class Client:
    def __new__(
        cls,
        url: str,
        *,
        watchdog_timeout: float | None = None,
        connect_timeout: float | None = None,
        response_timeout: float | None = None,
        fair_queue_timeout: float | None = None,
    ) -> Client: ...
    @staticmethod
    def connect_async(
        url: str,
        *,
        watchdog_timeout: float | None = None,
        connect_timeout: float | None = None,
        response_timeout: float | None = None,
        fair_queue_timeout: float | None = None,
    ) -> asyncio.Future[Client]: ...
    def lock_handle(self, name: str, holder_id: int) -> LockHandle: ...
    def fair_lock_handle(self, name: str, holder_id: int) -> LockHandle: ...
    def fenced_lock_handle(self, name: str, holder_id: int) -> LockHandle: ...
    def fenced_set(self, key: str, value: bytes, token: int) -> None: ...
    def fenced_delete(self, key: str, token: int) -> bool: ...
    def fenced_set_async(self, key: str, value: bytes, token: int) -> asyncio.Future[None]: ...
    def fenced_delete_async(self, key: str, token: int) -> asyncio.Future[bool]: ...
    def close(self) -> list[str]: ...
    @property
    def id(self) -> str: ...
    @property
    def watchdog_timeout(self) -> float: ...

@final
class LockHandle:
    @property
    def name(self) -> str: ...
    @property
    def owner(self) -> str: ...
    def acquire(
        self, blocking: bool = True, timeout: float | None = None, lease: float | None = None
    ) -> bool: ...
    def release(self) -> None: ...
    def locked(self) -> bool: ...
    def acquire_async(
        self, blocking: bool = True, timeout: float | None = None, lease: float | None = None
    ) -> asyncio.Future[Acquisition]: ...
    def release_async(self) -> asyncio.Future[None]: ...
    def locked_async(self) -> asyncio.Future[bool]: ...
    def is_held(self) -> bool: ...
    def hold_count(self) -> int: ...
    @property
    def token(self) -> int | None: ...
    @property
    def lost(self) -> bool: ...
    def on_lost(self, callback: Callable[[LockLostError], object]) -> None: ...

@final
class Acquisition:
    def claim(self) -> bool: ...
    def abandon(self) -> None: ...
