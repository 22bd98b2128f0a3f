"""Controlled leader moves on a three-node Ray cluster: preferred-leader election and auto rebalance.

An idempotent ``acks=all`` confluent-kafka producer writes without pause to an RF=3 topic
while leadership moves away from the preferred replica (the router's controlled move),
back through Kafka's ElectLeaders (``AdminClient.elect_leaders``), away again, and back by
``auto.leader.rebalance.enable`` on its own. The producer sees no error (librdkafka
retries the NOT_LEADER_OR_FOLLOWER it may get), and every acknowledged record is read back
once at its offset. Then the leader's node is drained (``logan-ray node drain``): leadership
leaves it by the same controlled move and stays away. Last, Ray itself is told that the leader's
node will go (the GCS's DrainNode with a preemption deadline, as ``ray drain-node`` or the
autoscaler send it): the router's node watch sees it and drains that node the same way. Runs in a child process: the session's own Ray runtime stays untouched.
"""
from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests", "tooling"))
from cluster_child import run_child  # noqa: E402
from history_checks import check_history  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = textwrap.dedent(
    """
    import json, os, sys, tempfile, threading, time
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    sys.path.insert(0, %r)
    import ray
    from ray.cluster_utils import Cluster
    from confluent_kafka import Consumer, ElectionType, KafkaError, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from ray.core.generated import autoscaler_pb2
    import logan_ray
    from logan_ray.gateway import gateway_name, start_gateways, stop_gateways
    from cluster_child import wait_for

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="logan_ray")
    out = {}
    stop = threading.Event()
    try:
        data_dir = tempfile.mkdtemp()
        c = logan_ray.connect(data_dir=data_dir, leader_imbalance_check_interval_seconds=3600)
        endpoints = start_gateways("127.0.0.1", 0)
        bootstrap = ",".join(sorted(endpoints.values()))
        info = c.create_topic("moves", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
        preferred, other = info["partitions"][0]["replicas"][0], info["partitions"][0]["replicas"][1]

        def describe():
            return c.describe_topic("moves")["partitions"][0]

        out["isr_full"] = wait_for(lambda: len(describe()["isr"]) == 3)

        acked, errors, ack_times = [], [], []
        def produce():
            p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                          "linger.ms": 2})
            def done(e, m):
                if e:
                    errors.append(str(e))
                else:
                    acked.append([m.offset(), m.value().decode()])
                    ack_times.append(time.monotonic())
            i = 0
            while not stop.is_set():
                p.produce("moves", b"m%%d" %% i, partition=0, on_delivery=done)
                i += 1
                p.poll(0.005)
            out["unflushed"] = p.flush(60)
        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        wait_for(lambda: len(acked) >= 200)

        moves = []
        def moved_by(action, leader):
            before, t0 = len(acked), time.monotonic()
            result = action()
            ok = wait_for(lambda: describe()["node_id"] == leader)
            wait_for(lambda: len(acked) >= before + 100)  # the producer goes on through the new leader
            moves.append({"ok": ok, "s": round(time.monotonic() - t0, 3), "epoch": describe()["leader_epoch"]})
            return result

        # 1. a controlled move away from the preferred replica (what a drain or reassignment does)
        out["move"] = moved_by(lambda: ray.get(c.router.move_leader.remote("moves", 0, other)), other)
        out["isr_after_move"] = wait_for(lambda: len(describe()["isr"]) == 3)  # the old leader follows
        # 2. Kafka's ElectLeaders, PREFERRED, from confluent-kafka's AdminClient: back to the preferred replica
        def codes(results):  # {TopicPartition: None or the partition's error} -> its Kafka error codes
            return [None if e is None else (e.code() if hasattr(e, "code") else e.args[0].code())
                    for e in results.values()]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        tp = TopicPartition("moves", 0)
        res = moved_by(lambda: admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(60), preferred)
        out["elect"] = codes(res)
        again = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(60)
        out["elect_again"] = codes(again)
        unclean = admin.elect_leaders(ElectionType.UNCLEAN, [tp]).result(60)
        out["unclean_with_leader"] = codes(unclean)
        missing = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("moves", 7)]).result(60)
        out["elect_missing"] = codes(missing)
        out["isr_after_elect"] = wait_for(lambda: len(describe()["isr"]) == 3)
        # 3. away again; auto.leader.rebalance.enable brings it back at its next check (1 s here)
        moved_by(lambda: ray.get(c.router.move_leader.remote("moves", 0, other)), other)
        out["isr_before_auto"] = wait_for(lambda: len(describe()["isr"]) == 3)
        moved_by(lambda: ray.get(c.router.set_leader_imbalance_check_interval.remote(1)), preferred)
        out["moves"] = moves
        out["preferred_leads"] = describe()["node_id"] == preferred

        # 4. a drain of the leader's node (`logan-ray node drain`): leadership leaves it at once, and the
        # auto rebalance does not bring it back
        head = ray.get_runtime_context().get_node_id()
        ray.get(c.router.set_leader_imbalance_check_interval.remote(3600))  # no move back before the drain
        if describe()["node_id"] == head:  # the driver and router live on the head: drain another node
            ray.get(c.router.move_leader.remote("moves", 0, next(n for n in describe()["isr"] if n != head)))
            wait_for(lambda: len(describe()["isr"]) == 3)
        victim = describe()["node_id"]
        before, t0 = len(acked), time.monotonic()
        rows = ray.get(c.router.drain_node.remote(victim, "test"))  # what `logan-ray node drain` calls
        accepted = [r["error_code"] for r in rows if r["topic"] == "moves"] == [0]
        drained = wait_for(lambda: describe()["node_id"] != victim)
        drain_s = time.monotonic() - t0
        wait_for(lambda: len(acked) >= before + 100)
        ray.get(c.router.set_leader_imbalance_check_interval.remote(1))
        time.sleep(3)  # three rebalance checks
        gap = max((b - a for a, b in zip(ack_times, ack_times[1:]) if b >= t0), default=None)
        out["drain"] = {"accepted": accepted, "moved": drained, "s": round(drain_s, 3),
                        "stays_off": describe()["node_id"] != victim, "max_ack_gap_s": gap if gap is None else round(gap, 3)}

        # 5. Ray announces that a node will go (the GCS's DrainNode: `ray drain-node`, the autoscaler's idle
        # termination, a preemption notice): the router's node watch drains it by itself
        ray.get(c.router.set_leader_imbalance_check_interval.remote(3600))  # only the drain moves it now
        ray.get(c.router.undrain_node.remote(victim))
        if describe()["node_id"] == head:
            ray.get(c.router.move_leader.remote("moves", 0, victim))
            wait_for(lambda: len(describe()["isr"]) == 3)
        leaving = describe()["node_id"]
        before, t0 = len(acked), time.monotonic()
        gcs = ray._raylet.GcsClient(address=cluster.address)
        # the node id in hex, as `ray drain-node` sends it (Ray decodes it with FromHex: binary names no node)
        notice = gcs.drain_node(leaving, autoscaler_pb2.DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION"),
                                "test: preemption notice", int(time.time() * 1000) + 60_000)
        moved = wait_for(lambda: describe()["node_id"] != leaving)
        ray_drain_s = time.monotonic() - t0
        wait_for(lambda: len(acked) >= before + 100)
        gap = max((b - a for a, b in zip(ack_times, ack_times[1:]) if b >= t0), default=None)
        ray.get(c.router.set_leader_imbalance_check_interval.remote(1))
        time.sleep(2)  # two rebalance checks: the leadership does not come back to the node Ray drains
        out["ray_drain"] = {"accepted": list(notice), "moved": moved, "s": round(ray_drain_s, 3),
                            "stays_off": describe()["node_id"] != leaving, "not_head": leaving != head,
                            "draining": ray.get(c.router.draining_nodes.remote()).get(leaving),
                            "max_ack_gap_s": gap if gap is None else round(gap, 3)}
        out["move_steps"] = ray.get(c.router.move_timings.remote())

        stop.set()
        producer.join(120)
        out["errors"] = errors
        out["acked"] = acked
        out["max_ack_gap_s"] = round(max(b - a for a, b in zip(ack_times, ack_times[1:])), 3)
        # where the longest pauses were, against when each move began (one monotonic clock on this machine)
        gaps = sorted(((b - a, a) for a, b in zip(ack_times, ack_times[1:])), reverse=True)[:5]
        out["top_gaps"] = [[round(g, 3), round(at - ack_times[0], 3)] for g, at in gaps]
        out["move_starts"] = [round(m["at"] - ack_times[0], 3) for m in out["move_steps"]]
        rc = Consumer({"bootstrap.servers": bootstrap, "group.id": "moves-check", "enable.auto.commit": False})
        rc.assign([TopicPartition("moves", 0, 0)])
        read, deadline = [], time.monotonic() + 60
        while len(read) < len(acked) and time.monotonic() < deadline:
            m = rc.poll(1.0)
            if m is not None and m.error() is None:
                read.append([m.offset(), m.value().decode()])
        rc.close()
        out["read"] = read
        # every replica ends where the leader ends (the two old leaders follow on their own files)
        end = c.partition_offsets("moves")[0][1]
        followers = [n for n in describe()["replicas"] if n != describe()["node_id"]]
        def follower_ends():
            ends = []
            for n in followers:
                try:
                    ends.append(ray.get(ray.get_actor(gateway_name(n), namespace="logan_ray").replica_state.remote(),
                                        timeout=10).get("moves-0", {}).get("log_end"))
                except Exception as e:
                    ends.append(repr(e)[:200])
            return ends
        wait_for(lambda: follower_ends() == [end, end])
        out["ends"] = [end] + follower_ends()
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


def test_leadership_moves_to_and_back_to_the_preferred_replica_without_losing_an_acknowledged_record():
    out, result = run_child(SCRIPT)
    assert "error" not in result, result["error"]
    print("figures:", json.dumps({"moves": result.get("moves"), "drain": result.get("drain"),
                                  "ray_drain": result.get("ray_drain"), "move_steps": result.get("move_steps"),
                                  "top_gaps": result.get("top_gaps"), "move_starts": result.get("move_starts"),
                                  "max_ack_gap_s": result.get("max_ack_gap_s"), "acked": len(result.get("acked", []))}))
    assert out.returncode == 0, out.stderr[-3000:]
    assert result["isr_full"] and result["isr_after_move"] and result["isr_after_elect"] and result["isr_before_auto"]
    assert result["move"] == 0  # NONE: the controlled move happened
    assert result["elect"] == [None]  # ElectLeaders PREFERRED succeeded
    assert result["elect_again"] == [84]  # ELECTION_NOT_NEEDED: the preferred replica leads
    assert result["unclean_with_leader"] == [84]  # UNCLEAN only for a partition without a leader
    assert result["elect_missing"] == [3]  # UNKNOWN_TOPIC_OR_PARTITION
    moves = result["moves"]
    assert [m["ok"] for m in moves] == [True] * 4  # the last one by auto.leader.rebalance.enable
    assert [m["epoch"] for m in moves] == sorted(set(m["epoch"] for m in moves))  # a new epoch each time
    assert result["preferred_leads"]
    assert result["unflushed"] == 0 and result["errors"] == []  # the producer never saw a failure
    assert check_history(result["acked"], result["read"]) == []
    assert len(result["read"]) == len(result["acked"])
    assert len(set(result["ends"])) == 1  # the leader and both followers end at the same offset
    drain = result["drain"]
    assert drain["accepted"] and drain["moved"] and drain["stays_off"], drain  # the drain's own move, at once
    ray_drain = result["ray_drain"]
    assert ray_drain["accepted"][0] is True and ray_drain["not_head"], ray_drain  # Ray took the notice
    assert ray_drain["moved"] and ray_drain["stays_off"], ray_drain  # the node watch drained the node
    assert ray_drain["draining"] and ray_drain["draining"]["by_ray"], ray_drain
