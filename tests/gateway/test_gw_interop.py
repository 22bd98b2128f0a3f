"""Records cross between logan-ray's Python API, Kafka clients and Ray Data's Kafka connectors."""
from __future__ import annotations

import json
import time

import ray
from confluent_kafka import OFFSET_BEGINNING, Producer
from kafka import KafkaConsumer, TopicPartition

from logan_ray.partitioner import partition_for_key
from test_gw_confluent import consume as confluent_consume


def python_consume(client, topic: str, expected: int, timeout: float = 30):
    consumer = client.consumer(topic, auto_offset_reset="earliest")
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        out.extend(consumer.poll(300))
    consumer.close()
    return out


def test_python_api_records_read_by_kafka_clients(client, gateway, topic_name):
    client.create_topic(topic_name, 3)
    with client.producer(compression="zstd", linger_ms=2) as producer:
        for i in range(300):
            producer.send(topic_name, b"py-%d" % i, key=b"k%d" % (i % 11) if i % 3 else None,
                          headers=[("origin", b"python")])
    got = confluent_consume(gateway, topic_name, {p: OFFSET_BEGINNING for p in range(3)}, 300)
    assert sorted(g.value for g in got) == sorted(b"py-%d" % i for i in range(300))
    assert all(g.partition == partition_for_key(g.key, 3) for g in got if g.key is not None)

    kc = KafkaConsumer(bootstrap_servers=gateway, group_id=None, auto_offset_reset="earliest",
                       consumer_timeout_ms=3000)
    kc.assign([TopicPartition(topic_name, p) for p in range(3)])
    seen = [(m.value, m.headers) for m in kc]
    kc.close()
    assert len(seen) == 300 and all(h == [("origin", b"python")] for _, h in seen)


def test_kafka_client_records_read_by_python_api(client, gateway, topic_name):
    client.create_topic(topic_name, 2)
    p = Producer({"bootstrap.servers": gateway, "partitioner": "murmur2_random", "compression.type": "lz4",
                  "linger.ms": 2})
    for i in range(500):
        p.produce(topic_name, b"kafka-%d" % i, b"key-%d" % (i % 9), headers=[("n", b"%d" % i)])
    assert p.flush(30) == 0
    records = python_consume(client, topic_name, 500)
    assert sorted(r.value for r in records) == sorted(b"kafka-%d" % i for i in range(500))
    for r in records:
        assert r.partition == partition_for_key(r.key, 2)
        assert dict(r.headers)["n"] == r.value.split(b"-")[1]


def test_ray_data_write_kafka_and_read_kafka(client, gateway, topic_name):
    client.create_topic(topic_name, 2)
    rows = [{"id": i, "name": f"row-{i}"} for i in range(200)]
    # librdkafka's default partitioner is CRC32-based; murmur2_random matches Java clients and logan-ray
    ray.data.from_items(rows).write_kafka(topic_name, gateway, key_field="name", key_serializer="string",
                                          value_serializer="json", producer_config={"partitioner": "murmur2_random"})
    assert sum(end for _, end in client.partition_offsets(topic_name).values()) == 200

    ds = ray.data.read_kafka(topic_name, bootstrap_servers=gateway)
    out = ds.take_all()
    assert len(out) == 200
    assert sorted(json.loads(r["value"])["id"] for r in out) == list(range(200))
    for r in out:
        assert r["key"] == json.loads(r["value"])["name"].encode()
        assert r["partition"] == partition_for_key(r["key"], 2)
    # the Python API sees the same records
    assert len(python_consume(client, topic_name, 200)) == 200
