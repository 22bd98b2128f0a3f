"""Columnar Python API: send_batch takes columns, poll_arrow returns Arrow (real Ray runtime)."""
from __future__ import annotations

import time
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from logan_ray.consumer import TopicPartition
from logan_ray.data.arrow_records import RECORD_SCHEMA
from logan_ray.partitioner import partition_for_key
from logan_ray.storage import records as record_codec


def poll_all(consumer, expected: int, timeout: float = 30.0) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        out.extend(consumer.poll(500))
    return out


def arrow_all(consumer, expected: int, timeout: float = 30.0, max_records: int | None = None) -> pa.Table:
    tables = []
    got = 0
    deadline = time.monotonic() + timeout
    while got < expected and time.monotonic() < deadline:
        t = consumer.poll_arrow(500, max_records=max_records)
        assert max_records is None or t.num_rows <= max_records
        tables.append(t)
        got += t.num_rows
    return pa.concat_tables(tables)


@pytest.fixture(params=["compiled", "pure"])
def codec(request):
    """The client's record codec (the producer's encoder, poll's and poll_arrow's decoders)."""
    prev = record_codec.use_compiled(request.param == "compiled")
    yield request.param
    record_codec.use_compiled(prev)


def test_poll_arrow_equals_poll_equals_what_was_sent_under_both_codecs(client, topic_name, codec):
    client.create_topic(topic_name, partitions=2)
    producer = client.producer(linger_ms=1)
    sent = []
    for i in range(1500):
        value = None if i % 9 == 0 else b"v%d" % i
        key = b"k%d" % (i % 13) if i % 4 else None
        headers = [("h", b"%d" % i), ("n", None)] if i % 50 == 0 else None
        producer.send(topic_name, value, key, headers=headers)
        sent.append((key, value, tuple(headers or ())))
    producer.flush()
    tps = [(topic_name, 0), (topic_name, 1)]
    c1 = client.consumer(auto_offset_reset="earliest")
    c1.assign(tps)
    records = poll_all(c1, 1500)
    c2 = client.consumer(auto_offset_reset="earliest")
    c2.assign(tps)
    table = arrow_all(c2, 1500, max_records=400)
    assert table.schema == RECORD_SCHEMA
    assert table.num_rows == len(records) == 1500
    assert Counter((r.key, r.value, r.headers) for r in records) == Counter(sent)
    key = lambda r: (r[0], r[1], r[2])  # noqa: E731
    expected = sorted(((r.topic, r.partition, r.offset, r.timestamp, r.key, r.value,
                        [{"key": k, "value": v} for k, v in r.headers]) for r in records), key=key)
    got = sorted(zip(*(table.column(c).to_pylist() for c in
                       ("topic", "partition", "offset", "timestamp", "key", "value", "headers"))), key=key)
    assert got == [tuple(e) for e in expected]
    for tp in tps:
        assert c2.position(tp) == c1.position(tp) == c1.end_offsets([tp])[TopicPartition(*tp)]
    assert c2.poll_arrow(200).num_rows == 0
    c1.close()
    c2.close()


def test_poll_and_poll_arrow_mixed_lose_nothing(client, topic_name):
    client.create_topic(topic_name, partitions=1)
    producer = client.producer()
    producer.send_batch(topic_name, [b"%d" % i for i in range(1000)], partition=0)
    producer.flush()
    c = client.consumer(auto_offset_reset="earliest")
    c.assign([(topic_name, 0)])
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < 1000 and time.monotonic() < deadline:
        seen += [r.offset for r in c.poll(500, max_records=150)]
        seen += c.poll_arrow(500, max_records=170).column("offset").to_pylist()
    assert seen == list(range(1000))
    c.close()


def test_send_batch_columns_match_per_record_sends(client, topic_name):
    """Keyed columns land on the partitions send() would pick, with the same bytes, in order."""
    client.create_topic(topic_name, partitions=3)
    producer = client.producer(batch_size=4096)
    n = 3000
    keys = [b"key-%d" % (i % 97) if i % 10 else None for i in range(n)]
    values = [b"value-%05d" % i if i % 7 else None for i in range(n)]
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())})
    futures = producer.send_batch(topic_name, table)
    producer.flush()
    assert len(futures) == n
    metas = futures.result()
    c = client.consumer(topic_name, auto_offset_reset="earliest")
    got = poll_all(c, n)
    c.close()
    assert len(got) == n
    by_value = {}
    for r in got:
        if r.key is not None:
            assert r.partition == partition_for_key(r.key, 3)
        by_value.setdefault(r.value, []).append(r)
    for i, m in enumerate(metas):
        if keys[i] is not None:
            assert m.partition == partition_for_key(keys[i], 3)
    # per partition, the records keep the order they had in the table
    for p in range(3):
        mine = [(k, v) for r in sorted(got, key=lambda r: r.offset) if r.partition == p for k, v in [(r.key, r.value)]]
        assert mine == [(k, v) for (k, v), m in zip(zip(keys, values), metas) if m.partition == p]


def test_send_batch_numpy_and_arrow_values(client, topic_name):
    client.create_topic(topic_name, partitions=1)
    producer = client.producer(batch_size=2000)
    fixed = np.array([b"a", b"bb", b"", b"dddd"] * 50, dtype="S4")
    rows = np.arange(200 * 8, dtype=np.uint8).reshape(200, 8)
    strings = pa.array(["x%d" % i for i in range(200)]).slice(5, 100)
    producer.send_batch(topic_name, fixed, partition=0)
    producer.send_batch(topic_name, rows, partition=0)
    producer.send_batch(topic_name, strings, partition=0)
    producer.send_batch(topic_name, [b"list"] * 3, keys=np.array([b"k1", b"k2", b"k3"]), partition=0)
    producer.flush()
    c = client.consumer(topic_name, auto_offset_reset="earliest")
    got = poll_all(c, 503)
    c.close()
    assert [r.value for r in got] == ([bytes(v) for v in fixed] + [bytes(r) for r in rows]
                                      + [s.encode() for s in strings.to_pylist()] + [b"list"] * 3)
    assert [r.key for r in got[-3:]] == [b"k1", b"k2", b"k3"]
    assert [r.offset for r in got] == list(range(503))
