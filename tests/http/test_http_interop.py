"""Records published over HTTP are read by a Kafka client (confluent-kafka) through the gateway, and back."""
from __future__ import annotations

import base64
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition


def test_http_published_records_are_read_by_confluent_kafka_through_the_gateway(http, gateway, topic_name):
    assert http.post("/topic", json={"name": topic_name, "partitions": 2}).status_code == 201
    records = [{"key": f"k{i}", "value": f"v{i}", "headers": {"n": str(i)}} for i in range(50)]
    meta = http.post("/publish", json={"topic": topic_name, "records": records}).json()["records"]
    c = Consumer({"bootstrap.servers": gateway, "group.id": "http-interop", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic_name, p, OFFSET_BEGINNING) for p in range(2)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 50 and time.monotonic() < deadline:
            for m in c.consume(100, 0.5):
                assert m.error() is None, m.error()
                got.append(m)
    finally:
        c.close()
    seen = {m.key().decode(): (m.partition(), m.offset(), m.value().decode(), m.headers()) for m in got}
    assert len(seen) == 50
    for i, m in enumerate(meta):
        assert seen[f"k{i}"] == (m["partition"], m["offset"], f"v{i}", [("n", str(i).encode())])


def test_confluent_kafka_records_are_read_over_http_subscribe_and_stream(http, gateway, topic_name):
    assert http.post("/topic", json={"name": topic_name}).status_code == 201
    p = Producer({"bootstrap.servers": gateway, "linger.ms": 5})
    for i in range(100):
        p.produce(topic_name, value=bytes([i, 255 - i]), key=f"k{i}".encode(), headers=[("src", b"kafka")])
    assert p.flush(30) == 0
    got = http.post("/subscribe", json={"topic": topic_name, "encoding": "base64", "timeout_ms": 5000}).json()
    assert [base64.b64decode(r["value"]) for r in got["records"]] == [bytes([i, 255 - i]) for i in range(100)]
    assert [base64.b64decode(r["key"]) for r in got["records"]] == [f"k{i}".encode() for i in range(100)]
    assert got["records"][0]["headers"] == [["src", base64.b64encode(b"kafka").decode()]]
    lines = http.get(f"/stream/{topic_name}/0", params={"encoding": "base64", "max_records": 100}).text.splitlines()
    assert len(lines) == 100
