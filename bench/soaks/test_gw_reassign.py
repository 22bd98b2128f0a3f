"""Partition reassignment on a Ray cluster (ray.cluster_utils.Cluster), a node joining while data flows.

Two nodes first: an RF=2 topic (``min.insync.replicas=2``) gets an idempotent ``acks=all``
confluent-kafka producer writing without pause, and an RF=2 topic without data sits on both nodes.
A third node joins (with its gateway). DeleteRecords moves the written partition's log start to
101, so the new replica must start there (not at 0). Through the gateway, kafka-python's admin client reassigns
the written partition to the follower and the new node, dropping the leader's node
(AlterPartitionReassignments); ListPartitionReassignments and Metadata show the union while the new
replica is built by fetching; once it is in sync, leadership moves by the controlled move and the
target becomes the replica set. Then ``rebalance_replicas`` (``logan-ray partitions rebalance``)
spreads the other topic's replicas onto the new node. Checked: every acknowledged record from the log
start on is read back once at its offset, the producer saw no error, the new replica's segment files are the leader's tail byte
for byte, the removed replica's folder is gone, Metadata shows the target, each change a new epoch.
Runs in a child process: the session's own Ray runtime stays untouched.
"""
from __future__ import annotations

import json
import os
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "tooling"))

from cluster_child import run_child  # noqa: E402
from history_checks import check_history  # noqa: E402

