"""The gateway's periodic jobs (heartbeat, partition gauges) go on after a failed round and end when stopped."""
from __future__ import annotations

import asyncio
import logging

from logan_ray.gateway.periodic import Periodic


class Flaky(Periodic):
    what = "a flaky round"

    def __init__(self) -> None:
        super().__init__()
        self.rounds = 0

    async def round(self) -> None:
        self.rounds += 1
        if self.rounds == 2:
            raise ConnectionError("router restarting")

    def interval_s(self) -> float:
        return 0.01


def test_a_failed_round_is_logged_and_the_next_one_comes_until_stopped(caplog):
    job = Flaky()

    async def run() -> int:
        job.start()
        job.start()  # idempotent: one loop
        while job.rounds < 5:
            await asyncio.sleep(0.01)
        job.stop()
        stopped_at = job.rounds
        await asyncio.sleep(0.05)
        return job.rounds - stopped_at

    with caplog.at_level(logging.WARNING, logger="logan_ray.gateway"):
        assert asyncio.run(run()) == 0
    assert [r.getMessage() for r in caplog.records] == ["gateway: a flaky round failed: router restarting"]
