"""A Fetch long-polling many inactive partitions waits on them with one waiter (issue 14's throughput
gap: a waiter per partition per Fetch, left behind each time one active partition got a record).
Pure asyncio: no Ray, no files."""
from __future__ import annotations

import asyncio
import time

from logan_ray.gateway.closed_reads import ClosedReads


def _reads() -> ClosedReads:
    async def data_dir() -> str:
        raise AssertionError("no view is opened here")
    return ClosedReads(data_dir)


def test_one_wait_on_many_inactive_partitions_ends_when_one_wakes_and_names_it():
    async def run() -> None:
        reads = _reads()
        keys = [("t", p) for p in range(1000)]
        started = time.monotonic()
        waiting = asyncio.ensure_future(reads.wait_any(keys, 10.0))
        await asyncio.sleep(0.05)
        reads.changed("t", 417)  # the router's feed: partition 417 started
        woke = await asyncio.wait_for(waiting, 5.0)
        assert woke == {("t", 417)}
        assert time.monotonic() - started < 5.0
        assert not reads._listeners  # nothing left behind for the next Fetch to trip over
    asyncio.run(run())


def test_a_wait_that_times_out_wakes_nothing_and_leaves_nothing_behind():
    async def run() -> None:
        reads = _reads()
        started = time.monotonic()
        assert await reads.wait_any([("t", 0), ("t", 1)], 0.1) == set()
        assert 0.09 <= time.monotonic() - started < 5.0
        assert not reads._listeners
        waiting = asyncio.ensure_future(reads.wait_any([("t", 0)], 10.0))
        await asyncio.sleep(0.01)
        waiting.cancel()  # the Fetch ended for another reason (an active partition got data)
        await asyncio.gather(waiting, return_exceptions=True)
        assert not reads._listeners
    asyncio.run(run())


def test_two_fetches_waiting_on_one_partition_both_wake():
    async def run() -> None:
        reads = _reads()
        a = asyncio.ensure_future(reads.wait_any([("t", 0), ("t", 1)], 10.0))
        b = asyncio.ensure_future(reads.wait_any([("t", 1)], 10.0))
        await asyncio.sleep(0.01)
        reads.changed("t", 1)
        assert await asyncio.wait_for(asyncio.gather(a, b), 5.0) == [{("t", 1)}, {("t", 1)}]
    asyncio.run(run())
