"""Replication cost: produce throughput and latency for RF=1 acks=1, RF=3 acks=1 and RF=3 acks=all.

Usage: python bench/replication.py [--records 100000] [--value-size 100] [--paced 1000] [--rate 500] [--failovers 10]
                                   [--drains 0] [--only-drains]
Starts a three-node ``ray.cluster_utils.Cluster`` on this machine (every node a set of Ray
processes, one gateway each, the followers' replica fetchers in them), creates one
single-partition topic per case, and with confluent-kafka:

* throughput: ``--records`` records sent as fast as the producer goes (linger 5 ms), records/s
  from the first send to the last delivery;
* latency at moderate load: ``--paced`` records at ``--rate`` per second, p50/p99 of send ->
  delivery report.

* failover: ``--failovers`` times, a new RF=3 topic (min.insync.replicas=2) gets 100 acks=all
  records, the node leading one of its partitions is killed (``Cluster.remove_node`` without
  grace: SIGKILL of its Ray processes, and of its gateway and partition actor), and the time from the kill to the first acknowledged
  acks=all produce is measured; the acknowledged records are then read back (lost ones
  counted). A new node replaces the dead one before the next round. Ray's health check is set
  to 1 s x 5 (its default is 3 s x 5); the broker session (``broker.session.timeout.ms``, 3 s)
  usually fences the dead node first.

* graceful drain: ``--drains`` times, while an idempotent acks=all producer sends without pause to
  an RF=3 topic, the node leading it is drained (the router's ``drain_node``, what ``logan-ray node
  drain`` and Ray's drain notice start; undrained after each round): the longest gap between two
  acknowledgements from the drain call until 200 more records were acknowledged, p50/p99, next to
  the longest gap over 3 s without a drain, and when each step of the router's move ended.
  ``--only-drains`` skips the other cases.

With acks=all the answer waits until both followers fetched the batch (min.insync.replicas=2,
so the ISR holds all three once they caught up; the bench waits for that first).
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

if __name__ == "__main__":
    need("logan_ray", "confluent_kafka")


def run_case(bootstrap: str, topic: str, acks: str, records: int, paced: int, rate: int, value: bytes) -> dict:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "enable.idempotence": acks == "all"})
    errors: list[str] = []
    done = [0]

    def count(e, _m) -> None:
        if e:
            errors.append(str(e))
        done[0] += 1

    for _ in range(200):  # warm up: metadata, connections, the partition actor
        p.produce(topic, value, partition=0, on_delivery=count)
    p.flush(60)
    t0 = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, value, partition=0, on_delivery=count)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    throughput = records / (time.perf_counter() - t0)
    lat: list[float] = []

    def timed(sent: float):
        return lambda e, _m: errors.append(str(e)) if e else lat.append(time.perf_counter() - sent)

    gap = 1.0 / rate
    nxt = time.perf_counter()
    for _ in range(paced):
        nxt += gap
        p.produce(topic, value, partition=0, on_delivery=timed(time.perf_counter()))
        while time.perf_counter() < nxt:
            p.poll(max(0.0, min(0.001, nxt - time.perf_counter())))
    p.flush(60)
    lat.sort()
    q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [float("nan")] * 99
    return {"records_per_s": throughput, "p50_ms": q[49] * 1000, "p99_ms": q[98] * 1000, "errors": len(errors)}


def failover_round(c, cluster, endpoints, head: str, i: int) -> tuple[float, int]:
    """One kill of a leader's node: (seconds from the kill to the first acks=all answer, acked records lost)."""
    import ray
    from confluent_kafka import Consumer, Producer, TopicPartition

    from logan_ray.gateway import gateway_name, start_gateways

    topic = f"failover-{i}"
    parts = c.create_topic(topic, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})["partitions"]
    vp = next(n for n, x in enumerate(parts) if x["node_id"] != head)
    victim = parts[vp]["node_id"]
    deadline = time.monotonic() + 60
    while len(c.describe_topic(topic)["partitions"][vp]["isr"]) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    safe = endpoints[head]
    p = Producer({"bootstrap.servers": safe, "acks": "all", "enable.idempotence": True, "linger.ms": 1})
    acked: list[int] = []
    for k in range(100):
        p.produce(topic, b"v%d" % k, partition=vp, on_delivery=lambda e, m: None if e else acked.append(m.offset()))
    p.flush(60)
    node = next(n for n in cluster.list_all_nodes() if n.node_id == victim)
    c.partitions(topic, refresh=True)  # the actor now leading (a spurious fencing may have moved it)
    pids = [ray.get(ray.get_actor(gateway_name(victim), namespace="logan_ray").stats.remote())["pid"],
            ray.get(c.partition_actor(topic, vp).pid.remote())]
    first: list[float] = []
    t0 = time.monotonic()
    cluster.remove_node(node, allow_graceful=False)
    for pid in pids:  # its gateway and partition actor too, at once (they outlive their raylet for a moment)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.produce(topic, b"after", partition=vp,
              on_delivery=lambda e, m: None if e else first.append(time.monotonic()))
    p.flush(120)
    took = first[0] - t0 if first else float("inf")
    consumer = Consumer({"bootstrap.servers": safe, "group.id": f"fo-{i}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, vp, 0)])
    seen: set[int] = set()
    deadline = time.monotonic() + 30
    while not set(acked) <= seen and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            seen.add(m.offset())
    consumer.close()
    cluster.add_node(num_cpus=1)  # the next round needs three nodes again
    cluster.wait_for_nodes()
    deadline = time.monotonic() + 60
    while len([n for n in ray.nodes() if n["Alive"]]) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    endpoints.clear()
    endpoints.update(start_gateways("127.0.0.1", 0))
    return took, len(set(acked) - seen)


def drain_rounds(c, bootstrap: str, rounds: int) -> tuple[list[float], float, list[str], list[dict]]:
    """Graceful drains under an acks=all producer that never pauses: per drain of the leader's node (the
    router's ``drain_node``, what Ray's drain notice starts), the longest gap between two acknowledgements
    from the drain call until 200 more records were acknowledged through the new leader. Returns (gaps,
    the longest gap over 3 s without a drain, producer errors, the router's move step timings)."""
    import threading

    import ray
    from confluent_kafka import Producer

    c.create_topic("drains", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})

    def describe() -> dict:
        return c.describe_topic("drains")["partitions"][0]

    def wait_for(pred, timeout: float = 60) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return True
            time.sleep(0.05)
        return False

    wait_for(lambda: len(describe()["isr"]) == 3)
    acks: list[float] = []
    errors: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2})

        def done(e, _m) -> None:
            if e:
                errors.append(str(e))
            else:
                acks.append(time.monotonic())
        while not stop.is_set():
            p.produce("drains", b"d" * 100, partition=0, on_delivery=done)
            p.poll(0.002)
        p.flush(60)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()

    def longest_gap(since: float, until: float) -> float:
        times = list(acks)
        return max((b - a for a, b in zip(times, times[1:]) if since <= b <= until), default=float("inf"))

    wait_for(lambda: len(acks) >= 500)
    t0 = time.monotonic()
    time.sleep(3)
    baseline = longest_gap(t0, time.monotonic())
    gaps = []
    for i in range(rounds):
        wait_for(lambda: len(describe()["isr"]) == 3)
        leader = describe()["node_id"]
        before, t0 = len(acks), time.monotonic()
        rows = ray.get(c.router.drain_node.remote(leader, "bench"))
        wait_for(lambda: describe()["node_id"] != leader and len(acks) >= before + 200)
        gap = longest_gap(t0, time.monotonic())
        gaps.append(gap)
        print(f"drain {i + 1}: {[r['error_code'] for r in rows if r['topic'] == 'drains']} (0: moved), longest gap "
              f"between acks=all answers {gap * 1000:.0f} ms", flush=True)
        ray.get(c.router.undrain_node.remote(leader))
        time.sleep(1)
    stop.set()
    thread.join(120)
    steps = [m for m in ray.get(c.router.move_timings.remote()) if m["topic"] == "drains"]
    return gaps, baseline, errors, steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--paced", type=int, default=1000)
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--failovers", type=int, default=10)
    ap.add_argument("--drains", type=int, default=0, help="graceful drains of the leader's node to time")
    ap.add_argument("--only-drains", action="store_true", help="skip the throughput, latency and failover cases")
    args = ap.parse_args()
    if args.only_drains:
        args.failovers = 0
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import ray
    from ray.cluster_utils import Cluster

    import logan_ray
    from logan_ray.gateway import broker_id, gateway_name, start_gateways, stop_gateways

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "_system_config": {
        "health_check_initial_delay_ms": 0, "health_check_period_ms": 1000, "health_check_failure_threshold": 5}})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="logan_ray", log_to_driver=False)
    try:
        c = logan_ray.connect(data_dir=tempfile.mkdtemp())
        endpoints = start_gateways("127.0.0.1", 0)
        bootstrap = endpoints[ray.get_runtime_context().get_node_id()]
        if args.drains:
            gaps, baseline, errors, steps = drain_rounds(c, bootstrap, args.drains)
            gaps.sort()
            p99 = gaps[min(len(gaps) - 1, int(round(0.99 * (len(gaps) - 1))))]
            print(f"# graceful drain over {len(gaps)} drains: longest gap between acks=all answers p50 "
                  f"{statistics.median(gaps) * 1000:.0f} ms, p99 (max of {len(gaps)}) {p99 * 1000:.0f} ms; "
                  f"3 s without a drain: {baseline * 1000:.0f} ms; producer errors: {len(errors)}")
            for name in ("caught_up", "handed_over", "old_stopped", "new_started"):
                got = sorted(m[name] for m in steps if name in m)
                if got:
                    print(f"#   move step {name:<12} ends p50 {statistics.median(got) * 1000:.0f} ms, max "
                          f"{got[-1] * 1000:.0f} ms after the move began")
            if args.only_drains:
                return
        c.create_topic("rf1", partitions=1, replication_factor=1)
        rf3 = c.create_topic("rf3", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
        deadline = time.monotonic() + 60
        while len(c.describe_topic("rf3")["partitions"][0]["isr"]) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        value = b"v" * args.value_size
        print(f"# 3 Ray nodes on one machine ({os.cpu_count()} cores), {args.records} x {args.value_size} B "
              f"flat out, then {args.paced} at {args.rate}/s; confluent-kafka, linger.ms=5")
        print(f"{'case':<16}{'records/s':>12}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}")
        for name, topic, acks in (("RF=1 acks=1", "rf1", "1"), ("RF=3 acks=1", "rf3", "1"),
                                  ("RF=3 acks=all", "rf3", "all")):
            r = run_case(bootstrap, topic, acks, args.records, args.paced, args.rate, value)
            print(f"{name:<16}{r['records_per_s']:>12.0f}{r['p50_ms']:>10.1f}{r['p99_ms']:>10.1f}{r['errors']:>8}",
                  flush=True)
        followers = rf3["partitions"][0]["replicas"][1:]
        ends = [ray.get(ray.get_actor(gateway_name(n), namespace="logan_ray").replica_state.remote())["rf3-0"]["log_end"]
                for n in followers]
        print(f"# followers of rf3 (brokers {[broker_id(n) for n in followers]}) end at {ends}; "
              f"leader at {c.partition_offsets('rf3')[0][1]}")
        head = ray.get_runtime_context().get_node_id()
        times, lost = [], 0
        for i in range(args.failovers):
            took, missing = failover_round(c, cluster, endpoints, head, i)
            times.append(took)
            lost += missing
            print(f"failover {i + 1}: {took:.2f} s to the first acks=all answer, {missing} acked records lost",
                  flush=True)
        if times:
            times.sort()
            p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
            print(f"# failover over {len(times)} kills: p50 {statistics.median(times):.2f} s, p99 (max of "
                  f"{len(times)}) {p99:.2f} s, acknowledged records lost: {lost}")
        stop_gateways()
        ray.get(c.router.shutdown.remote())
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    sys.exit(main())
