"""Long-polls of active partitions with nothing new wait on their offsets boards, not in their actors.

Why: a consumer assigned many partitions long-polls them all in one Fetch. Waiting in each
partition's actor (``wait_for_data``) was a call per active partition per poll: with light
traffic every record ends the poll, the next Fetch starts it again, and each start woke every
actor. A partition whose offsets board (``actors/offsets_board.py``) says the consumer is at
its log end is watched here instead: one task per gateway looks at the boards of every waiting
Fetch, at once when this gateway has just appended to a partition, else every ``POLL_S``
(appends that reach an actor another way: a Python client on the node). A board that moves, or
that may no longer be read (its channel closed, a follower joined), ends the wait for its
partition, which the Fetch then locates again, at its actor if need be.
"""
from __future__ import annotations

import asyncio
from typing import Any

#: how often boards are looked at while a Fetch waits on them (appends through this gateway: at once)
POLL_S = 0.01


class BoardWaits:
    """Per gateway: the Fetches waiting on offsets boards, and the one task that watches them."""

    def __init__(self) -> None:
        self._waiters: list[tuple[list[tuple[Any, Any, int, int]], asyncio.Future]] = []
        self._task: asyncio.Task | None = None
        self._tick: asyncio.Future | None = None

    async def wait_any(self, entries: list[tuple[Any, Any, int, int]], timeout_s: float) -> list[Any]:
        """``entries``: (key, partition route, fetch offset, current leader epoch). Until any of them has
        more than the offset (or its board can no longer tell), or the time is up: their keys."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future = loop.create_future()
        waiter = (entries, done)
        self._waiters.append(waiter)
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._watch())
        try:
            return await asyncio.wait_for(asyncio.shield(done), timeout_s)
        except asyncio.TimeoutError:
            return []
        finally:
            self._waiters.remove(waiter)

    def poke(self) -> None:
        """Something was appended through this gateway: look at the boards now."""
        tick = self._tick
        if tick is not None and not tick.done():
            tick.set_result(None)

    def waiting(self) -> int:
        return len(self._waiters)

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiters:
            for entries, done in list(self._waiters):
                if done.done():
                    continue
                moved = [key for key, part, offset, epoch in entries if part.at_log_end(offset, epoch) is None]
                if moved:
                    done.set_result(moved)
            tick = self._tick = loop.create_future()
            timer = loop.call_later(POLL_S, _resolve, tick)
            try:
                await tick
            finally:
                timer.cancel()
                self._tick = None


def _resolve(tick: asyncio.Future) -> None:
    if not tick.done():
        tick.set_result(None)
