"""A gateway's fresh-enough copy of versioned cluster metadata the router keeps (ACLs, client quotas).

The router holds the data durably with a version that grows with every change;
a gateway asks for the version at most every :data:`REFRESH_S` (one small Ray
call) and fetches the data only when it moved, so a change made anywhere applies
on every gateway within that time, and at once on the gateway that made it
(:meth:`RouterSnapshot.invalidate`).

Once loaded, a refresh runs as a task of its own, and the requests that come while
it runs wait for it at most :data:`WAIT_S` after it began: with a router that answers
(milliseconds), a change made anywhere still holds for every request from
:data:`REFRESH_S` after it; a router that is busy (an election), restarting or stopped
delays requests by :data:`WAIT_S` once, and then they are answered from the copy they
have, so it never stalls every produce and fetch of the cluster (these snapshots sit
on their path). The first load (when ``strict``: ACLs fail closed until they are
known) and a refresh right after this gateway's own change are waited for in full.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, Generic, TypeVar

REFRESH_S = 1.0
#: the longest a request waits for a refresh that began when (or before) it came
WAIT_S = 0.5

log = logging.getLogger(__name__)

T = TypeVar("T")


class RouterSnapshot(Generic[T]):
    """``version()`` and ``fetch()`` are the router calls (``fetch`` answers (version, data)); ``build``
    turns the data into what the gateway uses; ``initial`` is used until the first refresh. ``strict``:
    requests wait for the first load (and fail while the router cannot be asked) instead of being
    answered with ``initial``."""

    def __init__(self, version: Callable[[], Awaitable[int]], fetch: Callable[[], Awaitable[tuple[int, Any]]],
                 build: Callable[[Any], T], initial: T, strict: bool = True) -> None:
        self._version_call = version
        self._fetch = fetch
        self._build = build
        self._value = initial
        self._version = -1
        self._checked = 0.0
        self._strict = strict
        self._must_wait = strict  # the next get waits for a refresh (first load, or after invalidate)
        self._lock = asyncio.Lock()
        self._task: asyncio.Task | None = None
        self._task_began = 0.0

    async def get(self, fresh: bool = False) -> T:
        if fresh or self._must_wait:
            async with self._lock:
                if fresh or self._must_wait:
                    try:
                        await self._refresh()
                    except BaseException:
                        self._checked = time.monotonic()  # the background retries after REFRESH_S
                        self._must_wait = self._strict and self._version < 0
                        raise
        else:
            now = time.monotonic()
            if now - self._checked > REFRESH_S and (self._task is None or self._task.done()):
                self._task = asyncio.get_running_loop().create_task(self._refresh_in_background())
                self._task_began = now
            if self._task is not None and not self._task.done():
                left = self._task_began + WAIT_S - now
                if left > 0:
                    try:
                        await asyncio.wait_for(asyncio.shield(self._task), left)
                    except asyncio.TimeoutError:
                        pass  # the router is slow: this copy serves meanwhile
        return self._value

    async def _refresh(self) -> None:
        version = await self._version_call()
        if version != self._version:
            version, data = await self._fetch()
            self._value = self._build(data)
            self._version = version
        self._checked = time.monotonic()
        self._must_wait = False

    async def _refresh_in_background(self) -> None:
        try:
            async with self._lock:
                if time.monotonic() - self._checked > REFRESH_S:
                    await self._refresh()
        except Exception as e:  # the router is away: the copy stays in force, asked again after REFRESH_S
            self._checked = time.monotonic()
            log.debug("snapshot not refreshed: %s", e)

    @property
    def current(self) -> T:
        """What was last fetched (no router call)."""
        return self._value

    def invalidate(self) -> None:
        """This gateway changed the data: the next :meth:`get` waits for the router's new version."""
        self._checked = 0.0
        self._must_wait = True
