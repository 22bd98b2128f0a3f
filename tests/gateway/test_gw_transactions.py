"""Kafka transactions end to end on one node: confluent-kafka's transactional producer against the gateway.

The transaction coordinator (actors/txn_coordinator.py) logs to ``__transaction_state``,
EndTxn writes COMMIT/ABORT markers through the partition actors, Produce accepts
transactional batches only for partitions the transaction added, and a read_committed
Fetch stops at the last stable offset and lists the aborted transactions.
"""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from logan_ray.protocol import errors as codes
from wire_client import Wire

DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66


def _producer(gateway: str, tid: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": gateway, "transactional.id": tid, "linger.ms": 5, **extra})
    p.init_transactions(30)
    return p


def _read(gateway: str, topic: str, isolation: str, partitions: int = 1, quiet_s: float = 2.0,
          group: str | None = None) -> list[bytes]:
    """Every value readable at ``isolation``, from the beginning, until nothing new came for ``quiet_s``."""
    c = Consumer({"bootstrap.servers": gateway, "group.id": group or f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": isolation, "fetch.wait.max.ms": 100})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: list[bytes] = []
        last = time.monotonic()
        while time.monotonic() - last < quiet_s:
            for m in c.consume(100, 0.3):
                assert m.error() is None, m.error()
                out.append(m.value())
                last = time.monotonic()
        return out
    finally:
        c.close()


def test_commit_and_abort_read_committed_and_uncommitted(client, gateway, topic_name):
    client.create_topic(topic_name, 2)
    p = _producer(gateway, "tx-" + topic_name)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic_name, f"c{i}".encode(), partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic_name, f"a{i}".encode(), partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic_name, b"c-late", partition=0)
    p.commit_transaction(30)

    committed = sorted(_read(gateway, topic_name, "read_committed", 2))
    assert committed == sorted([b"c0", b"c1", b"c2", b"c3", b"c-late"])
    everything = sorted(_read(gateway, topic_name, "read_uncommitted", 2))
    assert everything == sorted([b"c0", b"c1", b"c2", b"c3", b"a0", b"a1", b"a2", b"a3", b"c-late"])


def test_an_open_transaction_is_invisible_to_read_committed_until_it_commits(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    p = _producer(gateway, "tx-" + topic_name)
    p.begin_transaction()
    p.produce(topic_name, b"pending", partition=0)
    p.flush(30)
    assert _read(gateway, topic_name, "read_uncommitted", quiet_s=1.0) == [b"pending"]
    assert _read(gateway, topic_name, "read_committed", quiet_s=1.0) == []  # stops at the LSO
    p.commit_transaction(30)
    assert _read(gateway, topic_name, "read_committed", quiet_s=1.0) == [b"pending"]


def test_consume_transform_produce_commits_offsets_only_with_the_transaction(client, gateway, topic_name):
    source, sink, group = topic_name + "-in", topic_name + "-out", "ctp-" + topic_name
    client.create_topic(source, 1)
    client.create_topic(sink, 1)
    feeder = Producer({"bootstrap.servers": gateway})
    for i in range(6):
        feeder.produce(source, f"m{i}".encode(), partition=0)
    assert feeder.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": gateway, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    p = _producer(gateway, "tx-" + topic_name)
    try:
        consumer.subscribe([source])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got += [m for m in consumer.consume(3 - len(got), 0.5) if m.error() is None]
        assert len(got) == 3

        def transform_and_end(commit: bool) -> None:
            p.begin_transaction()
            for m in got:
                p.produce(sink, m.value().upper(), partition=0)
            p.send_offsets_to_transaction([TopicPartition(source, 0, got[-1].offset() + 1)],
                                          consumer.consumer_group_metadata(), 30)
            (p.commit_transaction if commit else p.abort_transaction)(30)

        def committed() -> int:
            return consumer.committed([TopicPartition(source, 0)], 10)[0].offset

        transform_and_end(False)
        assert committed() < 0  # the aborted transaction's offsets were dropped
        transform_and_end(True)
        assert committed() == got[-1].offset() + 1 == 3
    finally:
        consumer.close()
    assert _read(gateway, sink, "read_committed") == [b"M0", b"M1", b"M2"]


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    tid = "tx-" + topic_name
    first = _producer(gateway, tid)
    first.begin_transaction()
    first.produce(topic_name, b"zombie", partition=0)
    first.flush(30)
    second = _producer(gateway, tid)  # bumps the epoch; the first one's open transaction is aborted
    second.begin_transaction()
    second.produce(topic_name, b"live", partition=0)
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        first.produce(topic_name, b"zombie-2", partition=0)
        first.commit_transaction(30)
    err = e.value.args[0]
    assert err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH), err
    assert err.fatal(), err
    assert _read(gateway, topic_name, "read_committed") == [b"live"]


def test_a_transaction_older_than_its_timeout_is_aborted(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    tid = "tx-" + topic_name
    p = _producer(gateway, tid, **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    p.produce(topic_name, b"too-slow", partition=0)
    p.flush(30)
    deadline = time.monotonic() + 20
    state = None
    with Wire(gateway) as w:
        while time.monotonic() < deadline:
            state = w.call(DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})["transaction_states"][0]
            if state["transaction_state"] == "CompleteAbort":
                break
            time.sleep(0.3)
        assert state is not None and state["transaction_state"] == "CompleteAbort", state
        listed = w.call(LIST_TRANSACTIONS, 1, {"state_filters": ["CompleteAbort"], "producer_id_filters": [],
                                               "duration_filter": -1})
        assert listed["error_code"] == codes.NONE
        assert tid in [t["transactional_id"] for t in listed["transaction_states"]]
    with pytest.raises(KafkaException):
        p.commit_transaction(10)
    assert _read(gateway, topic_name, "read_committed", quiet_s=1.0) == []
    assert _read(gateway, topic_name, "read_uncommitted", quiet_s=1.0) == [b"too-slow"]


def test_transactional_batches_of_partitions_not_in_the_transaction_are_refused(client, gateway, topic_name):
    """KIP-890: a transactional batch for a partition the transaction never added is refused."""
    from logan_ray.storage.record_builder import build_batch

    client.create_topic(topic_name, 1)
    tid = "tx-" + topic_name
    p = _producer(gateway, tid)
    p.begin_transaction()
    p.produce(topic_name, b"ok", partition=0)
    p.flush(30)
    with Wire(gateway) as w:
        described = w.call(DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})["transaction_states"][0]
        assert described["transaction_state"] == "Ongoing"
        assert described["topics"] == [{"topic": topic_name, "partitions": [0]}]
        pid, epoch = described["producer_id"], described["producer_epoch"]
        other = topic_name + "-other"
        client.create_topic(other, 1)
        batch = build_batch([b"sneaky"], [None], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                            is_transactional=True)
        out = w.call(0, 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 10000, "topic_data": [
            {"name": other, "partition_data": [{"index": 0, "records": batch}]}]})
        code = out["responses"][0]["partition_responses"][0]["error_code"]
        assert code == codes.INVALID_TXN_STATE
    p.commit_transaction(30)
    assert _read(gateway, other, "read_uncommitted", quiet_s=1.0) == []


def test_a_restarted_coordinator_replays_its_transactions_from_the_log(client, gateway, topic_name):
    """The coordinator's state is in __transaction_state: killed mid-transaction, Ray restarts it and
    it replays the partition, so the open transaction still commits (and the next one works)."""
    import ray

    from logan_ray.actors.txn_coordinator import txn_coordinator_on

    client.create_topic(topic_name, 1)
    tid = "tx-" + topic_name
    p = _producer(gateway, tid)
    p.begin_transaction()
    p.produce(topic_name, b"before-restart", partition=0)
    p.flush(30)
    coordinator = txn_coordinator_on(ray.get_runtime_context().get_node_id())
    ray.kill(coordinator, no_restart=False)
    p.produce(topic_name, b"after-restart", partition=0)
    p.commit_transaction(60)
    assert ray.get(coordinator.stats.remote(), timeout=30)["transactions"] >= 1  # the new instance replayed
    p.begin_transaction()
    p.produce(topic_name, b"next", partition=0)
    p.commit_transaction(30)
    assert _read(gateway, topic_name, "read_committed") == [b"before-restart", b"after-restart", b"next"]


def test_the_coordinator_keeps_serving_after_its_log_partition_hibernates(client, gateway):
    """An idle __transaction_state partition hibernates (partition.idle.ms): the coordinator's next
    append goes to its restarted actor, not to a NOT_COORDINATOR and a replay."""
    import ray

    from logan_ray.actors.names import NAMESPACE, ROUTER_NAME
    from logan_ray.actors.txn_coordinator import TXN_TOPIC, partition_for_txn, txn_coordinator_on

    coordinator = txn_coordinator_on(ray.get_runtime_context().get_node_id())
    tid = f"tx-hibernate-{uuid.uuid4().hex[:8]}"
    error, pid, epoch = ray.get(coordinator.init_producer_id.remote(tid, 10_000), timeout=60)
    assert error == codes.NONE
    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    n = len(ray.get(router.route_with_ids.remote([TXN_TOPIC]))[TXN_TOPIC]["partitions"])
    assert ray.get(router.hibernate.remote(TXN_TOPIC, partition_for_txn(tid, n), idle_only=False), timeout=60)
    assert ray.get(coordinator.init_producer_id.remote(tid, 10_000), timeout=60) == (codes.NONE, pid, epoch + 1)
