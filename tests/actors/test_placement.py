"""Placement on a simulated three-node Ray cluster (ray.cluster_utils.Cluster).

Runs in a child process: the session's own Ray runtime stays untouched.
"""
from __future__ import annotations

import json
import sys
import textwrap

from tests.tooling.child_result import child_result
from tests.tooling.cluster_child import run_in_group

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
        c = logan_ray.connect(data_dir=data_dir, replica_lag_time_max_ms=3000)
        info = c.create_topic("spread", partitions=6)
        p = c.producer()
        for i in range(6):
            p.send("spread", b"v", partition=i)
        p.flush()
        stats = [ray.get(c.partition_actor("spread", i).stats.remote()) for i in range(6)]
        nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
        rf3 = c.create_topic("rf3", partitions=2, replication_factor=3, activate=False,
                             config={"min.insync.replicas": "2"})
        # The leader side, with a follower's fetches reported by hand (no replica fetcher yet).
        from logan_ray.storage.record_builder import build_batch
        from logan_ray.common.errors import NotEnoughReplicasError
        from logan_ray.storage.errors import FencedLeaderEpochError
        leader = c.partition_actor("rf3", 0)
        follower = rf3["partitions"][0]["replicas"][1]
        hw = {}
        try:
            ray.get(leader.append_durable.remote(build_batch([b"a"])))
        except NotEnoughReplicasError:
            hw["refused_all"] = True  # ISR = the leader alone < min.insync.replicas 2
        ray.get(leader.append.remote(build_batch([b"0", b"1", b"2"])))
        hw["alone"] = ray.get(leader.offsets.remote())[1]  # the leader alone in sync: HW = log end
        hw["behind"] = ray.get(leader.replica_fetched.remote(follower, 1))
        hw["caught_up"] = ray.get(leader.replica_fetched.remote(follower, 3))  # joins the ISR
        hw["isr"] = c.describe_topic("rf3")["partitions"][0]["isr"]
        ray.get(leader.append.remote(build_batch([b"3", b"4"])))
        hw["held"] = ray.get(leader.offsets.remote())[1]  # the follower has 3 of 5
        data, fetched_hw, _ = ray.get(leader.fetch.remote(0))
        hw["fetch_hw"] = fetched_hw
        from logan_ray.storage.records import decode_records
        hw["visible"] = [r.offset for r in decode_records(data)]
        waiting = leader.append_durable.remote(build_batch([b"5"]))
        ready, _ = ray.wait([waiting], timeout=1.0)
        hw["acks_all_waits"] = not ready
        hw["after"] = ray.get(leader.replica_fetched.remote(follower, 6))
        hw["acks_all_done"] = ray.get(waiting, timeout=30)[0]
        # a follower position past the leader's log end (a forged or confused fetch) is refused, not recorded
        from logan_ray.storage.errors import OffsetOutOfRangeError
        try:
            ray.get(leader.replica_fetched.remote(follower, 2 ** 62))
        except OffsetOutOfRangeError:
            hw["forged_refused"] = ray.get(leader.offsets.remote())[1]
        # acks=all sent while the follower is cut off, inside the lag window: the shrink to the leader
        # alone moves the HW past it, but the ISR is under min.insync.replicas then (Kafka's rule)
        cut_off = leader.append_durable.remote(build_batch([b"6"]))
        # replica.lag.time.max.ms=3000: the follower stops fetching and leaves the ISR within ~4.5 s
        import time
        deadline = time.monotonic() + 10
        while len(c.describe_topic("rf3")["partitions"][0]["isr"]) > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        hw["shrunk"] = c.describe_topic("rf3")["partitions"][0]["isr"]
        from logan_ray.common.errors import NotEnoughReplicasAfterAppendError
        try:
            hw["cut_off_acked"] = ray.get(cut_off, timeout=30)[0]
        except NotEnoughReplicasAfterAppendError:
            hw["cut_off_refused"] = True
        hw["settings_lag"] = ray.get(c.router.settings.remote())["replica_lag_time_max_ms"]
        try:
            ray.get(c.router.alter_isr.remote("rf3", 0, 99, rf3["partitions"][0]["replicas"][:1]))
        except FencedLeaderEpochError:
            hw["zombie_refused"] = True
        try:
            c.create_topic("rf4", replication_factor=4, activate=False)
            refused = None
        except logan_ray.errors.InvalidReplicationFactorError as e:
            refused = str(e)
        with open(os.path.join(data_dir, "cluster-metadata.json")) as f:
            stored = json.load(f)["topics"]["rf3"]
        print(json.dumps({"planned": [x["node_id"] for x in info["partitions"]],
                          "rf3": [(x["node_id"], x["replicas"], x["isr"]) for x in rf3["partitions"]],
                          "rf3_factor": rf3["replication_factor"], "refused": refused, "hw": hw,
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
    out = run_in_group([sys.executable, "-c", SCRIPT], 300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = child_result(out.stdout)
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
    # leader side: HW = min log end over the ISR, ISR expansion persisted, acks=all waits for the HW
    hw = result["hw"]
    leader, follower = result["rf3"][0][1][:2]
    assert hw["refused_all"] and hw["alone"] == 3 and hw["behind"] == 3 and hw["caught_up"] == 3
    assert hw["isr"] == [leader, follower]
    assert hw["held"] == 3 and hw["fetch_hw"] == 3 and hw["visible"] == [0, 1, 2]
    assert hw["acks_all_waits"] and hw["after"] == 6 and hw["acks_all_done"] == 5
    assert hw["zombie_refused"]
    assert hw["forged_refused"] == 6  # the high watermark did not move with it
    assert hw.get("cut_off_refused") and "cut_off_acked" not in hw  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert hw["shrunk"] == [leader] and hw["settings_lag"] == 3000  # a configured replica.lag.time.max.ms