SCRIPT = textwrap.dedent(
    """
    import glob, json, os, sys, tempfile, threading, time
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    sys.path.insert(0, %r)
    import ray
    from ray.cluster_utils import Cluster
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient, TopicPartition as KTP
    import logan_ray
    from logan_ray.gateway import broker_id, gateway_name, start_gateways, stop_gateways
    from cluster_child import wait_for

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="logan_ray")
    out = {}
    stop = threading.Event()
    t_start = time.monotonic()
    try:
        data_dir = tempfile.mkdtemp()
        c = logan_ray.connect(data_dir=data_dir, leader_imbalance_check_interval_seconds=3600)
        start_gateways("127.0.0.1", 0)
        info = c.create_topic("re", partitions=1, replication_factor=2, config={"min.insync.replicas": "2"})
        c.create_topic("bal", partitions=2, replication_factor=2)
        c.create_topic("solo", partitions=2)  # replication factor 1: one copy, moved all the same
        c.create_topic("idle", partitions=1, activate=False)  # replication factor 1, never started until moved
        leader, follower = info["partitions"][0]["replicas"]

        def describe(topic="re", p=0):
            return c.describe_topic(topic)["partitions"][p]

        cluster.add_node(num_cpus=1)  # a node joins
        cluster.wait_for_nodes()
        endpoints = start_gateways("127.0.0.1", 0)
        third = next(n for n in endpoints if n not in (leader, follower))
        bootstrap = ",".join(sorted(endpoints.values()))
        out["isr_full"] = wait_for(lambda: len(describe()["isr"]) == 2)
        # __consumer_offsets and __transaction_state had two copies (two nodes up at their creation): they
        # grow to the configured three
        out["offsets_grown"] = wait_for(lambda: all(
            len(p["replicas"]) == 3 and len(p["isr"]) == 3 for t in ("__consumer_offsets", "__transaction_state")
            for p in c.describe_topic(t)["partitions"]
        ) and c.list_reassignments() == {}, 90)

        acked, acked_solo, errors = [], [], []
        def produce():
            p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2})
            def done(e, m):
                if e:
                    errors.append(str(e))
                else:
                    (acked if m.topic() == "re" else acked_solo).append([m.offset(), m.value().decode()])
            i = 0
            while not stop.is_set():
                p.produce("re", b"r%%d" %% i, partition=0, on_delivery=done)
                if i %% 4 == 0:
                    p.produce("solo", b"s%%d" %% i, partition=0, on_delivery=done)
                i += 1
                p.poll(0.005)
            out["unflushed"] = p.flush(60)
        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        wait_for(lambda: len(acked) >= 200)
        # the leader's log start moves past 0 (DeleteRecords): the new replica starts there, not at 0
        out["low"] = low = c.delete_records("re", {0: 101})[0]

        epochs = [describe()["leader_epoch"]]
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
        tp, target = KTP("re", 0), [broker_id(follower), broker_id(third)]
        t0 = time.monotonic()
        out["alter"] = {str(k): v for k, v in admin.alter_partition_reassignments({tp: target}).items()}
        listed = admin.list_partition_reassignments()
        out["listed"] = {str(k): v for k, v in listed.items()}
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("re", timeout=30).topics["re"].partitions[0]
        out["metadata_during"] = sorted(md.replicas)
        epochs.append(describe()["leader_epoch"])
        out["done"] = wait_for(lambda: admin.list_partition_reassignments() == {}, 60)
        out["move_s"] = round(time.monotonic() - t0, 3)
        d = describe()
        out["after"] = {"leader": d["node_id"], "replicas": d["replicas"], "isr": d["isr"]}
        epochs.append(d["leader_epoch"])
        out["epochs"] = epochs

        # a replication factor 1 partition moves too, while written: to the joined node alone
        solo_home = describe("solo")["node_id"]
        solo_epochs = [describe("solo")["leader_epoch"]]
        c.reassign_partitions({("solo", 0): [broker_id(third)]})
        solo_epochs.append(describe("solo")["leader_epoch"])
        out["solo_done"] = wait_for(lambda: c.list_reassignments() == {}, 60)
        d = describe("solo")
        solo_epochs.append(d["leader_epoch"])
        out["solo"] = {"home": solo_home, "leader": d["node_id"], "replicas": d["replicas"], "isr": d["isr"],
                       "epochs": solo_epochs, "third": third}
        before, before_solo = len(acked), len(acked_solo)
        wait_for(lambda: len(acked) >= before + 100 and len(acked_solo) >= before_solo + 25)
        stop.set()
        producer.join(120)
        out["errors"] = errors
        out["acked"] = [a for a in acked if a[0] >= low]
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("re", timeout=30).topics["re"].partitions[0]
        out["metadata_after"] = {"leader": md.leader, "replicas": sorted(md.replicas)}
        out["target"] = sorted(target)
        out["added_removed"] = [broker_id(third), broker_id(leader)]

        rc = Consumer({"bootstrap.servers": bootstrap, "group.id": "re-check", "enable.auto.commit": False})
        rc.assign([TopicPartition("re", 0, low)])
        read, deadline = [], time.monotonic() + 60
        while len(read) < len(out["acked"]) and time.monotonic() < deadline:
            m = rc.poll(1.0)
            if m is not None and m.error() is None:
                read.append([m.offset(), m.value().decode()])
        out["read"] = read
        out["acked_solo"] = acked_solo
        rc.assign([TopicPartition("solo", 0, 0)])
        read, deadline = [], time.monotonic() + 60
        while len(read) < len(acked_solo) and time.monotonic() < deadline:
            m = rc.poll(1.0)
            if m is not None and m.error() is None:
                read.append([m.offset(), m.value().decode()])
        rc.close()
        out["read_solo"] = read
        solo_dir = json.load(open(os.path.join(data_dir, "cluster-metadata.json")))["topics"]["solo"]["leaders"]["0"]
        out["solo_dirs"] = {"leads_on": solo_dir.get("directory"),
                            "old_gone": wait_for(lambda: not os.path.exists(os.path.join(data_dir, "solo-0")), 20)}

        # the new replica holds the leader's bytes; the removed replica's folder is gone
        end = c.partition_offsets("re")[0][1]
        gw_third = ray.get_actor(gateway_name(third), namespace="logan_ray")
        wait_for(lambda: ray.get(gw_third.replica_state.remote(), timeout=10).get("re-0", {}).get("log_end") == end)
        state = ray.get(gw_third.replica_state.remote(), timeout=10)["re-0"]
        meta = json.load(open(os.path.join(data_dir, "cluster-metadata.json")))
        lead_dir = meta["topics"]["re"]["leaders"]["0"]["directory"]
        def logs(folder):
            return {os.path.basename(f): open(f, "rb").read() for f in sorted(glob.glob(os.path.join(folder, "*.log")))}
        # the new replica began at the log start: it holds the leader's tail, byte for byte
        lead_bytes, new_bytes = b"".join(logs(lead_dir).values()), b"".join(logs(state["directory"]).values())
        out["same_bytes"] = len(new_bytes) > 0 and lead_bytes.endswith(new_bytes)
        # its first batch is the one holding the log start (the empty segment it was created with
        # waits for its delayed deletion): it was built from there, not from offset 0
        from logan_ray.storage.batch_header import header_at
        first = header_at(next(b for _n, b in sorted(logs(state["directory"]).items()) if b))
        out["new_replica_first_batch"] = [first.base_offset, first.base_offset + first.last_offset_delta]
        out["new_replica_log_start"] = state["log_start"]
        out["new_replica_end"] = [state["log_end"], end]
        old_dir = os.path.join(data_dir, "re-0")
        out["old_folder_gone"] = wait_for(lambda: not os.path.exists(old_dir), 20)
        out["strays_left"] = json.load(open(os.path.join(data_dir, "cluster-metadata.json")))["topics"]["re"][
            "leaders"]["0"].get("strays")

        # the moved partition, hibernated, is read from its new folder's closed files: nothing wakes it
        out["solo_hibernated"] = ray.get(c.router.hibernate.remote("solo", 0, None, False), timeout=60)
        served = ray.get(gw_third.stats.remote(), timeout=10)["closed_reads"]
        rc = Consumer({"bootstrap.servers": bootstrap, "group.id": "solo-check", "enable.auto.commit": False})
        rc.assign([TopicPartition("solo", 0, 0)])
        again, deadline = 0, time.monotonic() + 60
        while again < len(acked_solo) and time.monotonic() < deadline:
            m = rc.poll(1.0)
            again += m is not None and m.error() is None
        rc.close()
        out["solo_closed"] = {"read": again, "served_from_files": ray.get(gw_third.stats.remote(), timeout=10)[
            "closed_reads"] - served, "active": [r.get("active") for r in c.status()
                                                 if r["topic"] == "solo" and r["partition"] == 0]}

        # a never-written one-copy partition moves too (its leader starts to be fetched from), then takes a record
        c.reassign_partitions({("idle", 0): [broker_id(third)]})
        out["idle_done"] = wait_for(lambda: c.list_reassignments() == {}, 60)
        d = describe("idle")
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        got = []
        p.produce("idle", b"first", partition=0, on_delivery=lambda e, m: got.append(e or m.offset()))
        p.flush(30)
        out["idle"] = {"leader": d["node_id"], "replicas": d["replicas"], "third": third, "produced": got,
                       "end": c.partition_offsets("idle")[0][1]}

        # rebalance after the node joined: "bal" was placed on the first two nodes only
        t0 = time.monotonic()
        moves = c.rebalance_replicas()
        out["rebalance"] = [[k[0], k[1], m["error_code"]] for k, m in moves.items()]
        out["rebalance_done"] = wait_for(lambda: c.list_reassignments() == {}, 60)
        out["rebalance_s"] = round(time.monotonic() - t0, 3)
        load, per_topic = {n: 0 for n in endpoints}, {}
        for t in ("re", "bal", "solo", "idle", "__consumer_offsets", "__transaction_state"):  # every topic
            counts = per_topic[t] = {n: 0 for n in endpoints}
            for p in c.describe_topic(t)["partitions"]:
                for n in p["replicas"]:
                    load[n] += 1
                    counts[n] += 1
        out["load"] = sorted(load.values())
        out["topic_loads"] = {t: sorted(v.values()) for t, v in per_topic.items()}
        out["third_holds_bal"] = any(third in p["replicas"] for p in c.describe_topic("bal")["partitions"])
        out["again"] = len(c.rebalance_replicas(dry_run=True))
        # CreatePartitions (Kafka's, from confluent-kafka) places the new partition's replicas on distinct nodes
        from confluent_kafka.admin import NewPartitions
        kadmin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the future is done
        kadmin.create_partitions([NewPartitions("bal", 3)])["bal"].result(30)
        new = describe("bal", 2)
        out["new_partition"] = {"replicas": new["replicas"], "in_sync": wait_for(lambda: len(describe("bal", 2)["isr"]) == 2)}
        out["total_s"] = round(time.monotonic() - t_start, 1)
        admin.close()
        stop_gateways()
        ray.get(c.router.shutdown.remote())
    except Exception:
        import traceback
        out["error"] = traceback.format_exc()[-3000:]
        raise
    finally:
        stop.set()
        print(json.dumps(out), flush=True)
        ray.shutdown()
        cluster.shutdown()
    """
) % HERE


