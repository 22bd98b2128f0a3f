"""Consumer groups over the wire: FindCoordinator, the group APIs, and real Kafka clients in groups.

Every client test runs the issue's scenario on a 6-partition topic while a
producer keeps writing: three consumers share the partitions disjointly, one
leaves, another joins, and in the end every produced record has been consumed
(at-least-once; duplicates are allowed only around rebalances). Timeouts are
shortened (session 6 s, heartbeats 200-500 ms, initial rebalance delay 200 ms)
so the file stays fast; the defaults stay Kafka's in production.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import ray

from logan_ray.actors.group_coordinator import COORDINATOR_NAME, ensure_group_coordinator, stop_group_coordinator
from logan_ray.groups.consumer_protocol import decode_assignment, encode_assignment, encode_subscription
from logan_ray.protocol import errors as codes
from wire_client import Wire

FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC = 10, 11, 12, 13, 14
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE, LIST, DELETE, OFFSET_DELETE = 8, 9, 15, 16, 42, 47
PARTITIONS = 6
NODE_DIR = os.path.join(os.path.dirname(__file__), "..", "clients", "node")


@pytest.fixture(scope="module")
def coordinator(client, gateway):
    return ensure_group_coordinator(initial_rebalance_delay_ms=200, min_session_timeout_ms=100)


def wait_for(cond, timeout: float = 60, what: str = "condition", interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


# ------------------------------------------------------------------ the wire
def _join_body(group: str, member_id: str = "", topics=("t",)) -> dict:
    return {"group_id": group, "session_timeout_ms": 6000, "rebalance_timeout_ms": 10000, "member_id": member_id,
            "group_instance_id": None, "protocol_type": "consumer", "reason": None,
            "protocols": [{"name": "range", "metadata": encode_subscription(list(topics))}]}


def test_find_coordinator_and_group_apis_on_the_wire(client, gateway, coordinator, topic_name):
    client.create_topic(topic_name, 2)
    group = f"wire-{topic_name}"
    host, port = gateway.rsplit(":", 1)
    with Wire(gateway) as w:
        fc = w.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]
        assert (fc["error_code"], fc["host"], fc["port"]) == (0, host, int(port)) and fc["node_id"] >= 0
        old = w.call(FIND_COORDINATOR, 0, {"key": group})
        assert (old["error_code"], old["host"], old["port"]) == (0, host, int(port))
        # two-step join (v4+), then the full member list for the leader
        first = w.call(JOIN, 5, _join_body(group, topics=[topic_name]))
        assert first["error_code"] == codes.MEMBER_ID_REQUIRED and first["member_id"]
        joined = w.call(JOIN, 5, _join_body(group, first["member_id"], topics=[topic_name]))
        mid, gen = joined["member_id"], joined["generation_id"]
        assert joined["error_code"] == 0 and joined["leader"] == mid and joined["protocol_name"] == "range"
        assert [m["member_id"] for m in joined["members"]] == [mid]
        assignment = encode_assignment({topic_name: [0, 1]})
        synced = w.call(SYNC, 3, {"group_id": group, "generation_id": gen, "member_id": mid,
                                  "group_instance_id": None, "assignments": [{"member_id": mid,
                                                                              "assignment": assignment}]})
        assert synced["error_code"] == 0 and decode_assignment(synced["assignment"]).partitions == [(topic_name, [0, 1])]
        hb = {"group_id": group, "generation_id": gen, "member_id": mid, "group_instance_id": None}
        assert w.call(HEARTBEAT, 3, hb)["error_code"] == 0
        assert w.call(HEARTBEAT, 3, {**hb, "generation_id": gen - 1})["error_code"] == codes.ILLEGAL_GENERATION
        assert w.call(HEARTBEAT, 0, {**hb, "member_id": "stranger"})["error_code"] == codes.UNKNOWN_MEMBER_ID
        # JoinGroup v0-3 has no two-step join; v0 has no rebalance timeout
        assert w.call(JOIN, 3, _join_body(group + "-old"))["error_code"] == 0
        # offsets: commit (v8, flexible) with metadata, read back with v1, v5 and v8 (groups form)
        commit = {"group_id": group, "generation_id_or_member_epoch": gen, "member_id": mid,
                  "group_instance_id": None, "topics": [{"name": topic_name, "partitions": [
                      {"partition_index": 0, "committed_offset": 17, "committed_leader_epoch": -1,
                       "committed_metadata": "meta:é"},
                      {"partition_index": 1, "committed_offset": 3, "committed_leader_epoch": -1,
                       "committed_metadata": None}]}]}
        res = w.call(OFFSET_COMMIT, 8, commit)
        assert [p["error_code"] for p in res["topics"][0]["partitions"]] == [0, 0]
        stale = w.call(OFFSET_COMMIT, 2, {**commit, "generation_id_or_member_epoch": gen + 1, "retention_time_ms": -1})
        assert {p["error_code"] for p in stale["topics"][0]["partitions"]} == {codes.ILLEGAL_GENERATION}
        for version in (1, 5):
            got = w.call(OFFSET_FETCH, version, {"group_id": group, "topics": [
                {"name": topic_name, "partition_indexes": [0, 1]}]})
            parts = {p["partition_index"]: (p["committed_offset"], p["metadata"]) for p in got["topics"][0]["partitions"]}
            assert parts == {0: (17, "meta:é"), 1: (3, "")}
        got = w.call(OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": True})
        assert got["groups"][0]["topics"][0]["partitions"][0]["committed_offset"] == 17
        # admin APIs
        listed = w.call(LIST, 4, {"states_filter": ["Stable"]})["groups"]
        assert {"group_id": group, "protocol_type": "consumer", "group_state": "Stable"} in \
            [{k: g[k] for k in ("group_id", "protocol_type", "group_state")} for g in listed]
        described = w.call(DESCRIBE, 5, {"groups": [group], "include_authorized_operations": False})["groups"][0]
        assert described["group_state"] == "Stable" and described["members"][0]["client_id"] == "wire-test"
        assert described["members"][0]["client_host"] == "/127.0.0.1"
        assert w.call(DELETE, 2, {"groups_names": [group]})["results"][0]["error_code"] == codes.NON_EMPTY_GROUP
        od = w.call(OFFSET_DELETE, 0, {"group_id": group, "topics": [{"name": topic_name, "partitions": [
            {"partition_index": 0}]}]})
        assert od["error_code"] == 0 and od["topics"][0]["partitions"][0]["error_code"] == codes.GROUP_SUBSCRIBED_TO_TOPIC
        left = w.call(LEAVE, 4, {"group_id": group, "members": [{"member_id": mid, "group_instance_id": None,
                                                                  "reason": None}]})
        assert left["error_code"] == 0 and left["members"][0]["error_code"] == 0
        assert w.call(DELETE, 2, {"groups_names": [group, group + "-nope"]})["results"] == [
            {"group_id": group, "error_code": 0}, {"group_id": group + "-nope", "error_code": codes.GROUP_ID_NOT_FOUND}]
        gone = w.call(OFFSET_FETCH, 5, {"group_id": group, "topics": [{"name": topic_name, "partition_indexes": [0]}]})
        assert gone["topics"][0]["partitions"][0]["committed_offset"] == -1


# ---------------------------------------------------------- the scenario
class Feed:
    """A producer that keeps writing numbered records round-robin over the partitions."""

    def __init__(self, client, topic: str) -> None:
        self.producer = client.producer(linger_ms=2)
        self.topic = topic
        self.sent = 0
        self._halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._halt.is_set():
            for _ in range(12):
                self.producer.send(self.topic, b"r%06d" % self.sent, partition=self.sent % PARTITIONS)
                self.sent += 1
            self.producer.flush()
            time.sleep(0.02)

    def stop(self) -> set[bytes]:
        self._halt.set()
        self.thread.join(30)
        self.producer.close()
        return {b"r%06d" % i for i in range(self.sent)}


def group_settled(client, group: str, members: int, topic: str) -> bool:
    try:
        d = client.groups.describe(group)
    except Exception:
        return False
    owned = [tp for m in d["members"] for tp in m["assignment"]]
    return d["group_state"] == "Stable" and len(d["members"]) == members and len(owned) == len(set(owned)) and \
        sorted(owned) == [(topic, p) for p in range(PARTITIONS)]


def run_scenario(client, topic: str, group: str, start, label: str) -> None:
    """start(name) -> handle with .values (list of bytes) and .stop(); the issue's join/leave scenario."""
    client.create_topic(topic, PARTITIONS)
    feed = Feed(client, topic)
    everyone = []

    def add(name: str):
        m = start(name)
        everyone.append(m)
        return m

    members = {n: add(n) for n in ("c1", "c2", "c3")}
    wait_for(lambda: group_settled(client, group, 3, topic), what=f"{label}: three members, disjoint shares")
    time.sleep(0.5)
    members.pop("c3").stop()
    wait_for(lambda: group_settled(client, group, 2, topic), what=f"{label}: two members after a leave")
    members["c4"] = add("c4")
    wait_for(lambda: group_settled(client, group, 3, topic), what=f"{label}: a new member joins")
    produced = feed.stop()
    wait_for(lambda: produced <= {v for m in everyone for v in m.values}, timeout=60,
             what=f"{label}: every record consumed")
    for m in members.values():
        m.stop()
    assert len(produced) > 100
    assert all(m.values for m in everyone[:3]), "each of the first three members consumed records"


# ------------------------------------------------------------ confluent-kafka
class ConfluentMember:
    def __init__(self, gateway: str, topic: str, group: str, **conf) -> None:
        from confluent_kafka import Consumer

        self.values: list[bytes] = []
        self.consumer = Consumer({"bootstrap.servers": gateway, "group.id": group, "auto.offset.reset": "earliest",
                                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                                  "fetch.wait.max.ms": 100, **conf})
        self.consumer.subscribe([topic])
        self._halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._halt.is_set():
            for m in self.consumer.consume(500, 0.1):
                if m.error() is None:
                    self.values.append(m.value())
        self.consumer.close()  # commits stored offsets and leaves the group

    def stop(self) -> None:
        self._halt.set()
        self.thread.join(30)


def test_confluent_kafka_group(client, gateway, coordinator, topic_name):
    group = f"ck-{topic_name}"
    run_scenario(client, topic_name, group, lambda n: ConfluentMember(gateway, topic_name, group), "confluent")
