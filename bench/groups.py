"""Consumer-group figures: time to first record after subscribe(), commit latency, coordinator throughput, replay.

Run: ``python bench/groups.py`` (starts an embedded Ray, a gateway on a free port and
the group coordinator with production defaults: group.initial.rebalance.delay.ms=3000).
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

if __name__ == "__main__":
    need("logan_ray", "ray", "confluent_kafka")

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_AUTH_MODE", "token")


def subscribe_to_first_record(gateway: str, topic: str, runs: int, timeout_s: float = 120.0) -> list[float]:
    """A confluent-kafka consumer with default settings (plus auto.offset.reset=earliest) in a new group.

    A run that sees no record within ``timeout_s`` counts as NaN.
    """
    from confluent_kafka import Consumer

    out = []
    for _ in range(runs):
        c = Consumer({"bootstrap.servers": gateway, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                      "auto.offset.reset": "earliest"})
        started = time.perf_counter()
        c.subscribe([topic])
        took = float("nan")
        while time.perf_counter() - started < timeout_s:
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                took = time.perf_counter() - started
                break
        out.append(took)
        c.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--groups", type=int, default=2000)
    args = ap.parse_args()

    import ray

    import logan_ray
    from logan_ray.actors.group_coordinator import ensure_group_coordinator
    from logan_ray.consumer import OffsetAndMetadata
    from logan_ray.gateway import start_gateways, stop_gateways

    client = logan_ray.connect(data_dir=tempfile.mkdtemp(prefix="bench-groups-"))
    here = ray.get_runtime_context().get_node_id()
    gateway = start_gateways("127.0.0.1", 0, nodes=[here])[here]
    coord = ensure_group_coordinator()
    try:
        client.create_topic("bench-groups", 6)
        p = client.producer()
        for i in range(60):
            p.send("bench-groups", b"x", partition=i % 6)
        p.close()

        t = subscribe_to_first_record(gateway, "bench-groups", args.runs)
        print(f"confluent-kafka subscribe() -> first record: median {statistics.median(t):.2f} s "
              f"(runs: {', '.join(f'{x:.2f}' for x in t)}; 3.0 s of it is group.initial.rebalance.delay.ms)")

        consumer = client.consumer(group="bench-commit", enable_auto_commit=False)
        consumer.assign([("bench-groups", p) for p in range(6)])
        lat = []
        for i in range(300):
            started = time.perf_counter()
            consumer.commit({("bench-groups", p): OffsetAndMetadata(i, "m") for p in range(6)})
            lat.append((time.perf_counter() - started) * 1e3)
        consumer.close()
        lat.sort()
        print(f"Python API commit (6 partitions, durable): p50 {lat[len(lat) // 2]:.2f} ms, "
              f"p99 {lat[int(len(lat) * 0.99)]:.2f} ms")

        started = time.perf_counter()
        ray.get([coord.heartbeat.remote({"group_id": "none", "generation_id": 1, "member_id": "m"})
                 for _ in range(args.groups)])
        print(f"heartbeats, {args.groups} concurrent: {args.groups / (time.perf_counter() - started):,.0f}/s")
        started = time.perf_counter()
        refs = [coord.offset_commit.remote({
            "group_id": f"g{g}", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "bench-groups", "partitions": [
                {"partition_index": p, "committed_offset": g, "committed_metadata": ""} for p in range(6)]}]}, 9)
            for g in range(args.groups)]
        ray.get(refs)
        print(f"OffsetCommits (6 partitions each), {args.groups} groups concurrently: "
              f"{args.groups / (time.perf_counter() - started):,.0f}/s")

        pid = ray.get(coord.pid.remote())
        ray.kill(coord, no_restart=False)
        while True:
            try:
                if ray.get(coord.pid.remote(), timeout=5) != pid:
                    break
            except Exception:
                time.sleep(0.2)
        ray.get(coord.ready.remote())
        s = ray.get(coord.stats.remote())
        print(f"coordinator restart: replayed {s['loaded_records']:,} records of {s['groups']:,} groups "
              f"in {s['load_ms']:.0f} ms")
    finally:
        stop_gateways([here])
        client.close()


if __name__ == "__main__":
    main()
