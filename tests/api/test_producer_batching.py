"""Producer batch sizing and KIP-360 sequence recovery, against a real broker on Ray."""
from __future__ import annotations

import hashlib
import time

import pytest

from logan_ray.errors import RecordTooLargeError

KB = 1000
SIZES = [1, 10 * KB, 100 * KB, 900 * KB, 2_000_000]  # default max.message.bytes is 1048588


def _value(size: int, i: int) -> bytes:
    stamp = b"%d-%d:" % (size, i)
    return (stamp * (size // len(stamp) + 1))[:size]


def _read_all(client, topic: str, expected: int, timeout: float = 60.0) -> list:
    consumer = client.consumer(topic, auto_offset_reset="earliest")
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        out.extend(consumer.poll(500))
    consumer.close()
    return out


def _mixed_plan() -> list[int]:
    """Sizes in an interleaved order: oversize records sit between ordinary ones."""
    counts = {1: 300, 10 * KB: 300, 100 * KB: 20, 900 * KB: 3, 2_000_000: 3}
    plan: list[int] = []
    while any(counts.values()):
        for size in SIZES:
            if counts[size]:
                plan.append(size)
                counts[size] -= 1
    return plan


def test_every_ordinary_size_is_delivered_and_only_oversize_records_fail_alone(client, topic_name):
    client.create_topic(topic_name, partitions=1)  # default settings: max.message.bytes=1048588
    plan = _mixed_plan()
    with client.producer() as producer:  # default settings: batch_size 1 MiB
        futures = [producer.send(topic_name, _value(size, i)) for i, size in enumerate(plan)]
        with pytest.raises(RecordTooLargeError):
            producer.flush()
        delivered, failed = [], []
        for i, (size, fut) in enumerate(zip(plan, futures)):
            try:
                meta = fut.result()
            except RecordTooLargeError:
                failed.append(size)
            else:
                delivered.append((meta.offset, _value(size, i)))
    assert failed == [2_000_000] * 3
    assert len(delivered) == len(plan) - 3
    records = _read_all(client, topic_name, len(delivered))
    assert len(records) == len(delivered)
    got = {r.offset: hashlib.sha1(r.value).digest() for r in records}
    assert got == {offset: hashlib.sha1(v).digest() for offset, v in delivered}
    assert sorted(got) == list(range(len(delivered)))  # dense offsets: nothing else was written


def test_send_batch_splits_by_size_and_fails_only_the_oversize_values(client, topic_name):
    client.create_topic(topic_name, partitions=1)
    plan = _mixed_plan()
    values = [_value(size, i) for i, size in enumerate(plan)]
    with client.producer() as producer:
        futures = producer.send_batch(topic_name, values, partition=0)
        with pytest.raises(RecordTooLargeError):
            producer.flush()
        outcomes = []
        for f in futures:
            try:
                outcomes.append(f.result().offset)
            except RecordTooLargeError:
                outcomes.append(None)
    assert [size for size, o in zip(plan, outcomes) if o is None] == [2_000_000] * 3
    kept = [o for o in outcomes if o is not None]
    assert kept == list(range(len(plan) - 3))
    assert client.partition_offsets(topic_name)[0] == (0, len(plan) - 3)


def test_compressed_incompressible_batches_stay_under_the_topic_limit(client, topic_name):
    import os

    client.create_topic(topic_name, partitions=1, config={"max.message.bytes": "200000"})
    values = [os.urandom(9_000) for _ in range(200)]  # random bytes grow a little when compressed
    with client.producer(compression="gzip", batch_size=1 << 20) as producer:
        metas = [f.result() for f in producer.send_batch(topic_name, values, partition=0)]
    assert [m.offset for m in metas] == list(range(200))


def _send_alone(producer, topic: str, value: bytes):
    """A record that ships at once in a batch of its own (it exceeds the producer's batch_size)."""
    return producer.send(topic, value, partition=0)


def test_rejected_batch_then_later_in_flight_batches_succeed_at_once(client, topic_name):
    client.create_topic(topic_name, partitions=1)
    producer = client.producer(batch_size=1000, linger_ms=0)
    assert _send_alone(producer, topic_name, b"a" * 1200).result().offset == 0  # the broker knows the producer
    # Shrink the topic's limit behind the producer's back: it still believes 1 MB.
    client.alter_topic(topic_name, {"max.message.bytes": "3000"})
    started = time.monotonic()
    bad = _send_alone(producer, topic_name, b"x" * 5000)
    good = [_send_alone(producer, topic_name, b"g%d" % i * 700) for i in range(4)]  # in flight behind it
    with pytest.raises(RecordTooLargeError):
        bad.result()
    offsets = [f.result().offset for f in good]
    later = [_send_alone(producer, topic_name, b"l%d" % i * 700).result().offset for i in range(3)]
    elapsed = time.monotonic() - started
    assert offsets == [1, 2, 3, 4] and later == [5, 6, 7]
    assert elapsed < 3.0, f"sends after the rejected batch took {elapsed:.1f} s (the broker waits 5 s for a gap)"
    # The next oversize record is refused by the producer itself, now that it knows the new limit.
    with pytest.raises(RecordTooLargeError):
        _send_alone(producer, topic_name, b"x" * 5000).result()
    producer.close()
    values = [r.value for r in _read_all(client, topic_name, 8)]
    assert values == [b"a" * 1200] + [b"g%d" % i * 700 for i in range(4)] + [b"l%d" % i * 700 for i in range(3)]


def test_rejected_last_batch_hands_its_sequence_to_the_next(client, topic_name):
    client.create_topic(topic_name, partitions=1)
    producer = client.producer(batch_size=1000, linger_ms=0)
    assert _send_alone(producer, topic_name, b"a" * 1200).result().offset == 0
    client.alter_topic(topic_name, {"max.message.bytes": "3000"})
    with pytest.raises(RecordTooLargeError):
        _send_alone(producer, topic_name, b"x" * 5000).result()
    started = time.monotonic()
    assert [_send_alone(producer, topic_name, b"n%d" % i * 700).result().offset for i in range(3)] == [1, 2, 3]
    assert time.monotonic() - started < 2.0
    producer.close()
