"""Which ``__consumer_offsets`` partitions a node's group coordinator owns (pure rules).

As in Kafka, the coordinator of a group is the leader of the group's partition of
``__consumer_offsets``: a node's coordinator serves a group only while its node leads
that partition, and only in the leader epoch it replayed the partition in. Any other
leadership (another node after a failover, a controlled move or a drain; the same node
in a later epoch, after a crash of the partition's actor, whose log may have been
cut back) means the groups it holds may be stale: it gives them up (NOT_COORDINATOR to
their clients) and a coordinator replays the partition again before serving them.
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple


class Leadership(NamedTuple):
    node_id: str | None  # None: offline (its node is gone, no leader elected yet)
    epoch: int


def leadership(route: Mapping[str, Any], partition: int) -> Leadership:
    """The leader node and epoch of one partition, from the router's ``route_with_ids`` entry."""
    node = route["partitions"][partition][1]
    if partition in set(route.get("offline") or ()):
        node = None
    epochs = route.get("leader_epochs") or ()
    return Leadership(node, int(epochs[partition]) if partition < len(epochs) else 0)


def owns(me: str, lead: Leadership) -> bool:
    return lead.node_id is not None and lead.node_id == me


def lost(me: str, owned: Mapping[int, int], route: Mapping[str, Any]) -> list[int]:
    """The owned partitions (partition -> the epoch they were replayed in) to give up now."""
    out = []
    for part, epoch in sorted(owned.items()):
        if part >= len(route["partitions"]):
            out.append(part)
            continue
        lead = leadership(route, part)
        if not owns(me, lead) or lead.epoch != epoch:
            out.append(part)
    return out
