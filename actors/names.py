"""How logan-ray's Ray actors find each other: one namespace and the name of each actor.

The router, the cleaners and the group coordinator look each other up by these
names (``ray.get_actor``), so the names live here, beside none of them: a module
that needs another actor's name does not import that actor's module.
"""
from __future__ import annotations

#: Every named actor of logan-ray lives in this Ray namespace.
NAMESPACE = "logan_ray"
#: The cluster's one router (topic metadata, placement, producer ids).
ROUTER_NAME = "router"
#: The cluster's one consumer-group coordinator.
COORDINATOR_NAME = "group-coordinator"


def actor_name(topic: str, partition: int) -> str:
    """The partition actor of ``topic``-``partition``."""
    return f"{topic}-{partition}"


def cleaner_name(node_id: str) -> str:
    """The log cleaner of a node (one per node: it reads that node's segment files)."""
    return f"cleaner-{node_id}"


def gateway_name(node_id: str) -> str:
    """The Kafka gateway actor of a node (one per node; it also runs the node's replica fetcher)."""
    return f"gateway-{node_id[:8]}"


def broker_id(node_id: str) -> int:
    """Kafka broker id of a Ray node: the first 28 bits of its id (stable, non-negative int32)."""
    return int(node_id[:7], 16)
