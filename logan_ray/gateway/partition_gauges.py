"""The log gauges of every partition a node leads, published by that node's gateway.

Why here and not in the partition actors: an inactive (hibernated) partition has no process,
and Ray's metrics agent drops the series of a worker that stopped reporting, so its gauges
would vanish while its data is still there. ``ray.util.metrics`` cannot withdraw a series
either, so two publishers (an actor while active, the gateway while not) would leave two
series, one stale, differing only in Ray's ``WorkerId`` label. One owner per node, the
gateway (long-lived, pinned to its node), publishes them all: every ``INTERVAL_S`` it asks the
router for the node's partitions (``RouterActor.node_log_stats``: an active partition's
figures from its actor, an inactive one's folder), reads the inactive folders itself, on its
node, from the checkpoints a clean close wrote (``ClosedLog``; nothing is started, no Ray
task), and sets the gauges, with the partition's replica, in-sync replica and under-replicated
figures from the router's metadata (what Kafka's per-partition metrics of those names say). The
counters and latency histograms stay in the partition actors: they only move while active.
A partition that left the node (deleted, moved) keeps its last values until the gateway
restarts, since a series cannot be withdrawn.
"""
from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from ray.util import metrics

from logan_ray.storage.closed_log import closed_folder_stats

from .periodic import Periodic

INTERVAL_S = 10.0
#: a folder changed less than this long before it was read may change again within the file system's
#: timestamp granularity, unseen: its figures are not kept for the next round
SETTLED_S = 2.0
_TAGS = ("topic", "partition")
#: gauge name -> (description, field of node_log_stats)
GAUGES = {
    "logan_ray_log_start_offset": ("Log start offset", "log_start_offset"),
    "logan_ray_log_end_offset": ("Log end offset", "log_end_offset"),
    "logan_ray_size_bytes": ("Bytes on disk", "size_bytes"),
    "logan_ray_segments": ("Segment count", "segment_count"),
    "logan_ray_partition_active": ("1 while the partition has a process (actor), 0 while inactive", "active"),
    "logan_ray_replicas": ("Replicas of the partition (its replica set, leader included)", "replicas"),
    "logan_ray_in_sync_replicas": ("In-sync replicas of the partition (leader included)", "in_sync_replicas"),
    "logan_ray_under_replicated": ("1 while the partition has fewer in-sync replicas than replicas",
                                   "under_replicated"),
}


class ClosedFolderFigures:
    """The figures of inactive partition folders, read again only when a folder changed.

    Ray drops a gauge's series unless it is set again before each export, so every round sets
    every gauge; reading a thousand closed folders each time is what made an idle broker's
    gateway busy (bench/idle_cpu.py). A closed folder changes only by renames and removals
    (a clean close's marker, checkpoints, retention, a new segment), each of which moves the
    folder's own mtime: one stat tells whether the last figures still hold."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[tuple[int, int], dict[str, int]]] = {}

    def read(self, directories: list[str]) -> list[dict[str, int] | None]:
        out: list[dict[str, int] | None] = []
        known: dict[str, tuple[tuple[int, int], dict[str, int]]] = {}
        for directory in directories:
            try:
                st = os.stat(directory)
            except FileNotFoundError:
                out.append(None)
                continue
            key = (st.st_ino, st.st_mtime_ns)
            held = self._known.get(directory)
            if held is not None and held[0] == key:
                figures: dict[str, int] | None = held[1]
            else:
                figures = closed_folder_stats(directory)
                if figures is not None and time.time() - st.st_mtime_ns / 1e9 < SETTLED_S:
                    out.append(figures)  # too fresh to be known by its mtime: read again next round
                    continue
            if figures is not None:
                known[directory] = (key, figures)
            out.append(figures)
        self._known = known  # folders gone, woken or unreadable are forgotten
        return out


class PartitionGauges(Periodic):
    what = "publishing the partition gauges"  # failed: the router may be restarting

    def __init__(self, router: Any, node_id: str, interval_s: float = INTERVAL_S) -> None:
        super().__init__()
        self._router, self._node_id, self._interval = router, node_id, interval_s
        self._gauges = {name: metrics.Gauge(name, doc, tag_keys=_TAGS) for name, (doc, _f) in GAUGES.items()}
        self._closed = ClosedFolderFigures()

    def interval_s(self) -> float:
        return self._interval

    async def round(self) -> int:
        return await self.publish()

    async def publish(self) -> int:
        """One round: set every gauge of every partition this node leads; returns how many partitions."""
        rows = await self._router.node_log_stats.remote(self._node_id)
        closed = [r for r in rows if not r["active"]]
        figures = await asyncio.to_thread(self._closed.read, [r["directory"] for r in closed])
        for row, got in zip(closed, figures):
            if got is not None:
                row.update(got)
        rows = [r for r in rows if "log_end_offset" in r]  # a folder not cleanly closed: next round
        for row in rows:
            tags = {"topic": row["topic"], "partition": str(row["partition"])}
            for name, (_doc, field) in GAUGES.items():
                self._gauges[name].set(float(row[field]), tags)
        return len(rows)

