"""Kafka transactions through the Python API (issue 35 item 3): the transactional producer and
read_committed consumers over Ray actor calls, against the same coordinator the gateway serves."""
from __future__ import annotations

import time
import uuid

import pytest

from logan_ray.errors import InvalidTxnStateError, ProducerFencedError


def _read(client, topic: str, isolation: str, partitions: int = 1, quiet_s: float = 1.0,
          arrow: bool = False) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record readable at ``isolation``, from the beginning,
    until nothing new came for ``quiet_s``."""
    c = client.consumer(isolation_level=isolation, fetch_max_wait_ms=100)
    c.assign([(topic, p) for p in range(partitions)])
    c.seek_to_beginning()
    out: list[tuple[int, int, bytes]] = []
    last = time.monotonic()
    try:
        while time.monotonic() - last < quiet_s:
            if arrow:
                t = c.poll_arrow(200)
                got = list(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist(),
                               t.column("value").to_pylist()))
            else:
                got = [(r.partition, r.offset, r.value) for r in c.poll(200)]
            if got:
                out += got
                last = time.monotonic()
    finally:
        c.close()
    return sorted(out)


def _values(rows) -> list[bytes]:
    return sorted(v for _, _, v in rows)


def test_commit_shows_abort_hides_for_read_committed_only(client, topic_name):
    client.create_topic(topic_name, 2)
    p = client.producer(transactional_id="tx-" + topic_name)
    p.begin_transaction()
    for i in range(4):
        p.send(topic_name, f"c{i}".encode(), partition=i % 2)
    p.commit_transaction()
    p.begin_transaction()
    p.send_batch(topic_name, [f"a{i}".encode() for i in range(4)], partition=0)
    p.send(topic_name, b"a-p1", partition=1)
    p.abort_transaction()
    p.begin_transaction()
    p.send(topic_name, b"c-late", partition=0)
    p.commit_transaction()
    p.close()

    committed = [b"c0", b"c1", b"c2", b"c3", b"c-late"]
    for arrow in (False, True):
        assert _values(_read(client, topic_name, "read_committed", 2, arrow=arrow)) == sorted(committed)
    aborted = [b"a0", b"a1", b"a2", b"a3", b"a-p1"]
    assert _values(_read(client, topic_name, "read_uncommitted", 2)) == sorted(committed + aborted)
    # the default is read_uncommitted, as Kafka's
    c = client.consumer(topic_name, auto_offset_reset="earliest")
    seen = []
    deadline = time.monotonic() + 10
    while len(seen) < 10 and time.monotonic() < deadline:
        seen += [r.value for r in c.poll(300)]
    c.close()
    assert sorted(seen) == sorted(committed + aborted)


def _open_transaction_between(client, topic_name):
    """A one-partition topic holding b"before", then b"pending" in an open transaction, then b"after"
    written outside it: log end 3, last stable offset 1. Returns (plain producer, transactional one)."""
    client.create_topic(topic_name, 1)
    plain = client.producer(acks="all")
    plain.send(topic_name, b"before", partition=0).result()
    p = client.producer(transactional_id="tx-" + topic_name)
    p.begin_transaction()
    p.send(topic_name, b"pending", partition=0)
    p.flush()
    plain.send(topic_name, b"after", partition=0).result()
    return plain, p


def test_an_open_transaction_blocks_read_committed_at_the_last_stable_offset(client, topic_name):
    plain, p = _open_transaction_between(client, topic_name)  # "after" is past the LSO: held back too
    for arrow in (False, True):
        assert _read(client, topic_name, "read_committed", arrow=arrow) == [(0, 0, b"before")]
    assert _values(_read(client, topic_name, "read_uncommitted")) == [b"after", b"before", b"pending"]
    p.commit_transaction()
    assert _read(client, topic_name, "read_committed") == [(0, 0, b"before"), (0, 1, b"pending"), (0, 2, b"after")]
    p.close()
    plain.close()


def test_read_committed_end_offsets_and_seek_to_end_stop_at_the_last_stable_offset(client, topic_name):
    plain, p = _open_transaction_between(client, topic_name)  # log end 3, LSO 1 (the open transaction)
    tp = (topic_name, 0)
    committed = client.consumer(isolation_level="read_committed")
    uncommitted = client.consumer(isolation_level="read_uncommitted")
    try:
        assert list(committed.end_offsets([tp]).values()) == [1]
        assert list(uncommitted.end_offsets([tp]).values()) == [3]
        for c, end in ((committed, 1), (uncommitted, 3)):
            c.assign([tp])
            c.seek_to_end()
            assert c.position(tp) == end
        p.commit_transaction()  # the marker at 3: everything is stable, the end is the log end
        assert list(committed.end_offsets([tp]).values()) == [4]
    finally:
        committed.close()
        uncommitted.close()
        p.close()
        plain.close()


def test_offsets_sent_to_a_transaction_commit_only_with_it(client, topic_name):
    client.create_topic(topic_name, 1)
    group = "g-" + topic_name
    p = client.producer(transactional_id="tx-" + topic_name)
    reader = client.consumer(group=group, enable_auto_commit=False)
    reader.assign([(topic_name, 0)])

    p.begin_transaction()
    p.send(topic_name, b"x", partition=0)
    p.send_offsets_to_transaction({(topic_name, 0): 5}, group)
    p.abort_transaction()
    assert reader.committed([(topic_name, 0)])[(topic_name, 0)] is None

    p.begin_transaction()
    p.send(topic_name, b"y", partition=0)
    p.send_offsets_to_transaction({(topic_name, 0): 7}, reader.group_metadata())
    assert reader.committed([(topic_name, 0)])[(topic_name, 0)] is None  # not before the commit
    p.commit_transaction()
    assert reader.committed([(topic_name, 0)])[(topic_name, 0)].offset == 7
    reader.close()
    p.close()


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(client, topic_name):
    client.create_topic(topic_name, 1)
    tid = "tx-" + topic_name
    first = client.producer(transactional_id=tid)
    first.begin_transaction()
    first.send(topic_name, b"zombie", partition=0)
    first.flush()
    second = client.producer(transactional_id=tid)
    second.init_transactions()  # aborts the first one's open transaction and bumps the epoch
    with pytest.raises(ProducerFencedError):
        first.commit_transaction()
    with pytest.raises(ProducerFencedError):
        first.begin_transaction()
    second.begin_transaction()
    second.send(topic_name, b"live", partition=0)
    second.commit_transaction()
    assert _values(_read(client, topic_name, "read_committed")) == [b"live"]
    first.close()
    second.close()


def test_calls_in_the_wrong_state_raise_invalid_txn_state(client, topic_name):
    client.create_topic(topic_name, 1)
    p = client.producer(transactional_id="tx-" + topic_name)
    with pytest.raises(InvalidTxnStateError):
        p.commit_transaction()  # not even initialised
    p.init_transactions()
    with pytest.raises(InvalidTxnStateError):
        p.send(topic_name, b"outside", partition=0)
    with pytest.raises(InvalidTxnStateError):
        p.abort_transaction()
    p.begin_transaction()
    with pytest.raises(InvalidTxnStateError):
        p.begin_transaction()
    p.commit_transaction()  # an empty transaction commits
    with pytest.raises(InvalidTxnStateError):
        p.send_offsets_to_transaction({(topic_name, 0): 1}, "g")
    p.close()
    assert client.partition_offsets(topic_name)[0][1] == 0  # nothing was written


def test_a_kafka_client_and_the_python_api_agree_on_what_is_committed(client, gateway, topic_name):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    client.create_topic(topic_name, 2)
    kafka = Producer({"bootstrap.servers": gateway, "transactional.id": "k-" + topic_name, "linger.ms": 5})
    kafka.init_transactions(30)
    kafka.begin_transaction()
    kafka.produce(topic_name, b"k-commit", partition=0)
    kafka.commit_transaction(30)
    kafka.begin_transaction()
    kafka.produce(topic_name, b"k-abort", partition=1)
    kafka.flush(30)
    kafka.abort_transaction(30)

    p = client.producer(transactional_id="py-" + topic_name)
    p.begin_transaction()
    p.send(topic_name, b"py-commit-0", partition=0)
    p.send(topic_name, b"py-commit-1", partition=1)
    p.commit_transaction()
    p.begin_transaction()
    p.send(topic_name, b"py-abort", partition=0)
    p.abort_transaction()
    p.begin_transaction()
    p.send(topic_name, b"py-open", partition=1)
    p.flush()  # left open: past the LSO for both readers

    c = Consumer({"bootstrap.servers": gateway, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": "read_committed", "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic_name, q, OFFSET_BEGINNING) for q in range(2)])
    seen: list[tuple[int, int, bytes]] = []
    last = time.monotonic()
    while time.monotonic() - last < 2.0:
        for m in c.consume(100, 0.3):
            assert m.error() is None, m.error()
            seen.append((m.partition(), m.offset(), m.value()))
            last = time.monotonic()
    c.close()
    ours = _read(client, topic_name, "read_committed", 2)
    assert _values(ours) == [b"k-commit", b"py-commit-0", b"py-commit-1"]
    assert sorted(seen) == ours
    p.abort_transaction()
    p.close()
