"""Which partitions ``auto.leader.rebalance.enable`` gives back to their preferred replica.

Kafka's rule (the controller's ``checkAndTriggerAutoLeaderRebalance``), as a pure
function the router calls every ``leader.imbalance.check.interval.seconds``: for each
broker, the imbalance ratio is the share of the partitions whose preferred replica
(first assigned replica) it is that another broker leads; when that share is above
``leader.imbalance.per.broker.percentage``, every such partition whose preferred
replica is alive and in the ISR is moved back to it. Leadership that drifted after
failovers, drains or reassignments so returns where the assignment spread it.
"""
from __future__ import annotations

from typing import Any, Iterable

from . import replica_placement

DEFAULT_CHECK_INTERVAL_S = 300  # leader.imbalance.check.interval.seconds
DEFAULT_PER_BROKER_PERCENTAGE = 10  # leader.imbalance.per.broker.percentage


def to_rebalance(topics: dict[str, dict[str, Any]], alive: Iterable[str], percentage: int,
                 excluded: Iterable[str] = ()) -> list[tuple[str, int, str]]:
    """(topic, partition, preferred node) of every partition to move back to its preferred replica.

    Only replicated partitions count. ``excluded``: nodes that must not take leadership (draining).
    """
    up = set(alive) - set(excluded)
    preferred_on: dict[str, int] = {}
    displaced: dict[str, list[tuple[str, int, str]]] = {}
    for name, t in topics.items():
        for p in range(t["partitions"]):
            if not replica_placement.replicated(t, p):
                continue
            preferred = replica_placement.preferred_replica(t, p)
            preferred_on[preferred] = preferred_on.get(preferred, 0) + 1
            if t["placement"][str(p)]["node_id"] != preferred:
                displaced.setdefault(preferred, []).append((name, p, preferred))
    out = []
    for node, moves in sorted(displaced.items()):
        if node not in up or len(moves) * 100 <= percentage * preferred_on[node]:
            continue
        out += [(name, p, n) for name, p, n in moves
                if n in replica_placement.isr_of(topics[name], p)]
    return out
