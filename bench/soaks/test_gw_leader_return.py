"""A leader whose node is gone with no in-sync replica alive leads again when its machine returns.

Kafka's default (``unclean.leader.election.enable`` false): a partition whose leader dies while
it is the only in-sync replica stays offline, and the broker that comes back with that log leads
it again; nothing acknowledged is lost. Here the machine comes back as a new Ray node id at the
same address, on the same disk. ``ray.cluster_utils.Cluster`` of three nodes at 127.0.0.1-3; a
topic with two replicas; the partition whose replicas are both away from the head (where the
router runs). Its follower's node is removed (SIGKILL), records are written with the leader
alone in the ISR, then the leader's node is removed: the partition is offline. The leader's
machine returns: it leads again on its folder, in a new leader epoch, with every acknowledged
record at its offset. The follower's machine returns after it and catches up. Runs in a child
process: the session's own Ray runtime stays untouched.
"""
from __future__ import annotations

import os
import sys
import textwrap

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests", "tooling"))

from cluster_child import run_child  # noqa: E402

SCRIPT = textwrap.dedent(
    """
    import json, os, tempfile, time
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

        c.create_topic("ret", partitions=6, replication_factor=2)
        parts = c.describe_topic("ret")["partitions"]
        p = next(x["partition"] for x in parts if head not in x["replicas"])
        desc = lambda: c.describe_topic("ret")["partitions"][p]
        out["isr_full"] = wait_for(lambda: len(desc()["isr"]) == 2)
        leader = desc()["node_id"]
        follower = next(n for n in desc()["replicas"] if n != leader)
        prod = c.producer(acks=-1)
        for i in range(30):
            prod.send("ret", b"both-%d" % i, partition=p)
        prod.flush()

        follower_ip = remove_node(cluster, follower)
        out["isr_alone"] = wait_for(lambda: desc()["isr"] == [leader])
        for i in range(30):
            prod.send("ret", b"alone-%d" % i, partition=p)
        prod.flush()  # acknowledged by the leader alone (min.insync.replicas 1)
        epoch_before = desc()["leader_epoch"]

        leader_ip = remove_node(cluster, leader)
        time.sleep(4)  # the router notices: no in-sync replica alive, nothing to elect
        out["offline"] = desc()
        endpoints = add_node(cluster, leader_ip)  # the machine is back: a new Ray node id
        back = next(n for n in endpoints if n not in (leader, follower) and n != head)
        out["leads_again"] = wait_for(lambda: desc()["node_id"] == back and desc()["isr"] == [back], 60)
        out["after_return"] = desc()
        out["epoch_bumped"] = desc()["leader_epoch"] > epoch_before
        for i in range(10):
            prod.send("ret", b"after-%d" % i, partition=p)
        prod.flush()
        records = ray.get(c.partition_actor("ret", p).read_records.remote(0))
        out["records"] = [(r.offset, r.value.decode()) for r in records]

        endpoints = add_node(cluster, follower_ip)
        back2 = next(n for n in endpoints if n not in (leader, follower, back) and n != head)
        out["follower_back"] = wait_for(lambda: sorted(desc()["isr"]) == sorted([back, back2]), 90)
        gw = ray.get_actor(gateway_name(back2), namespace="logan_ray")
        out["follower_end"] = ray.get(gw.replica_state.remote(), timeout=10).get(f"ret-{p}", {}).get("log_end")
        stop_gateways()
        ray.get(c.router.shutdown.remote())
    except Exception:
        import traceback
        out["error"] = traceback.format_exc()[-3000:]
        raise
    finally:
        print(json.dumps(out, default=str), flush=True)
        ray.shutdown()
        cluster.shutdown()
    """
)


def test_a_leader_that_was_the_last_in_sync_replica_leads_again_when_its_machine_returns():
    out, result = run_child(SCRIPT)
    assert "error" not in result, result["error"]
    assert out.returncode == 0, out.stderr[-3000:]
    assert result["isr_full"] and result["isr_alone"], result
    assert result["leads_again"], result  # on the new node id at its address, alone in the ISR
    assert result["epoch_bumped"], result
    # every acknowledged record, at the offset it was acknowledged at, then the new ones
    assert result["records"] == [[i, f"both-{i}"] for i in range(30)] + [[30 + i, f"alone-{i}"] for i in range(30)] + [
        [60 + i, f"after-{i}"] for i in range(10)]
    assert result["follower_back"], result  # the follower's machine returns too and catches up
    assert result["follower_end"] == 70
