"""Produce and consume through the Python API on a real Ray runtime."""
from __future__ import annotations

import time

import pytest

from logan_ray.consumer import TopicPartition
from logan_ray.errors import (
    InvalidConfigError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from logan_ray.partitioner import partition_for_key


def consume_all(client, topic: str, expected: int, timeout: float = 30.0, **kw):
    consumer = client.consumer(topic, auto_offset_reset="earliest", **kw)
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        out.extend(consumer.poll(500))
    extra = consumer.poll(300)
    consumer.close()
    return out + extra


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_every_compression(client, topic_name, compression):
    client.create_topic(topic_name, partitions=3)
    producer = client.producer(compression=compression, linger_ms=2, acks="all")
    futures = [producer.send(topic_name, f"value-{i}".encode(), f"key-{i % 17}".encode(),
                             headers=[("h", str(i).encode())] if i % 5 == 0 else None)
               for i in range(3000)]
    producer.flush()
    metas = [f.result() for f in futures]
    records = consume_all(client, topic_name, 3000)
    assert len(records) == 3000
    by_value = {r.value: r for r in records}
    for i, meta in enumerate(metas):
        r = by_value[f"value-{i}".encode()]
        key = f"key-{i % 17}".encode()
        assert r.key == key
        assert r.partition == meta.partition == partition_for_key(key, 3)
        assert r.offset == meta.offset
        assert r.timestamp == meta.timestamp
        assert r.headers == ((("h", str(i).encode()),) if i % 5 == 0 else ())
    # offsets per partition are dense and start at 0
    for p in range(3):
        offs = sorted(r.offset for r in records if r.partition == p)
        assert offs == list(range(len(offs)))
    ends = client.partition_offsets(topic_name)
    assert sum(end for _, end in ends.values()) == 3000


def test_send_batch_and_unkeyed_sticky(client, topic_name):
    client.create_topic(topic_name, partitions=2)
    producer = client.producer(batch_size=64 * 1024)
    futures = producer.send_batch(topic_name, [b"x" * 100] * 20000)
    producer.flush()
    offsets = {(f.result().partition, f.result().offset) for f in futures}
    assert len(offsets) == 20000
    assert sum(e for _, e in client.partition_offsets(topic_name).values()) == 20000


def test_seek_offsets_for_times_and_serializers(client, topic_name):
    client.create_topic(topic_name, partitions=1)
    producer = client.producer(value_serializer="json", key_serializer="str")
    base = int(time.time() * 1000) - 100_000
    for i in range(100):
        producer.send(topic_name, {"i": i}, f"k{i}", timestamp_ms=base + i * 10)
    producer.flush()
    consumer = client.consumer(value_deserializer="json", key_deserializer="str")
    tp = TopicPartition(topic_name, 0)
    consumer.assign([tp])
    found = consumer.offsets_for_times({tp: base + 505})
    assert found[tp] == (51, base + 510)
    assert consumer.offsets_for_times({tp: base + 10**9})[tp] is None
    consumer.seek(tp, found[tp][0])
    got = []
    while len(got) < 49:
        got.extend(consumer.poll(2000))
    assert [r.value for r in got] == [{"i": i} for i in range(51, 100)]
    assert got[0].key == "k51"
    consumer.seek_to_end()
    assert consumer.position(tp) == 100
    consumer.seek_to_beginning()
    assert consumer.position(tp) == 0
    assert consumer.poll(3000)[0].offset == 0


def test_long_poll_wakes_on_append(client, topic_name):
    client.create_topic(topic_name)
    actor = client.partition_actor(topic_name, 0)
    import ray

    ref = actor.fetch.remote(0, 1 << 20, 10_000, 1)
    time.sleep(0.5)
    started = time.monotonic()
    producer = client.producer(linger_ms=0)
    producer.send(topic_name, b"wake").result()
    data, hw, start = ray.get(ref)
    assert time.monotonic() - started < 2.0  # not the 10 s max wait
    assert hw == 1 and data


def test_admin_calls(client, topic_name):
    info = client.create_topic(topic_name, partitions=2, config={"retention.ms": "60000"})
    assert [p["partition"] for p in info["partitions"]] == [0, 1]
    assert topic_name in client.list_topics()
    assert client.topic_config(topic_name)["retention.ms"] == "60000"
    client.alter_topic(topic_name, {"segment.bytes": "1048576"})
    cfg = client.topic_config(topic_name)
    assert cfg["segment.bytes"] == "1048576" and cfg["retention.ms"] == "60000"
    client.add_partitions(topic_name, 4)
    assert len(client.describe_topic(topic_name)["partitions"]) == 4
    with pytest.raises(TopicExistsError):
        client.create_topic(topic_name)
    client.delete_topic(topic_name)
    assert topic_name not in client.list_topics()
    with pytest.raises(UnknownTopicError):
        client.describe_topic(topic_name)


def test_delete_records_moves_log_start(client, topic_name):
    client.create_topic(topic_name)
    p = client.producer()
    p.send_batch(topic_name, [b"v"] * 10, partition=0)
    p.flush()
    assert client.delete_records(topic_name, {0: 4}) == {0: 4}
    assert client.partition_offsets(topic_name)[0] == (4, 10)
    records = consume_all(client, topic_name, 6)
    assert [r.offset for r in records] == list(range(4, 10))


@pytest.mark.parametrize("name", ["", ".", "..", "bad name", "x" * 250, "a/b", "ü"])
def test_invalid_topic_names_rejected(client, broker_dir, name):
    import os

    before = sorted(os.listdir(broker_dir))
    with pytest.raises(InvalidTopicError):
        client.create_topic(name)
    assert sorted(os.listdir(broker_dir)) == before


def test_bad_input_typed_errors_and_nothing_written(client, topic_name):
    with pytest.raises(InvalidConfigError, match="no.such.config"):
        client.create_topic(topic_name, config={"no.such.config": "1"})
    with pytest.raises(InvalidConfigError, match="retention.ms"):
        client.create_topic(topic_name, config={"retention.ms": "soon"})
    assert topic_name not in client.list_topics()
    client.create_topic(topic_name, config={"max.message.bytes": "2000"})
    producer = client.producer(linger_ms=0)
    fut = producer.send(topic_name, b"x" * 5000)
    with pytest.raises(RecordTooLargeError):
        fut.result()
    assert client.partition_offsets(topic_name)[0] == (0, 0)
    with pytest.raises(UnknownPartitionError):
        producer.send(topic_name, b"x", partition=7)
    consumer = client.consumer()
    consumer.assign([(topic_name, 0)])
    with pytest.raises(OffsetOutOfRangeError):
        consumer.seek((topic_name, 0), -5)
    actor = client.partition_actor(topic_name, 0)
    import ray

    with pytest.raises(OffsetOutOfRangeError):
        ray.get(actor.fetch.remote(100, 1024))
    with pytest.raises(UnknownTopicError):
        client.consumer("does-not-exist-" + topic_name)
