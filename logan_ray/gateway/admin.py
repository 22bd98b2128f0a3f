"""Admin APIs: topics, partitions, configs and DeleteRecords, answered through the router.

Every gateway answers admin requests (each advertises itself as the controller),
because the router — not a broker — owns the topic registry. Errors from the
router and the partition actors are typed with their Kafka code, so each result
carries the code and the message the caller would get from Kafka.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from logan_ray.actors.broker_dynamic import DYNAMIC, GROUP_CONFIGS
from logan_ray.broker_config import KAFKA_TYPES
from logan_ray.protocol import errors as codes

from .cluster import ZERO_UUID, error_code, error_message
from .handler import GatewayContext, HandlerTable

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("logan_ray.gateway")

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
# DescribeConfigs config sources
TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 4, 5, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def _topic_configs(gw: GatewayContext, name: str) -> list[tuple[str, str, bool]]:
    return await gw.cluster.router.topic_config.remote(name)


# ----------------------------------------------------------------- topics
async def _create_one(gw: GatewayContext, t: dict, validate_only: bool, version: int) -> dict:
    name = t["name"]
    out = {"name": name, "topic_id": ZERO_UUID, "error_code": codes.NONE, "error_message": None,
           "num_partitions": -1, "replication_factor": -1, "configs": None}
    partitions = t["num_partitions"]
    if t.get("assignments"):
        partitions = len(t["assignments"])  # placement is logan-ray's job; honour the count
    config = {c["name"]: c["value"] for c in t.get("configs", []) if c["value"] is not None}
    try:
        info = await gw.cluster.router.create_topic.remote(name, partitions, config, t["replication_factor"],
                                                          validate_only)
        out["num_partitions"] = len(info["partitions"]) if isinstance(info["partitions"], list) \
            else info["partitions"]
        out["replication_factor"] = info.get("replication_factor", 1)
        if info.get("topic_id"):
            out["topic_id"] = uuid.UUID(info["topic_id"])
        if version >= 5 and not validate_only:
            rows = await _topic_configs(gw, name)
            out["configs"] = [{"name": k, "value": v, "read_only": False, "is_sensitive": False,
                               "config_source": DEFAULT_CONFIG if is_default else TOPIC_CONFIG}
                              for k, v, is_default in rows]
    except Exception as e:
        out["error_code"], out["error_message"] = error_code(e), error_message(e)
    return out


async def create_topics(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    validate_only = body.get("validate_only", False)
    seen: dict[str, int] = {}
    for t in body["topics"]:
        seen[t["name"]] = seen.get(t["name"], 0) + 1
    jobs = []
    for t in body["topics"]:
        if seen[t["name"]] > 1:
            jobs.append(_failed_create(t["name"], codes.INVALID_REQUEST, "topic named more than once"))
        else:
            jobs.append(_create_one(gw, t, validate_only, header.api_version))
    return {"throttle_time_ms": 0, "topics": list(await asyncio.gather(*jobs))}


async def _failed_create(name: str, code: int, message: str) -> dict:
    return {"name": name, "topic_id": ZERO_UUID, "error_code": code, "error_message": message,
            "num_partitions": -1, "replication_factor": -1, "configs": None}


async def _delete_one(gw: GatewayContext, name: str | None, tid: Any) -> dict:
    out = {"name": name, "topic_id": tid if tid is not None else ZERO_UUID,
           "error_code": codes.NONE, "error_message": None}
    if name is None:
        name = (await gw.cluster.topic_names([tid]))[tid]
        if name is None:
            out["error_code"], out["error_message"] = codes.UNKNOWN_TOPIC_ID, "unknown topic id"
            return out
        out["name"] = name
    elif gw.cluster.topic_id(name) == ZERO_UUID:
        try:
            await gw.cluster.topic(name)  # learn its id for the answer
        except Exception:
            pass
    if out["topic_id"] == ZERO_UUID:
        out["topic_id"] = gw.cluster.topic_id(name)
    try:
        await gw.cluster.router.delete_topic.remote(name)
    except Exception as e:
        out["error_code"], out["error_message"] = error_code(e), error_message(e)
    gw.cluster.forget(name)
    return out


async def delete_topics(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    if header.api_version >= 6:
        targets = [(t.get("name"), t.get("topic_id") if t.get("name") is None else None) for t in body["topics"]]
    else:
        targets = [(n, None) for n in body["topic_names"]]
    results = await asyncio.gather(*(_delete_one(gw, n, i) for n, i in targets))
    return {"throttle_time_ms": 0, "responses": list(results)}


async def create_partitions(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    async def one(t: dict) -> dict:
        out = {"name": t["name"], "error_code": codes.NONE, "error_message": None}
        try:
            await gw.cluster.router.create_partitions.remote(t["name"], t["count"], body["validate_only"])
        except Exception as e:
            out["error_code"], out["error_message"] = error_code(e), error_message(e)
        gw.cluster.forget(t["name"])
        return out

    return {"throttle_time_ms": 0, "results": list(await asyncio.gather(*(one(t) for t in body["topics"])))}


# ----------------------------------------------------------------- configs
async def _broker_rows(gw: GatewayContext) -> list[tuple[str, str, bool]]:
    s = await gw.cluster.settings()
    return [
        ("broker.id", str(gw.cluster.broker_id), False),
        ("auto.create.topics.enable", str(s.get("auto_create_topics", True)).lower(), False),
        ("num.partitions", str(s.get("num_partitions", 1)), False),
        ("log.dirs", str(s.get("data_dir", "")), False),
        ("default.replication.factor", str(s.get("default_replication_factor", 1)),
         s.get("default_replication_factor", 1) == 1),
        ("replica.lag.time.max.ms", str(s.get("replica_lag_time_max_ms", 30000)),
         s.get("replica_lag_time_max_ms", 30000) == 30000),
        ("offsets.topic.replication.factor", str(s.get("offsets_topic_replication_factor", 3)),
         s.get("offsets_topic_replication_factor", 3) == 3),
        ("broker.heartbeat.interval.ms", str(s.get("broker_heartbeat_interval_ms", 500)),
         s.get("broker_heartbeat_interval_ms", 500) == 500),
        ("broker.session.timeout.ms", str(s.get("broker_session_timeout_ms", 3000)),
         s.get("broker_session_timeout_ms", 3000) == 3000),
        ("auto.leader.rebalance.enable", str(s.get("auto_leader_rebalance_enable", True)).lower(),
         s.get("auto_leader_rebalance_enable", True) is True),
        ("leader.imbalance.check.interval.seconds", str(s.get("leader_imbalance_check_interval_seconds", 300)),
         s.get("leader_imbalance_check_interval_seconds", 300) == 300),
        ("leader.imbalance.per.broker.percentage", str(s.get("leader_imbalance_per_broker_percentage", 10)),
         s.get("leader_imbalance_per_broker_percentage", 10) == 10),
        ("socket.request.max.bytes", str(gw.max_frame_bytes), True),
        ("queued.max.request.bytes", str(gw.pool.capacity), False),
        ("max.connections", str(gw.quotas.max_connections), True),
        ("max.connections.per.ip", str(gw.quotas.max_per_ip), True),
    ]


async def _describe_one(gw: GatewayContext, r: dict, version: int, body_flags: dict) -> dict:
    rtype, name = r["resource_type"], r["resource_name"]
    out = {"error_code": codes.NONE, "error_message": None, "resource_type": rtype, "resource_name": name,
           "configs": []}
    try:
        if rtype == TOPIC:
            rows = await _topic_configs(gw, name)
            read_only, source_of = False, (lambda d: DEFAULT_CONFIG if d else TOPIC_CONFIG)
        elif rtype == BROKER:
            if name not in ("", str(gw.cluster.broker_id)):
                out["error_code"], out["error_message"] = codes.INVALID_REQUEST, f"no broker {name!r} here"
                return out
            rows = await _broker_rows(gw)
            read_only, source_of = True, (lambda d: DEFAULT_CONFIG if d else STATIC_BROKER_CONFIG)
            live = {k for k, _, _ in rows}  # what the gateway runs with wins over the settings as given
            extra = [e for e in gw.broker_configs if e["name"] not in live]
        elif rtype == BROKER_LOGGER:
            return out
        elif rtype == GROUP:
            stored = await gw.cluster.router.group_configs.remote(name)
            entries = [{"name": k, "value": stored.get(k, default), "read_only": False, "is_default": k not in stored,
                        "config_source": GROUP_CONFIG if k in stored else DEFAULT_CONFIG, "is_sensitive": False,
                        "synonyms": [], "config_type": 3, "documentation": None}
                       for k, (default, _parse) in GROUP_CONFIGS.items()]
            keys = r.get("configuration_keys")
            out["configs"] = [e for e in entries if not keys or e["name"] in keys]
            return out
        else:
            out["error_code"], out["error_message"] = codes.INVALID_REQUEST, f"unsupported resource type {rtype}"
            return out
    except Exception as e:
        out["error_code"], out["error_message"] = error_code(e), error_message(e)
        return out
    keys = r.get("configuration_keys")
    wanted = None if not keys else set(keys)
    entries = [
        {"name": k, "value": v, "read_only": read_only, "is_default": is_default,
         "config_source": source_of(is_default), "is_sensitive": False, "synonyms": [],
         "config_type": (KAFKA_TYPES.get(k) or 0) if rtype == BROKER else 0, "documentation": None}
        for k, v, is_default in rows]
    if rtype == BROKER:
        docs = bool(body_flags.get("include_documentation"))
        entries += [{**e, "documentation": e.get("documentation") if docs else None} for e in extra]
        entries = _with_dynamic(entries, await gw.cluster.router.broker_configs.remote(name), bool(name))
    out["configs"] = [e for e in entries if wanted is None or e["name"] in wanted]
    return out


def _with_dynamic(entries: list[dict], dynamic: dict[str, dict[str, str]], per_broker: bool) -> list[dict]:
    """Broker entries with the dynamic configs in force, as Kafka describes them: a per-broker value
    (DYNAMIC_BROKER_CONFIG) over the cluster default (DYNAMIC_DEFAULT_BROKER_CONFIG) over the static
    setting; dynamic names are not read-only. The default level ("") shows only its own values."""
    def dyn(name: str, value: str, source: int) -> dict:
        spec = DYNAMIC[name]
        return {"name": name, "value": value, "read_only": False, "is_default": False, "config_source": source,
                "is_sensitive": False, "synonyms": [], "config_type": spec.kafka_type, "documentation": None}

    if not per_broker:
        return [dyn(k, v, DYNAMIC_DEFAULT_BROKER_CONFIG) for k, v in sorted(dynamic["default"].items())]
    in_force = {k: (v, DYNAMIC_DEFAULT_BROKER_CONFIG) for k, v in dynamic["default"].items()}
    in_force.update({k: (v, DYNAMIC_BROKER_CONFIG) for k, v in dynamic["broker"].items()})
    out = []
    for e in entries:
        if e["name"] in in_force:
            value, source = in_force.pop(e["name"])
            out.append({**dyn(e["name"], value, source), "documentation": e.get("documentation")})
        else:
            out.append({**e, "read_only": False} if e["name"] in DYNAMIC else e)
    shown = {e["name"] for e in out}
    out += [dyn(k, v, src) for k, (v, src) in sorted(in_force.items())]
    out += [{**dyn(k, spec.default, DEFAULT_CONFIG), "is_default": True}
            for k, spec in DYNAMIC.items() if spec.default is not None and k not in shown and k not in in_force]
    return out


async def describe_configs(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    results = await asyncio.gather(*(_describe_one(gw, r, header.api_version, body) for r in body["resources"]))
    return {"throttle_time_ms": 0, "results": list(results)}


async def _alter_one(gw: GatewayContext, r: dict, incremental: bool, validate_only: bool) -> dict:
    rtype, name = r["resource_type"], r["resource_name"]
    out = {"error_code": codes.NONE, "error_message": None, "resource_type": rtype, "resource_name": name}
    if rtype in (BROKER, GROUP):
        if rtype == BROKER and name not in ("", str(gw.cluster.broker_id)):
            out["error_code"] = codes.INVALID_REQUEST
            out["error_message"] = f"Unexpected broker id, expected {gw.cluster.broker_id} or empty string, " \
                                   f"but received {name}"
            return out
        ops = [(c["config_operation"] if incremental else SET, c["name"], c["value"]) for c in r["configs"]]
        alter = gw.cluster.router.alter_broker_configs if rtype == BROKER else gw.cluster.router.alter_group_configs
        try:
            await alter.remote(name, ops, incremental, validate_only)
        except Exception as e:
            out["error_code"], out["error_message"] = error_code(e), error_message(e)
        return out
    if rtype != TOPIC:
        out["error_code"] = codes.INVALID_REQUEST
        out["error_message"] = f"unsupported resource type {rtype}"
        return out
    try:
        changes: dict[str, Any] = {}
        if not incremental:
            changes = {c["name"]: c["value"] for c in r["configs"]}
        else:
            current = None
            for c in r["configs"]:
                op, key, value = c["config_operation"], c["name"], c["value"]
                if op == SET:
                    changes[key] = value
                elif op == DELETE:
                    changes[key] = None
                elif op in (APPEND, SUBTRACT):
                    if current is None:
                        current = {k: v for k, v, _ in await _topic_configs(gw, name)}
                    base = changes.get(key, current.get(key)) or ""
                    items = [x for x in base.split(",") if x]
                    extra = [x for x in (value or "").split(",") if x]
                    if op == APPEND:
                        items += [x for x in extra if x not in items]
                    else:
                        items = [x for x in items if x not in extra]
                    changes[key] = ",".join(items)
                else:
                    out["error_code"], out["error_message"] = codes.INVALID_REQUEST, f"unknown operation {op}"
                    return out
        await gw.cluster.router.alter_config.remote(name, changes, incremental, validate_only)
    except Exception as e:
        out["error_code"], out["error_message"] = error_code(e), error_message(e)
    return out


async def alter_configs(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    results = await asyncio.gather(*(_alter_one(gw, r, False, body["validate_only"]) for r in body["resources"]))
    return {"throttle_time_ms": 0, "responses": list(results)}


async def incremental_alter_configs(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    results = await asyncio.gather(*(_alter_one(gw, r, True, body["validate_only"]) for r in body["resources"]))
    return {"throttle_time_ms": 0, "responses": list(results)}


# ----------------------------------------------------------------- records
async def delete_records(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    async def one(name: str, p: dict) -> dict:
        out = {"partition_index": p["partition_index"], "low_watermark": -1, "error_code": codes.NONE}
        try:
            part = await gw.cluster.partition(name, p["partition_index"])
            if part is None:
                out["error_code"] = codes.UNKNOWN_TOPIC_OR_PARTITION
            elif part.offline:
                out["error_code"] = codes.LEADER_NOT_AVAILABLE
            elif not part.local:
                out["error_code"] = codes.NOT_LEADER_OR_FOLLOWER
            else:
                out["low_watermark"] = await part.call("delete_records", p["offset"])
        except Exception as e:
            out["error_code"] = error_code(e)
        return out

    topics = []
    for t in body["topics"]:
        parts = await asyncio.gather(*(one(t["name"], p) for p in t["partitions"]))
        topics.append({"name": t["name"], "partitions": list(parts)})
    return {"throttle_time_ms": 0, "topics": topics}


HANDLERS: HandlerTable = {
    19: (0, 7, create_topics),
    20: (0, 6, delete_topics),
    37: (0, 3, create_partitions),
    32: (0, 4, describe_configs),
    33: (0, 2, alter_configs),
    44: (0, 1, incremental_alter_configs),
    21: (0, 2, delete_records),
}
