"""AlterPartitionReassignments (45) and ListPartitionReassignments (46) on the session's single-node broker:
ApiVersions, Kafka's error codes, with the repo's wire client and with kafka-python's admin client.

The moves themselves need several nodes: tests/gateway/test_gw_multinode.py.
"""
from __future__ import annotations

import ray
from wire_client import Wire

from logan_ray.actors.names import broker_id

ALTER, LIST = 45, 46


def alter(w: Wire, topic: str, partition: int, replicas, version: int = 0) -> tuple[dict, dict]:
    r = w.call(ALTER, version, {"timeout_ms": 10000, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "replicas": replicas}]}]})
    return r, r["responses"][0]["partitions"][0]


def test_api_versions_advertises_both(gateway):
    with Wire(gateway) as w:
        apis = {a["api_key"]: (a["min_version"], a["max_version"]) for a in w.call(18, 3, {
            "client_software_name": "t", "client_software_version": "1"})["api_keys"]}
    assert apis[ALTER] == (0, 1) and apis[LIST] == (0, 0)


def test_errors_are_kafkas(client, gateway, topic_name):
    client.create_topic(topic_name, partitions=1, activate=False)
    me = broker_id(ray.get_runtime_context().get_node_id())
    with Wire(gateway) as w:
        _r, p = alter(w, "no-such-topic-x", 0, [me])
        assert p["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
        _r, p = alter(w, topic_name, 7, [me])
        assert p["error_code"] == 3
        for replicas, why in (([], "empty"), ([me, me], "duplicate"), ([me, 4242], "does not exist")):
            r, p = alter(w, topic_name, 0, replicas, version=1)
            assert (r["error_code"], p["error_code"]) == (0, 39) and why in p["error_message"], p  # INVALID_REPLICA_ASSIGNMENT
        _r, p = alter(w, topic_name, 0, [me])  # replication factor 1, to the node it is on: nothing to move
        assert p["error_code"] == 0
        _r, p = alter(w, topic_name, 0, None)
        assert p["error_code"] == 85  # NO_REASSIGNMENT_IN_PROGRESS
        listed = w.call(LIST, 0, {"timeout_ms": 10000, "topics": None})
        assert (listed["error_code"], listed["topics"]) == (0, [])
        listed = w.call(LIST, 0, {"timeout_ms": 10000, "topics": [{"name": topic_name, "partition_indexes": [0]}]})
        assert (listed["error_code"], listed["topics"]) == (0, [])


def test_kafka_python_admin_client(client, gateway, topic_name):
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.errors import NoReassignmentInProgressError, UnknownTopicOrPartitionError

    client.create_topic(topic_name, partitions=1, activate=False)
    admin = KafkaAdminClient(bootstrap_servers=gateway, request_timeout_ms=15000)
    try:
        assert admin.list_partition_reassignments() == {}
        got = admin.alter_partition_reassignments({TopicPartition(topic_name, 0): None,
                                                   TopicPartition("no-such-topic-y", 0): None})
        assert got == {TopicPartition(topic_name, 0): NoReassignmentInProgressError,
                       TopicPartition("no-such-topic-y", 0): UnknownTopicOrPartitionError}
    finally:
        admin.close()
