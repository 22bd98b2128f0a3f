"""A job the gateway runs on its event loop every so often, until stopped.

The broker heartbeat and the partition gauges share this shape: one round, then a sleep;
a round that fails (the router restarting, a node gone) is logged and the next one comes.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger("logan_ray.gateway")


class Periodic:
    #: what a round does, for the log line of a failed one
    what = "periodic job"

    def __init__(self) -> None:
        self._task: asyncio.Task | None = None

    async def round(self) -> Any:
        raise NotImplementedError

    def interval_s(self) -> float:
        raise NotImplementedError

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.round()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("gateway: %s failed: %s", self.what, e)
            await asyncio.sleep(self.interval_s())
