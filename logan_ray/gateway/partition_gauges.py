"""The log gauges of every partition a node leads, published by that node's gateway.

Why here and not in the partition actors: an inactive (hibernated) partition has no process,
and Ray's metrics agent drops the series of a worker that stopped reporting, so its gauges
would vanish while its data is still there. ``ray.util.metrics`` cannot withdraw a series
either, so two publishers (an actor while active, the gateway while not) would leave two
series, one stale, differing only in Ray's ``WorkerId`` label. One owner per node, the
gateway (long-lived, pinned to its node), publishes them all: every ``INTERVAL_S`` it asks the
router for the node's log stats (``RouterActor.node_log_stats``: an active partition's from
its actor, an inactive one's from its folder, nothing is started) and sets the gauges. The
counters and latency histograms stay in the partition actors: they only move while active.
A partition that left the node (deleted, moved) keeps its last values until the gateway
restarts, since a series cannot be withdrawn.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from ray.util import metrics

log = logging.getLogger("logan_ray.gateway")

INTERVAL_S = 10.0
_TAGS = ("topic", "partition")
#: gauge name -> (description, field of node_log_stats)
GAUGES = {
    "logan_ray_log_start_offset": ("Log start offset", "log_start_offset"),
    "logan_ray_log_end_offset": ("Log end offset", "log_end_offset"),
    "logan_ray_size_bytes": ("Bytes on disk", "size_bytes"),
    "logan_ray_segments": ("Segment count", "segment_count"),
    "logan_ray_partition_active": ("1 while the partition has a process (actor), 0 while inactive", "active"),
}


class PartitionGauges:
    def __init__(self, router: Any, node_id: str, interval_s: float = INTERVAL_S) -> None:
        self._router, self._node_id, self._interval_s = router, node_id, interval_s
        self._gauges = {name: metrics.Gauge(name, doc, tag_keys=_TAGS) for name, (doc, _f) in GAUGES.items()}
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def publish(self) -> int:
        """One round: set every gauge of every partition this node leads; returns how many partitions."""
        rows = await self._router.node_log_stats.remote(self._node_id)
        for row in rows:
            tags = {"topic": row["topic"], "partition": str(row["partition"])}
            for name, (_doc, field) in GAUGES.items():
                self._gauges[name].set(float(row[field]), tags)
        return len(rows)

    async def _run(self) -> None:
        while True:
            try:
                await self.publish()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the router may be restarting: next round
                log.warning("gateway: partition gauges not published: %s", e)
            await asyncio.sleep(self._interval_s)
