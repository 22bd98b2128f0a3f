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
    # only file ranges came over the channel; the consumer read the segment files itself
    assert consumer.fetch_paths["pread"] >= 1, consumer.fetch_paths
    assert consumer.fetch_paths["channel"] == consumer.fetch_paths["ray"] == 0, consumer.fetch_paths


def test_consumer_gets_the_bytes_over_the_channel_when_it_cannot_read_the_segment_files(
        client, broker_dir, topic_name, monkeypatch):
    client.create_topic(topic_name, 1)
    _channel_open(client, topic_name)
    producer = client.producer(linger_ms=0)
    for i in range(4):
        producer.send_batch(topic_name, [b"a%d-%d" % (i, j) for j in range(10)], partition=0)
        producer.flush()
    consumer = client.consumer(auto_offset_reset="earliest", fetch_max_bytes=100)  # one batch a fetch
    consumer.assign([(topic_name, 0)])
    got = _read(consumer, 20)
    assert consumer.fetch_paths["pread"] >= 2 and consumer.fetch_paths["channel"] == 0, consumer.fetch_paths
    # the segment leaves its path (as when retention deletes it between locate and read):
    # the partition keeps serving from its open file, the consumer asks it for the bytes
    segment = os.path.join(broker_dir, f"{topic_name}-0", f"{0:020d}.log")
    os.rename(segment, segment + ".away")
    try:
        got += _read(consumer, 20)
    finally:
        os.rename(segment + ".away", segment)
    assert [r.value for r in got] == [b"a%d-%d" % (i, j) for i in range(4) for j in range(10)]
    assert consumer.fetch_paths["channel"] >= 2 and consumer.fetch_paths["ray"] == 0, consumer.fetch_paths
    # with the file back, reads go to it again; LOGAN_RAY_LOCAL_READS=0 keeps the bytes on the channel
    producer.send_batch(topic_name, [b"b"] * 10, partition=0)
    producer.flush()
    served = dict(consumer.fetch_paths)
    assert len(_read(consumer, 10)) == 10 and consumer.fetch_paths["pread"] > served["pread"]
    monkeypatch.setenv("LOGAN_RAY_LOCAL_READS", "0")
    consumer.seek((topic_name, 0), consumer.position((topic_name, 0)))  # drops the read-ahead in flight
    producer.send_batch(topic_name, [b"c"] * 10, partition=0)
    producer.flush()
    served = dict(consumer.fetch_paths)
    assert len(_read(consumer, 10)) == 10
    assert consumer.fetch_paths["pread"] == served["pread"] and consumer.fetch_paths["channel"] > served["channel"]
    consumer.close()


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
    assert len(got) == 100 and consumer.fetch_paths["pread"] > 0
    consumer.poll(50)  # a long-poll (a locate) is now waiting on the channel
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
    assert [(r.offset, r.value) for r in got] == \
        [(i, b"before-%d" % i) for i in range(100)] + [(100 + i, b"after-%d" % i) for i in range(100)]
    _reads_files_again(client, consumer, producer, topic_name, 200)
    consumer.close()


def _reads_files_again(client, consumer, producer, topic: str, at: int) -> None:
    """Once the new actor's channel is open, the consumer locates and reads the files again."""
    _channel_open(client, topic)
    consumer.seek((topic, 0), at)  # drops a fetch still in flight by Ray
    producer.send(topic, b"last", partition=0)
    producer.flush()
    served = dict(consumer.fetch_paths)
    assert [(r.offset, r.value) for r in _read(consumer, 1)] == [(at, b"last")]
    assert consumer.fetch_paths["pread"] > served["pread"], (served, consumer.fetch_paths)


def test_consumer_follows_its_partition_through_hibernation_and_reads_its_files_again(client, topic_name):
    from logan_ray.actors.names import NAMESPACE, ROUTER_NAME

    client.create_topic(topic_name, 1)
    _channel_open(client, topic_name)
    producer = client.producer(acks="all")
    producer.send_batch(topic_name, [b"a%d" % i for i in range(50)], partition=0)
    producer.flush()
    consumer = client.consumer(auto_offset_reset="earliest", fetch_max_wait_ms=100)
    consumer.assign([(topic_name, 0)])
    got = _read(consumer, 50)
    assert consumer.fetch_paths["pread"] >= 1
    stale, _ = client.partition_route(topic_name, 0)
    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    previous = ray.get(router.set_partition_idle_ms.remote(300))
    try:  # the consumer stops polling; the partition hibernates, its process exits
        deadline = time.monotonic() + 30
        while any(r["topic"] == topic_name and r.get("active") for r in client.status()):
            assert time.monotonic() < deadline, "the partition did not hibernate"
            time.sleep(0.1)
    finally:
        ray.get(router.set_partition_idle_ms.remote(previous))
    # the consumer's cached route names the stopped actor: its fetch fails with the channel
    # closed or PartitionHibernatedError, it re-resolves through the router and goes on
    producer.send_batch(topic_name, [b"b%d" % i for i in range(50)], partition=0)
    producer.flush()
    got += _read(consumer, 50)
    assert [r.value for r in got] == [b"a%d" % i for i in range(50)] + [b"b%d" % i for i in range(50)]
    assert client.partition_route(topic_name, 0)[0]._actor_id != stale._actor_id
    _reads_files_again(client, consumer, producer, topic_name, 100)
    consumer.close()
