"""Produce/consume throughput of 100-byte records through the Python API vs ray.util.queue.Queue.

Run: python bench/python_api.py [--records 2000000] [--queue-records 3000]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

if __name__ == "__main__":
    need("logan_ray", "ray")

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import machine  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--queue-records", type=int, default=3000)
    ap.add_argument("--record-size", type=int, default=100)
    args = ap.parse_args()

    import ray
    from ray.util.queue import Queue

    import logan_ray

    print(machine.describe())
    value = b"x" * args.record_size
    with tempfile.TemporaryDirectory() as d:
        client = logan_ray.connect(data_dir=d)
        try:
            client.create_topic("bench", partitions=1)
            producer = client.producer(batch_size=1 << 20, linger_ms=5)
            chunk = [value] * 50_000
            t = time.perf_counter()
            for _ in range(args.records // len(chunk)):
                producer.send_batch("bench", chunk, partition=0)
            producer.flush()
            produce_s = time.perf_counter() - t
            n = (args.records // len(chunk)) * len(chunk)
            produce_rate = n / produce_s

            t = time.perf_counter()
            single_n = min(n, 300_000)
            for _ in range(single_n):
                producer.send("bench", value, partition=0)
            producer.flush()
            single_rate = single_n / (time.perf_counter() - t)

            consumer = client.consumer(auto_offset_reset="earliest", fetch_max_bytes=8 << 20)
            consumer.assign([("bench", 0)])
            got = 0
            t = time.perf_counter()
            while got < n:
                got += len(consumer.poll(5000))
            consume_rate = got / (time.perf_counter() - t)

            q = Queue()
            t = time.perf_counter()
            for _ in range(args.queue_records):
                q.put(value)
            queue_put = args.queue_records / (time.perf_counter() - t)
            t = time.perf_counter()
            for _ in range(args.queue_records):
                q.get()
            queue_get = args.queue_records / (time.perf_counter() - t)
        finally:
            client.close()

    print(f"{'':34}{'records/s':>14}{'vs Queue':>10}")
    print(f"{'logan-ray produce (send_batch)':34}{produce_rate:>14,.0f}{produce_rate / queue_put:>9,.0f}x")
    print(f"{'logan-ray produce (send)':34}{single_rate:>14,.0f}{single_rate / queue_put:>9,.0f}x")
    print(f"{'logan-ray consume (poll)':34}{consume_rate:>14,.0f}{consume_rate / queue_get:>9,.0f}x")
    print(f"{'ray.util.queue.Queue put':34}{queue_put:>14,.0f}")
    print(f"{'ray.util.queue.Queue get':34}{queue_get:>14,.0f}")
    print(f"({n:,} records of {args.record_size} B for logan-ray; {args.queue_records:,} for the Queue)")


if __name__ == "__main__":
    main()
