"""A SIGKILL of the router (the controller) under load, its node alive (issue 33, "Done when").

Three ``ray.cluster_utils.Cluster`` nodes, an RF 3 topic with ``min.insync.replicas=2`` led
by every node, one idempotent acks=all confluent-kafka producer per partition writing 200
records a second. The router's process is SIGKILLed; Ray starts it again on its node from the saved
metadata. Kafka's brokers keep serving while the controller quorum is briefly away, so:
every node's gateway carries its lease through the restart (the gaps in acknowledgements are
printed: 1.2-2.8 s in most runs here, up to 14.6 s on one partition when the loaded GCS was
slow to answer; 5-22 s on every partition without the carried lease), and every acknowledged
record is read back once at its offset (``check_history``).
"""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests", "tooling"))
from cluster_child import run_child  # noqa: E402
from history_checks import check_history  # noqa: E402

SCRIPT = """
import json, os, signal, tempfile, threading, time
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
import ray
from confluent_kafka import Consumer, Producer, TopicPartition
import logan_ray
from logan_ray.gateway import start_gateways, stop_gateways
from cluster_child import start_cluster, wait_for

PARTITIONS = 3
RATE = 200
cluster = start_cluster(3)
out = {}
stop = threading.Event()
try:
    c = logan_ray.connect(data_dir=tempfile.mkdtemp())
    endpoints = start_gateways("127.0.0.1", 0)
    head = ray.get_runtime_context().get_node_id()
    parts = c.create_topic("steady", partitions=PARTITIONS, replication_factor=3,
                           config={"min.insync.replicas": "2"})["partitions"]
    out["leaders"] = sorted({p["node_id"] == head for p in parts})
    wait_for(lambda: all(len(p["isr"]) == 3 for p in c.describe_topic("steady")["partitions"]), 60)

    acked = {p: [] for p in range(PARTITIONS)}
    errors = []

    def write(p):
        prod = Producer({"bootstrap.servers": endpoints[head], "acks": "all", "linger.ms": 2,
                         "enable.idempotence": True})

        def cb(e, m):
            if e:
                errors.append(str(e))
            else:
                acked[p].append([time.monotonic(), m.offset(), m.value().decode()])
        i, start = 0, time.monotonic()
        while not stop.is_set():  # RATE records a second, each acknowledged by every in-sync replica
            prod.produce("steady", b"%d-%d" % (p, i), partition=p, on_delivery=cb)
            i += 1
            prod.poll(max(0.0, start + i / RATE - time.monotonic()))
        prod.flush(60)

    writers = [threading.Thread(target=write, args=(p,), daemon=True) for p in range(PARTITIONS)]
    for w in writers:
        w.start()
    time.sleep(4)
    router_pid = ray.get(c.router.__ray_call__.remote(lambda self: os.getpid()))
    t_kill = time.monotonic()
    os.kill(router_pid, signal.SIGKILL)

    def restarted():
        try:
            return ray.get(c.router.__ray_call__.remote(lambda self: os.getpid()), timeout=5) != router_pid
        except Exception:  # restarting: the call may time out or fail
            return False
    back = wait_for(restarted, 60)
    out["router_back_s"] = time.monotonic() - t_kill if back else None
    time.sleep(8)
    stop.set()
    for w in writers:
        w.join(120)
    out["errors"] = errors[:20]
    gaps = {}
    for p, rows in acked.items():
        times = [t for t, _o, _v in rows]
        around = [b - a for a, b in zip(times, times[1:]) if b > t_kill - 1]
        gaps[p] = max(around) if around else None
        out["acked_%d" % p] = [[o, v] for _t, o, v in rows]
        out["after_kill_%d" % p] = sum(1 for t in times if t > t_kill)
    out["gaps"] = gaps
    for p in range(PARTITIONS):
        cons = Consumer({"bootstrap.servers": endpoints[head], "group.id": "g%d" % p, "enable.auto.commit": False})
        cons.assign([TopicPartition("steady", p, 0)])
        read, deadline = [], time.monotonic() + 60
        while len(read) < len(acked[p]) and time.monotonic() < deadline:
            for m in cons.consume(10000, timeout=0.5):
                if m.error() is None:
                    read.append([m.offset(), m.value().decode()])
        cons.close()
        out["read_%d" % p] = read
    stop_gateways(list(endpoints), timeout=10)
    ray.get(c.router.shutdown.remote(), timeout=30)
finally:
    stop.set()
    print(json.dumps(out), flush=True)
    ray.shutdown()
    cluster.shutdown()
"""


@pytest.fixture(scope="module")
def router_kill() -> dict:
    os.environ["RAY_DEDUP_LOGS"] = "0"  # every gateway's own log line reaches the child's stderr
    try:
        proc, result = run_child(SCRIPT, timeout=300)
    finally:
        os.environ.pop("RAY_DEDUP_LOGS", None)
    result["_stderr"] = proc.stderr[-4000:]
    # what the gateways and the router said (the carried lease, re-registrations), for a failure's message
    result["_said"] = [line[-220:] for line in proc.stderr.splitlines()
                       if "gateway:" in line or "router:" in line or "partition " in line][-40:]
    result["_carried"] = sorted({line.split("pid=", 1)[1].split(")", 1)[0] for line in proc.stderr.splitlines()
                                 if "keeps its lease meanwhile" in line and "pid=" in line})
    print({k: v for k, v in result.items() if k in ("gaps", "router_back_s", "leaders")})
    print("\n".join(result["_said"]))
    return result


@pytest.mark.slow
def test_a_router_sigkill_under_load_leaves_every_gateway_acknowledging_and_loses_nothing(router_kill):
    r = router_kill
    assert "gaps" in r, r["_stderr"]
    assert r["leaders"] == [False, True]  # partitions led by the head's node and by the others
    assert r["router_back_s"] is not None, r["_stderr"]
    assert r["errors"] == []
    assert all(r["after_kill_%d" % p] > 0 for p in range(3)), r["gaps"]
    assert all(g is not None for g in r["gaps"].values()), r["gaps"]
    # issue 33: no acks=all write gap over 5 s while the router restarts. acks=all needs no lease while
    # another replica confirms (PartitionActor._refuse_if_fenced); before, every write waited for the GCS
    # to say "restarting" in time to carry the lease (gaps of 9-40 s on a loaded machine when it did not)
    assert max(r["gaps"].values()) <= 5.0, (r["gaps"], r["router_back_s"], r["_carried"], r["_said"])
    for p in range(3):
        # a record acknowledged without an offset (a retry answered during the restart: librdkafka
        # reports none) must still be in the log exactly once
        known = [[o, v] for o, v in r["acked_%d" % p] if o is not None]
        assert check_history(known, r["read_%d" % p]) == [], p
        values = [v for _o, v in r["read_%d" % p]]
        assert all(values.count(v) == 1 for o, v in r["acked_%d" % p] if o is None), p
