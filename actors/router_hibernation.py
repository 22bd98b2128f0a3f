"""Hibernation of idle partitions and the cap on active partitions per node (issue 14).

A mixin of RouterActor: the router decides when a partition's actor may stop and
which one goes first when a node reaches ``max.active.partitions``.
"""
from __future__ import annotations

import asyncio
import logging
import time

import ray

from logan_ray.storage.errors import InvalidConfigError

from .names import NAMESPACE, actor_name

log = logging.getLogger("logan_ray.router")
PARTITION_BUDGET_BYTES = 64 << 20  # memory counted per active partition (an actor process: ~64 MiB PSS measured)
MIN_ACTIVE_PARTITIONS = 64
HIBERNATE_TIMEOUT_S = 60.0
HIBERNATED_IDS_KEPT = 100_000  # actor ids that ended by hibernation (callers ask whether a failed call ran)


class PartitionHibernation:
    # ------------------------------------------------------------ hibernation
    def _cap(self, node_id: str) -> int:
        """``max.active.partitions`` of a node: the broker setting, else derived from the node's memory
        (half of Ray's ``memory`` resource at PARTITION_BUDGET_BYTES per active partition)."""
        if self.max_active_partitions is not None:
            return self.max_active_partitions
        cap = self._derived_caps.get(node_id)
        if cap is None:
            memory = next((n.get("Resources", {}).get("memory", 0) for n in ray.nodes() if n.get("NodeID") == node_id), 0)
            cap = self._derived_caps[node_id] = max(MIN_ACTIVE_PARTITIONS, int(memory / 2 / PARTITION_BUDGET_BYTES))
        return cap

    async def _make_room(self, node_id: str) -> None:
        """Before activating one more partition on ``node_id``: at its cap, hibernate the least recently
        used partitions that have no call in flight. When every active partition is busy the cap is
        exceeded for a while (slow, never an error: their calls end, then they hibernate)."""
        here = [(k, h) for k, h in self._handles.items()
                if self._meta["topics"].get(k[0], {}).get("placement", {}).get(str(k[1]), {}).get("node_id") == node_id]
        excess = len(here) + 1 - self._cap(node_id)
        if excess <= 0:
            return
        usage = await asyncio.gather(*(h.usage.remote() for _k, h in here), return_exceptions=True)
        idle = sorted((u[1], k) for (k, _h), u in zip(here, usage) if isinstance(u, tuple) and u[0] == 0)
        for _last_used, key in idle:
            if excess <= 0:
                return
            if await self.hibernate(*key, idle_only=False):
                excess -= 1
                log.info("partition %s-%d hibernated to make room on node %s (max.active.partitions)", *key, node_id)

    async def set_max_active_partitions(self, cap: int | None) -> int | None:
        """Change ``max.active.partitions`` while the broker runs (None: derived from memory); returns the
        previous value. Not saved: the broker setting wins at the next start."""
        previous, self.max_active_partitions = self.max_active_partitions, cap if cap and cap > 0 else None
        return previous

    async def set_partition_idle_ms(self, idle_ms: int) -> int:
        """Change ``partition.idle.ms`` while the broker runs (not saved: the broker setting wins at the
        next start); every active partition hears of it. Returns the previous value."""
        if not isinstance(idle_ms, int) or idle_ms < 1:
            raise InvalidConfigError(f"partition.idle.ms must be a positive number of ms, got {idle_ms!r}")
        previous, self.partition_idle_ms = self.partition_idle_ms, idle_ms
        await asyncio.gather(*(h.set_idle_ms.remote(idle_ms) for h in list(self._handles.values())),
                             return_exceptions=True)
        return previous

    async def hibernate(self, topic: str, partition: int, topic_id: str | None = None, idle_only: bool = True) -> bool:
        """Hibernate a partition: its actor closes its log cleanly (only if nothing is in flight, and
        with ``idle_only`` only if idle for ``partition.idle.ms``), then it is stopped; the next use
        activates it again. True when it hibernated.

        Called by a partition actor whose idle time ran out, and by the router itself (the cap on
        active partitions). While it runs the partition is neither active nor startable: an
        activation waits for the old actor to be gone, so two actors never own one folder.
        """
        key = (topic, partition)
        handle = self._handles.get(key)
        t = self._meta["topics"].get(topic)
        if handle is None or t is None or key in self._activating or key in self._stopping:
            return False
        if topic_id is not None and t["topic_id"] != topic_id:
            return False
        with self._replacing(key):
            del self._handles[key]
            try:
                closed = await asyncio.wait_for(handle.hibernate.remote(idle_only), HIBERNATE_TIMEOUT_S)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as e:
                # It died meanwhile (a crash): Ray restarts it, and it recovers its log: still active.
                log.warning("partition %s-%d died while hibernating (%s); it stays active", topic, partition, e)
                closed = False
            except Exception as e:  # the log failed to close (disk error): restart it, it recovers
                log.warning("partition %s-%d failed to hibernate (%s); restarting it", topic, partition, e)
                ray.kill(handle, no_restart=False)
                closed = False
            if not closed:
                if topic in self._meta["topics"]:
                    self._handles[key] = handle
                return False
            self._hibernated_ids[handle._actor_id.hex()] = None
            while len(self._hibernated_ids) > HIBERNATED_IDS_KEPT:
                self._hibernated_ids.popitem(last=False)
            ray.kill(handle, no_restart=True)
            await _name_released(actor_name(topic, partition))
            self._feed.publish(t["placement"][str(partition)]["node_id"], topic, partition, None)
            log.info("partition %s-%d hibernated", topic, partition)
            return True

    async def partition_changes(self, node_id: str, feed_id: str | None, since: int, timeout_s: float = 30.0):
        """Partitions of ``node_id`` started or hibernated after sequence ``since`` (a gateway waits here);
        see ``actors/partition_feed.py``."""
        return await self._feed.changes(node_id, feed_id, since, timeout_s)


async def _name_released(name: str, timeout: float = 30.0) -> None:
    """Wait until a killed actor's name is free, so the next one of that name is a new actor.

    Each look-up is a blocking GCS call: made off the event loop, so that tens of partitions
    hibernating at once (a topic's worth going idle together) do not stall the router's other
    calls, broker heartbeats among them (a node whose heartbeats stall for
    broker.session.timeout.ms is fenced)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            await asyncio.to_thread(ray.get_actor, name, namespace=NAMESPACE)
        except ValueError:
            return
        await asyncio.sleep(0.05)
    log.warning("actor %s still holds its name %.0f s after it was killed", name, timeout)
