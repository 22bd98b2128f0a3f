"""Per-API authorization of the gateway, as Kafka's KafkaApis checks it, around the unchanged handlers.

With an authorizer configured (``authorizer.class.name``), :func:`guard` runs before a
request's handler: resources the principal may not use are taken out of the request
and answered with TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED, merged back into the
handler's response (so an allowed topic next to a denied one still works, and a
denied produce writes nothing); requests about one group or the cluster are answered
with the error directly. Metadata and ListGroups show only what the principal may
describe; authorized operations (KIP-430) are computed when asked for.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from logan_ray.protocol import errors as codes
from logan_ray.security import acl
from logan_ray.security.authorizer import who

from . import txn_authz
from .broker_identity import replica_id_of

if TYPE_CHECKING:
    from .connection import Connection
    from .handler import GatewayContext as Gateway

Post = Callable[[dict], Awaitable[dict] | dict]
TOPIC_DENIED = codes.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = codes.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = codes.CLUSTER_AUTHORIZATION_FAILED
ZERO_UUID = uuid.UUID(int=0)
OMITTED = -(2**31)


async def authorize_cluster(gw: "Gateway", conn: "Connection", operation: str) -> str | None:
    """None when ``conn``'s principal may do ``operation`` (an AclOperation name) on the cluster, else why not."""
    if gw.authorizer is None:
        return None
    d = await gw.authorizer.decider()
    principal, host = who(conn)
    if d.allowed(principal, host, acl.OPERATIONS[operation.lower()], acl.CLUSTER, acl.CLUSTER_NAME):
        return None
    return f"{principal} is not authorized to {operation} the cluster"


def _defaults(api_key: int, version: int) -> dict:
    from logan_ray.protocol import APIS
    from logan_ray.protocol.schema import Struct, type_default

    return type_default(Struct(*[f for f in APIS[api_key].response if version in f.versions]))


# (request list, request name key, request parts key, request part index key,
#  response list, response name key, response parts key, response part index key, operation)
_PARTITIONED = {
    0: ("topic_data", "name", "partition_data", "index", "responses", "name", "partition_responses", "index",
        acl.WRITE),
    1: ("topics", "topic", "partitions", "partition", "responses", "topic", "partitions", "partition_index", acl.READ),
    2: ("topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index",
        acl.DESCRIBE),
    21: ("topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index",
         acl.DELETE),
    23: ("topics", "topic", "partitions", "partition", "topics", "topic", "partitions", "partition", acl.DESCRIBE),
    8: ("topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index",
        acl.READ),
    # OffsetDelete: DELETE on the group (below), then READ on each topic, as Kafka checks it
    47: ("topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index",
         acl.READ),
}
_GROUP_WHOLE = {11: acl.READ, 12: acl.READ, 13: acl.READ, 14: acl.READ, 47: acl.DELETE}


