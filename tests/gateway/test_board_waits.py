"""Long-polls of active partitions wait on their offsets boards (logan_ray/gateway/board_waits.py)."""
from __future__ import annotations

import asyncio
import time

from logan_ray.gateway import board_waits
from logan_ray.gateway.board_waits import BoardWaits


class FakePart:
    """A route whose board says its log end is ``end`` (None: the board can no longer tell)."""

    def __init__(self, end: int | None) -> None:
        self.end = end

    def at_log_end(self, offset: int, epoch: int = -1):
        return (self.end, 0) if self.end is not None and offset == self.end else None


def test_a_wait_ends_for_the_partition_whose_log_end_moved_and_only_it():
    async def run():
        waits = BoardWaits()
        a, b = FakePart(5), FakePart(9)
        asyncio.get_running_loop().call_later(0.05, setattr, b, "end", 10)
        started = time.monotonic()
        woke = await waits.wait_any([("a", a, 5, -1), ("b", b, 9, -1)], 5.0)
        return woke, time.monotonic() - started, waits.waiting()

    woke, took, left = asyncio.run(run())
    assert woke == ["b"]
    assert took < 1.0
    assert left == 0


def test_a_wait_with_nothing_new_lasts_its_timeout_and_a_board_that_cannot_tell_ends_it():
    async def run():
        waits = BoardWaits()
        quiet = FakePart(3)
        started = time.monotonic()
        nothing = await waits.wait_any([("q", quiet, 3, -1)], 0.2)
        idle_for = time.monotonic() - started
        gone = FakePart(3)
        asyncio.get_running_loop().call_later(0.02, setattr, gone, "end", None)  # its channel closed
        return nothing, idle_for, await waits.wait_any([("q", quiet, 3, -1), ("g", gone, 3, -1)], 5.0)

    nothing, idle_for, woke = asyncio.run(run())
    assert nothing == [] and idle_for >= 0.19
    assert woke == ["g"]


def test_an_append_through_the_gateway_is_seen_at_once_not_at_the_next_poll(monkeypatch):
    monkeypatch.setattr(board_waits, "POLL_S", 30.0)  # only a poke can end this wait in time

    async def run():
        waits = BoardWaits()
        part = FakePart(7)

        def appended():
            part.end = 8
            waits.poke()

        asyncio.get_running_loop().call_later(0.05, appended)
        started = time.monotonic()
        woke = await waits.wait_any([("p", part, 7, -1)], 10.0)
        return woke, time.monotonic() - started

    woke, took = asyncio.run(run())
    assert woke == ["p"] and took < 1.0
