"""The local fast path: Python clients on a partition's node use its channel, others Ray calls."""
from __future__ import annotations

import os
import signal
import time

import pytest
import ray

from logan_ray.errors import InvalidRecordError, RecordTooLargeError


def _channel_open(client, topic: str, partition: int = 0) -> None:
    handle, _node = client.partition_route(topic, partition)
    assert client.local_path.wait_open(handle), "the partition's channel did not open"


def _read(consumer, count: int, timeout: float = 30.0) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        out += consumer.poll(300)
    return out


def test_colocated_producer_and_consumer_use_the_channel(client, topic_name):
    client.create_topic(topic_name, 1)
    _channel_open(client, topic_name)
    producer = client.producer(acks="all", linger_ms=1)
    for i in range(2000):
        producer.send(topic_name, b"v%d" % i, b"k%d" % i, partition=0)
    producer.flush()
    assert producer.append_paths["channel"] > 0 and producer.append_paths["ray"] == 0, producer.append_paths
    consumer = client.consumer(auto_offset_reset="earliest", fetch_max_bytes=16 << 10)
    consumer.assign([(topic_name, 0)])
    got = _read(consumer, 2000)
    consumer.close()
    assert [(r.offset, r.value) for r in got] == [(i, b"v%d" % i) for i in range(2000)]
    assert consumer.fetch_paths["channel"] > 1 and consumer.fetch_paths["ray"] == 0, consumer.fetch_paths


def test_a_partition_on_another_node_or_the_path_turned_off_uses_ray_calls(client, topic_name, monkeypatch):
    client.create_topic(topic_name, 1)
    _channel_open(client, topic_name)
    monkeypatch.setenv("LOGAN_RAY_LOCAL_PATH", "0")
    producer = client.producer()
    producer.send(topic_name, b"by ray", partition=0)
    producer.flush()
    assert producer.append_paths == {"channel": 0, "ray": 1}
    monkeypatch.delenv("LOGAN_RAY_LOCAL_PATH")
    monkeypatch.setattr(client.local_path, "node_id", "some-other-node")  # as seen from another node
    consumer = client.consumer(auto_offset_reset="earliest")
    consumer.assign([(topic_name, 0)])
    assert [r.value for r in _read(consumer, 1)] == [b"by ray"]
    consumer.close()
    assert consumer.fetch_paths["channel"] == 0 and consumer.fetch_paths["ray"] >= 1


def test_errors_over_the_channel_are_the_typed_errors_of_ray_calls(client, topic_name):
    client.create_topic(topic_name, 1, {"cleanup.policy": "compact", "max.message.bytes": "2000"})
    _channel_open(client, topic_name)
    producer = client.producer()
    keyless = producer.send(topic_name, b"no key", partition=0)
    with pytest.raises(InvalidRecordError, match="without a key") as e:
        keyless.result(10)
    assert e.value.code == 87 and [i for i, _ in e.value.record_errors] == [0]
    handle, _ = client.partition_route(topic_name, 0)
    from logan_ray.storage.record_builder import build_batch

    too_big = client.local_path.call(handle, client.local_path.node_id, "append",
                                     payload=build_batch([b"x" * 5000], [b"k"]))
    with pytest.raises(RecordTooLargeError):
        too_big.result(10)
    assert producer.append_paths["ray"] == 0


def test_consumer_and_producer_survive_a_partition_actor_restart_mid_poll(client, topic_name):
    client.create_topic(topic_name, 1)
    _channel_open(client, topic_name)
    producer = client.producer(acks="all")
    for i in range(100):
        producer.send(topic_name, b"before-%d" % i, partition=0)
    producer.flush()
    consumer = client.consumer(auto_offset_reset="earliest", fetch_max_wait_ms=2000)
    consumer.assign([(topic_name, 0)])
    got = _read(consumer, 100)
    assert len(got) == 100 and consumer.fetch_paths["channel"] > 0
    consumer.poll(50)  # a long-poll is now waiting on the channel
    handle, _ = client.partition_route(topic_name, 0)
    pid = ray.get(handle.pid.remote())
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while True:  # Ray restarts the actor
        try:
            if ray.get(handle.pid.remote(), timeout=10) != pid:
                break
        except Exception:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    for i in range(100):
        producer.send(topic_name, b"after-%d" % i, partition=0)
    producer.flush()
    got += _read(consumer, 100)
    consumer.close()
    assert [(r.offset, r.value) for r in got] == \
        [(i, b"before-%d" % i) for i in range(100)] + [(100 + i, b"after-%d" % i) for i in range(100)]
