"""ACL checks of the transaction APIs, as Kafka's KafkaApis makes them (called by :mod:`.authz`'s guard).

- InitProducerId with a transactional id, EndTxn, a transactional Produce: WRITE on
  the TRANSACTIONAL_ID, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
- AddPartitionsToTxn (v0-3): WRITE on the id, and WRITE on each topic (a denied topic
  gets TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED); v4+ is the
  brokers' batched form: CLUSTER_ACTION on the cluster.
- AddOffsetsToTxn: WRITE on the id, then READ on the group.
- TxnOffsetCommit: WRITE on the id, READ on the group, READ on each topic; here a
  denied topic refuses the whole request (its topics TOPIC_AUTHORIZATION_FAILED, the
  others OPERATION_NOT_ATTEMPTED), so no offset of it is held for the transaction.
- DescribeTransactions: DESCRIBE on each id; ListTransactions lists only those.
"""
from __future__ import annotations

from typing import Any, Callable

from logan_ray.protocol import errors as codes
from logan_ray.security import acl

TXN_DENIED = codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
Ok = Callable[[int, int, str], bool]
Guarded = tuple[dict | None, Callable[[dict], dict] | None]


def _write_id(ok: Ok, tid: Any) -> bool:
    return ok(acl.WRITE, acl.TRANSACTIONAL_ID, tid or "")


def _partitions(topics: list[dict], key: str, code_of: Callable[[str], int], result: str) -> list[dict]:
    return [{"name": t["name"], result: [
        {"partition_index": p if isinstance(p, int) else p["partition_index"],
         ("partition_error_code" if result == "results_by_partition" else "error_code"): code_of(t["name"])}
        for p in t.get(key) or ()]} for t in topics or ()]


def produce(body: dict, ok: Ok) -> dict | None:
    """The answer to a transactional Produce whose principal may not write its transactional id, else None."""
    tid = body.get("transactional_id")
    if tid is None or _write_id(ok, tid):
        return None
    return {"throttle_time_ms": 0, "node_endpoints": [], "responses": [
        {"name": t.get("name", ""), "topic_id": t.get("topic_id"), "partition_responses": [
            {"index": p["index"], "error_code": TXN_DENIED, "base_offset": -1, "log_append_time_ms": -1,
             "log_start_offset": -1, "record_errors": [], "error_message": None} for p in t["partition_data"]]}
        for t in body["topic_data"]]}


def guard(key: int, version: int, body: dict, ok: Ok, defaults: dict) -> Guarded:
    """(answer instead of the handler, or None; a fix of the handler's answer, or None) for a transaction API."""
    if key == 22:
        if body.get("transactional_id") is not None and not _write_id(ok, body["transactional_id"]):
            return {**defaults, "error_code": TXN_DENIED, "producer_id": -1, "producer_epoch": -1}, None
        return None, None
    if key == 24:
        if version >= 4:
            if not ok(acl.CLUSTER_ACTION, acl.CLUSTER, acl.CLUSTER_NAME):
                return {**defaults, "error_code": codes.CLUSTER_AUTHORIZATION_FAILED}, None
            return None, None
        topics = body.get("v3_and_below_topics") or []
        if not _write_id(ok, body.get("v3_and_below_transactional_id")):
            return {**defaults, "results_by_topic_v3_and_below": _partitions(
                topics, "partitions", lambda _: TXN_DENIED, "results_by_partition")}, None
        denied = {t["name"] for t in topics if not ok(acl.WRITE, acl.TOPIC, t["name"])}
        if denied:
            return {**defaults, "results_by_topic_v3_and_below": _partitions(
                topics, "partitions", lambda n: codes.TOPIC_AUTHORIZATION_FAILED if n in denied
                else codes.OPERATION_NOT_ATTEMPTED, "results_by_partition")}, None
        return None, None
    if key in (25, 26):
        if not _write_id(ok, body.get("transactional_id")):
            return {**defaults, "error_code": TXN_DENIED}, None
        if key == 25 and not ok(acl.READ, acl.GROUP, body.get("group_id") or ""):
            return {**defaults, "error_code": codes.GROUP_AUTHORIZATION_FAILED}, None
        return None, None
    if key == 28:
        topics = body.get("topics") or []
        denied = {t["name"] for t in topics if not ok(acl.READ, acl.TOPIC, t["name"])}
        whole = (TXN_DENIED if not _write_id(ok, body.get("transactional_id"))
                 else codes.GROUP_AUTHORIZATION_FAILED if not ok(acl.READ, acl.GROUP, body.get("group_id") or "")
                 else None)
        if whole is not None or denied:
            return {**defaults, "topics": _partitions(
                topics, "partitions", lambda n: whole if whole is not None else codes.TOPIC_AUTHORIZATION_FAILED
                if n in denied else codes.OPERATION_NOT_ATTEMPTED, "partitions")}, None
        return None, None
    if key == 65:
        ids = list(body.get("transactional_ids") or [])
        denied = [i for i in ids if not ok(acl.DESCRIBE, acl.TRANSACTIONAL_ID, i)]
        if not denied:
            return None, None
        body["transactional_ids"] = [i for i in ids if i not in denied]

        def post(resp: dict) -> dict:
            resp["transaction_states"] = list(resp.get("transaction_states") or []) + [
                {"error_code": TXN_DENIED, "transactional_id": i, "transaction_state": "",
                 "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                 "producer_epoch": -1, "topics": []} for i in denied]
            return resp
        return None, post
    if key == 66:
        return None, lambda resp: {**resp, "transaction_states": [
            t for t in resp.get("transaction_states") or []
            if ok(acl.DESCRIBE, acl.TRANSACTIONAL_ID, t["transactional_id"])]}
    return None, None


#: the api keys :func:`guard` checks (WriteTxnMarkers, 27, is not served)
KEYS = frozenset({22, 24, 25, 26, 28, 65, 66})
