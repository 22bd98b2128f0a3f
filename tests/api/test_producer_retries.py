"""The Python Producer retries NOT_LEADER_OR_FOLLOWER, as Kafka's producer does.

A replicated partition's actor refuses an append with NotLeaderOrFollowerError when
leadership is moving or its node's broker lease lapsed (a starved machine whose gateway
missed heartbeats: it is renewed, or the controller elects elsewhere). Kafka's producer
treats that error as retriable; ours raised it from ``flush`` (found by the unclean-election
test on a loaded machine). Here a stand-in actor refuses the first append of a batch, then
passes it to the real partition: the record must be acknowledged once, at one offset.
"""
from __future__ import annotations

import ray

from logan_ray.common.errors import NotLeaderOrFollowerError


@ray.remote
class RefusesFirstAppend:
    """In front of a partition actor: the first append is refused as by a fenced leader."""

    def __init__(self, partition) -> None:
        self.partition = partition
        self.refused = 0
        self.calls = 0

    async def append(self, data: bytes, internal: bool = False):
        self.calls += 1
        if self.refused == 0:
            self.refused += 1
            raise NotLeaderOrFollowerError("partition t-0: this node's broker lease with the controller ran out "
                                           "(fenced)")
        return await self.partition.append.remote(data, internal)

    def counts(self) -> tuple[int, int]:
        return self.refused, self.calls


def test_a_send_refused_with_not_leader_or_follower_is_retried_and_written_once(client, topic_name, monkeypatch):
    client.create_topic(topic_name, partitions=1)
    real, _node = client.partition_route(topic_name, 0)
    front = RefusesFirstAppend.remote(real)
    # "elsewhere": not this node, so the producer calls the actor through Ray (no local channel)
    monkeypatch.setattr(client, "partition_route", lambda topic, partition: (front, "elsewhere"))
    monkeypatch.setattr(client, "reroute", lambda topic, partition, stale: (front, "elsewhere", False))
    producer = client.producer(acks=1)
    try:
        md = producer.send(topic_name, b"only-once", partition=0).result(timeout=60)
    finally:
        producer.close()
    monkeypatch.undo()
    assert ray.get(front.counts.remote()) == (1, 2)
    consumer = client.consumer(auto_offset_reset="earliest")
    consumer.assign([(topic_name, 0)])
    try:
        records = consumer.poll(timeout_ms=10000)
    finally:
        consumer.close()
    assert [(r.offset, r.value) for r in records] == [(md.offset, b"only-once")]
