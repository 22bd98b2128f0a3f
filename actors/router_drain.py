"""Graceful drain: leadership leaves a node before the node leaves.

A mixin of RouterActor. ``drain_node`` (``logan-ray node drain``) moves the leadership of
every replicated partition led on a node to another in-sync replica by the controlled
move of ``router_rebalance`` (the old leader stops taking writes, the new one has all of
its log before it starts): clients see a NOT_LEADER_OR_FOLLOWER, refresh their metadata
and go on, instead of waiting for Ray to declare the node dead once it is gone. A
draining node takes no leadership (preferred-leader elections and the auto rebalance skip
it) until ``undrain_node``. Reacting to Ray's own drain announcements (the GCS's DrainNode)
is not done yet: see docs/replication.md.

Partitions with one replica cannot move (their only copy is on that node): they stay,
and are reported.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from logan_ray.protocol import errors as codes

from . import replica_placement

log = logging.getLogger("logan_ray.router")
RETRY_S = 5.0  # a partition whose move failed is tried again after this long (a failed try refuses writes a while)


class NodeDrain:
    def _init_drain(self) -> None:
        self._draining: set[str] = set()  # nodes leadership must not move to
        self._drain_failed: dict[tuple[str, int], float] = {}  # partition -> when its last move failed

    async def drain_node(self, node_id: str, reason: str = "requested") -> list[dict[str, Any]]:
        """Move every leadership off ``node_id`` and keep new ones away; one row per partition it still
        led: {"topic", "partition", "to" (node id or None), "error_code"} (NONE once moved)."""
        first = node_id not in self._draining
        self._draining.add(node_id)
        rows = []
        for topic, t in list(self._meta["topics"].items()):
            for p in range(t["partitions"]):
                if t["placement"][str(p)]["node_id"] != node_id:
                    continue
                target = self._drain_target(t, p, node_id)
                if target is None:
                    code = codes.ELIGIBLE_LEADERS_NOT_AVAILABLE
                elif not first and time.monotonic() - self._drain_failed.get((topic, p), -RETRY_S) < RETRY_S:
                    code = codes.PREFERRED_LEADER_NOT_AVAILABLE  # failed a moment ago: not yet again
                else:
                    code = await self.move_leader(topic, p, target, f"drain of {node_id[:8]}: {reason}")
                    if code != codes.NONE:
                        self._drain_failed[(topic, p)] = time.monotonic()
                    else:
                        self._drain_failed.pop((topic, p), None)
                rows.append({"topic": topic, "partition": p, "to": target, "error_code": code})
        if first or any(r["error_code"] == codes.NONE for r in rows):
            log.warning("node %s drains (%s): %d leaderships moved, %d stay", node_id[:8], reason,
                        sum(r["error_code"] == codes.NONE for r in rows),
                        sum(r["error_code"] != codes.NONE for r in rows))
        return rows

    async def undrain_node(self, node_id: str) -> bool:
        """Let ``node_id`` take leadership again (a drain called off); True when it was draining."""
        was = node_id in self._draining
        self._draining.discard(node_id)
        return was

    def _drain_target(self, t: dict[str, Any], partition: int, leaving: str) -> str | None:
        """The in-sync replica to lead instead of ``leaving``: the first, in assigned order, that is alive
        and not draining; None when there is none (one replica, or no other in sync)."""
        if replica_placement.replication_factor(t) <= 1:
            return None
        isr = set(replica_placement.isr_of(t, partition))
        rec = t.get("leaders", {}).get(str(partition), {})
        order = rec.get("assignment") or replica_placement.replicas_of(t, partition)
        return next((n for n in order if n != leaving and n in isr and n in self._alive
                     and n not in self._draining), None)
