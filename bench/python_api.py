"""Python API throughput side by side with confluent-kafka through the gateway, in one run.

Run: python bench/python_api.py [--records 2000000] [--record-size 100] [--queue-records 3000]

One embedded broker, 100 B values, one partition. Measured in this order:
1. produce with ``Producer.send_batch`` (lists of 50,000 values) and, on the same
   partition, ``send`` one record at a time (300,000 records), first by the compiled send
   path (logan_ray/_send_path.c) and then by the Python ``send`` it stands in for;
2. consume everything from offset 0 with ``Consumer.poll`` and with
   ``Consumer.poll_arrow`` (8 MiB fetches);
   steps 1 and 2 twice: over the node-local channel (the local fast path, the default
   on the partition's node) and by Ray actor calls (``LOGAN_RAY_LOCAL_PATH=0``), each
   on its own topic;
3. the reference: confluent-kafka's producer and consumer through the Kafka
   gateway of the same broker, on the same topic (the consumer reads the same
   records from offset 0; the producer appends ``--records`` more);
4. ``ray.util.queue.Queue`` put/get, the Ray primitive a queue user would reach for.
Each rate is records/s over the whole loop including the final flush/ack.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

if __name__ == "__main__":
    need("logan_ray", "ray", "confluent_kafka")

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import machine  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.kafka import consume_confluent, free_port  # noqa: E402  (one confluent-kafka reference reader)


def confluent_produce(bootstrap: str, topic: str, n: int, value: bytes) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1048576,
                  "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000})
    produce_one = p.produce
    t = time.perf_counter()
    for _ in range(n):
        try:
            produce_one(topic, value, partition=0)
        except BufferError:
            p.poll(0.01)
            produce_one(topic, value, partition=0)
    left = p.flush(300)
    took = time.perf_counter() - t
    if left:
        raise RuntimeError(f"confluent-kafka: {left} records not acknowledged")
    return n / took


def measure(client, topic: str, path: str, value: bytes, args, rates: dict[str, float]) -> tuple[int, int]:
    """send_batch, send, poll and poll_arrow on a new one-partition topic, over one path."""
    client.create_topic(topic, partitions=1)
    if path == "channel":  # open it before timing (the first calls would go by Ray while it opens)
        assert client.local_path.wait_open(client.partition_actor(topic, 0)), "no channel to the partition"
    producer = client.producer(batch_size=1 << 20, linger_ms=5)
    chunk = [value] * 50_000
    t = time.perf_counter()
    for _ in range(args.records // len(chunk)):
        producer.send_batch(topic, chunk, partition=0)
    producer.flush()
    n = (args.records // len(chunk)) * len(chunk)
    rates[f"send_batch ({path})"] = n / (time.perf_counter() - t)
    single_n = min(n, args.single_records)
    # send one at a time: the compiled send path (when built), then the Python send on the same
    # producer and partition (the class method, which the compiled one stands in for)
    sends = [("send", producer.send)]
    if getattr(producer.send, "__func__", None) is None:
        sends.append(("send, Python path", functools.partial(type(producer).send, producer)))
    for name, send in sends:
        t = time.perf_counter()
        for _ in range(single_n):
            send(topic, value, partition=0)
        producer.flush()
        rates[f"{name} ({path})"] = single_n / (time.perf_counter() - t)
    total = n + single_n * len(sends)
    import logan_ray.data.arrow_records  # noqa: F401  poll_arrow's one-time import (Ray Data, ~0.3 s) not timed
    for how in ("poll", "poll_arrow"):
        consumer = client.consumer(auto_offset_reset="earliest", fetch_max_bytes=8 << 20)
        consumer.assign([(topic, 0)])
        got = 0
        t = time.perf_counter()
        while got < total:
            got += len(consumer.poll(5000)) if how == "poll" else consumer.poll_arrow(5000).num_rows
        rates[f"{how} ({path})"] = got / (time.perf_counter() - t)
        consumer.close()
    print(f"{path} done: sent {producer.append_paths}, fetched {consumer.fetch_paths}", flush=True)
    return n, total - n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--single-records", type=int, default=300_000)
    ap.add_argument("--queue-records", type=int, default=3000)
    ap.add_argument("--record-size", type=int, default=100)
    args = ap.parse_args()

    import ray
    from ray.util.queue import Queue

    import logan_ray
    from logan_ray.gateway import start_gateways, stop_gateways
    from logan_ray.storage.records import compiled

    print(machine.describe(), flush=True)
    print(f"record codec: {'compiled' if compiled() else 'pure Python'}")
    value = b"x" * args.record_size
    rates: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as d:
        client = logan_ray.connect(data_dir=d)
        node = ray.get_runtime_context().get_node_id()
        try:
            n = single_n = 0
            for path, topic in (("channel", "bench"), ("ray calls", "bench-ray")):
                os.environ["LOGAN_RAY_LOCAL_PATH"] = "1" if path == "channel" else "0"
                n, single_n = measure(client, topic, path, value, args, rates)
            os.environ.pop("LOGAN_RAY_LOCAL_PATH", None)
            total = n + single_n

            bootstrap = start_gateways("127.0.0.1", free_port(), nodes=[node])[node]
            try:
                rates["confluent-kafka consume (gateway)"] = total / consume_confluent(bootstrap, "bench", total)
                rates["confluent-kafka produce (gateway)"] = confluent_produce(bootstrap, "bench", n, value)
            finally:
                stop_gateways([node])

            q = Queue()
            t = time.perf_counter()
            for _ in range(args.queue_records):
                q.put(value)
            rates["ray.util.queue.Queue put"] = args.queue_records / (time.perf_counter() - t)
            t = time.perf_counter()
            for _ in range(args.queue_records):
                q.get()
            rates["ray.util.queue.Queue get"] = args.queue_records / (time.perf_counter() - t)
        finally:
            client.close()

    ref_c = rates["confluent-kafka consume (gateway)"]
    ref_p = rates["confluent-kafka produce (gateway)"]
    print(f"{'':36}{'records/s':>14}{'vs confluent':>14}")
    for name, rate in rates.items():
        ref = ref_c if ("consume" in name or "poll" in name) else ref_p if ("produce" in name or "send" in name) else None
        rel = f"{rate / ref:>13.2f}x" if ref and not name.startswith("confluent") else ""
        print(f"{name:36}{rate:>14,.0f}{rel}")
    print(f"({n:,} records of {args.record_size} B by send_batch, {single_n:,} by send; "
          f"{args.queue_records:,} for the Queue)")


if __name__ == "__main__":
    main()
