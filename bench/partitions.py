"""Cheap partitions (issue 14): what thousands of partitions on one node cost.

Run: ``python bench/partitions.py`` (embedded Ray, a gateway on a free port). Steps, in order:

1. create one topic of ``--partitions`` partitions (wall time of CreateTopics);
2. broker memory at rest: the sum of PSS of this process's whole process tree
   (GCS, raylet, every worker and actor: the whole embedded broker);
3. the gateway's time per Fetch naming every partition, none with data (all inactive: what a
   consumer assigned them all costs per request);
4. first-request latency over ``--cold`` untouched partitions: one 100 B record
   produced with confluent-kafka (linger.ms=0, acks=1) to each, timed from
   produce() to its delivery report. With lazy activation this is the
   activation latency; before it, every partition was already running. Then step 3's Fetch
   again, with those partitions active and at their log end (what a Fetch costs the gateway
   for active partitions with nothing new: actors/offsets_board.py). Side by side,
   Ray's own floor: the same number of bare named actors (no code, ``num_cpus=0``,
   pinned to this node, as a partition actor, each on a prestarted worker) created one
   at a time, at least 0.5 s apart, timed from creation to the answer of their first call;
5. ``--duration`` s of 100 B records produced round-robin to ``--active``
   partitions while a confluent-kafka consumer group reads all partitions:
   throughput, end-to-end latency p99 (producer timestamp to consumer), memory;
6. memory again after ``--idle`` s without traffic.

Compare throughput with the same run at ``--partitions`` equal to ``--active``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid

from machine import describe  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)
from needs import need  # noqa: E402

if __name__ == "__main__":
    need("logan_ray", "ray", "confluent_kafka", "psutil")

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_AUTH_MODE", "token")

VALUE = b"v" * 100


def broker_pss_mib() -> float:
    """Sum of PSS over this process and all its descendants (the embedded Ray broker)."""
    import psutil

    me = psutil.Process()
    total = 0
    for p in [me, *me.children(recursive=True)]:
        try:
            total += p.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total / 2**20


def partition_actor_count() -> int:
    """Live PartitionActor processes, from Ray's state API."""
    import ray
    from ray.util.state import list_actors

    # this broker's GCS, by address: another Ray may run on the machine
    return sum(1 for a in list_actors(address=ray.get_runtime_context().gcs_address,
                                      filters=[("state", "=", "ALIVE")], limit=10_000)
               if a.class_name == "PartitionActor")


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def first_request_latencies(gateway: str, topic: str, partitions: range, gap_s: float = 0.0) -> list[float]:
    from confluent_kafka import Producer

    prod = Producer({"bootstrap.servers": gateway, "linger.ms": 0, "acks": 1})
    prod.list_topics(topic, timeout=30)  # metadata first, so only the produce is timed
    out = []
    for p in partitions:
        time.sleep(gap_s)
        done: list[float] = []
        started = time.perf_counter()
        prod.produce(topic, VALUE, partition=p, on_delivery=lambda err, _m: done.append(
            time.perf_counter() if err is None else float("nan")))
        prod.flush(60)
        out.append((done[0] - started) * 1e3 if done else float("nan"))
    return out


def idle_fetch_ms(gateway: str, topic: str, partitions: int, rounds: int = 100,
                  ends: dict[int, int] | None = None) -> list[float]:
    """Ms per Fetch (v11, max_wait 0) naming every partition of ``topic`` at its log end (``ends``: the
    partitions whose log end is not 0), none with data: what the gateway spends per request on
    partitions that have nothing new (a consumer assigned all of them sends such requests back to
    back). The request is encoded once and the answer only read, so the time is the gateway's."""
    ends = ends or {}
    import socket
    import struct

    from logan_ray.protocol import encode_request

    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": ends.get(p, 0), "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20} for p in range(partitions)]}]}
    frame = encode_request(1, 11, 1, "bench", body)
    host, port = gateway.rsplit(":", 1)
    out = []
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def exactly(n: int) -> None:
            while n:
                got = s.recv(min(n, 1 << 20))
                if not got:
                    raise ConnectionError("gateway closed the connection")
                n -= len(got)

        for i in range(rounds + 5):
            started = time.perf_counter()
            s.sendall(frame)
            head = bytearray()
            while len(head) < 4:
                head += s.recv(4 - len(head))
            exactly(struct.unpack(">i", bytes(head))[0])
            if i >= 5:  # the first ones open the partitions' views
                out.append((time.perf_counter() - started) * 1e3)
    return out