def test_a_partition_moves_to_a_joined_node_while_acks_all_records_flow():
    out, result = run_child(SCRIPT, timeout=300)
    assert "error" not in result, result["error"]
    assert out.returncode == 0, out.stderr[-3000:]
    print("figures:", json.dumps({k: result.get(k) for k in ("move_s", "rebalance_s", "total_s", "epochs", "listed",
                                                              "metadata_during", "after", "load", "topic_loads",
                                                              "rebalance")})
          + f" acked={len(result['acked'])}")
    assert result["isr_full"]
    assert result["offsets_grown"]  # offsets.topic.replication.factor 3 reached once the third node joined
    assert list(result["alter"].values()) == [None]  # accepted
    target = result["target"]
    listed = list(result["listed"].values())
    if listed:  # the new replica was still being built (it usually is: it starts empty)
        (r,) = listed
        added, removed = result["added_removed"]
        assert r["adding_replicas"] == [added] and r["removing_replicas"] == [removed]
        assert sorted(r["replicas"]) == sorted(target + [removed])
        assert len(result["metadata_during"]) == 3  # Metadata shows the union during the move
    assert result["done"]
    after = result["after"]
    assert len(after["replicas"]) == 2 and sorted(after["isr"]) == sorted(after["replicas"])
    assert result["metadata_after"]["replicas"] == target and result["metadata_after"]["leader"] in target
    epochs = result["epochs"]
    assert epochs[0] < epochs[1] < epochs[2]  # a new epoch at the start and at the end (and the leader move)
    assert result["unflushed"] == 0 and result["errors"] == []
    assert check_history(result["acked"], result["read"]) == []
    assert len(result["read"]) == len(result["acked"])
    assert result["low"] == 101
    # the replication factor 1 partition moved to the joined node by fetching, its records all there
    solo = result["solo"]
    assert result["solo_done"] and solo["home"] != solo["third"], solo
    assert solo["leader"] == solo["third"] and solo["replicas"] == [solo["third"]] == solo["isr"], solo
    assert solo["epochs"][0] < solo["epochs"][1] < solo["epochs"][2], solo
    assert len(result["acked_solo"]) >= 25
    assert check_history(result["acked_solo"], result["read_solo"]) == []
    assert len(result["read_solo"]) == len(result["acked_solo"])
    assert result["solo_dirs"]["old_gone"] and "replicas" in result["solo_dirs"]["leads_on"], result["solo_dirs"]
    idle = result["idle"]
    assert result["idle_done"] and idle["leader"] == idle["third"] and idle["replicas"] == [idle["third"]], idle
    assert idle["produced"] == [0] and idle["end"] == 1, idle
    closed = result["solo_closed"]
    assert result["solo_hibernated"] and closed["read"] == len(result["acked_solo"]), closed
    assert closed["served_from_files"] > 0 and closed["active"] == [False], closed
    assert result["same_bytes"], result["new_replica_end"]
    first, last = result["new_replica_first_batch"]
    assert first <= 101 <= last  # built from the batch holding the log start, not from offset 0
    assert result["new_replica_log_start"] == 101  # and its log start is the leader's
    assert result["old_folder_gone"] and not result["strays_left"]
    assert result["rebalance"] and all(code == 0 for _t, _p, code in result["rebalance"])
    assert result["rebalance_done"] and result["third_holds_bal"], (result["rebalance"], result["load"])
    # each topic spread over the three nodes, and the cluster as a whole
    assert all(v[-1] - v[0] <= 1 for v in result["topic_loads"].values()), result["topic_loads"]
    assert result["load"][-1] - result["load"][0] <= 1, result["load"]
    assert result["again"] == 0  # balanced now
    new = result["new_partition"]
    assert len(new["replicas"]) == 2 == len(set(new["replicas"])) and new["in_sync"]  # its follower fetches
