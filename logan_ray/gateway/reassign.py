"""AlterPartitionReassignments (API 45) and ListPartitionReassignments (API 46): Kafka's KIP-455.

The router (the controller, ``actors/router_reassign.py``) does the work: a target is saved,
the replicas being added are built by fetching from the leader, and once they are all in the
ISR the target becomes the replica set (a removed leader hands over by a controlled move first).
Replicas are broker ids on the wire and node ids inside (``names.broker_id``). ALTER on the
cluster is needed for the first, DESCRIBE on the cluster for the second, when an authorizer is
set (CLUSTER_AUTHORIZATION_FAILED otherwise, as Kafka's KafkaApis answers).
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from logan_ray.actors.names import broker_id
from logan_ray.protocol import errors as codes

from .authz import authorize_cluster
from .cluster import error_code, error_message
from .handler import GatewayContext, HandlerTable

if TYPE_CHECKING:
    from .connection import Connection


def _timeout(body: dict) -> float | None:
    timeout_ms = body.get("timeout_ms", 60000)
    return timeout_ms / 1000 if timeout_ms > 0 else None


def _alter_answer(body: dict, results: dict[tuple[str, int], tuple[int, str | None]], code: int = codes.NONE,
                  message: str | None = None) -> dict[str, Any]:
    """The response, every partition asked in the order asked; ``code`` for all of them when the
    request failed as a whole (Kafka's getErrorResponse sets it at the top and on each partition)."""
    return {"throttle_time_ms": 0, "allow_replication_factor_change": body.get("allow_replication_factor_change", True),
            "error_code": code, "error_message": message,
            "responses": [{"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"],
                 "error_code": results.get((t["name"], p["partition_index"]), (code, message))[0],
                 "error_message": results.get((t["name"], p["partition_index"]), (code, message))[1]}
                for p in t["partitions"]]} for t in body.get("topics") or []]}


async def alter_partition_reassignments(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    denied = await authorize_cluster(gw, conn, "ALTER")
    if denied is not None:
        return _alter_answer(body, {}, codes.CLUSTER_AUTHORIZATION_FAILED, denied)
    asked = [(t["name"], p["partition_index"], p["replicas"]) for t in body.get("topics") or []
             for p in t["partitions"]]
    allow = body.get("allow_replication_factor_change", True) if header.api_version >= 1 else True
    try:
        results = await asyncio.wait_for(gw.cluster.router.alter_partition_reassignments.remote(asked, allow),
                                         _timeout(body))
    except Exception as e:
        code, message = (codes.REQUEST_TIMED_OUT, "the reassignments were not started within the timeout") \
            if isinstance(e, asyncio.TimeoutError) else (error_code(e), error_message(e))
        return _alter_answer(body, {}, code, message)
    for topic in {t for t, _p in results}:
        gw.cluster.forget(topic)  # replicas and epochs changed: the next request routes anew
    return _alter_answer(body, results)


async def list_partition_reassignments(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    answer: dict[str, Any] = {"throttle_time_ms": 0, "error_code": codes.NONE, "error_message": None, "topics": []}
    denied = await authorize_cluster(gw, conn, "DESCRIBE")
    if denied is not None:
        return {**answer, "error_code": codes.CLUSTER_AUTHORIZATION_FAILED, "error_message": denied}
    asked = None if body.get("topics") is None else \
        [(t["name"], p) for t in body["topics"] for p in t["partition_indexes"]]
    try:
        ongoing = await asyncio.wait_for(gw.cluster.router.list_partition_reassignments.remote(asked),
                                         _timeout(body))
    except Exception as e:
        code, message = (codes.REQUEST_TIMED_OUT, "the reassignments were not listed within the timeout") \
            if isinstance(e, asyncio.TimeoutError) else (error_code(e), error_message(e))
        return {**answer, "error_code": code, "error_message": message}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), r in ongoing.items():
        by_topic.setdefault(topic, []).append({
            "partition_index": p, "replicas": [broker_id(n) for n in r["replicas"]],
            "adding_replicas": [broker_id(n) for n in r["adding"]],
            "removing_replicas": [broker_id(n) for n in r["removing"]]})
    answer["topics"] = [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
    return answer


HANDLERS: HandlerTable = {
    45: (0, 1, alter_partition_reassignments),
    46: (0, 0, list_partition_reassignments),
}
