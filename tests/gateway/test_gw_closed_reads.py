"""Reads do not wake partitions (issue 14): the gateway serves Fetch and ListOffsets of an inactive
partition from its closed files and long-polls there; the first append starts the actor and a
waiting consumer gets the record from it, once, without loss."""
from __future__ import annotations

import threading
import time
import uuid

import pytest
import ray
from confluent_kafka import Consumer, Producer, TopicPartition
from ray.util.state import list_actors

from logan_ray.actors.names import NAMESPACE



@pytest.fixture(autouse=True)
def short_idle(short_partition_idle):
    """Every test here runs with ``partition.idle.ms`` of 300 ms (tests/conftest.py)."""
    return short_partition_idle


def live_actors(topic: str) -> set[int]:
    """Partitions of ``topic`` with a live PartitionActor process (Ray's state API)."""
    return {int(a.name[len(topic) + 1:]) for a in list_actors(
        filters=[("state", "=", "ALIVE"), ("class_name", "=", "PartitionActor")], limit=10_000)
        if a.name.startswith(f"{topic}-") and a.name[len(topic) + 1:].isdigit()}


def active(client, topic: str) -> set[int]:
    return {r["partition"] for r in client.status() if r["topic"] == topic and r.get("active")}


def wait_inactive(client, topic: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not active(client, topic) and not live_actors(topic):
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic}: still active {active(client, topic)}, actors {live_actors(topic)}")


def test_a_consumer_reads_a_hibernated_partition_from_its_files_without_waking_it(client, gateway, topic_name):
    client.create_topic(topic_name, partitions=1, activate=False)
    producer = Producer({"bootstrap.servers": gateway, "linger.ms": 0})
    base = int(time.time() * 1000) - 60_000
    for i in range(30):
        producer.produce(topic_name, f"v{i}".encode(), partition=0, timestamp=base + i * 1000)
    assert producer.flush(30) == 0
    wait_inactive(client, topic_name)

    consumer = Consumer({"bootstrap.servers": gateway, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 200})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (0, 30)
        found = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + 10_500)], timeout=10)
        assert found[0].offset == 11
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 30 and time.monotonic() < deadline:
            for m in consumer.consume(100, 0.5):
                assert m.error() is None, m.error()
                got.append((m.offset(), m.value()))
        assert got == [(i, f"v{i}".encode()) for i in range(30)]
        time.sleep(1.0)  # the consumer long-polls at the log end meanwhile
        assert not live_actors(topic_name) and not active(client, topic_name)
    finally:
        consumer.close()
    stats = ray.get(ray.get_actor(f"gateway-{ray.get_runtime_context().get_node_id()[:8]}",
                                  namespace=NAMESPACE).stats.remote())
    assert stats["closed_reads"] > 0


def test_a_long_poll_on_an_inactive_partition_gets_the_first_produced_record_right_after_its_ack(
        client, gateway, topic_name):
    client.create_topic(topic_name, partitions=1, activate=False)
    consumer = Consumer({"bootstrap.servers": gateway, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 5000})
    got: list[tuple[int, bytes, float]] = []
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            m = consumer.poll(0.1)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value(), time.monotonic()))

    try:
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        time.sleep(1.5)  # long-polling the never-started partition from its (empty) folder
        assert not live_actors(topic_name) and not got
        acked: list[float] = []
        producer = Producer({"bootstrap.servers": gateway, "linger.ms": 0})
        producer.produce(topic_name, b"first", partition=0, on_delivery=lambda err, _m: acked.append(time.monotonic()))
        assert producer.flush(30) == 0
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.5)  # a duplicate would show up by now
    finally:
        stop.set()
        reader.join(5)
        consumer.close()
    assert [(o, v) for o, v, _t in got] == [(0, b"first")]
    delay_ms = (got[0][2] - acked[0]) * 1000
    print(f"record reached the long-polling consumer {delay_ms:.1f} ms after its ack")
    assert delay_ms < 1000