async def guard(gw: "Gateway", conn: "Connection", header: Any, body: dict) -> tuple[dict | None, Post | None]:
    """(response to send instead of running the handler, or None; a function to fix the handler's response)."""
    key, version = header.api_key, header.api_version
    if key == 1 and replica_id_of(version, body) >= 0:
        return None, None  # a replica fetch: CLUSTER_ACTION, not READ (broker_identity, in the Fetch handler)
    d = await gw.authorizer.decider()
    principal, host = who(conn)

    def ok(op: int, rtype: int, name: str) -> bool:
        return d.allowed(principal, host, op, rtype, name)

    if key in _GROUP_WHOLE:
        if not ok(_GROUP_WHOLE[key], acl.GROUP, body.get("group_id", "")):
            return {**_defaults(key, version), "error_code": GROUP_DENIED}, None
        if key not in _PARTITIONED:
            return None, None
    if key == 0:
        refused = txn_authz.produce(body, ok)
        if refused is not None:
            return refused, None
    if key in _PARTITIONED:
        group_denied = key == 8 and not ok(acl.READ, acl.GROUP, body.get("group_id", ""))
        return None, await _partitioned(gw, key, body, ok, group_denied)
    if key == 3:
        return None, await _metadata(version, d, principal, host, body, ok)
    if key == 60:
        def post_cluster(resp: dict) -> dict:
            if body.get("include_cluster_authorized_operations"):
                resp["cluster_authorized_operations"] = d.operations(principal, host, acl.CLUSTER, acl.CLUSTER_NAME)
            return resp
        return None, post_cluster
    if key == 22:
        if body.get("transactional_id") is None and not (
                ok(acl.IDEMPOTENT_WRITE, acl.CLUSTER, acl.CLUSTER_NAME)
                or d.any_allowed(principal, host, acl.WRITE, acl.TOPIC)):
            return {**_defaults(key, version), "error_code": CLUSTER_DENIED, "producer_id": -1,
                    "producer_epoch": -1}, None
        return txn_authz.guard(key, version, body, ok, _defaults(key, version))
    if key in txn_authz.KEYS:
        return txn_authz.guard(key, version, body, ok, _defaults(key, version))
    if key == 10:
        return _find_coordinator(key, version, body, ok)
    if key == 9:
        return _offset_fetch(key, version, body, ok)
    if key == 15:
        return _split_names(body, "groups", None, "groups", "group_id", GROUP_DENIED,
                            lambda n: ok(acl.DESCRIBE, acl.GROUP, n))
    if key == 42:
        return _split_names(body, "groups_names", None, "results", "group_id", GROUP_DENIED,
                            lambda n: ok(acl.DELETE, acl.GROUP, n))
    if key == 16:
        if ok(acl.DESCRIBE, acl.CLUSTER, acl.CLUSTER_NAME):
            return None, None
        return None, lambda resp: {**resp, "groups": [g for g in resp.get("groups", [])
                                                       if ok(acl.DESCRIBE, acl.GROUP, g["group_id"])]}
    if key == 19:
        cluster_create = ok(acl.CREATE, acl.CLUSTER, acl.CLUSTER_NAME)
        return _split_names(body, "topics", "name", "topics", "name", TOPIC_DENIED,
                            lambda n: cluster_create or ok(acl.CREATE, acl.TOPIC, n))
    if key == 20:
        if version >= 6:
            return _split_names(body, "topics", "name", "responses", "name", TOPIC_DENIED,
                                lambda n: n is not None and ok(acl.DELETE, acl.TOPIC, n))
        return _split_names(body, "topic_names", None, "responses", "name", TOPIC_DENIED,
                            lambda n: ok(acl.DELETE, acl.TOPIC, n))
    if key == 37:
        return _split_names(body, "topics", "name", "results", "name", TOPIC_DENIED,
                            lambda n: ok(acl.ALTER, acl.TOPIC, n))
    if key == 43 and not ok(acl.ALTER, acl.CLUSTER, acl.CLUSTER_NAME):  # Kafka: ALTER on the cluster
        asked = body.get("topic_partitions") or []
        return {**_defaults(key, version), "error_code": CLUSTER_DENIED, "replica_election_results": [
            {"topic": t["topic"], "partition_result": [{"partition_id": p, "error_code": CLUSTER_DENIED,
                                                        "error_message": None} for p in t["partitions"]]}
            for t in asked]}, None
    if key in (32, 33, 44):
        op = acl.DESCRIBE_CONFIGS if key == 32 else acl.ALTER_CONFIGS
        out_key = "results" if key == 32 else "responses"
        return _configs(body, out_key, op, ok)
    return None, None


async def _names_of(gw: "Gateway", ids: list[uuid.UUID]) -> dict:
    return await gw.cluster.topic_names(ids) if ids else {}


