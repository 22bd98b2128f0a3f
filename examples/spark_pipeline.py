"""A data pipeline on logan-ray: Kafka producer -> Spark aggregation -> compacted topic -> Python app.

1. A Kafka client (kafka-python) produces raw purchase events into "purchases"
   through logan-ray's Kafka gateway.
2. A Spark job on the same Ray cluster (raydp) reads the topic as a DataFrame,
   sums purchases per user and writes one record per user into
   "user-totals", a compacted topic (cleanup.policy=compact): the latest
   total per user is what a compacted topic keeps.
3. A Python app reads the totals back through logan-ray's API.

Run: python examples/spark_pipeline.py   (embedded broker in a temp dir, or the
running `logan-ray start` broker when LOGAN_RAY_DATA_DIR points at its data dir).
"""
from __future__ import annotations

import json
import os
import random
import tempfile
import time

# Ray 2.60 turns token auth on for local clusters; the mode must be in the
# environment before Ray reads its config at import (see the report on
# logan_ray.client.init_ray, which sets it too late for standalone scripts).
os.environ.setdefault("RAY_AUTH_MODE", "token")

import ray  # noqa: E402
from kafka import KafkaProducer  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

import logan_ray  # noqa: E402
from logan_ray import spark as lspark  # noqa: E402
from logan_ray.client import read_broker_file  # noqa: E402

RAW, TOTALS = "purchases", "user-totals"
EVENTS = 20_000

data_dir = os.environ.get("LOGAN_RAY_DATA_DIR") or tempfile.mkdtemp(prefix="logan-ray-pipeline-")
client = logan_ray.connect(data_dir=data_dir)
started_gateway = False
try:
    ray.data.DataContext.get_current().enable_progress_bars = False
    # The Kafka endpoint: the running broker's, or a gateway started here for this run.
    info = read_broker_file(data_dir) or {}
    bootstrap = info.get("kafka")
    if not bootstrap:
        from logan_ray.gateway import start_gateways

        here = ray.get_runtime_context().get_node_id()
        bootstrap = start_gateways("127.0.0.1", 0, nodes=[here])[here]
        started_gateway = True

    topics = client.list_topics()
    if RAW not in topics:
        client.create_topic(RAW, partitions=3)
    if TOTALS not in topics:
        client.create_topic(TOTALS, partitions=3, config={"cleanup.policy": "compact"})

    # 1. raw events from a Kafka client
    producer = KafkaProducer(bootstrap_servers=bootstrap, key_serializer=str.encode,
                             value_serializer=lambda v: json.dumps(v).encode(), linger_ms=5)
    rng = random.Random(42)
    for i in range(EVENTS):
        user = f"user-{rng.randrange(50)}"
        producer.send(RAW, key=user, value={"user": user, "item": f"sku-{rng.randrange(500)}",
                                            "amount": round(rng.uniform(1, 100), 2)})
    producer.flush()
    producer.close()
    print(f"produced {EVENTS} purchases through the Kafka gateway at {bootstrap}")

    # 2. Spark on Ray: aggregate per user, write into the compacted topic
    started = time.perf_counter()
    spark = lspark.session("logan-ray-pipeline", num_executors=1, executor_cores=1, executor_memory="1g")
    spark.sparkContext.setLogLevel("ERROR")
    purchases = lspark.read_topic(spark, RAW, value_format="json", expand_value=True, client=client)
    totals = (purchases.groupBy("user")
              .agg(F.count("*").alias("purchases"), F.round(F.sum("amount"), 2).alias("total"))
              .withColumnRenamed("user", "key"))
    written = lspark.write_topic(totals, TOTALS, key="key", value=["purchases", "total"], client=client)
    print(f"spark wrote {sum(written.values())} totals in {time.perf_counter() - started:.1f} s: {written}")
    lspark.stop()

    # 3. a Python app reads the totals back (latest record per key, as compaction keeps)
    consumer = client.consumer(TOTALS, auto_offset_reset="earliest", value_deserializer="json")
    latest: dict[str, dict] = {}
    deadline = time.monotonic() + 30
    while len(latest) < sum(written.values()) and time.monotonic() < deadline:
        for r in consumer.poll(timeout_ms=1000):
            latest[r.key.decode()] = r.value
    consumer.close()
    top = sorted(latest.items(), key=lambda kv: -kv[1]["total"])[:5]
    print(f"{len(latest)} users; top spenders:")
    for user, v in top:
        print(f"  {user:8} {v['purchases']:4} purchases  {v['total']:10.2f}")
    assert sum(v["purchases"] for v in latest.values()) == EVENTS
finally:
    lspark.stop()
    if started_gateway:
        from logan_ray.gateway import stop_gateways

        stop_gateways([ray.get_runtime_context().get_node_id()])
    client.close()
