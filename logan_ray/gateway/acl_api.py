"""DescribeAcls, CreateAcls and DeleteAcls: Kafka's ACL administration over the wire.

ACLs are stored by the router (durable cluster metadata); each gateway's authorizer
applies them. Without an authorizer, these answer SECURITY_DISABLED as Kafka does.
Describing needs DESCRIBE on the cluster, creating and deleting ALTER.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from logan_ray.protocol import errors as codes
from logan_ray.security import acl

from .authz import authorize_cluster
from .cluster import error_code, error_message

if TYPE_CHECKING:
    from .connection import Connection
    from .handler import GatewayContext as Gateway

_DISABLED = "No Authorizer is configured on the broker (authorizer.class.name)"


def _filter(f: dict) -> acl.Binding:
    return acl.Binding(f["resource_type_filter"], f["resource_name_filter"], f.get("pattern_type_filter", 3),
                       f["principal_filter"], f["host_filter"], f["operation"], f["permission_type"])


async def describe_acls(gw: "Gateway", conn: "Connection", header: Any, body: dict) -> dict:
    out = {"throttle_time_ms": 0, "error_code": codes.NONE, "error_message": None, "resources": []}
    if gw.authorizer is None:
        out.update(error_code=codes.SECURITY_DISABLED, error_message=_DISABLED)
        return out
    denied = await authorize_cluster(gw, conn, "DESCRIBE")
    if denied:
        out.update(error_code=codes.CLUSTER_AUTHORIZATION_FAILED, error_message=denied)
        return out
    d = await gw.authorizer.decider(fresh=True)
    flt = _filter(body)
    grouped: dict[tuple, list[dict]] = {}
    for b in d.bindings:
        if acl.filter_matches(flt, b):
            grouped.setdefault((b.resource_type, b.name, b.pattern), []).append(
                {"principal": b.principal, "host": b.host, "operation": b.operation, "permission_type": b.permission})
    out["resources"] = [{"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
                        for (t, n, p), acls in sorted(grouped.items())]
    return out


async def create_acls(gw: "Gateway", conn: "Connection", header: Any, body: dict) -> dict:
    creations = body["creations"]
    if gw.authorizer is None:
        return {"throttle_time_ms": 0, "results": [
            {"error_code": codes.SECURITY_DISABLED, "error_message": _DISABLED} for _ in creations]}
    denied = await authorize_cluster(gw, conn, "ALTER")
    if denied:
        return {"throttle_time_ms": 0, "results": [
            {"error_code": codes.CLUSTER_AUTHORIZATION_FAILED, "error_message": denied} for _ in creations]}
    results, valid = [], []
    for c in creations:
        b = acl.Binding(c["resource_type"], c["resource_name"], c.get("resource_pattern_type", 3), c["principal"],
                        c["host"], c["operation"], c["permission_type"])
        try:
            acl.validate(b)
        except acl.AclError as e:
            results.append({"error_code": codes.INVALID_REQUEST, "error_message": str(e)})
            continue
        valid.append(list(b))
        results.append({"error_code": codes.NONE, "error_message": None})
    if valid:
        try:
            await gw.cluster.router.add_acls.remote(valid)
        except Exception as e:
            results = [r if r["error_code"] else {"error_code": error_code(e), "error_message": error_message(e)}
                       for r in results]
        gw.authorizer.invalidate()
    return {"throttle_time_ms": 0, "results": results}


async def delete_acls(gw: "Gateway", conn: "Connection", header: Any, body: dict) -> dict:
    filters = body["filters"]
    if gw.authorizer is None:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": codes.SECURITY_DISABLED, "error_message": _DISABLED, "matching_acls": []}
            for _ in filters]}
    denied = await authorize_cluster(gw, conn, "ALTER")
    if denied:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": codes.CLUSTER_AUTHORIZATION_FAILED, "error_message": denied, "matching_acls": []}
            for _ in filters]}
    d = await gw.authorizer.decider(fresh=True)
    matches = [[b for b in d.bindings if acl.filter_matches(_filter(f), b)] for f in filters]
    wanted = [list(b) for m in matches for b in m]
    try:
        removed = await gw.cluster.router.remove_acls.remote(wanted) if wanted else []
    except Exception as e:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": error_code(e), "error_message": error_message(e), "matching_acls": []} for _ in filters]}
    gw.authorizer.invalidate()
    gone = [tuple(b) for b in removed]
    return {"throttle_time_ms": 0, "filter_results": [
        {"error_code": codes.NONE, "error_message": None, "matching_acls": [
            {"error_code": codes.NONE, "error_message": None, "resource_type": b.resource_type,
             "resource_name": b.name, "pattern_type": b.pattern, "principal": b.principal, "host": b.host,
             "operation": b.operation, "permission_type": b.permission} for b in m if tuple(b) in gone]}
        for m in matches]}


HANDLERS = {
    29: (0, 3, describe_acls),
    30: (0, 3, create_acls),
    31: (0, 3, delete_acls),
}