def ray_actor_floor(count: int, gap_s: float) -> list[float]:
    """Ms from creating a bare named actor on this node to the answer of its first call (each one is
    ended before the next): what any Ray actor start costs here, whatever the actor does. Each gets a
    worker prestarted for this job before the gap, as a partition actor gets one of the router's warm
    workers (logan_ray.actors.warm_workers), so the two starts compare."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from logan_ray.actors.warm_workers import WarmWorkers

    @ray.remote(num_cpus=0)
    class Bare:
        def ping(self) -> int:
            return os.getpid()

    ctx = ray.get_runtime_context()
    here = ctx.get_node_id()
    warm = WarmWorkers(ctx.get_job_id(), ctx.get_runtime_env_string(), size=1)
    out = []
    for i in range(count):
        warm.fill(here)
        time.sleep(max(gap_s, 0.5))  # the prestarted worker has started and registered
        warm.took(here)
        started = time.perf_counter()
        actor = Bare.options(name=f"bench-bare-{uuid.uuid4().hex[:8]}", scheduling_strategy=NodeAffinitySchedulingStrategy(
            here, soft=False)).remote()
        ray.get(actor.ping.remote())
        out.append((time.perf_counter() - started) * 1e3)
        ray.kill(actor)
    return out


def activation_breakdown(topic: str, partitions: range, latencies: list[float]) -> str:
    """Median ms of each step of the activations just measured (the router's and the actors' records)."""
    import ray

    from logan_ray.actors.names import NAMESPACE, ROUTER_NAME, actor_name

    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    if not hasattr(router, "activation_steps"):  # the step records went with the early answer (stop 27)
        return "activation steps: not recorded by this broker"
    by_key = {(s["topic"], s["partition"]): s for s in ray.get(router.activation_steps.remote())}
    rows: dict[str, list[float]] = {k: [] for k in ("room", "create", "to_constructor", "config", "open",
                                                  "answer", "outside_router")}
    for p, lat in zip(partitions, latencies):
        r = by_key.get((topic, p))
        if r is None or "ready_ms" not in r:
            continue
        try:
            a = ray.get(ray.get_actor(actor_name(topic, p), namespace=NAMESPACE).activation_steps.remote())
        except Exception:
            continue
        created_at = r["asked_at"] + (r["room_ms"] + r["create_ms"]) / 1e3
        to_constructor = (a["init_at"] - created_at) * 1e3
        rows["room"].append(r["room_ms"])
        rows["create"].append(r["create_ms"])
        rows["to_constructor"].append(to_constructor)
        rows["config"].append(a["config_ms"])
        rows["open"].append(a["open_ms"])
        rows["answer"].append(r["ready_ms"] - to_constructor - a["config_ms"] - a["open_ms"])
        rows["outside_router"].append(lat - r["room_ms"] - r["create_ms"] - r["ready_ms"])
    return ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in rows.items() if v)


def produce_and_consume(gateway: str, topic: str, active: int, duration_s: float) -> dict:
    from confluent_kafka import Consumer, Producer

    stop = threading.Event()
    latencies: list[float] = []
    consumed = [0]
    again = [0]  # records delivered at an offset the consumer had already passed (redelivered)
    rebalances = [0]
    next_offset: dict[int, int] = {}

    def on_assign(_c, parts) -> None:
        rebalances[0] += 1

    def consume() -> None:
        c = Consumer({"bootstrap.servers": gateway, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                      "auto.offset.reset": "latest", "enable.auto.commit": True})
        c.subscribe([topic], on_assign=on_assign)
        while not stop.is_set():
            for m in c.consume(1000, 0.1):
                if m.error() is None:
                    consumed[0] += 1
                    latencies.append(time.time() * 1e3 - m.timestamp()[1])
                    p, o = m.partition(), m.offset()
                    if o < next_offset.get(p, -1):
                        again[0] += 1
                    else:
                        next_offset[p] = o + 1
        c.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    time.sleep(8.0)  # let the group form (initial rebalance delay) before counting
    failed: dict[str, int] = {}  # delivery reports of records the broker did not take, by error

    def on_failure(err, _msg) -> None:
        if err is not None:
            failed[err.name()] = failed.get(err.name(), 0) + 1

    prod = Producer({"bootstrap.servers": gateway, "linger.ms": 5, "acks": 1,
                     "delivery.report.only.error": True, "on_delivery": on_failure})
    sent = 0
    latencies.clear()
    consumed[0] = 0
    started = time.perf_counter()
    while time.perf_counter() - started < duration_s:
        try:
            prod.produce(topic, VALUE, partition=sent % active)
            sent += 1
        except BufferError:
            prod.poll(0.01)
        if sent % 1000 == 0:
            prod.poll(0)
    unsent = prod.flush(60)  # records still not acknowledged after 60 s (failed ones are in `failed`)
    took = time.perf_counter() - started
    time.sleep(2.0)
    stop.set()
    reader.join(30)
    # what the log holds: more than was sent means the producer's retries wrote records twice
    # (librdkafka retries a timed-out request; this producer is not idempotent)
    from confluent_kafka import TopicPartition

    c = Consumer({"bootstrap.servers": gateway, "group.id": "bench-offsets"})
    stored = sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(active))
    c.close()
    return {"sent": sent, "produce_rps": sent / took, "consumed": consumed[0], "unsent": unsent,
            "stored": stored, "redelivered": again[0], "assignments": rebalances[0], "failed": failed,
            "latency_p50_ms": pct(latencies, 0.5), "latency_p99_ms": pct(latencies, 0.99)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--active", type=int, default=50)
    ap.add_argument("--cold", type=int, default=200)
    ap.add_argument("--duration", type=float, default=60.0, help="0: stop after the activation latencies")
    ap.add_argument("--cold-gap", type=float, default=0.0,
                    help="seconds between two first requests (0: back to back, as a burst)")
    ap.add_argument("--idle", type=float, default=0.0, help="seconds without traffic before the last reading")
    ap.add_argument("--partition-idle-ms", type=int, default=0,
                    help="the broker's partition.idle.ms for this run (0: its default, 5 minutes)")
    args = ap.parse_args()
    cold = min(args.cold, args.partitions - args.active)

    import ray

    import logan_ray
    from logan_ray.gateway import start_gateways

    client = logan_ray.connect(data_dir=tempfile.mkdtemp(prefix="bench-partitions-"))
    here = ray.get_runtime_context().get_node_id()
    gateway = start_gateways("127.0.0.1", 0, nodes=[here])[here]
    if args.partition_idle_ms > 0:
        from logan_ray.actors.names import NAMESPACE, ROUTER_NAME

        ray.get(ray.get_actor(ROUTER_NAME, namespace=NAMESPACE).set_partition_idle_ms.remote(args.partition_idle_ms))
    topic = "bench-partitions"
    print(f"# {args.partitions} partitions, {args.active} active, {cold} cold, {args.duration:.0f} s run")
    print(f"# {describe()}; load average {os.getloadavg()[0]:.2f}")
    pss_empty = broker_pss_mib()
    started = time.perf_counter()
    client.create_topic(topic, args.partitions, activate=False)  # lazy: no process until first use
    created = time.perf_counter() - started
    print(f"create {args.partitions} partitions: {created:.2f} s ({created / args.partitions * 1e3:.1f} ms each)")
    time.sleep(2.0)
    print(f"broker PSS: {pss_empty:.0f} MiB before, {broker_pss_mib():.0f} MiB at rest after "
          f"({partition_actor_count()} PartitionActor processes)")

    if args.active < args.partitions:
        idle = idle_fetch_ms(gateway, topic, args.partitions)
        print(f"a Fetch naming all {args.partitions} partitions, none with data (gateway time): "
              f"p50 {pct(idle, 0.5):.1f} ms, p90 {pct(idle, 0.9):.1f} ms")

    lat = first_request_latencies(gateway, topic, range(args.partitions - cold, args.partitions), args.cold_gap)
    if lat:  # none when every partition is an active one (the comparison run)
        print(f"first request to {cold} untouched partitions ({args.cold_gap:g} s apart): p50 {pct(lat, 0.5):.0f} ms, "
              f"p99 {pct(lat, 0.99):.0f} ms, max {max(lat):.0f} ms")
        print(f"  activation steps, median ms: {activation_breakdown(topic, range(args.partitions - cold, args.partitions), lat)}")
        if args.active < args.partitions:
            busy = idle_fetch_ms(gateway, topic, args.partitions,
                                 ends={p: 1 for p in range(args.partitions - cold, args.partitions)})
            print(f"a Fetch naming all {args.partitions} partitions, none with data, the {cold} just written "
                  f"active (gateway time): p50 {pct(busy, 0.5):.1f} ms, p90 {pct(busy, 0.9):.1f} ms")
        floor = ray_actor_floor(min(cold, 50), args.cold_gap)
        print(f"Ray's floor, a bare named actor created and its first call answered ({len(floor)}, "
              f"{max(args.cold_gap, 0.5):g} s apart): "
              f"p50 {pct(floor, 0.5):.0f} ms, p99 {pct(floor, 0.99):.0f} ms, min {min(floor):.0f} ms")

    if args.duration <= 0:  # activation latency only
        print(f"# load average at the end {os.getloadavg()[0]:.2f}")
        return
    r = produce_and_consume(gateway, topic, args.active, args.duration)
    print(f"produce 100 B round-robin to {args.active} partitions, one consumer group on all {args.partitions}: "
          f"{r['produce_rps']:.0f} records/s produced, {r['consumed']} of {r['sent']} consumed, "
          f"end-to-end latency p50 {r['latency_p50_ms']:.0f} ms, p99 {r['latency_p99_ms']:.0f} ms")
    print(f"  {r['stored']} records in the {args.active} partitions' logs, {r['unsent']} not acknowledged "
          f"after the 60 s flush, failed deliveries {r['failed'] or 0}, {r['redelivered']} delivered again at an "
          f"offset already consumed, {r['assignments']} assignments of the group")
    print(f"broker PSS after the run: {broker_pss_mib():.0f} MiB ({partition_actor_count()} PartitionActor processes)")
    if args.idle > 0:
        time.sleep(args.idle)
        print(f"broker PSS after {args.idle:.0f} s idle: {broker_pss_mib():.0f} MiB "
              f"({partition_actor_count()} PartitionActor processes)")
    print(f"# load average at the end {os.getloadavg()[0]:.2f}")
    if lat:
        print(f"(first-request latencies: median {statistics.median(lat):.0f} ms)")


if __name__ == "__main__":
    main()