async def _partitioned(gw: "Gateway", key: int, body: dict, ok: Callable, group_denied: bool) -> Post | None:
    req_list, req_name, req_parts, req_idx, resp_list, resp_name, resp_parts, resp_idx, op = _PARTITIONED[key]
    entries = body.get(req_list) or []
    ids = [t["topic_id"] for t in entries if not t.get(req_name) and t.get("topic_id") not in (None, ZERO_UUID)]
    names = await _names_of(gw, ids)
    kept, denied = [], []
    for t in entries:
        name = t.get(req_name) or names.get(t.get("topic_id"))
        if group_denied:
            denied.append((t, GROUP_DENIED))
        elif name is None or not ok(op, acl.TOPIC, name):  # unknown ids too: never tell what exists
            denied.append((t, TOPIC_DENIED))
        else:
            kept.append(t)
    if not denied:
        return None
    body[req_list] = kept

    def post(resp: dict) -> dict:
        out = list(resp.get(resp_list) or [])
        for t, code in denied:
            entry = {resp_parts: [{resp_idx: p[req_idx], "error_code": code} for p in t.get(req_parts) or []]}
            if req_name in t:
                entry[resp_name] = t[req_name]
            if "topic_id" in t:
                entry["topic_id"] = t["topic_id"]
            out.append(entry)
        resp[resp_list] = out
        return resp
    return post


async def _metadata(version: int, d: acl.Decider, principal: str, host: str, body: dict, ok: Callable) -> Post:
    requested = body.get("topics")
    all_topics = requested is None or (version == 0 and not requested)
    if body.get("allow_auto_topic_creation", True) and not ok(acl.CREATE, acl.CLUSTER, acl.CLUSTER_NAME):
        wanted = [t.get("name") for t in requested or [] if t.get("name")]
        if not wanted or not all(ok(acl.CREATE, acl.TOPIC, n) for n in wanted):
            body["allow_auto_topic_creation"] = False

    def post(resp: dict) -> dict:
        out = []
        for t in resp.get("topics", []):
            name = t.get("name")
            if name is None or t.get("error_code") not in (codes.NONE, codes.LEADER_NOT_AVAILABLE):
                if name is not None and not ok(acl.DESCRIBE, acl.TOPIC, name):
                    t = {**t, "error_code": TOPIC_DENIED, "topic_id": ZERO_UUID, "partitions": []}
                out.append(t)
                continue
            if ok(acl.DESCRIBE, acl.TOPIC, name):
                if body.get("include_topic_authorized_operations"):
                    t["topic_authorized_operations"] = d.operations(principal, host, acl.TOPIC, name)
                out.append(t)
            elif not all_topics:
                out.append({**t, "error_code": TOPIC_DENIED, "topic_id": ZERO_UUID, "partitions": [],
                            "is_internal": False, "topic_authorized_operations": OMITTED})
        resp["topics"] = out
        if body.get("include_cluster_authorized_operations"):
            resp["cluster_authorized_operations"] = d.operations(principal, host, acl.CLUSTER, acl.CLUSTER_NAME)
        return resp
    return post


def _find_coordinator(key: int, version: int, body: dict, ok: Callable) -> tuple[dict | None, Post | None]:
    key_type = body.get("key_type", 0)
    rtype = acl.GROUP if key_type == 0 else acl.TRANSACTIONAL_ID
    code = GROUP_DENIED if key_type == 0 else codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if version < 4:
        if not ok(acl.DESCRIBE, rtype, body.get("key", "")):
            return {**_defaults(key, version), "error_code": code, "node_id": -1, "host": "", "port": -1}, None
        return None, None
    keys = body.get("coordinator_keys") or []
    denied = [k for k in keys if not ok(acl.DESCRIBE, rtype, k)]
    if not denied:
        return None, None
    body["coordinator_keys"] = [k for k in keys if k not in denied]

    def post(resp: dict) -> dict:
        resp["coordinators"] = list(resp.get("coordinators") or []) + [
            {"key": k, "node_id": -1, "host": "", "port": -1, "error_code": code,
             "error_message": "not authorized"} for k in denied]
        return resp
    if not body["coordinator_keys"]:
        return post({**_defaults(key, version), "coordinators": []}), None
    return None, post


