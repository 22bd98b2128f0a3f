"""Per-group metrics exported through ``ray.util.metrics`` (the Ray dashboard's Prometheus endpoint).

Lag is what operators watch: a consumer group falling behind shows up next to
the partitions' own metrics, per group, topic and partition.
"""
from __future__ import annotations

from ray.util import metrics

from logan_ray.groups.group import STATES

_G = ("group",)
_GP = ("group", "topic", "partition")


class GroupMetrics:
    def __init__(self) -> None:
        self.members = metrics.Gauge("logan_ray_group_members", "Members of the consumer group", tag_keys=_G)
        self.generation = metrics.Gauge("logan_ray_group_generation", "Current generation of the group", tag_keys=_G)
        self.state = metrics.Gauge("logan_ray_group_state", "1 for the group's current state, 0 for the others",
                                   tag_keys=("group", "state"))
        self.rebalances = metrics.Gauge("logan_ray_group_rebalances", "Rebalances since the coordinator started",
                                        tag_keys=_G)
        self.committed = metrics.Gauge("logan_ray_group_committed_offset", "Committed offset", tag_keys=_GP)
        self.lag = metrics.Gauge("logan_ray_group_lag", "Log end offset minus committed offset", tag_keys=_GP)

    def group(self, group_id: str, members: int, generation: int, state: str, rebalances: int) -> None:
        tags = {"group": group_id}
        self.members.set(members, tags)
        self.generation.set(generation, tags)
        self.rebalances.set(rebalances, tags)
        for s in STATES:
            self.state.set(1 if s == state else 0, {"group": group_id, "state": s})

    def partition(self, group_id: str, topic: str, partition: int, committed: int, lag: int | None) -> None:
        tags = {"group": group_id, "topic": topic, "partition": str(partition)}
        self.committed.set(committed, tags)
        if lag is not None:
            self.lag.set(lag, tags)
