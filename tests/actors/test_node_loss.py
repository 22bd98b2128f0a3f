"""A partition whose node is gone waits for it: never re-created (empty) elsewhere.

Simulated two-node Ray cluster (ray.cluster_utils.Cluster) whose second node has
its own address (127.0.0.2), as a second machine would. The node is removed:
its partition reports LEADER_NOT_AVAILABLE on the wire (Metadata, Produce, Fetch)
and in Python (a typed error naming the node), ``status`` names the awaited node;
then a node comes back at that address and the partition is served again with
all its records, at the offsets it had. Runs in a child process: the session's
own Ray runtime stays untouched.
"""
from __future__ import annotations

import os
import sys
import textwrap

import pytest

from tests.tooling.child_result import child_result
from tests.tooling.cluster_child import run_in_group

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gateway")

SCRIPT = textwrap.dedent(
    """
    import contextlib, io, json, os, sys, tempfile, time
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    sys.path.insert(0, %r)
    import ray
    from ray.cluster_utils import Cluster
    import logan_ray
    from logan_ray import cli
    from logan_ray.errors import LeaderNotAvailableError
    from logan_ray.gateway import broker_id, start_gateways, stop_gateways
    from logan_ray.storage.record_builder import build_batch
    from wire_client import Wire, fetch_body, metadata_body, produce_body

    def wait(pred, timeout=90):
        deadline = time.monotonic() + timeout
        while not pred():
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.5)

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    far = cluster.add_node(num_cpus=1, node_ip_address="127.0.0.2")
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="logan_ray")
    out = {}
    data_dir = tempfile.mkdtemp()
    try:
        c = logan_ray.connect(data_dir=data_dir)
        head = ray.get_runtime_context().get_node_id()
        endpoints = start_gateways("127.0.0.1", 0)
        info = c.create_topic("lost", partitions=2)
        far_id = next(n["NodeID"] for n in ray.nodes() if n["NodeManagerAddress"] == "127.0.0.2")
        p = next(x["partition"] for x in info["partitions"] if x["node_id"] == far_id)
        prod = c.producer()
        for i in range(10):
            prod.send("lost", b"r%%d" %% i, partition=p)
        prod.flush()
        out["before"] = c.partition_offsets("lost")[p]
        out["epoch_before"] = c.describe_topic("lost")["partitions"][p]["leader_epoch"]

        cluster.remove_node(far)
        wait(lambda: any(r.get("offline") and r["topic"] == "lost" for r in c.status()))
        row = next(r for r in c.status() if r["topic"] == "lost" and r["partition"] == p)
        out["status_row"] = {"offline": row.get("offline"), "waiting_for": row.get("waiting_for")}
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            cli.main(["--data-dir", data_dir, "status"])
        out["cli_status"] = buf.getvalue()
        try:
            c.partitions("lost", refresh=True)  # as after any failed call: ask the router again
            c.partition_actor("lost", p)
            out["python"] = "no error"
        except LeaderNotAvailableError as e:
            out["python"] = {"node_id": e.node_id, "retriable": e.retriable, "message": str(e)}
        with Wire(endpoints[head]) as w:
            md = w.call(3, 12, metadata_body(["lost"]))
            part = next(x for x in md["topics"][0]["partitions"] if x["partition_index"] == p)
            out["metadata"] = [part["error_code"], part["leader_id"], part["offline_replicas"]]
            pr = w.call(0, 9, produce_body("lost", p, build_batch([b"nowhere"])))
            out["produce"] = pr["responses"][0]["partition_responses"][0]["error_code"]
            fr = w.call(1, 12, fetch_body("lost", [(p, 0, 1 << 20)]))
            out["fetch"] = fr["responses"][0]["partitions"][0]["error_code"]
        out["far_broker"] = broker_id(far_id)

        cluster.add_node(num_cpus=1, node_ip_address="127.0.0.2")  # the machine is back (new Ray node id)
        cluster.wait_for_nodes()
        def back():
            try:
                c.partitions("lost", refresh=True)
                c.partition_actor("lost", p)
                return True
            except LeaderNotAvailableError:
                return False
        wait(back)
        out["after"] = c.partition_offsets("lost")[p]
        out["epoch_after"] = c.describe_topic("lost")["partitions"][p]["leader_epoch"]
        out["actor_epoch_after"] = ray.get(c.partition_actor("lost", p).leader_epoch.remote())
        out["next_offset"] = c.producer().send("lost", b"new", partition=p).result(timeout=60).offset
        values = ray.get(c.partition_actor("lost", p).read_records.remote(0))
        out["values"] = [r.value.decode() for r in values]
        stop_gateways()
        ray.get(c.router.shutdown.remote())
    finally:
        print(json.dumps(out), flush=True)
        ray.shutdown()
        cluster.shutdown()
    """
) % HERE


@pytest.mark.slow
def test_partition_of_a_lost_node_waits_for_it_and_comes_back_with_its_records():
    out = run_in_group([sys.executable, "-c", SCRIPT], 400)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    r = child_result(out.stdout)
    assert r["before"] == [0, 10]
    assert r["status_row"]["offline"] is True and "127.0.0.2" in r["status_row"]["waiting_for"]
    assert "offline:" in r["cli_status"] and "(127.0.0.2)" in r["cli_status"]
    assert r["python"]["retriable"] is True and "127.0.0.2" in r["python"]["message"]
    assert r["metadata"] == [5, -1, [r["far_broker"]]]  # LEADER_NOT_AVAILABLE, no leader, its replica offline
    assert r["produce"] == 5 and r["fetch"] == 5
    assert r["after"] == [0, 10]  # back with its log, not an empty one
    # re-placed on the returned node (new Ray node id): a new leader, in a new epoch, saved before it serves
    assert r["epoch_before"] == 0 and r["epoch_after"] == r["actor_epoch_after"] == 1
    assert r["next_offset"] == 10
    assert r["values"] == ["r%d" % i for i in range(10)] + ["new"]
