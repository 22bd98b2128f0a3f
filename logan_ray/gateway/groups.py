"""FindCoordinator and the consumer-group APIs, answered by this node's group coordinator actor.

As in Kafka, a group's coordinator is the leader of its ``__consumer_offsets``
partition: FindCoordinator names the gateway of the node leading it (asked of the
router each time, so a failover or a move shows at once). Each gateway hands group
requests to the coordinator actor of its own node, which serves only the groups of
partitions its node leads and answers NOT_COORDINATOR for the rest (a client that
asked the old node finds the new one). The coordinator takes and returns the
protocol's bodies as dicts, so each handler is one actor call plus the error shape
to send if the coordinator cannot be reached or does not coordinate the group.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from logan_ray.common.errors import NotCoordinatorError
from logan_ray.groups import OFFSETS_TOPIC, ownership
from logan_ray.groups.offsets_log import partition_for_group
from logan_ray.protocol import errors as codes

from .acl_ops import authorized_operations
from .cluster import broker_id
from .handler import GatewayContext, HandlerTable

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("logan_ray.gateway")

GROUP_KEY, TRANSACTION_KEY = 0, 1


def _coordinator(gw: GatewayContext) -> Any:
    """This node's coordinator actor (created on first use)."""
    handle = gw.group_coordinator
    if handle is None:
        from logan_ray.actors.group_coordinator import coordinator_on

        handle = gw.group_coordinator = coordinator_on(gw.cluster.node_id)
        gw.group_coordinator_node = gw.cluster.node_id
    return handle


async def _call(gw: GatewayContext, method: str, *args: Any, fail: Callable[[int], dict]) -> dict:
    """Call the coordinator; NOT_COORDINATOR when this node does not lead the group's partition, a
    retriable COORDINATOR_NOT_AVAILABLE if the actor is gone (killed, restarting)."""
    try:
        handle = _coordinator(gw)
        return await getattr(handle, method).remote(*args)
    except NotCoordinatorError:
        return fail(codes.NOT_COORDINATOR)
    except Exception as e:
        gw.group_coordinator = None  # look it up again next time
        gw.group_coordinator_node = None
        log.warning("gateway: group coordinator %s failed: %s", method, e)
        return fail(codes.COORDINATOR_NOT_AVAILABLE)


def _host(conn: "Connection") -> str:
    peer = conn.peer
    return f"/{peer[0]}" if isinstance(peer, tuple) and peer else str(peer)


# --------------------------------------------------------------- FindCoordinator
async def _coordinator_endpoints(gw: GatewayContext, keys: list[str], topic: str = OFFSETS_TOPIC
                                 ) -> dict[str, tuple[int, str, int] | None]:
    """(broker id, host, port) of the gateway on the node leading each key's partition of ``topic``
    (``__consumer_offsets`` for groups, ``__transaction_state`` for transactional ids); None while it
    has no leader or that node no gateway (COORDINATOR_NOT_AVAILABLE)."""
    try:
        route = (await gw.cluster.router.route_with_ids.remote([topic])).get(topic)
    except Exception as e:
        log.warning("gateway: cannot find the group coordinators: %s", e)
        return {k: None for k in keys}
    if route is None:
        return {k: None for k in keys}
    gateways = await gw.cluster.gateways()
    out: dict[str, tuple[int, str, int] | None] = {}
    for key in keys:
        node = ownership.leadership(route, partition_for_group(key, len(route["partitions"]))).node_id
        if node is not None and node not in gateways:
            gateways = await gw.cluster.gateways(fresh=True)
        if node is None or node not in gateways:
            out[key] = None
            continue
        host, port = gateways[node]
        out[key] = (broker_id(node), host, port)
    return out


async def find_coordinator(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    key_type = body.get("key_type", GROUP_KEY)
    keys = list(body.get("coordinator_keys") or ()) if header.api_version >= 4 else [body.get("key") or ""]
    if key_type == TRANSACTION_KEY:
        from logan_ray.actors.txn_coordinator import TXN_TOPIC

        found = await _coordinator_endpoints(gw, keys, TXN_TOPIC)
    elif key_type == GROUP_KEY:
        found = await _coordinator_endpoints(gw, keys)
    else:
        found = {}

    def answer(key: str) -> tuple[int, str | None, int, str, int]:
        if key_type not in (GROUP_KEY, TRANSACTION_KEY):
            return codes.INVALID_REQUEST, f"unknown coordinator key type {key_type}", -1, "", -1
        if found.get(key) is None:
            return codes.COORDINATOR_NOT_AVAILABLE, "no group coordinator yet", -1, "", -1
        node_id, host, port = found[key]  # type: ignore[misc]
        return codes.NONE, None, node_id, host, port

    if header.api_version < 4:
        code, message, node_id, host, port = answer(keys[0])
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "node_id": node_id,
                "host": host, "port": port}
    coordinators = []
    for key in keys:
        code, message, node_id, host, port = answer(key)
        coordinators.append({"key": key, "node_id": node_id, "host": host, "port": port, "error_code": code,
                             "error_message": message})
    return {"throttle_time_ms": 0, "coordinators": coordinators}


