"""A continuous pipeline on logan-ray: sensor readings -> alerts, with a dead-letter topic.

Two worker actors (one consumer group, "sensor-alerts") read "sensor-readings" as Arrow
batches, keep the readings over 30 degrees as alerts in "sensor-alerts", and put the
malformed readings (the function raises on them) into "sensor-readings-dlq", each with
its source offset and the error in headers. The pipeline runs until stopped; records
produced while it runs are picked up at once. Run it again: it continues from the
group's committed offsets and processes only what is new.

Run: python examples/stream_pipeline.py   (attaches to the broker `logan-ray start` runs,
or to the one of LOGAN_RAY_DATA_DIR; otherwise starts an embedded one in a temp dir).
"""
from __future__ import annotations

import json
import os
import random
import tempfile
import time

import pyarrow as pa

import logan_ray
from logan_ray import stream
from logan_ray.client import default_data_dir, read_broker_file

READINGS, ALERTS, DLQ = "sensor-readings", "sensor-alerts", "sensor-readings-dlq"


def alerts(batch: pa.RecordBatch) -> pa.Table:
    """Readings over 30 degrees, keyed by sensor. Runs in the worker actors; raises on a bad reading."""
    keys, values = [], []
    for raw in batch.column("value").to_pylist():
        reading = json.loads(raw)  # a malformed reading raises: it goes to the dead-letter topic
        if reading["celsius"] > 30:
            keys.append(reading["sensor"].encode())
            values.append(json.dumps({**reading, "alert": "hot"}).encode())
    return pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())})


def produce_readings(client, count: int, bad_every: int = 1000) -> None:
    with client.producer() as producer:
        for i in range(count):
            if i % bad_every == bad_every - 1:
                producer.send(READINGS, b"{not json", key=b"broken")
                continue
            sensor = f"s{random.randrange(20)}"
            reading = {"sensor": sensor, "celsius": round(random.uniform(10, 35), 1), "seq": i}
            producer.send(READINGS, json.dumps(reading).encode(), key=sensor.encode())


def wait_until_caught_up(pipeline, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = pipeline.status()
        print(f"  workers {status.workers}, processed {status.records_processed}, "
              f"alerts {status.output_records}, dead letters {status.dead_letters}, lag {status.total_lag}")
        if status.total_lag == 0 and status.records_processed:
            return
        time.sleep(1)
    raise TimeoutError("the pipeline did not catch up")


data_dir = os.environ.get("LOGAN_RAY_DATA_DIR")
if data_dir is None and read_broker_file(default_data_dir()) is None:
    data_dir = tempfile.mkdtemp(prefix="logan-ray-stream-")  # no broker runs: an embedded one here
client = logan_ray.connect(data_dir=data_dir)
try:
    topics = client.list_topics()
    for name, partitions in ((READINGS, 3), (ALERTS, 3), (DLQ, 1)):
        if name not in topics:
            client.create_topic(name, partitions=partitions)

    produce_readings(client, 5000)
    print("pipeline started; catching up with 5000 readings:")
    pipeline = stream.run(client, [READINGS], group="sensor-alerts", fn=alerts, output_topic=ALERTS,
                          dead_letter_topic=DLQ, workers=2)
    try:
        wait_until_caught_up(pipeline)
        print("5000 more readings while it runs:")
        produce_readings(client, 5000)
        wait_until_caught_up(pipeline)
        for worker, partitions in sorted(pipeline.status().assignment.items()):
            print(f"  {worker} reads partitions {[p for _, p in partitions]}")
    finally:
        final = pipeline.stop()
    print(f"stopped: {final.records_processed} readings processed, {final.output_records} alerts, "
          f"{final.dead_letters} dead letters")

    consumer = client.consumer(DLQ, auto_offset_reset="earliest")
    letters = consumer.poll(timeout_ms=2000, max_records=2)
    consumer.close()
    for letter in letters:
        headers = dict(letter.headers)
        print(f"dead letter from {headers[stream.DLQ_TOPIC].decode()}-{headers[stream.DLQ_PARTITION].decode()} "
              f"offset {headers[stream.DLQ_OFFSET].decode()}: {headers[stream.DLQ_ERROR].decode()}")
finally:
    client.close()
