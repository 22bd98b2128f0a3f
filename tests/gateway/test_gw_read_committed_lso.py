"""read_committed Fetches are bounded by the partition's own transaction state (issue 35 item 1a).

The gateway once kept a set of "topics seen in a transaction here" to decide which Fetches went to
the partition's ``locate_committed``; a restarted gateway had it empty and served aborted and open
transactions' records to read_committed consumers (Jepsen's G1a). The gateway is restarted for
real here (SIGKILL, Ray starts it again), active and hibernated partitions alike.
"""
from __future__ import annotations

import os
import signal
import time

import pytest
import ray
from confluent_kafka import Consumer, Producer
from ray.util.state import list_actors

from logan_ray._ray import get
from logan_ray.gateway import gateway_name
from test_gw_transactions import _read as read_values


def _producer(gateway: str, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": gateway, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(30)
    return p


def _read(gateway: str, topic: str, isolation: str) -> list[bytes]:
    """Every value of partition 0 readable at ``isolation`` until nothing new came for 1.5 s."""
    return read_values(gateway, topic, isolation, quiet_s=1.5)


def _restart_gateway(gateway: str) -> None:
    """SIGKILL this node's gateway (its module state goes with it) and wait until Ray's restart serves."""
    actor = ray.get_actor(gateway_name(ray.get_runtime_context().get_node_id()), namespace="logan_ray")
    pid = get(actor.stats.remote())["pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while True:
        try:
            if get(actor.stats.remote())["pid"] != pid:
                break
        except Exception:
            pass
        assert time.monotonic() < deadline, "the gateway did not come back"
        time.sleep(0.3)
    probe = Consumer({"bootstrap.servers": gateway, "group.id": "probe"})
    try:
        while True:
            try:
                probe.list_topics(timeout=2)
                return
            except Exception:
                assert time.monotonic() < deadline, "the restarted gateway does not answer"
    finally:
        probe.close()


def _live(topic: str) -> bool:
    return any(a.name == f"{topic}-0" for a in list_actors(
        filters=[("state", "=", "ALIVE"), ("class_name", "=", "PartitionActor")], limit=10_000))


def _wait_hibernated(client, topic: str) -> None:
    deadline = time.monotonic() + 30
    while any(r["topic"] == topic and r.get("active") for r in client.status()) or _live(topic):
        assert time.monotonic() < deadline, f"{topic}-0 did not hibernate"
        time.sleep(0.1)


def _commit_abort_open(gateway: str, topic: str) -> Producer:
    """c0 committed, a0 a1 aborted, c1 committed, then "open" in a transaction left open."""
    p = _producer(gateway, "tx-" + topic)
    for values, commit in (([b"c0"], True), ([b"a0", b"a1"], False), ([b"c1"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(topic, v, partition=0)
        p.flush(30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"open", partition=0)
    p.flush(30)
    return p


def test_a_restarted_gateway_hides_aborted_and_open_transactions_from_read_committed(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    p = _commit_abort_open(gateway, topic_name)
    _restart_gateway(gateway)
    assert _read(gateway, topic_name, "read_committed") == [b"c0", b"c1"]  # no a0/a1, nothing past the LSO
    assert _read(gateway, topic_name, "read_uncommitted") == [b"c0", b"a0", b"a1", b"c1", b"open"]
    p.commit_transaction(30)
    assert _read(gateway, topic_name, "read_committed") == [b"c0", b"c1", b"open"]


@pytest.mark.usefixtures("short_partition_idle")
def test_a_hibernated_partition_with_transactions_is_read_committed_by_its_lso(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    p = _commit_abort_open(gateway, topic_name)
    _wait_hibernated(client, topic_name)  # closed with an abort in its .txnindex and a transaction open
    _restart_gateway(gateway)
    assert _read(gateway, topic_name, "read_committed") == [b"c0", b"c1"]
    p.abort_transaction(30)


def test_a_hibernated_partition_without_transactions_is_read_committed_from_its_files(client, gateway, topic_name,
                                                                                     short_partition_idle):
    """Cost follows use: a read_committed consumer of a topic without transactions does not wake it."""
    client.create_topic(topic_name, 1)
    plain = Producer({"bootstrap.servers": gateway, "linger.ms": 0})
    for i in range(5):
        plain.produce(topic_name, b"v%d" % i, partition=0)
    assert plain.flush(30) == 0
    _wait_hibernated(client, topic_name)
    get(short_partition_idle.set_partition_idle_ms.remote(60_000))  # woken, it would stay up (the fixture resets)
    assert _read(gateway, topic_name, "read_committed") == [b"v%d" % i for i in range(5)]
    assert not _live(topic_name)


def test_a_late_batch_after_the_commit_is_refused_though_its_partition_was_verified(client, gateway, topic_name):
    """KIP-890 with the gateway's verification cache (issue 35 item 1b): the partition's marker ends the
    cached verification, so a batch of the committed transaction is refused, not a new transaction."""
    from logan_ray.protocol import errors as codes
    from logan_ray.storage.record_builder import build_batch
    from wire_client import Wire

    client.create_topic(topic_name, 1)
    tid = "tx-" + topic_name
    p = _producer(gateway, tid)
    p.begin_transaction()
    for v in (b"one", b"two", b"three"):  # one batch each: the later ones find the partition verified
        p.produce(topic_name, v, partition=0)
        p.flush(30)
    with Wire(gateway) as w:
        state = w.call(65, 0, {"transactional_ids": [tid]})["transaction_states"][0]
        pid, epoch = state["producer_id"], state["producer_epoch"]
        p.commit_transaction(30)
        late = build_batch([b"late"], [None], producer_id=pid, producer_epoch=epoch, base_sequence=3,
                           is_transactional=True)
        out = w.call(0, 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 10000, "topic_data": [
            {"name": topic_name, "partition_data": [{"index": 0, "records": late}]}]})
        assert out["responses"][0]["partition_responses"][0]["error_code"] == codes.INVALID_TXN_STATE
    assert _read(gateway, topic_name, "read_uncommitted") == [b"one", b"two", b"three"]
    p.begin_transaction()  # the producer goes on: its next transaction verifies the partition again
    p.produce(topic_name, b"four", partition=0)
    p.commit_transaction(30)
    assert _read(gateway, topic_name, "read_committed") == [b"one", b"two", b"three", b"four"]


def _end_offsets(gateway: str, topic: str) -> dict[str, int]:
    """ListOffsets LATEST as a kafka-python consumer of each isolation level asks it."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTP

    out = {}
    for isolation in ("read_committed", "read_uncommitted"):
        c = KafkaConsumer(bootstrap_servers=gateway, isolation_level=isolation, request_timeout_ms=10000)
        try:
            out[isolation] = c.end_offsets([KafkaTP(topic, 0)])[KafkaTP(topic, 0)]
        finally:
            c.close()
    return out


def test_list_offsets_latest_is_the_lso_for_read_committed_and_the_high_watermark_otherwise(
        client, gateway, topic_name, short_partition_idle):
    """Kafka ends ListOffsets at the last fetchable offset: a read_committed consumer that seeks to the end
    (auto.offset.reset=latest, lag) must not land past an open transaction (librdkafka's 0103
    do_test_wmark_isolation_level); a hibernated partition's files answer only when they hold none."""
    client.create_topic(topic_name, 1)
    p = _commit_abort_open(gateway, topic_name)  # c0 0, commit 1, a0 a1 2-3, abort 4, c1 5, commit 6, open 7
    assert _end_offsets(gateway, topic_name) == {"read_committed": 7, "read_uncommitted": 8}
    _wait_hibernated(client, topic_name)
    assert _end_offsets(gateway, topic_name) == {"read_committed": 7, "read_uncommitted": 8}
    p.commit_transaction(30)
    assert _end_offsets(gateway, topic_name) == {"read_committed": 9, "read_uncommitted": 9}