# ------------------------------------------------------------------ membership
async def join_group(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    v = header.api_version

    def fail(code: int) -> dict:
        return {"throttle_time_ms": 0, "error_code": code, "generation_id": -1, "protocol_type": None,
                "protocol_name": "" if v < 7 else None, "leader": "", "skip_assignment": False,
                "member_id": body.get("member_id") or "", "members": []}

    return await _call(gw, "join_group", body, v, header.client_id or "", _host(conn), fail=fail)


async def sync_group(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    def fail(code: int) -> dict:
        return {"throttle_time_ms": 0, "error_code": code, "protocol_type": None, "protocol_name": None,
                "assignment": b""}

    return await _call(gw, "sync_group", body, header.api_version, fail=fail)


async def heartbeat(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    return await _call(gw, "heartbeat", body, fail=lambda code: {"throttle_time_ms": 0, "error_code": code})


async def leave_group(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    return await _call(gw, "leave_group", body, header.api_version,
                       fail=lambda code: {"throttle_time_ms": 0, "error_code": code, "members": []})


# --------------------------------------------------------------------- offsets
async def offset_commit(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    def fail(code: int) -> dict:
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": code}
                                               for p in t.get("partitions") or ()]} for t in body.get("topics") or ()]}

    return await _call(gw, "offset_commit", body, header.api_version, fail=fail)


async def offset_fetch(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    v = header.api_version

    def topics_failed(topics: list | None, code: int) -> list[dict]:
        return [{"name": t["name"], "partitions": [
            {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
             "error_code": code} for p in t.get("partition_indexes") or ()]} for t in topics or ()]

    def fail(code: int) -> dict:
        if v >= 8:
            return {"throttle_time_ms": 0, "groups": [
                {"group_id": g["group_id"], "topics": [], "error_code": code} for g in body.get("groups") or ()]}
        return {"throttle_time_ms": 0, "topics": topics_failed(body.get("topics"), code), "error_code": code}

    return await _call(gw, "offset_fetch", body, v, fail=fail)


# ----------------------------------------------------------------------- admin
async def list_groups(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    return await _call(gw, "list_groups", body,
                       fail=lambda code: {"throttle_time_ms": 0, "error_code": code, "groups": []})


async def describe_groups(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    def fail(code: int) -> dict:
        return {"throttle_time_ms": 0, "groups": [
            {"error_code": code, "error_message": None, "group_id": g, "group_state": "", "protocol_type": "",
             "protocol_data": "", "members": [], "authorized_operations": -(2**31)} for g in body.get("groups") or ()]}

    out = await _call(gw, "describe_groups", body, header.api_version, fail=fail)
    if body.get("include_authorized_operations"):  # KIP-430: every operation, as no ACLs exist
        ops = authorized_operations("group", True)
        for g in out["groups"]:
            if g["error_code"] == codes.NONE and g["group_state"] != "Dead":
                g["authorized_operations"] = ops
    return out


async def delete_groups(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    return await _call(gw, "delete_groups", body, fail=lambda code: {"throttle_time_ms": 0, "results": [
        {"group_id": g, "error_code": code} for g in body.get("groups_names") or ()]})


async def offset_delete(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    return await _call(gw, "offset_delete", body,
                       fail=lambda code: {"error_code": code, "throttle_time_ms": 0, "topics": []})


# OffsetCommit/OffsetFetch v10 name topics by id only (KIP-848 era); clients fall back to v9. Serving v10
# needs the ACL checks of gateway/authz.py (by topic name) to resolve the ids first.
HANDLERS: HandlerTable = {
    10: (0, 6, find_coordinator),
    11: (0, 9, join_group),
    14: (0, 5, sync_group),
    12: (0, 4, heartbeat),
    13: (0, 5, leave_group),
    8: (0, 9, offset_commit),
    9: (0, 9, offset_fetch),
    16: (0, 5, list_groups),
    15: (0, 6, describe_groups),
    42: (0, 2, delete_groups),
    47: (0, 0, offset_delete),
}
