"""A short logan-ray app: create a topic, produce JSON events, read them back.

Run: python examples/quickstart.py   (starts an embedded broker in a temp dir, or
attaches to the one `logan-ray start` runs when LOGAN_RAY_DATA_DIR points at it).
"""
from __future__ import annotations

import os
import tempfile

import logan_ray

data_dir = os.environ.get("LOGAN_RAY_DATA_DIR") or tempfile.mkdtemp(prefix="logan-ray-example-")
client = logan_ray.connect(data_dir=data_dir)
try:
    if "clicks" not in client.list_topics():
        client.create_topic("clicks", partitions=3, config={"retention.ms": str(24 * 3600 * 1000)})

    with client.producer(value_serializer="json", key_serializer="str", compression="zstd") as producer:
        futures = [producer.send("clicks", {"user": f"u{i % 4}", "page": f"/p/{i}"}, key=f"u{i % 4}")
                   for i in range(1000)]
    first = futures[0].result()
    print(f"first record: partition {first.partition}, offset {first.offset}")

    consumer = client.consumer("clicks", auto_offset_reset="earliest", value_deserializer="json")
    seen = []
    while len(seen) < 1000:
        seen.extend(consumer.poll(timeout_ms=2000))
    per_user: dict[str, int] = {}
    for r in seen:
        per_user[r.value["user"]] = per_user.get(r.value["user"], 0) + 1
    print("clicks per user:", dict(sorted(per_user.items())))

    # The partition actors are plain Ray actors; apps may call them directly.
    actor = client.partition_actor("clicks", 0)
    import ray

    print("partition 0 stats:", {k: v for k, v in ray.get(actor.stats.remote()).items()
                                 if k in ("log_start_offset", "log_end_offset", "segment_count")})
finally:
    client.close()
