"""Placement on a simulated three-node Ray cluster (ray.cluster_utils.Cluster).

Runs in a child process: the session's own Ray runtime stays untouched.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import json, os, sys, tempfile
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import ray
    from ray.cluster_utils import Cluster
    import logan_ray, logan_ray.errors

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="logan_ray")
    try:
        data_dir = tempfile.mkdtemp()
        c = logan_ray.connect(data_dir=data_dir)
        info = c.create_topic("spread", partitions=6)
        p = c.producer()
        for i in range(6):
            p.send("spread", b"v", partition=i)
        p.flush()
        stats = [ray.get(c.partition_actor("spread", i).stats.remote()) for i in range(6)]
        nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
        rf3 = c.create_topic("rf3", partitions=2, replication_factor=3, activate=False)
        try:
            c.create_topic("rf4", replication_factor=4, activate=False)
            refused = None
        except logan_ray.errors.InvalidReplicationFactorError as e:
            refused = str(e)
        with open(os.path.join(data_dir, "cluster-metadata.json")) as f:
            stored = json.load(f)["topics"]["rf3"]
        print(json.dumps({"planned": [x["node_id"] for x in info["partitions"]],
                          "rf3": [(x["node_id"], x["replicas"], x["isr"]) for x in rf3["partitions"]],
                          "rf3_factor": rf3["replication_factor"], "refused": refused,
                          "stored": [[r["node_id"] for r in stored["leaders"][str(p)]["replicas"]] for p in range(2)],
                          "actual": [s["node_id"] for s in stats],
                          "ends": [s["log_end_offset"] for s in stats], "nodes": nodes}))
        ray.get(c.router.shutdown.remote())
    finally:
        ray.shutdown()
        cluster.shutdown()
    """
)


def test_partitions_spread_over_three_nodes_and_served_there():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(result["nodes"]) == 3
    assert result["planned"] == result["actual"]  # each partition runs on the node it was pinned to
    counts = {n: result["actual"].count(n) for n in result["nodes"]}
    assert sorted(counts.values()) == [2, 2, 2]
    assert result["ends"] == [1] * 6
    # replication.factor 3: three distinct nodes, leader first, durable in the router's metadata
    assert result["rf3_factor"] == 3
    for (leader, replicas, isr), stored in zip(result["rf3"], result["stored"]):
        assert replicas[0] == leader and sorted(replicas) == sorted(result["nodes"]) and isr == [leader]
        assert stored == replicas
    assert result["refused"] == "Replication factor: 4 larger than available brokers: 3."
