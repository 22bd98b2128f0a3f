"""ApiVersions, Metadata, DescribeCluster, FindCoordinator and InitProducerId.

Each gateway is a Kafka broker whose id is derived from its Ray node id, and a
partition's leader is the gateway on the node where the partition actor lives,
so clients send produce and fetch requests straight to the node holding the data.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from logan_ray.errors import InvalidTopicError
from logan_ray.groups import OFFSETS_TOPIC
from logan_ray.protocol import errors as codes

from .acl_ops import authorized_operations
from .cluster import ZERO_UUID, broker_id, error_code, error_message
from .handler import GatewayContext, HandlerTable

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("logan_ray.gateway")

MAX_EPOCH = 32767


async def api_versions(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    return {"error_code": codes.NONE, "api_keys": gw.api_versions(), "throttle_time_ms": 0,
            "supported_features": [], "finalized_features_epoch": -1, "finalized_features": [],
            "zk_migration_ready": False}


async def _brokers(gw: GatewayContext) -> tuple[list[dict], set[str]]:
    gateways = await gw.cluster.gateways()
    brokers = [{"node_id": broker_id(node), "host": host, "port": port, "rack": None}
               for node, (host, port) in sorted(gateways.items())]
    return brokers, set(gateways)


async def leader_endpoints(gw: GatewayContext, leaders: list[dict | None]) -> list[dict]:
    """Endpoints of the brokers named in ``current_leader`` hints (KIP-951); none when no hint."""
    wanted = {h["leader_id"] for h in leaders if h}
    if not wanted:
        return []
    brokers, _ = await _brokers(gw)
    return [b for b in brokers if b["node_id"] in wanted]


def _check_name(name: Any) -> str | None:
    from logan_ray.actors.topic_names import validate_topic_name

    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return None
    return name


async def metadata(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    version = header.api_version
    cluster = gw.cluster
    requested = body.get("topics")
    if version == 0 and not requested:
        requested = None  # v0: an empty list means every topic
    # v0-v3 have no such field and always ask for auto-creation; the ACL guard (authz._metadata)
    # turns it off for a principal that may not create, at every version.
    auto_create = body.get("allow_auto_topic_creation", True)
    brokers, alive = await _brokers(gw)
    topic_ops = authorized_operations("topic", body.get("include_topic_authorized_operations", False))
    topics_out: list[dict] = []
    if requested is None:
        routes = await cluster.refresh(None)
        order = sorted(routes)
    else:
        order = []
        by_id = [t["topic_id"] for t in requested if t.get("name") is None and t.get("topic_id")]
        names_of = await cluster.topic_names(by_id) if by_id else {}
        valid: list[str] = []
        for t in requested:
            name = t.get("name")
            if name is None:
                tid = t.get("topic_id")
                name = names_of.get(tid)
                if name is None:
                    topics_out.append({"error_code": codes.UNKNOWN_TOPIC_ID, "name": None, "topic_id": tid,
                                       "partitions": []})
                    continue
            if _check_name(name) is None:
                topics_out.append({"error_code": codes.INVALID_TOPIC_EXCEPTION, "name": name,
                                   "partitions": []})
                continue
            if name not in order:
                order.append(name)
                valid.append(name)
        routes = {}
        if valid:
            try:
                routes = await cluster.refresh(valid, auto_create)
            except Exception as e:  # auto-creation failed: report the topics as they are
                log.warning("gateway: metadata auto-create of %s failed: %s", valid, error_message(e))
                routes = await cluster.refresh(valid, False)
    for name in order:
        parts = routes.get(name)
        if parts is None:
            topics_out.append({"error_code": codes.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                               "topic_id": ZERO_UUID, "partitions": []})
            continue
        partitions = []
        for i, p in enumerate(parts):
            replicas = [broker_id(n) for n in p.replicas]
            offline_replicas = [broker_id(n) for n in p.replicas if n not in alive or (p.offline and n == p.node_id)]
            if p.offline:  # its node is gone: the partition waits for it (no election yet)
                partitions.append({"error_code": codes.LEADER_NOT_AVAILABLE, "partition_index": i,
                                   "leader_id": -1, "leader_epoch": p.leader_epoch, "replica_nodes": replicas,
                                   "isr_nodes": [], "offline_replicas": offline_replicas})
            elif p.node_id in alive:
                partitions.append({"error_code": codes.NONE, "partition_index": i, "leader_id": broker_id(p.node_id),
                                   "leader_epoch": p.leader_epoch, "replica_nodes": replicas,
                                   "isr_nodes": [broker_id(n) for n in p.isr],
                                   "offline_replicas": offline_replicas})
            else:  # no gateway on that node (yet): clients retry
                partitions.append({"error_code": codes.LEADER_NOT_AVAILABLE, "partition_index": i,
                                   "leader_id": -1, "leader_epoch": p.leader_epoch, "replica_nodes": [],
                                   "isr_nodes": [], "offline_replicas": []})
        topics_out.append({"error_code": codes.NONE, "name": name, "topic_id": cluster.topic_id(name),
                           "is_internal": name == OFFSETS_TOPIC, "partitions": partitions,
                           "topic_authorized_operations": topic_ops})
    return {"throttle_time_ms": 0, "brokers": brokers, "cluster_id": cluster.cluster_id,
            "controller_id": cluster.broker_id, "topics": topics_out,
            "cluster_authorized_operations": authorized_operations(
                "cluster", body.get("include_cluster_authorized_operations", False)),
            "error_code": codes.NONE}


async def describe_cluster(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    brokers, _ = await _brokers(gw)
    endpoint_type = body.get("endpoint_type", 1)
    if endpoint_type not in (1, 2):
        return {"throttle_time_ms": 0, "error_code": codes.UNSUPPORTED_ENDPOINT_TYPE,
                "error_message": f"unknown endpoint type {endpoint_type}", "endpoint_type": endpoint_type,
                "cluster_id": gw.cluster.cluster_id, "controller_id": -1, "brokers": []}
    return {"throttle_time_ms": 0, "error_code": codes.NONE, "error_message": None,
            "endpoint_type": endpoint_type, "cluster_id": gw.cluster.cluster_id,
            "controller_id": gw.cluster.broker_id,
            "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": None,
                         "is_fenced": False} for b in brokers],
            "cluster_authorized_operations": authorized_operations(
                "cluster", body.get("include_cluster_authorized_operations", False))}


async def find_coordinator(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    """No group or transaction coordinator yet: clients keep retrying, as with a starting Kafka."""
    message = "logan-ray has no group or transaction coordinator yet"
    if header.api_version < 4:
        return {"throttle_time_ms": 0, "error_code": codes.COORDINATOR_NOT_AVAILABLE, "error_message": message,
                "node_id": -1, "host": "", "port": -1}
    return {"throttle_time_ms": 0, "coordinators": [
        {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": codes.COORDINATOR_NOT_AVAILABLE,
         "error_message": message} for key in body.get("coordinator_keys", [])]}


async def init_producer_id(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    """Idempotent producers: a fresh id, or the same id with a bumped epoch (KIP-360); transactional
    ones are answered by their transaction coordinator (:mod:`.txn`)."""
    out = {"throttle_time_ms": 0, "error_code": codes.NONE, "producer_id": -1, "producer_epoch": -1}
    if body.get("transactional_id") is not None:  # the id's transaction coordinator answers
        from .txn import init_transactional

        return await init_transactional(gw, header, body)
    pid, epoch = body.get("producer_id", -1), body.get("producer_epoch", -1)
    try:
        if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
            out["producer_id"], out["producer_epoch"] = pid, epoch + 1
        else:
            out["producer_id"] = await gw.cluster.router.allocate_producer_id.remote()
            out["producer_epoch"] = 0
    except Exception as e:
        out["error_code"] = error_code(e)
    return out


HANDLERS: HandlerTable = {
    18: (0, 4, api_versions),
    3: (0, 13, metadata),
    60: (0, 2, describe_cluster),
    10: (0, 6, find_coordinator),
    22: (0, 5, init_producer_id),
}
