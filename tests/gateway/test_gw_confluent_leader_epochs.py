"""confluent-kafka (librdkafka, KIP-320) consuming across a leader-epoch bump.

librdkafka tracks the leader epoch of every record it consumes and, when
Metadata shows a new epoch (or a fetch is answered FENCED_LEADER_EPOCH), checks
its position with OffsetForLeaderEpoch before fetching on: a wrong answer makes
it report log truncation and reset its offset (duplicates or loss). The epoch
is bumped by SIGKILLing the partition actor (Ray starts it again, a new leader).
"""
from __future__ import annotations

import logging
import os
import signal
import time

import ray
from confluent_kafka import Consumer, Producer, TopicPartition

from wire_client import Wire, metadata_body


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def produce(gateway: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": gateway, "linger.ms": 5, "enable.idempotence": True})
    errors = []
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda err, _m: err and errors.append(err))
    assert p.flush(60) == 0 and not errors, errors


def test_consumer_reads_every_record_once_across_a_leader_epoch_bump(client, gateway, topic_name):
    client.create_topic(topic_name, partitions=1)
    first = [b"before-%04d" % i for i in range(300)]
    second = [b"after-%04d" % i for i in range(300)]
    produce(gateway, topic_name, first)

    captured = Captured()
    logger = logging.getLogger(f"rdkafka-{topic_name}")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(captured)
    c = Consumer({"bootstrap.servers": gateway, "group.id": topic_name, "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
                  "max.partition.fetch.bytes": 1024, "queued.max.messages.kbytes": 1,  # many small fetches
                  "debug": "fetch,topic", "logger": logger})
    got: list[tuple[int, bytes]] = []

    def consume_until(n: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            for m in c.consume(100, 0.5):
                assert m.error() is None, m.error()
                got.append((m.offset(), m.value()))
                assert m.leader_epoch() is not None  # records carry their epoch to the client
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        consume_until(100)
        assert {m for _o, m in got} <= set(first)
        actor = client.partition_actor(topic_name, 0)
        os.kill(ray.get(actor.pid.remote()), signal.SIGKILL)
        with Wire(gateway) as w:
            deadline = time.monotonic() + 60
            while w.call(3, 12, metadata_body([topic_name]))["topics"][0]["partitions"][0]["leader_epoch"] != 1:
                assert time.monotonic() < deadline, "no new leader epoch"
                time.sleep(0.2)
        produce(gateway, topic_name, second)
        consume_until(600)
        time.sleep(1.0)  # anything extra (a re-read after a wrong truncation verdict) would show now
        for m in c.consume(100, 0.5):
            assert m.error() is None, m.error()
            got.append((m.offset(), m.value()))
    finally:
        c.close()
        logger.removeHandler(captured)
    assert [v for _o, v in got] == first + second  # each record exactly once, in order
    assert [o for o, _v in got] == list(range(600))
    text = "\n".join(captured.lines)
    assert "truncat" not in text.lower(), [line for line in captured.lines if "runcat" in line]
    # librdkafka validated its position against the new leader epoch (KIP-320: OffsetForLeaderEpoch) and went on
    assert "validate-epoch-wait -> active" in text, text[-3000:]
    assert "current leader epoch 1" in text
