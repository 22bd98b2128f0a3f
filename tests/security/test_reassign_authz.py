"""Reassignment APIs under ACLs (logan_ray/gateway/reassign.py), on the in-process secured gateway:
ALTER on the cluster for AlterPartitionReassignments, DESCRIBE on the cluster for ListPartitionReassignments,
CLUSTER_AUTHORIZATION_FAILED otherwise, as Kafka's KafkaApis; a super user reaches the controller."""
from __future__ import annotations

import socket

from test_gateway_tls_sasl_local import CREDS, _Method, call, pki, plain_login, secured_gateway  # noqa: F401 (pki: fixture)

from logan_ray.security import acl, scram

CREDS.update({("admin", m): scram.new_credential(m, "pw") for m in scram.MECHANISMS})

ASK = {"timeout_ms": 5000, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [1, 2]},
                                                                 {"partition_index": 1, "replicas": None}]}]}


def test_alter_and_list_need_cluster_alter_and_describe(pki):  # noqa: F811
    with secured_gateway(pki, authorizer=True) as (gw, addrs):
        asked = []

        async def alter(items, allow):
            asked.append((items, allow))
            return {("t", 0): (0, None), ("t", 1): (85, "none in progress")}

        async def listing(partitions):
            return {("t", 0): {"replicas": ["0000001" + "0" * 49, "0000002" + "0" * 49],
                               "adding": ["0000002" + "0" * 49], "removing": []}}
        router = gw.cluster.router.handle
        router.alter_partition_reassignments = _Method(alter)
        router.list_partition_reassignments = _Method(listing)
        with socket.create_connection(addrs["SASL_PLAINTEXT"]) as s:
            plain_login(s, "alice", "pw")
            r = call(s, 45, 1, ASK, corr=2)
            assert r["error_code"] == 31 and "not authorized" in r["error_message"]  # CLUSTER_AUTHORIZATION_FAILED
            assert [p["error_code"] for p in r["responses"][0]["partitions"]] == [31, 31]
            r = call(s, 46, 0, {"timeout_ms": 5000, "topics": None}, corr=3)
            assert (r["error_code"], r["topics"]) == (31, [])
            assert asked == []  # the controller was never asked
            router.bindings.append([acl.CLUSTER, acl.CLUSTER_NAME, acl.LITERAL, "User:alice", "*", acl.DESCRIBE,
                                    acl.ALLOW])
            gw.authorizer.invalidate()
        with socket.create_connection(addrs["SASL_PLAINTEXT"]) as s:
            plain_login(s, "alice", "pw")
            r = call(s, 46, 0, {"timeout_ms": 5000, "topics": None}, corr=4)
            assert r["error_code"] == 0
            assert r["topics"] == [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [1, 2],
                                                                 "adding_replicas": [2], "removing_replicas": []}]}]
            assert call(s, 45, 1, ASK, corr=5)["error_code"] == 31  # DESCRIBE does not grant ALTER
        with socket.create_connection(addrs["SASL_PLAINTEXT"]) as s:
            plain_login(s, "admin", "pw")  # a super user
            r = call(s, 45, 1, ASK, corr=6)
            assert r["error_code"] == 0
            assert [(p["partition_index"], p["error_code"]) for p in r["responses"][0]["partitions"]] == [(0, 0), (1, 85)]
            assert asked == [([("t", 0, [1, 2]), ("t", 1, None)], True)]
