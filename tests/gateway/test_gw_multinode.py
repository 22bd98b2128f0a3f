"""Gateways on a simulated three-node Ray cluster (ray.cluster_utils.Cluster).

Each node runs its own gateway; a partition's leader in Metadata is the gateway on
the node of its partition actor, so a real Kafka client sends every request to the
right node, and a request sent to the wrong one gets NOT_LEADER_OR_FOLLOWER naming
the right broker (KIP-951). Runs in a child process: the session's own Ray runtime
stays untouched.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = textwrap.dedent(
    """
    import json, os, sys, tempfile, time, uuid
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    sys.path.insert(0, %r)
    import ray
    from ray.cluster_utils import Cluster
    from confluent_kafka import Consumer, Producer, TopicPartition
    import logan_ray
    from logan_ray.gateway import broker_id, gateway_name, start_gateways, stop_gateways
    from wire_client import Wire, fetch_body, produce_body
    from logan_ray.storage.record_builder import build_batch

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="logan_ray")
    out = {}
    try:
        c = logan_ray.connect(data_dir=tempfile.mkdtemp())
        endpoints = start_gateways("127.0.0.1", 0)
        out["gateways"] = {broker_id(n): e for n, e in endpoints.items()}
        info = c.create_topic("spread", partitions=3)
        leaders = [broker_id(p["node_id"]) for p in info["partitions"]]
        out["leaders"] = leaders

        first = sorted(endpoints.values())[0]
        p = Producer({"bootstrap.servers": first, "linger.ms": 5})
        delivered, errors = [], []
        for i in range(300):
            p.produce("spread", b"v%%d" %% i, key=b"k%%d" %% i,
                      on_delivery=lambda e, m: errors.append(str(e)) if e else delivered.append(m.partition()))
        assert p.flush(60) == 0
        out["errors"] = errors
        out["per_partition"] = [delivered.count(i) for i in range(3)]

        consumer = Consumer({"bootstrap.servers": first, "group.id": "mn", "enable.auto.commit": False})
        consumer.assign([TopicPartition("spread", i, 0) for i in range(3)])
        got, deadline = [], time.monotonic() + 60
        while len(got) < 300 and time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.value())
        consumer.close()
        out["consumed"] = sorted(got) == sorted(b"v%%d" %% i for i in range(300))

        wrong = []
        for part, leader in enumerate(leaders):
            other = next(e for b, e in out["gateways"].items() if b != leader)
            with Wire(other) as w:
                pr = w.call(0, 11, produce_body("spread", part, build_batch([b"misrouted"])))
                body = fetch_body("spread", [(part, 0, 1 << 20)])
                body["topics"][0]["topic_id"] = uuid.UUID(c.describe_topic("spread")["topic_id"])
                fr = w.call(1, 16, body)
            pp = pr["responses"][0]["partition_responses"][0]
            fp = fr["responses"][0]["partitions"][0]
            wrong.append({"expected": leader,
                          "produce": [pp["error_code"], pp["current_leader"]["leader_id"],
                                      [(e["node_id"], "%%s:%%d" %% (e["host"], e["port"])) for e in pr["node_endpoints"]]],
                          "fetch": [fp["error_code"], fp["current_leader"]["leader_id"],
                                    [(e["node_id"], "%%s:%%d" %% (e["host"], e["port"])) for e in fr["node_endpoints"]]]})
        out["wrong"] = wrong

        # A follower's Fetch (replica_id = its broker id) reports its position to the leader and reads
        # past the high watermark; consumers (replica_id -1) see only up to it.
        from logan_ray.storage.records import decode_records
        rep = c.create_topic("rep", partitions=1, replication_factor=2, activate=False)["partitions"][0]
        lead_gw, follower = out["gateways"][broker_id(rep["node_id"])], broker_id(rep["replicas"][1])
        def fetch_at(w, offset, replica_id):
            body = fetch_body("rep", [(0, offset, 1 << 20)])
            body["replica_id"] = replica_id
            part = w.call(1, 11, body)["responses"][0]["partitions"][0]
            return part["error_code"], part["high_watermark"], [r.offset for r in decode_records(part["records"] or b"")]
        steps = []
        with Wire(lead_gw) as w:
            w.call(0, 9, produce_body("rep", 0, build_batch([b"0", b"1", b"2"])))
            steps.append(fetch_at(w, 0, follower))  # the leader alone in sync: HW 3
            steps.append(fetch_at(w, 3, follower))  # caught up: joins the ISR
            w.call(0, 9, produce_body("rep", 0, build_batch([b"3", b"4"])))
            steps.append(fetch_at(w, 0, -1))  # a consumer: up to the HW only
            steps.append(fetch_at(w, 3, follower))  # the follower reads past it
            steps.append(fetch_at(w, 5, follower))  # and moves it
            steps.append(fetch_at(w, 0, -1))
        out["replica_fetch"] = steps
        out["rep_isr"] = [broker_id(n) for n in c.describe_topic("rep")["partitions"][0]["isr"]]
        out["rep_replicas"] = [broker_id(n) for n in rep["replicas"]]
        out["ends"] = [c.partition_offsets("spread")[i][1] for i in range(3)]
        stats = {}
        for node in endpoints:
            s = ray.get(ray.get_actor(gateway_name(node), namespace="logan_ray").stats.remote())
            stats[broker_id(node)] = s["channel_calls"]
        out["channel_calls"] = stats
        stop_gateways()
        ray.get(c.router.shutdown.remote())
    finally:
        print(json.dumps(out), flush=True)
        ray.shutdown()
        cluster.shutdown()
    """
) % HERE


def test_each_node_serves_its_partitions_and_redirects_the_rest():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    gateways = {int(b): e for b, e in result["gateways"].items()}
    assert len(gateways) == 3 and len(set(gateways.values())) == 3
    assert sorted(result["leaders"]) == sorted(gateways)  # one partition on each node
    assert result["errors"] == []
    assert sum(result["per_partition"]) == 300 and all(result["per_partition"])
    assert result["consumed"]  # from all three nodes, through one bootstrap address
    assert result["replica_fetch"] == [[0, 3, [0, 1, 2]], [0, 3, []], [0, 3, [0, 1, 2]], [0, 3, [3, 4]],
                                       [0, 5, []], [0, 5, [0, 1, 2, 3, 4]]]
    assert result["rep_isr"] == result["rep_replicas"]  # the follower joined the ISR
    assert result["ends"] == result["per_partition"]  # nothing misrouted was written
    for w in result["wrong"]:
        leader = w["expected"]
        for code, hinted, endpoints in (w["produce"], w["fetch"]):
            assert code == 6  # NOT_LEADER_OR_FOLLOWER
            assert hinted == leader
            assert endpoints == [[leader, gateways[leader]]]
    assert all(calls > 0 for calls in result["channel_calls"].values())  # each served its own partition
