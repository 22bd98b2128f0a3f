"""ACLs on the transaction APIs (gateway/txn_authz.py through gateway/authz.py's guard); no Ray: the
authorizer is faked by a set of allowed (operation, resource type, name)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from logan_ray.gateway import authz
from logan_ray.protocol import errors as E
from logan_ray.security import acl


class _Decider:
    def __init__(self, allowed: set[tuple[int, int, str]]) -> None:
        self.allowed_set = allowed

    def allowed(self, principal, host, op, rtype, name) -> bool:
        return (op, rtype, name) in self.allowed_set

    def any_allowed(self, principal, host, op, rtype) -> bool:
        return any(o == op and r == rtype for o, r, _ in self.allowed_set)


def _guard(allowed: set, key: int, version: int, body: dict):
    async def decider():
        return _Decider(allowed)

    gw = SimpleNamespace(authorizer=SimpleNamespace(decider=decider))
    conn = SimpleNamespace(session=None, peer=("127.0.0.1", 5000))
    return asyncio.run(authz.guard(gw, conn, SimpleNamespace(api_key=key, api_version=version), body))


W_TX = (acl.WRITE, acl.TRANSACTIONAL_ID, "tx")


def test_init_producer_id_and_end_txn_need_write_on_the_transactional_id():
    init = {"transactional_id": "tx", "transaction_timeout_ms": 1000, "producer_id": -1, "producer_epoch": -1}
    answer, _ = _guard(set(), 22, 4, init)
    assert answer["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert _guard({W_TX}, 22, 4, init) == (None, None)
    end = {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "committed": True}
    assert _guard(set(), 26, 3, end)[0]["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert _guard({W_TX}, 26, 3, end) == (None, None)


def test_add_partitions_needs_the_id_and_each_topic():
    body = {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": "a", "partitions": [0]}, {"name": "b", "partitions": [1]}]}
    answer, _ = _guard({(acl.WRITE, acl.TOPIC, "a"), (acl.WRITE, acl.TOPIC, "b")}, 24, 3, body)
    assert {r["partition_error_code"] for t in answer["results_by_topic_v3_and_below"]
            for r in t["results_by_partition"]} == {E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    answer, _ = _guard({W_TX, (acl.WRITE, acl.TOPIC, "a")}, 24, 3, body)
    assert [(t["name"], t["results_by_partition"][0]["partition_error_code"])
            for t in answer["results_by_topic_v3_and_below"]] == [
        ("a", E.OPERATION_NOT_ATTEMPTED), ("b", E.TOPIC_AUTHORIZATION_FAILED)]
    assert _guard({W_TX, (acl.WRITE, acl.TOPIC, "a"), (acl.WRITE, acl.TOPIC, "b")}, 24, 3, body) == (None, None)
    assert _guard({W_TX}, 24, 4, {"transactions": []})[0]["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED


def test_offsets_in_a_transaction_need_the_group_and_its_topics():
    add = {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "group_id": "g"}
    assert _guard({W_TX}, 25, 3, add)[0]["error_code"] == E.GROUP_AUTHORIZATION_FAILED
    assert _guard({W_TX, (acl.READ, acl.GROUP, "g")}, 25, 3, add) == (None, None)
    commit = {"transactional_id": "tx", "group_id": "g", "producer_id": 1, "producer_epoch": 0, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5}]}]}
    codes_of = lambda answer: [p["error_code"] for t in answer["topics"] for p in t["partitions"]]  # noqa: E731
    assert codes_of(_guard({W_TX, (acl.READ, acl.GROUP, "g")}, 28, 3, commit)[0]) == [E.TOPIC_AUTHORIZATION_FAILED]
    assert codes_of(_guard({(acl.READ, acl.GROUP, "g"), (acl.READ, acl.TOPIC, "t")}, 28, 3, commit)[0]) == \
        [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
    assert _guard({W_TX, (acl.READ, acl.GROUP, "g"), (acl.READ, acl.TOPIC, "t")}, 28, 3, commit) == (None, None)


def test_a_transactional_produce_needs_write_on_its_id():
    body = {"transactional_id": "tx", "acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b""}]}]}
    answer, _ = _guard({(acl.WRITE, acl.TOPIC, "t")}, 0, 9, body)
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    answer, post = _guard({W_TX, (acl.WRITE, acl.TOPIC, "t")}, 0, 9, body)
    assert answer is None  # the topic checks follow as for any produce


def test_describe_and_list_show_only_the_ids_the_principal_may_describe():
    body = {"transactional_ids": ["tx", "other"]}
    answer, post = _guard({(acl.DESCRIBE, acl.TRANSACTIONAL_ID, "tx")}, 65, 0, body)
    assert answer is None and body["transactional_ids"] == ["tx"]
    out = post({"throttle_time_ms": 0, "transaction_states": [{"transactional_id": "tx", "error_code": 0}]})
    assert [(s["transactional_id"], s["error_code"]) for s in out["transaction_states"]] == [
        ("tx", E.NONE), ("other", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
    _, post = _guard({(acl.DESCRIBE, acl.TRANSACTIONAL_ID, "tx")}, 66, 1, {"state_filters": []})
    listed = post({"error_code": 0, "transaction_states": [{"transactional_id": "tx"}, {"transactional_id": "x"}]})
    assert [t["transactional_id"] for t in listed["transaction_states"]] == ["tx"]
