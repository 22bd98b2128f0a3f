"""The gateway's route cache follows a leader change announced on the router's partition feed.

Without Ray: a fake router answers ``route_with_ids``; ``Cluster.partition_changed`` is what the
gateway's feed reader calls. A partition that starts on this node while the cache routes it to
another node is a leadership that moved here (a controlled move, an election): the route must be
asked again, or this gateway refuses the producer's appends and the followers' fetches with
NOT_LEADER_OR_FOLLOWER (what made tests/gateway/test_gw_leader_moves.py flaky). A replicated
partition leaving this node is asked again too.
"""
from __future__ import annotations

import asyncio
import uuid

from logan_ray.gateway.cluster import Cluster

TOPIC_ID = str(uuid.uuid4())


class _Call:
    def __init__(self, fn):
        self.remote = fn


class _Handle:
    """A partition actor's handle as the cache sees it (an id; its channel is never reachable here)."""

    def __init__(self, name: str) -> None:
        self._actor_id = bytes(name, "ascii").ljust(16, b"-")
        self.channel = _Call(self._no_channel)

    async def _no_channel(self):
        return None  # no node-local channel: calls would go by Ray


class _Router:
    def __init__(self) -> None:
        self.leader, self.epoch, self.handle = "bbbbbbbb02", 1, _Handle("b1")
        self.asked = 0
        self.route_with_ids = _Call(self._route)
        self.partition_changes = _Call(self._changes)

    async def _route(self, names, auto_create):
        self.asked += 1
        return {"moves": {"partitions": [(self.handle, self.leader)], "topic_id": TOPIC_ID,
                          "leader_epochs": [self.epoch], "replicas": [[self.leader, "aaaaaaaa01", "cccccccc03"]],
                          "isr": [[self.leader, "aaaaaaaa01", "cccccccc03"]], "offline": []}}

    async def _changes(self, node_id, feed_id, since, timeout_s):
        await asyncio.sleep(3600)  # the test calls partition_changed itself


def test_a_partition_started_here_while_routed_elsewhere_is_routed_anew():
    async def scenario() -> None:
        router = _Router()
        cluster = Cluster(router, "aaaaaaaa01", "cluster")
        part = await cluster.partition("moves", 0)
        assert not part.local and part.node_id == "bbbbbbbb02" and part.leader_epoch == 1
        # the router moves the leadership here and announces the new actor on this node's feed
        router.leader, router.epoch, router.handle = "aaaaaaaa01", 2, _Handle("a2")
        cluster.partition_changed("moves", 0, router.handle)
        part = await cluster.partition("moves", 0)
        assert part.local and part.leader_epoch == 2 and part.handle is router.handle
        # and away again: the old leader's gateway hears None for it
        router.leader, router.epoch, router.handle = "cccccccc03", 3, _Handle("c3")
        cluster.partition_changed("moves", 0, None)
        part = await cluster.partition("moves", 0)
        assert not part.local and part.node_id == "cccccccc03" and part.leader_epoch == 3
        assert router.asked == 3  # asked once per change, not on every request
        await cluster.partition("moves", 0)
        assert router.asked == 3
        cluster.close()
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()

    asyncio.run(scenario())
