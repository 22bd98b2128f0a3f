"""Spark on Ray (raydp): topics as DataFrames, DataFrames into topics, clean shutdown.

One small Spark (1 executor, 1 core, 1g) for the module: a JVM start costs
seconds on this machine.
"""
from __future__ import annotations

import json
import time

import psutil
import pytest
import ray

from logan_ray import spark as lspark
from logan_ray.partitioner import partition_for_key

BASE_TS = 1_760_000_000_000


def java_pids() -> set[int]:
    return {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "java"}


def spark_python_workers() -> set[int]:
    out = set()
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "pyspark.daemon" in cmd or "pyspark/daemon" in cmd:
            out.add(p.pid)
    return out


@pytest.fixture(scope="module")
def java_before(client):
    return java_pids()


@pytest.fixture(scope="module")
def spark(client, java_before):
    ray.data.DataContext.get_current().enable_progress_bars = False
    session = lspark.session("logan-ray-tests", num_executors=1, executor_cores=1, executor_memory="1g")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    lspark.stop()


def produce(client, topic: str, n: int) -> None:
    client.create_topic(topic, partitions=3)
    with client.producer(compression="lz4") as producer:
        for i in range(n):
            producer.send(topic, json.dumps({"user": f"u{i % 7}", "amount": i}).encode(), f"u{i % 7}".encode(),
                          timestamp_ms=BASE_TS + i)


def test_topic_reads_into_a_dataframe(client, spark, topic_name):
    produce(client, topic_name, 2100)
    df = lspark.read_topic(spark, topic_name, client=client)
    assert df.columns == ["topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers"]
    rows = df.collect()
    assert len(rows) == 2100
    assert sorted(json.loads(bytes(r.value))["amount"] for r in rows) == list(range(2100))
    assert all(r.partition == partition_for_key(bytes(r.key), 3) for r in rows)

    # raydp's own Dataset.to_spark (pandas in between) yields the same rows
    cols = ["partition", "offset", "value"]
    assert sorted(lspark.read_topic(spark, topic_name, columns=cols, client=client, via="raydp").collect()) == \
        sorted((r.partition, r.offset, r.value) for r in rows)

    window = lspark.read_topic(spark, topic_name, start=100, end=200, columns=["partition", "offset"], client=client)
    assert window.count() == 300
    assert sorted({r.offset for r in window.collect()}) == list(range(100, 200))

    by_time = lspark.read_topic(spark, topic_name, start={"timestamp": BASE_TS + 2000}, client=client)
    assert by_time.count() == 100

    empty = lspark.read_topic(spark, topic_name, start={"timestamp": BASE_TS + 10**6}, client=client)
    assert empty.count() == 0 and empty.columns == df.columns

    per_user = (lspark.read_topic(spark, topic_name, value_format="json", expand_value=True, client=client)
                .groupBy("user").sum("amount").collect())
    assert {r["user"]: r["sum(amount)"] for r in per_user} == {
        f"u{u}": sum(i for i in range(2100) if i % 7 == u) for u in range(7)}


def test_dataframe_writes_into_a_topic(client, spark, topic_name, gateway):
    from kafka import KafkaConsumer, TopicPartition

    client.create_topic(topic_name, partitions=4)
    n = 1000
    df = spark.createDataFrame([(f"key-{i % 37}", f"value-{i}") for i in range(n)], ["key", "value"])
    written = lspark.write_topic(df, topic_name, client=client)
    assert sum(written.values()) == n

    # the Python API
    consumer = client.consumer(topic_name, auto_offset_reset="earliest")
    got = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        got.extend(consumer.poll(500))
    consumer.close()
    expected = sorted((f"key-{i % 37}".encode(), f"value-{i}".encode()) for i in range(n))
    assert sorted((r.key, r.value) for r in got) == expected
    assert all(r.partition == partition_for_key(r.key, 4) for r in got)

    # a Kafka client through the gateway
    kc = KafkaConsumer(bootstrap_servers=gateway, group_id=None, enable_auto_commit=False,
                       auto_offset_reset="earliest")
    try:
        kc.assign([TopicPartition(topic_name, p) for p in range(4)])
        kafka_rows = []
        deadline = time.monotonic() + 30
        while len(kafka_rows) < n and time.monotonic() < deadline:
            for tp, records in kc.poll(timeout_ms=500).items():
                kafka_rows.extend((tp.partition, r.key, r.value) for r in records)
    finally:
        kc.close()
    assert sorted((k, v) for _p, k, v in kafka_rows) == expected
    assert all(p == partition_for_key(k, 4) for p, k, _v in kafka_rows)


def test_an_exactly_once_dataframe_write_is_committed_in_transactions_and_read_committed_once(
        client, spark, topic_name, gateway):
    """Spark hands the DataFrame to Ray Data's two-phase sink (docs/transactions.md): the rows are
    written in one transaction per Ray write task and committed by the driver once all returned."""
    from kafka import KafkaConsumer, TopicPartition

    client.create_topic(topic_name, partitions=2)
    n = 300
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(n)], ["key", "value"])
    written = lspark.write_topic(df, topic_name, client=client, exactly_once=True)
    assert sum(written.values()) == n
    kc = KafkaConsumer(bootstrap_servers=gateway, enable_auto_commit=False)
    try:
        ends = kc.end_offsets([TopicPartition(topic_name, p) for p in range(2)])
    finally:
        kc.close()
    assert sum(ends.values()) > n  # each partition's transactions end in COMMIT markers, which take offsets
    rows = lspark.read_topic(spark, topic_name, client=client, isolation_level="read_committed").collect()
    assert sorted(bytes(r.value).decode() for r in rows) == sorted(f"v{i}" for i in range(n))


def test_stop_leaves_no_java_and_a_new_session_starts(client, spark, java_before):
    lspark.stop()
    leftover = java_pids() - java_before
    assert not leftover, [psutil.Process(p).cmdline()[-3:] for p in leftover]
    assert not spark_python_workers()
    names = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)} if hasattr(
        ray.util, "list_named_actors") else set()
    assert not any(n.endswith(lspark.MASTER_SUFFIX) for n in names)

    again = lspark.session("logan-ray-tests-2")
    try:
        assert again.range(1000).selectExpr("sum(id)").collect()[0][0] == 499500
    finally:
        lspark.stop()
    assert not (java_pids() - java_before)
