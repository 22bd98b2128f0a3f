"""Broker restart on the same data dir, and SIGKILL of a partition actor mid-produce."""
from __future__ import annotations

import os
import signal
import threading
import time

import ray


def test_restart_keeps_topics_configs_and_records(client, restart_router, topic_name):
    client.create_topic(topic_name, partitions=2, config={"retention.bytes": "123456789"})
    producer = client.producer(compression="zstd")
    metas = [f.result() for f in producer.send_batch(topic_name, [b"r%d" % i for i in range(5000)], partition=1)]
    producer.close()
    restart_router()
    assert topic_name in client.list_topics()
    assert client.topic_config(topic_name)["retention.bytes"] == "123456789"
    assert client.partition_offsets(topic_name) == {0: (0, 0), 1: (0, 5000)}
    records = ray.get(client.partition_actor(topic_name, 1).read_records.remote(0, 64 << 20))
    assert [r.value for r in records] == [b"r%d" % i for i in range(5000)]
    assert [r.offset for r in records] == [m.offset for m in metas]


def test_sigkill_partition_actor_loses_no_acknowledged_record(client, topic_name):
    client.create_topic(topic_name, partitions=1)
    actor = client.partition_actor(topic_name, 0)
    pid = ray.get(actor.pid.remote())
    producer = client.producer(acks="all", linger_ms=1, batch_size=16 * 1024)
    acked: list[bytes] = []
    stop = threading.Event()

    def produce():
        i = 0
        while not stop.is_set():
            futs = [(b"rec-%08d" % (i + j), producer.send(topic_name, b"rec-%08d" % (i + j))) for j in range(200)]
            for value, f in futs:
                f.result(timeout=60)
                acked.append(value)
            i += 200

    t = threading.Thread(target=produce)
    t.start()
    time.sleep(1.5)
    os.kill(pid, signal.SIGKILL)
    time.sleep(3.0)
    stop.set()
    t.join(timeout=120)
    producer.flush()
    assert ray.get(actor.pid.remote()) != pid  # Ray restarted it, and it recovered from disk
    start, end = ray.get(actor.offsets.remote())
    records = []
    offset = start
    while offset < end:
        batch = ray.get(actor.read_records.remote(offset, 8 << 20))
        records.extend(batch)
        offset = batch[-1].offset + 1
    values = [r.value for r in records]
    assert len(acked) > 1000
    assert len(values) == len(set(values)), "a record was written twice"
    missing = set(acked) - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost"
    assert values == sorted(values)  # order kept across the crash
