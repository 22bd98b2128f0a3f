"""A gateway's fresh-enough copy of versioned cluster metadata the router keeps (ACLs, client quotas).

The router holds the data durably with a version that grows with every change;
a gateway asks for the version at most every :data:`REFRESH_S` (one small Ray
call) and fetches the data only when it moved, so a change made anywhere applies
on every gateway within that time, and at once on the gateway that made it
(:meth:`RouterSnapshot.invalidate`).
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, Generic, TypeVar

REFRESH_S = 1.0

T = TypeVar("T")


class RouterSnapshot(Generic[T]):
    """``version()`` and ``fetch()`` are the router calls (``fetch`` answers (version, data)); ``build``
    turns the data into what the gateway uses; ``initial`` is used until the first refresh."""

    def __init__(self, version: Callable[[], Awaitable[int]], fetch: Callable[[], Awaitable[tuple[int, Any]]],
                 build: Callable[[Any], T], initial: T) -> None:
        self._version_call = version
        self._fetch = fetch
        self._build = build
        self._value = initial
        self._version = -1
        self._checked = 0.0
        self._lock = asyncio.Lock()

    async def get(self, fresh: bool = False) -> T:
        if fresh or time.monotonic() - self._checked > REFRESH_S:
            async with self._lock:
                if fresh or time.monotonic() - self._checked > REFRESH_S:
                    version = await self._version_call()
                    if version != self._version:
                        version, data = await self._fetch()
                        self._value = self._build(data)
                        self._version = version
                    self._checked = time.monotonic()
        return self._value

    @property
    def current(self) -> T:
        """What was last fetched (no router call)."""
        return self._value

    def invalidate(self) -> None:
        self._checked = 0.0
