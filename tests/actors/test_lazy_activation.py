"""Lazy activation (issue 14): creating a topic starts no process; a partition's actor starts on
first need (a Kafka produce or fetch, a Python handle), once, however many ask at the same time."""
from __future__ import annotations

import time
import uuid

import ray
from ray.util.state import list_actors

from logan_ray.actors.names import NAMESPACE, ROUTER_NAME


def _live_partition_actors(topic: str) -> set[str]:
    """Names of this topic's live PartitionActor processes, from Ray's state API."""
    return {a.name for a in list_actors(filters=[("state", "=", "ALIVE"), ("class_name", "=", "PartitionActor")],
                                        limit=10_000)
            if a.name.startswith(f"{topic}-") and a.name[len(topic) + 1:].isdigit()}


def test_create_topic_starts_no_actor_and_a_python_handle_activates_one_partition_once(client, topic_name):
    client.create_topic(topic_name, partitions=200, activate=False)
    assert _live_partition_actors(topic_name) == set()
    assert all(p["online"] for p in client.describe_topic(topic_name)["partitions"])
    rows = [r for r in client.status() if r["topic"] == topic_name]
    assert len(rows) == 200 and not any(r["active"] for r in rows)
    parts = client.partitions(topic_name, refresh=True)  # listing a topic's partitions starts none of them
    assert len(parts) == 200 and all(h is None for h, _node in parts)
    # offsets and status of inactive partitions are read from their folders, starting nothing
    assert client.partition_offsets(topic_name) == {p: (0, 0) for p in range(200)}
    rows = [r for r in client.status() if r["topic"] == topic_name]
    assert all(r["log_start_offset"] == 0 and r["log_end_offset"] == 0 for r in rows)
    assert _live_partition_actors(topic_name) == set()

    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    handles = ray.get([router.activate.remote(topic_name, 7) for _ in range(10)])  # concurrent first requests
    assert len({h._actor_id.hex() for h in handles}) == 1
    assert ray.get(handles[0].offsets.remote()) == (0, 0)
    assert _live_partition_actors(topic_name) == {f"{topic_name}-7"}
    assert [r["partition"] for r in client.status() if r["topic"] == topic_name and r["active"]] == [7]


def test_kafka_produce_activates_only_its_partition_and_the_record_reads_back(client, gateway, topic_name):
    from confluent_kafka import Consumer, Producer, TopicPartition

    client.create_topic(topic_name, partitions=50, activate=False)
    p = Producer({"bootstrap.servers": gateway, "linger.ms": 0})
    p.produce(topic_name, b"hello", partition=31)
    assert p.flush(60) == 0
    c = Consumer({"bootstrap.servers": gateway, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic_name, 31, 0)])
    deadline, got = time.monotonic() + 30, None
    while got is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got = m
    c.close()
    assert got is not None and got.value() == b"hello" and got.offset() == 0
    assert _live_partition_actors(topic_name) == {f"{topic_name}-31"}