def _committed_topics(topics: list[dict], named: bool, ok: Callable) -> list[dict]:
    """OffsetFetch answers: topics the principal may not describe are left out of an all-topics answer
    and answered TOPIC_AUTHORIZATION_FAILED when named. Checks go by name, which is why OffsetFetch v10
    (topics by id) is not served (gateway/groups.py); an entry without a name is never shown."""
    out = []
    for t in topics:
        name = t.get("name")
        if name and ok(acl.DESCRIBE, acl.TOPIC, name):
            out.append(t)
        elif named:
            out.append({**t, "partitions": [{**p, "committed_offset": -1, "metadata": None, "error_code": TOPIC_DENIED}
                                            for p in t.get("partitions", [])]})
    return out


def _offset_fetch(key: int, version: int, body: dict, ok: Callable) -> tuple[dict | None, Post | None]:
    if version < 8:
        if not ok(acl.DESCRIBE, acl.GROUP, body.get("group_id", "")):
            return {**_defaults(key, version), "error_code": GROUP_DENIED, "topics": []}, None
        named = body.get("topics") is not None
        return None, lambda resp: {**resp, "topics": _committed_topics(resp.get("topics") or [], named, ok)}
    groups = body.get("groups") or []
    denied = [g for g in groups if not ok(acl.DESCRIBE, acl.GROUP, g["group_id"])]
    named = {g["group_id"]: g.get("topics") is not None for g in groups}
    body["groups"] = [g for g in groups if g not in denied]

    def post(resp: dict) -> dict:
        kept = [{**g, "topics": _committed_topics(g.get("topics") or [], named.get(g.get("group_id"), True), ok)}
                for g in resp.get("groups") or []]
        resp["groups"] = kept + [
            {"group_id": g["group_id"], "topics": [], "error_code": GROUP_DENIED} for g in denied]
        return resp
    if not body["groups"]:
        return post({**_defaults(key, version), "groups": []}), None
    return None, post


def _split_names(body: dict, req_list: str, req_name: str | None, resp_list: str, resp_name: str, code: int,
                 allowed: Callable[[Any], bool]) -> tuple[dict | None, Post | None]:
    entries = body.get(req_list) or []
    name_of = (lambda e: e) if req_name is None else (lambda e: e.get(req_name))
    denied = [e for e in entries if not allowed(name_of(e))]
    if not denied:
        return None, None
    body[req_list] = [e for e in entries if e not in denied]

    def post(resp: dict) -> dict:
        resp[resp_list] = list(resp.get(resp_list) or []) + [
            {resp_name: name_of(e), "error_code": code, "error_message": "not authorized",
             **({"topic_id": e.get("topic_id")} if isinstance(e, dict) and "topic_id" in e else {})}
            for e in denied]
        return resp
    return None, post


def _configs(body: dict, out_key: str, op: int, ok: Callable) -> tuple[dict | None, Post | None]:
    resources = body.get("resources") or []

    def allowed(r: dict) -> bool:
        if r["resource_type"] == 2:
            return ok(op, acl.TOPIC, r["resource_name"])
        if r["resource_type"] == 32:  # a consumer group's configs (KIP-848)
            return ok(op, acl.GROUP, r["resource_name"])
        return ok(op, acl.CLUSTER, acl.CLUSTER_NAME)
    denied = [r for r in resources if not allowed(r)]
    if not denied:
        return None, None
    body["resources"] = [r for r in resources if r not in denied]

    def post(resp: dict) -> dict:
        resp[out_key] = list(resp.get(out_key) or []) + [
            {"error_code": {2: TOPIC_DENIED, 32: GROUP_DENIED}.get(r["resource_type"], CLUSTER_DENIED),
             "error_message": "not authorized", "resource_type": r["resource_type"],
             "resource_name": r["resource_name"], "configs": []} for r in denied]
        return resp
    return None, post
