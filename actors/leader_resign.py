"""Waiting for a successor replica to hold a resigning leader's whole log (a controlled leader move).

Kafka's controlled moves (preferred-leader election, controlled shutdown) elect a
replica of the ISR; here the old leader first stops taking writes, so the successor
can be made to hold *everything* the old leader wrote, and nothing is truncated when
it takes over. A follower's fetch offset is its log end (it has every record
below it), so "caught up" is simply: its last fetch offset reached the leader's log
end. Follower fetches come every few hundred ms (the fetcher's long poll answers at
once when there is data), so a short poll interval is enough here.
"""
from __future__ import annotations

import asyncio
import time
from typing import Callable

from logan_ray.common.errors import RequestTimedOutError

from .isr import FollowerStates

POLL_S = 0.02


async def wait_caught_up(states: FollowerStates, successor: str, log_end: Callable[[], int],
                         timeout_s: float) -> None:
    """Return once ``successor``'s fetch offset reached ``log_end()``; RequestTimedOutError after ``timeout_s``.

    The successor must be a follower of the partition; it need not be in the ISR for this
    check (the router checks that), only to have fetched everything.
    """
    if successor not in states.leo:
        raise ValueError(f"{successor} is not a follower of this partition")
    deadline = time.monotonic() + timeout_s
    while states.leo.get(successor, -1) < log_end():
        if time.monotonic() >= deadline:
            raise RequestTimedOutError(f"replica {successor[:8]} did not catch up with the leader's log end "
                                       f"{log_end()} within {timeout_s:.1f} s (it is at {states.leo.get(successor)})")
        await asyncio.sleep(POLL_S)
