"""Which node a pipeline worker should start on: near the partitions it is likely to read.

The group's range assignor gives each member a contiguous run of each topic's
partitions, so worker ``i`` of ``n`` is placed on the node holding the partition at
the start of the i-th run (of the partitions listed topic by topic). The affinity is
soft: a full or missing node only means the worker reads over Ray instead of from
the segment files on its own node. Pure functions, no Ray.
"""
from __future__ import annotations

from typing import Sequence


def worker_nodes(partition_nodes: Sequence[str | None], workers: int) -> list[str | None]:
    """A node id (or None: anywhere) for each of ``workers`` workers, given each partition's node."""
    known = [n for n in partition_nodes if n]
    if not known:
        return [None] * workers
    return [known[(i * len(known)) // workers] if workers <= len(known) else known[i % len(known)]
            for i in range(workers)]
