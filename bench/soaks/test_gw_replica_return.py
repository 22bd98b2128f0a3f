"""A follower replica of a node Ray declared dead is taken back by the node that returns at its address.

``ray.cluster_utils.Cluster`` of three nodes, each at its own address (127.0.0.1-3); a topic
with three replicas. The node of one follower is removed (SIGKILL of its raylet and of its
gateway): the ISR shrinks to two and records are written without it. A node comes back at the
same address; Ray gives it a new node id. The router gives it the replica (a new leader epoch,
as for a reassignment), on the folder the gone node's replica was written in: its replica
fetcher catches up from that folder's log end, the ISR is three again, and its segment files
are the leader's byte for byte. Runs in a child process: the session's own Ray runtime stays
untouched.
"""
from __future__ import annotations

import os
import sys
import textwrap

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests", "tooling"))

from cluster_child import run_child  # noqa: E402

SCRIPT = textwrap.dedent(
    """
    import glob, json, os, tempfile, time
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import ray
    import logan_ray
    from logan_ray.gateway import gateway_name, start_gateways, stop_gateways
    from cluster_child import add_node, remove_node, start_cluster, wait_for

    cluster = start_cluster(ips=("127.0.0.2", "127.0.0.3"))
    out = {}
    try:
        data_dir = tempfile.mkdtemp()
        c = logan_ray.connect(data_dir=data_dir, replica_lag_time_max_ms=3000,
                              leader_imbalance_check_interval_seconds=3600)
        start_gateways("127.0.0.1", 0)
        head = ray.get_runtime_context().get_node_id()

        def describe():
            return c.describe_topic("back")["partitions"][0]

        c.create_topic("back", partitions=1, replication_factor=3)
        out["isr_full"] = wait_for(lambda: len(describe()["isr"]) == 3)
        d = describe()
        victim = next(n for n in d["replicas"] if n not in (head, d["node_id"]))  # a follower, not the head
        meta = json.load(open(os.path.join(data_dir, "cluster-metadata.json")))
        rec = meta["topics"]["back"]["leaders"]["0"]
        old_dir = rec.get("follower_dirs", {}).get(victim) or os.path.join(data_dir, "replicas", victim[:8], "back-0")
        prod = c.producer(acks=-1)
        for i in range(50):
            prod.send("back", b"before-%d" % i, partition=0)
        prod.flush()
        wait_for(lambda: len(glob.glob(os.path.join(old_dir, "*.log"))) > 0 and
                 ray.get(ray.get_actor(gateway_name(victim), namespace="logan_ray").replica_state.remote(),
                         timeout=10).get("back-0", {}).get("log_end") == 50)
        epoch_before = describe()["leader_epoch"]

        victim_ip = remove_node(cluster, victim)  # SIGKILL of the node's raylet, Ray processes and gateway
        out["isr_shrank"] = wait_for(lambda: victim not in describe()["isr"])
        for i in range(50):
            prod.send("back", b"without-%d" % i, partition=0)
        prod.flush()
        out["end_without"] = c.partition_offsets("back")[0][1]

        endpoints = add_node(cluster, victim_ip)  # the machine is back: a new Ray node id
        returned = next(n for n in endpoints if n not in d["replicas"])
        out["replicas_back"] = wait_for(lambda: returned in describe()["replicas"] and victim not in describe()["replicas"])
        out["isr_back"] = wait_for(lambda: sorted(describe()["isr"]) == sorted(describe()["replicas"]), 90)
        out["epoch_bumped"] = describe()["leader_epoch"] > epoch_before
        for i in range(10):
            prod.send("back", b"after-%d" % i, partition=0)
        prod.flush()
        end = c.partition_offsets("back")[0][1]
        gw = ray.get_actor(gateway_name(returned), namespace="logan_ray")
        wait_for(lambda: ray.get(gw.replica_state.remote(), timeout=10).get("back-0", {}).get("log_end") == end)
        state = ray.get(gw.replica_state.remote(), timeout=10)["back-0"]
        out["ends"] = [state["log_end"], end]
        out["same_folder"] = os.path.realpath(state["directory"]) == os.path.realpath(old_dir)
        lead_dir = json.load(open(os.path.join(data_dir, "cluster-metadata.json")))["topics"]["back"]["leaders"]["0"].get(
            "directory") or os.path.join(data_dir, "back-0")  # the first leader's folder unless a move changed it
        def logs(folder):
            return {os.path.basename(f): open(f, "rb").read() for f in sorted(glob.glob(os.path.join(folder, "*.log")))}
        out["same_bytes"] = logs(lead_dir) == logs(state["directory"]) and sum(map(len, logs(lead_dir).values())) > 0
        values = ray.get(c.partition_actor("back", 0).read_records.remote(0))
        out["values"] = [r.value.decode() for r in values]
        stop_gateways()
        ray.get(c.router.shutdown.remote())
    except Exception:
        import traceback
        out["error"] = traceback.format_exc()[-3000:]
        raise
    finally:
        print(json.dumps(out), flush=True)
        ray.shutdown()
        cluster.shutdown()
    """
)


def test_a_follower_of_a_node_that_returns_at_its_address_is_caught_up_on_its_old_folder():
    out, result = run_child(SCRIPT)
    assert "error" not in result, result["error"]
    assert out.returncode == 0, out.stderr[-3000:]
    assert result["isr_full"] and result["isr_shrank"]
    assert result["end_without"] == 100
    assert result["replicas_back"], result  # the new node id holds the gone node's replica
    assert result["isr_back"] and result["epoch_bumped"], result  # caught up, back in the ISR
    assert result["ends"] == [110, 110]
    assert result["same_folder"], result  # on the folder it had, not a new empty one
    assert result["same_bytes"]
    assert result["values"] == [f"before-{i}" for i in range(50)] + [f"without-{i}" for i in range(50)] + [
        f"after-{i}" for i in range(10)]
