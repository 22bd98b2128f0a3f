"""Graceful drain: leadership leaves a node before the node leaves.

A mixin of RouterActor. ``drain_node`` (``logan-ray node drain``) moves the leadership of
every replicated partition led on a node to another in-sync replica by the controlled
move of ``router_rebalance`` (the old leader stops taking writes, the new one has all of
its log before it starts): clients see a NOT_LEADER_OR_FOLLOWER, refresh their metadata
and go on, instead of waiting for Ray to declare the node dead once it is gone. A
draining node takes no leadership (preferred-leader elections, the auto rebalance and
moves skip it, a failover elects it last) and no new partition (placement skips it) until
``undrain_node``.

Ray announces that a node will go through the GCS's DrainNode (``ray drain-node``, the
autoscaler's idle termination, a preemption notice, each with a deadline); the node watch
reads the GCS's draining nodes (``GcsClient.get_draining_nodes``) and drains each one
announced here as if ``logan-ray node drain`` had been called, before its deadline.

Partitions with one replica cannot move (their only copy is on that node): they stay,
and are reported.
"""
from __future__ import annotations

import asyncio
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
        self._ray_drains: dict[str, int] = {}  # nodes Ray announced will go -> deadline (ms since the epoch, 0: none)
        self._manual_drains: set[str] = set()  # drained by hand (``logan-ray node drain``): only undrain ends it
        self._drain_tasks: dict[str, asyncio.Task] = {}

    async def drain_node(self, node_id: str, reason: str = "requested", by_ray: bool = False) -> list[dict[str, Any]]:
        """Move every leadership off ``node_id`` and keep new ones away; one row per partition it still
        led: {"topic", "partition", "to" (node id or None), "error_code"} (NONE once moved).
        ``by_ray``: Ray announced the drain (ends when Ray forgets it), else it was asked by hand."""
        if not by_ray:
            self._manual_drains.add(node_id)
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
        self._manual_drains.discard(node_id)
        return was

    async def _follow_ray_drains(self) -> None:
        """The node watch's part: drain every alive node Ray announces will go (``drain_node`` in a task,
        so elections never wait for moves); again while it still leads a partition another replica could
        lead (a move
        that failed is retried ``RETRY_S`` later); undrain a node Ray no longer drains and that was not
        drained by hand. Ray's drains of nodes that left are forgotten."""
        try:
            announced = await asyncio.to_thread(ray_draining_nodes)
        except Exception as e:  # the GCS is busy or restarting: the next round asks again
            log.warning("router: reading Ray's draining nodes failed: %s", e)
            return
        for node, deadline in announced.items():
            if node not in self._alive:
                continue
            if node not in self._ray_drains:
                left = (deadline / 1000 - time.time()) if deadline else None
                log.warning("router: Ray drains node %s (%s): moving its leaderships off it", node[:8],
                            "no deadline" if left is None else f"deadline in {left:.1f} s")
            self._ray_drains[node] = deadline
            task = self._drain_tasks.get(node)
            if (task is None or task.done()) and (node not in self._draining or self._leads_movable(node)):
                self._drain_tasks[node] = asyncio.get_running_loop().create_task(
                    self.drain_node(node, "Ray drains the node", by_ray=True))
        for node in [n for n in self._ray_drains if n not in announced or n not in self._alive]:
            del self._ray_drains[node]
            if node not in self._alive:
                self._draining.discard(node)  # gone: a Ray node id never comes back
                self._manual_drains.discard(node)
            elif node not in self._manual_drains:
                self._draining.discard(node)
                log.warning("router: Ray no longer drains node %s: it may lead again", node[:8])

    def _leads_movable(self, node_id: str) -> bool:
        """``node_id`` still leads a partition whose leadership another replica could take."""
        return any(t["placement"][str(p)]["node_id"] == node_id and self._drain_target(t, p, node_id) is not None
                   for t in self._meta["topics"].values() for p in range(t["partitions"]))

    async def draining_nodes(self) -> dict[str, dict[str, Any]]:
        """{node id: {"by_ray": bool, "deadline_ms": int or None}} of every node that takes no leadership."""
        return {n: {"by_ray": n in self._ray_drains, "deadline_ms": self._ray_drains.get(n) or None}
                for n in self._draining}

    def _drain_target(self, t: dict[str, Any], partition: int, leaving: str) -> str | None:
        """The in-sync replica to lead instead of ``leaving``: the first, in assigned order, that is alive
        and not draining; None when there is none (one replica, or no other in sync)."""
        if not replica_placement.replicated(t, partition):
            return None
        isr = set(replica_placement.isr_of(t, partition))
        rec = t.get("leaders", {}).get(str(partition), {})
        order = rec.get("assignment") or replica_placement.replicas_of(t, partition)
        return next((n for n in order if n != leaving and n in isr and n in self._alive
                     and n not in self._draining), None)


def ray_draining_nodes(timeout_s: float = 5.0) -> dict[str, int]:
    """Ray's drain notices (the GCS's draining nodes: DrainNode accepted for them): {node id in hex:
    deadline in ms since the epoch, 0 for none}. Blocking: call it off the event loop.

    Ray 2.60 has no public API for it; the GCS client of this worker answers both
    ``get_draining_nodes`` (with deadlines) and the node table, whose alive nodes carry
    ``state_snapshot.state == DRAINING``: a node either names is draining.
    """
    from ray._private.worker import global_worker
    from ray.core.generated import gcs_pb2

    gcs = global_worker.gcs_client
    out = {_hex(k): int(v or 0) for k, v in gcs.get_draining_nodes(timeout=timeout_s).items()}
    infos = gcs.get_all_node_info(timeout=timeout_s, state_filter=gcs_pb2.GcsNodeInfo.ALIVE)
    for node_id, info in infos.items():
        if info.state_snapshot.state == gcs_pb2.NodeSnapshot.DRAINING:
            out.setdefault(_hex(node_id), 0)
    return out


def _hex(node_id: Any) -> str:
    if isinstance(node_id, bytes):
        return node_id.hex()
    return node_id.hex() if hasattr(node_id, "hex") and not isinstance(node_id, str) else str(node_id)
