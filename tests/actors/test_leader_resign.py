"""A resigning leader's wait for its successor (actors/leader_resign.py)."""
from __future__ import annotations

import asyncio

import pytest

from logan_ray.actors.isr import FollowerStates
from logan_ray.actors.leader_resign import wait_caught_up
from logan_ray.common.errors import RequestTimedOutError


def _states() -> FollowerStates:
    return FollowerStates("L", ["L", "F1", "F2"], ["L", "F1", "F2"], high_watermark=5, epoch_start_offset=0, now_ms=0)


def test_returns_once_the_successor_fetched_up_to_the_log_end():
    states = _states()

    async def run() -> float:
        async def follower_fetches() -> None:
            for offset in (6, 8, 10):
                await asyncio.sleep(0.05)
                states.fetched("F1", offset, 10, 0)
        loop = asyncio.get_running_loop()
        started = loop.time()
        fetching = asyncio.create_task(follower_fetches())
        await wait_caught_up(states, "F1", lambda: 10, 5.0)
        await fetching
        return loop.time() - started

    assert asyncio.run(run()) >= 0.15  # not before its fetch at offset 10 (the log end)
    assert states.leo["F1"] == 10


def test_times_out_when_the_successor_stays_behind_and_refuses_a_non_follower():
    states = _states()
    states.fetched("F1", 9, 10, 0)
    with pytest.raises(RequestTimedOutError, match="did not catch up"):
        asyncio.run(wait_caught_up(states, "F1", lambda: 10, 0.1))
    with pytest.raises(ValueError):
        asyncio.run(wait_caught_up(states, "X", lambda: 10, 0.1))
