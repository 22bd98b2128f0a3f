"""confluent-kafka (librdkafka) against a real gateway over TCP."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from kafka_checks import (
    CODEC_IDS,
    codecs_stored,
    PARTITIONS,
    Got,
    check_all_back,
    check_timestamps,
    expected_offsets_for_time,
    records_for,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def consume(bootstrap: str, topic: str, starts: dict[int, int], expected: int, timeout: float = 30) -> list[Got]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "logan-ray-tests", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    try:
        c.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
        out: list[Got] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                assert m.error() is None, m.error()
                out.append(Got(m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1]))
        return out
    finally:
        c.close()


def test_confluent_full_cycle(client, gateway, topic_name):
    admin = AdminClient({"bootstrap.servers": gateway})
    admin.create_topics([NewTopic(topic_name, PARTITIONS, 1, config={"retention.ms": "3600000"})])[topic_name] \
        .result(30)
    assert topic_name in admin.list_topics(timeout=10).topics

    produced = []
    base = int(time.time() * 1000) - 100_000
    for i, codec in enumerate(CODECS):
        recs = records_for(codec, base + i * 1000)
        p = Producer({"bootstrap.servers": gateway, "compression.type": codec, "partitioner": "murmur2_random",
                      "linger.ms": 5})
        for r in recs:
            p.produce(topic_name, r.value, r.key, timestamp=r.timestamp)
        assert p.flush(30) == 0
        produced += recs

    got = consume(gateway, topic_name, {p: OFFSET_BEGINNING for p in range(PARTITIONS)}, len(produced))
    check_all_back(produced, got)
    check_timestamps(produced, got)
    assert codecs_stored(client, topic_name) == {CODEC_IDS[c] for c in CODECS}

    probe = Consumer({"bootstrap.servers": gateway, "group.id": "logan-ray-tests"})
    try:
        ends = [probe.get_watermark_offsets(TopicPartition(topic_name, p), timeout=10) for p in range(PARTITIONS)]
        assert [lo for lo, _ in ends] == [0] * PARTITIONS
        assert sum(hi for _, hi in ends) == len(produced)
        target = base + 3 * 1000 + 4  # inside the lz4 records
        found = probe.offsets_for_times([TopicPartition(topic_name, p, target) for p in range(PARTITIONS)], 10)
        want = expected_offsets_for_time(got, target)
        assert {tp.partition: tp.offset for tp in found} == want
    finally:
        probe.close()
    later = consume(gateway, topic_name, {p: o for p, o in want.items() if o >= 0},
                    sum(1 for g in got if g.timestamp >= target))
    assert sorted(g.value for g in later) == sorted(g.value for g in got if g.timestamp >= target)

    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    configs = admin.describe_configs([res])[res].result(30)
    assert configs["retention.ms"].value == "3600000" and not configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].is_default

    admin.delete_topics([topic_name])[topic_name].result(30)
    assert topic_name not in admin.list_topics(timeout=10).topics


def test_confluent_idempotent_producer_has_no_duplicates(gateway, topic_name):
    admin = AdminClient({"bootstrap.servers": gateway})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(30)
    p = Producer({"bootstrap.servers": gateway, "enable.idempotence": True, "retries": 1000,
                  "max.in.flight.requests.per.connection": 5, "linger.ms": 1, "batch.num.messages": 50,
                  "partitioner": "murmur2_random"})
    n = 3000
    errors = []
    for i in range(n):
        p.produce(topic_name, b"v%d" % i, b"k%d" % (i % 13), on_delivery=lambda e, m: e and errors.append(e))
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert errors == []
    got = consume(gateway, topic_name, {0: OFFSET_BEGINNING, 1: OFFSET_BEGINNING}, n)
    values = [g.value for g in got]
    assert len(values) == n and len(set(values)) == n
    # per key, the order of sending is kept
    by_key: dict[bytes, list[int]] = {}
    for g in sorted(got, key=lambda g: (g.partition, g.offset)):
        by_key.setdefault(g.key, []).append(int(g.value[1:]))
    assert all(v == sorted(v) for v in by_key.values())
