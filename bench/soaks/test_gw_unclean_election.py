"""An unclean leader election on a cluster, enabled broker-wide at runtime as a Kafka admin does.

``ray.cluster_utils.Cluster`` of three nodes at 127.0.0.1-3; a topic with two replicas, the
partition whose replicas are both away from the head (where the router runs). The follower's
node is removed (SIGKILL) and records are acknowledged by the leader alone; then the leader's
node is removed. The follower's machine comes back (a new Ray node id, not in the ISR): the
partition stays offline, Kafka's default. The cluster-wide dynamic broker config
``unclean.leader.election.enable=true`` is set (the router's AlterConfigs on the default broker
level, as ``kafka-configs.sh --entity-default`` does; Python's Kafka admin clients cannot name
that level): the out-of-sync replica is elected, in a new epoch, and the records only the
old leader had are lost, as Kafka documents for unclean elections; new records continue from the
new leader's end. When the old leader's machine returns it follows: its diverging records are
truncated by leader epoch and it ends with the new leader's log. Runs in a child process.
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

        c.create_topic("unc", partitions=6, replication_factor=2)
        parts = c.describe_topic("unc")["partitions"]
        p = next(x["partition"] for x in parts if head not in x["replicas"])
        desc = lambda: c.describe_topic("unc")["partitions"][p]
        out["isr_full"] = wait_for(lambda: len(desc()["isr"]) == 2)
        leader = desc()["node_id"]
        follower = next(n for n in desc()["replicas"] if n != leader)
        prod = c.producer(acks=-1)
        for i in range(30):
            prod.send("unc", b"both-%d" % i, partition=p)
        prod.flush()
        out["follower_has_30"] = wait_for(lambda: ray.get(ray.get_actor(gateway_name(follower), namespace="logan_ray")
                                                         .replica_state.remote(), timeout=10)
                                          .get(f"unc-{p}", {}).get("log_end") == 30)

        follower_ip = remove_node(cluster, follower)
        out["isr_alone"] = wait_for(lambda: desc()["isr"] == [leader])
        for i in range(20):
            prod.send("unc", b"alone-%d" % i, partition=p)
        prod.flush()  # acknowledged by the leader alone (min.insync.replicas 1)
        epoch_before = desc()["leader_epoch"]
        leader_ip = remove_node(cluster, leader)

        endpoints = add_node(cluster, follower_ip)  # the out-of-sync replica's machine is back first
        back = next(n for n in endpoints if n not in (leader, follower, head))
        out["adopted"] = wait_for(lambda: back in desc()["replicas"])
        time.sleep(5)  # several election rounds: clean elections find no in-sync replica
        out["still_offline"] = desc()["node_id"] != back
        # the cluster-wide default level ("", kafka-configs.sh --entity-default), as AlterConfigs sets it
        out["altered"] = ray.get(c.router.alter_broker_configs.remote(
            "", [(0, "unclean.leader.election.enable", "true")]))
        out["elected"] = wait_for(lambda: desc()["node_id"] == back, 30)
        out["after_election"] = desc()
        out["epoch_bumped"] = desc()["leader_epoch"] > epoch_before
        # the old producer's sequence numbers run past the new leader's log (it lost 20 of its records):
        # it gets OUT_OF_ORDER_SEQUENCE_NUMBER, as a Kafka idempotent producer does; a new one writes on
        prod = c.producer(acks=-1)
        for i in range(10):
            prod.send("unc", b"after-%d" % i, partition=p)
        prod.flush()
        records = ray.get(c.partition_actor("unc", p).read_records.remote(0))
        out["records"] = [(r.offset, r.value.decode()) for r in records]

        endpoints = add_node(cluster, leader_ip)  # the old leader's machine returns: it follows now
        back2 = next(n for n in endpoints if n not in (leader, follower, back, head))
        out["old_leader_follows"] = wait_for(lambda: sorted(desc()["isr"]) == sorted([back, back2]), 90)
        gw = ray.get_actor(gateway_name(back2), namespace="logan_ray")
        from logan_ray.storage.records import decode_records
        wait_for(lambda: ray.get(gw.replica_state.remote(), timeout=10).get(f"unc-{p}", {}).get("log_end") == 40)
        state = ray.get(gw.replica_state.remote(), timeout=10).get(f"unc-{p}", {})
        out["old_leader_end"] = state.get("log_end")
        data = b"".join(open(f, "rb").read() for f in sorted(glob.glob(os.path.join(state["directory"], "*.log"))))
        out["old_leader_records"] = [(r.offset, r.value.decode()) for r in decode_records(data)]  # its files, read
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


def test_an_unclean_election_enabled_at_runtime_elects_the_out_of_sync_replica_and_the_old_leader_truncates():
    out, result = run_child(SCRIPT)
    assert "error" not in result, result["error"]
    assert out.returncode == 0, out.stderr[-3000:]
    assert result["isr_full"] and result["follower_has_30"] and result["isr_alone"] and result["adopted"], result
    assert result["still_offline"], result  # Kafka's default: no clean candidate, no leader
    assert result["altered"].get("unclean.leader.election.enable") == "true", result["altered"]
    assert result["elected"] and result["epoch_bumped"], result
    assert result["after_election"]["isr"] == [result["after_election"]["node_id"]]  # the new leader alone
    # the 20 records only the old leader had are lost (an unclean election's price); new ones follow on
    expected = [[i, f"both-{i}"] for i in range(30)] + [[30 + i, f"after-{i}"] for i in range(10)]
    assert result["records"] == expected
    assert result["old_leader_follows"], result
    assert result["old_leader_end"] == 40 and result["old_leader_records"] == expected  # diverging tail cut
