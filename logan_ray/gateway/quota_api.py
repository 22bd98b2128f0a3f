"""DescribeClientQuotas and AlterClientQuotas (KIP-546): client quota administration over the wire.

The router stores the quotas (durable cluster metadata, like the ACLs); entities,
keys and values are checked here (logan_ray.security.quota) and refused per entry
with INVALID_REQUEST as Kafka does. Describing needs DESCRIBE_CONFIGS on the
cluster, altering ALTER_CONFIGS (Kafka's rules); this gateway applies a change at
once, the others within their refresh time (client_quotas.ClientQuotas).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from logan_ray.protocol import errors as codes
from logan_ray.security import quota

from .authz import authorize_cluster
from .cluster import error_code, error_message

if TYPE_CHECKING:
    from .connection import Connection
    from .handler import GatewayContext as Gateway


def _wire_entity(e: quota.Entity) -> list[dict]:
    return [{"entity_type": t, "entity_name": n} for t, n in e]


async def describe_client_quotas(gw: "Gateway", conn: "Connection", header: Any, body: dict) -> dict:
    out: dict[str, Any] = {"throttle_time_ms": 0, "error_code": codes.NONE, "error_message": None, "entries": None}
    denied = await authorize_cluster(gw, conn, "DESCRIBE_CONFIGS")
    if denied:
        out.update(error_code=codes.CLUSTER_AUTHORIZATION_FAILED, error_message=denied)
        return out
    components = [(c["entity_type"], c["match_type"], c["match"]) for c in body["components"]]
    try:
        table = await gw.client_quotas.table(fresh=True)
        found = table.matching(components, body["strict"])
    except quota.QuotaError as e:
        out.update(error_code=codes.INVALID_REQUEST, error_message=str(e))
        return out
    except Exception as e:
        out.update(error_code=error_code(e), error_message=error_message(e))
        return out
    out["entries"] = [{"entity": _wire_entity(e), "values": [{"key": k, "value": float(v)}
                                                             for k, v in sorted(values.items())]}
                      for e, values in found]
    return out


def _change(entry: dict) -> tuple[quota.Entity, dict[str, Any]]:
    """(entity, {key: value or None to remove}) of one AlterClientQuotas entry, or QuotaError."""
    e = quota.entity((p["entity_type"], p["entity_name"]) for p in entry["entity"])
    ops: dict[str, Any] = {}
    for op in entry["ops"]:
        if op["key"] in ops:
            raise quota.QuotaError(f"Duplicate quota key {op['key']} for entity {quota.describe_entity(e)}")
        if op["remove"]:
            if op["key"] not in quota.KEYS:
                raise quota.QuotaError(f"Unknown client quota key: {op['key']}")
            ops[op["key"]] = None
        else:
            ops[op["key"]] = quota.check_value(op["key"], op["value"])
    return e, ops


async def alter_client_quotas(gw: "Gateway", conn: "Connection", header: Any, body: dict) -> dict:
    entries = body["entries"]
    denied = await authorize_cluster(gw, conn, "ALTER_CONFIGS")
    if denied:
        return {"throttle_time_ms": 0, "entries": [
            {"error_code": codes.CLUSTER_AUTHORIZATION_FAILED, "error_message": denied, "entity": e["entity"]}
            for e in entries]}
    results, changes = [], []
    for entry in entries:
        try:
            e, ops = _change(entry)
        except quota.QuotaError as err:
            results.append({"error_code": codes.INVALID_REQUEST, "error_message": str(err), "entity": entry["entity"]})
            continue
        changes.append([[list(p) for p in e], ops])
        results.append({"error_code": codes.NONE, "error_message": None, "entity": entry["entity"]})
    if changes and not body["validate_only"]:
        try:
            await gw.cluster.router.alter_quotas.remote(changes)
        except Exception as err:
            results = [r if r["error_code"] else {**r, "error_code": error_code(err), "error_message": error_message(err)}
                       for r in results]
        gw.client_quotas.invalidate()
    return {"throttle_time_ms": 0, "entries": results}


HANDLERS = {
    48: (0, 1, describe_client_quotas),
    49: (0, 1, alter_client_quotas),
}