def test_a_reader_of_closed_files_follows_retention_that_ran_while_it_was_not_looking(
        client, gateway, topic_name, short_idle):
    client.create_topic(topic_name, partitions=1, activate=False,
                        config={"retention.ms": "60000", "segment.bytes": "1024"})
    day_ago = int(time.time() * 1000) - 86_400_000
    producer = Producer({"bootstrap.servers": gateway, "linger.ms": 0})
    for i in range(30):
        producer.produce(topic_name, b"o" * 100, partition=0, timestamp=day_ago + i)
        producer.flush(30)
    wait_inactive(client, topic_name)
    consumer = Consumer({"bootstrap.servers": gateway, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (0, 30)  # a view now
        assert ray.get(short_idle.retention_pass.remote()) == [(topic_name, 0)]  # woke, deleted, slept
        wait_inactive(client, topic_name)
        low, high = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
        assert 0 < low < high == 30
        consumer.assign([TopicPartition(topic_name, 0, 0)])  # below the log start: reset to earliest
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 30 - low and time.monotonic() < deadline:
            got += [m.offset() for m in consumer.consume(100, 0.5) if m.error() is None]
        assert got == list(range(low, 30))
        assert not live_actors(topic_name)
    finally:
        consumer.close()


def _why_missing(client, consumer, topic: str, missing: list[int]) -> str:
    """What the broker and the consumer say of partitions whose record was not read (for a failure's
    message: this failed once in CI, missing one partition, and never alone)."""
    lines = [f"missing {missing}"]
    try:
        tps = [TopicPartition(topic, p) for p in missing]
        assigned = set(consumer.assignment())
        lines += [f"positions {[(t.partition, t.offset) for t in consumer.position(tps)]}",
                  f"assigned {[p for p in missing if TopicPartition(topic, p) in assigned]}",
                  f"live actors {sorted(live_actors(topic))}"]
        for p in missing:
            marks = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            status = [r for r in client.status() if r["topic"] == topic and r["partition"] == p]
            lines.append(f"partition {p}: watermarks {marks}, status {status}")
    except Exception as e:  # the failure's own message matters more than these
        lines.append(f"(could not ask: {e!r})")
    return "; ".join(lines)


PARTITIONS = 1000  # the topic
STEP = 100  # every STEP-th partition takes a produce: each starts a process (~0.5-2 s of CPU on a 2-core
# machine, docs/benchmarks.md), so all 1,000 would take 5-30 minutes; 10 keep the suite's budget (50 took
# 94 s alone, more in a full run); the group is still assigned all 1,000 and polls them all


def test_a_1000_partition_topic_takes_produces_is_read_by_a_group_then_its_partitions_hibernate(
        client, gateway, topic_name):
    client.create_topic(topic_name, partitions=PARTITIONS, activate=False)
    written = range(0, PARTITIONS, STEP)
    # idempotent: a burst of activations may outlast a produce request, and a plain producer's retry
    # would then write a record twice (Kafka's at-least-once), which is not what this test is about
    producer = Producer({"bootstrap.servers": gateway, "linger.ms": 5, "enable.idempotence": True})
    for p in written:
        producer.produce(topic_name, f"p{p}".encode(), partition=p)
    assert producer.flush(120) == 0  # (each append started its partition's actor: a closed log takes none)
    consumer = Consumer({"bootstrap.servers": gateway, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 200})
    try:
        consumer.subscribe([topic_name])
        got: dict[int, list] = {}
        deadline = time.monotonic() + 90
        while sum(map(len, got.values())) < len(written) and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                assert m.error() is None, m.error()
                got.setdefault(m.partition(), []).append((m.offset(), m.value()))
        assert got == {p: [(0, f"p{p}".encode())] for p in written}, _why_missing(
            client, consumer, topic_name, [p for p in written if p not in got])
        assert len(consumer.assignment()) == PARTITIONS  # the one member reads all 1,000
        # the group keeps polling every partition; they hibernate anyway and its reads go on from files
        wait_inactive(client, topic_name, timeout=60)
        assert not live_actors(topic_name)
        assert not [m for m in consumer.consume(500, 1.0) if m.error() is None]  # nothing twice
    finally:
        consumer.close()
