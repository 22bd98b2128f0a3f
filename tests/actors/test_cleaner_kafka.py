"""kafka-python reads a compacted topic through the Kafka gateway: offset gaps are normal for a real client."""
from __future__ import annotations

import random
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def consume_from(bootstrap: str, tp: TopicPartition, start: int | None, end: int, **kw) -> list:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=100,
                      **kw)
    try:
        c.assign([tp])
        if start is None:
            c.seek_to_beginning(tp)
        else:
            c.seek(tp, start)
        out = []
        deadline = time.monotonic() + 30
        while c.position(tp) < end and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=500).values():
                out += [(m.offset, m.key, m.value) for m in msgs]
        assert c.position(tp) == end, (c.position(tp), end)
        return out
    finally:
        c.close()


def test_kafka_python_reads_a_compacted_topic(client, gateway, topic_name):
    client.create_topic(topic_name, partitions=1,
                        config={"cleanup.policy": "compact", "segment.bytes": str(32 << 10)})
    rnd = random.Random(6)
    written = {}
    for codec in (None, "lz4", "gzip"):
        p = KafkaProducer(bootstrap_servers=gateway, compression_type=codec, linger_ms=5, batch_size=4096)
        sent = []
        for i in range(700):
            key = b"k%02d" % rnd.randrange(40)
            value = None if rnd.random() < 0.03 else b"%s-%d:" % (str(codec).encode(), i) + b"z" * rnd.randrange(150)
            sent.append((p.send(topic_name, key=key, value=value, partition=0), key, value))
        p.flush(30)
        written.update({f.get(10).offset: (k, v) for f, k, v in sent})
        p.close()
    end = max(written) + 1
    client.compact(topic_name)  # a scheduled pass may already have cleaned part of it
    latest = {}
    for o in sorted(written):
        latest[written[o][0]] = o
    want = [(o, *written[o]) for o in sorted(written) if latest[written[o][0]] == o]
    assert len(want) == 40
    import ray

    on_disk = ray.get(client.partition_actor(topic_name, 0).read_records.remote(0, 64 << 20))
    assert len(on_disk) == len(want)  # 2100 written, one per key left

    tp = TopicPartition(topic_name, 0)
    assert consume_from(gateway, tp, None, end) == want
    # small fetches step over the gaps batch by batch; a consumer resuming mid-log goes on from there
    assert consume_from(gateway, tp, None, end, max_partition_fetch_bytes=600) == want
    for start in rnd.sample(range(end), 5):
        assert consume_from(gateway, tp, start, end) == [w for w in want if w[0] >= start]
