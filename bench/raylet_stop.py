"""Only the leader host's raylet stops: do two leaders ever acknowledge? (issue 32, item 6; a reproduction)

Usage: python bench/raylet_stop.py

Ray calls a node dead when its raylet stops answering health checks, while the node's
gateway and partition actors run on: they still reach clients, and a Python ``Producer``
(actor calls go from worker to worker, not through the raylet) still reaches the old
leader's actor. A three-node ``ray.cluster_utils.Cluster`` (its own Ray, in a child
process), an RF=3 topic, a confluent-kafka producer (through the gateways) and a Python
``Producer`` (through Ray) writing ``acks=1`` to one partition; the raylet of that
partition's leader's host is SIGSTOPped until a new leader is elected, then 4 s more.
Every acknowledged record must be read back at its offset from the new leader; the
script prints how long the election took and each problem the history shows. It is a
bench script, not a test, because it does not pass yet: docs/replication.md, "Still
missing", says what it found.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = """
import json, os, signal, sys, tempfile, threading, time
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
import ray
from ray.cluster_utils import Cluster
from confluent_kafka import Consumer, Producer, TopicPartition
import logan_ray
from logan_ray.gateway import start_gateways

cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "_system_config": {
    "health_check_initial_delay_ms": 0, "health_check_period_ms": 1000, "health_check_failure_threshold": 3}})
for _ in range(2):
    cluster.add_node(num_cpus=1)
cluster.wait_for_nodes()
ray.init(address=cluster.address, namespace="logan_ray")
out = {}
stop = threading.Event()
try:
    c = logan_ray.connect(data_dir=tempfile.mkdtemp())
    endpoints = start_gateways("127.0.0.1", 0)
    head = ray.get_runtime_context().get_node_id()
    parts = c.create_topic("z", partitions=3, replication_factor=3, config={"min.insync.replicas": "1"})["partitions"]
    vp = next(i for i, x in enumerate(parts) if x["node_id"] != head)
    victim = parts[vp]["node_id"]
    deadline = time.monotonic() + 60
    while len(c.describe_topic("z")["partitions"][vp]["isr"]) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    kafka_acked, py_acked, errors = [], [], []

    def kafka_writer():
        p = Producer({"bootstrap.servers": endpoints[head], "acks": "1", "linger.ms": 1, "socket.timeout.ms": 4000,
                      "message.timeout.ms": 20000, "retries": 0})
        def cb(e, m):
            if e is None:
                kafka_acked.append([m.offset(), m.value().decode()])
        i = 0
        while not stop.is_set():
            p.produce("z", b"k%d" % i, partition=vp, on_delivery=cb)
            p.poll(0.01)
            i += 1
        p.flush(30)

    def python_writer():
        p = c.producer(acks=1)
        i = 0
        while not stop.is_set():
            value = "py%d" % i
            i += 1
            try:
                md = p.send("z", value.encode(), partition=vp).result(timeout=20)
                py_acked.append([md.offset, value])
            except Exception as e:  # refused or timed out: not acknowledged
                errors.append(type(e).__name__)
                time.sleep(0.05)

    writers = [threading.Thread(target=kafka_writer, daemon=True), threading.Thread(target=python_writer, daemon=True)]
    for w in writers:
        w.start()
    time.sleep(2)
    raylet = next(n for n in cluster.list_all_nodes() if n.node_id == victim).all_processes["raylet"][0].process.pid
    t0 = time.monotonic()
    os.kill(raylet, signal.SIGSTOP)  # the raylet alone: the gateway and partition actors run on
    try:
        elected = None
        while time.monotonic() - t0 < 60:
            d = c.describe_topic("z")["partitions"][vp]
            if d["node_id"] != victim and not d.get("offline"):
                elected = d
                break
            time.sleep(0.1)
        out["elected_s"] = round(time.monotonic() - t0, 2)
        out["elected"] = elected is not None
        time.sleep(4)  # both writers go on against the old and the new leader
    finally:
        stop.set()
        for w in writers:
            w.join(60)
        os.kill(raylet, signal.SIGCONT)
    out["kafka_acked"], out["py_acked"], out["errors"] = kafka_acked, py_acked, sorted(set(errors))
    cons = Consumer({"bootstrap.servers": endpoints[head], "group.id": "check", "enable.auto.commit": False})
    cons.assign([TopicPartition("z", vp, 0)])
    want = max([o for o, _v in kafka_acked + py_acked] or [0])
    read, deadline = [], time.monotonic() + 60
    while (not read or read[-1][0] < want) and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is not None and m.error() is None:
            read.append([m.offset(), m.value().decode()])
    cons.close()
    out["read"] = read
finally:
    stop.set()
    print(json.dumps(out), flush=True)
    ray.shutdown()
    cluster.shutdown()
"""


def main() -> int:
    need("logan_ray", "confluent_kafka", "ray")
    sys.path.insert(0, ROOT)
    from machine import describe
    from tests.tooling.child_result import child_result
    from tests.tooling.history_checks import check_history

    print(describe())
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600, env=env)
    r = child_result(proc.stdout)
    if "read" not in r:
        print(proc.stderr[-3000:])
        return 2
    problems = check_history(r["kafka_acked"] + r["py_acked"], r["read"])
    print(json.dumps({"elected_after_s": r["elected_s"], "acked_kafka": len(r["kafka_acked"]),
                      "acked_python": len(r["py_acked"]), "read": len(r["read"]), "problems": len(problems),
                      "first_problems": problems[:5], "python_errors": r["errors"]}, indent=1))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
