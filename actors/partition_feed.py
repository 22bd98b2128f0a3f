"""The router's feed of partition state changes, per node: which partitions became active or inactive.

Why: a node's gateway serves reads of inactive partitions from their files and lets
long-polls wait there (``logan_ray/gateway/closed_reads.py``). When something else
(a Python producer, the retention pass, another connection) starts a partition, the
gateway must hear of it at once, both to hand its waiting long-polls to the new actor
and to stop using a cached route. Each gateway keeps one call to
:meth:`PartitionFeed.changes` waiting at the router; the router publishes every start
and every hibernation as it happens.

Events carry a sequence number per feed; a restarted router is a new feed (new id), and
a reader too far behind (events dropped) is told to forget everything it cached.
"""
from __future__ import annotations

import asyncio
import uuid
from collections import deque
from typing import Any

KEPT = 10_000  # events kept per node for readers that are a little behind


class PartitionFeed:
    """Per node: a bounded log of (sequence, topic, partition, actor handle or None when inactive)."""

    def __init__(self) -> None:
        self.feed_id = uuid.uuid4().hex
        self._seq = 0
        self._events: dict[str, deque[tuple[int, str, int, Any]]] = {}
        self._dropped: dict[str, int] = {}  # node -> sequence of the newest event no longer kept
        self._changed: asyncio.Event | None = None

    def publish(self, node_id: str, topic: str, partition: int, handle: Any) -> None:
        """``topic``-``partition`` on ``node_id`` is now served by ``handle`` (None: inactive)."""
        self._seq += 1
        events = self._events.setdefault(node_id, deque(maxlen=KEPT))
        if len(events) == KEPT:
            self._dropped[node_id] = events[0][0]
        events.append((self._seq, topic, partition, handle))
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def changes(self, node_id: str, feed_id: str | None, since: int,
                      timeout_s: float) -> tuple[str, int, list[tuple[str, int, Any]] | None]:
        """(feed id, last sequence, events after ``since`` on ``node_id``), waiting up to ``timeout_s`` for one.

        Events are None when the reader cannot be brought up to date (another feed, or events it
        missed were dropped): it must forget what it cached and start from the sequence returned.
        """
        if feed_id != self.feed_id or since > self._seq or since < self._dropped.get(node_id, 0):
            return self.feed_id, self._seq, None
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            events = self._events.get(node_id, ())
            fresh = [(t, p, h) for seq, t, p, h in events if seq > since]
            if fresh:
                return self.feed_id, events[-1][0], fresh
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return self.feed_id, self._seq, []
            if self._changed is None:
                self._changed = asyncio.Event()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                pass
