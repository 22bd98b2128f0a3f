"""Only the leader host's raylet stops: do two leaders ever acknowledge? (issue 32 item 6)

Shared by ``bench/raylet_stop.py`` and bench/soaks/test_raylet_stop.py: run :data:`SCRIPT` in
a child process (:func:`cluster_child.run_child`), judge its result with :func:`two_leaders`.

Ray calls a node dead when its raylet stops answering health checks, while the node's
gateway and partition actors run on: they still reach clients, and a Python ``Producer``
(actor calls go from worker to worker, not through the raylet) still reaches the old
leader's actor. A three-node ``ray.cluster_utils.Cluster``, an RF=3 topic, a confluent-kafka
producer (through the gateways) and a Python ``Producer`` (through Ray) writing ``acks=1`` to
one partition; the raylet of that partition's leader's host is SIGSTOPped until a new leader
is elected, then 4 s more, and every acknowledged record is looked for in a read of the
partition from the new leader.
"""
from __future__ import annotations

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
                kafka_acked.append([m.offset(), m.value().decode(), time.time()])
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
                py_acked.append([md.offset, value, time.time()])
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
        while time.monotonic() - t0 < 120:
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
    want = max([a[0] for a in kafka_acked + py_acked] or [0])
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


def two_leaders(acked: list[list], read: list[list]) -> dict:
    """Did the old leader acknowledge after the new one had begun to (two leaders side by side)?

    ``acks=1`` promises nothing about a leader's loss: records the old leader acknowledged
    before its followers fetched them are gone after a failover, in Kafka as here. What must
    not happen is an overlap: a record acknowledged (and then lost) by the old leader *after*
    the new leader acknowledged its first record. The new leader's records are the
    acknowledged ones read back at or after the first lost offset.
    """
    at = {o: v for o, v in read}
    lost = [a for a in acked if at.get(a[0]) != a[1]]
    if not lost:
        return {"lost": 0, "overlap_s": 0.0}
    first_lost = min(a[0] for a in lost)
    new_leader = [a for a in acked if a[0] >= first_lost and at.get(a[0]) == a[1]]
    last_old = max(a[2] for a in lost)
    first_new = min((a[2] for a in new_leader), default=float("inf"))
    late = [a for a in lost if a[2] > first_new]
    return {"lost": len(lost), "old_leader_acked_after_the_new_one_began": len(late),
            "overlap_s": round(max(0.0, last_old - first_new), 3)}


def judge(r: dict) -> dict:
    """The summary of a run's result: the election time, what was acknowledged and read, the acks=1
    records lost before the election (allowed), anything else wrong with the history, and the overlap
    of the two leaders' acknowledgements (none allowed)."""
    from history_checks import check_history

    acked = r["kafka_acked"] + r["py_acked"]
    problems = check_history([a[:2] for a in acked], r["read"])
    lost = [p for p in problems if p.startswith("acknowledged")]
    return {"elected": r["elected"], "elected_after_s": r["elected_s"], "acked_kafka": len(r["kafka_acked"]),
            "acked_python": len(r["py_acked"]), "read": len(r["read"]),
            "acks1_lost_before_the_election": len(lost), "other_problems": [p for p in problems if p not in lost][:5],
            "two_leaders_acknowledging": two_leaders(acked, r["read"]), "python_errors": r["errors"]}
