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
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tooling"))

from cluster_child import run_in_group  # noqa: E402
from history_checks import check_history  # noqa: E402

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

    # Ray notices a dead node within ~5 s (its default is 5 failures of a 3 s health check)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "_system_config": {
        "health_check_initial_delay_ms": 0, "health_check_period_ms": 1000, "health_check_failure_threshold": 5}})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="logan_ray")
    out = {}
    try:
        data_dir = tempfile.mkdtemp()
        c = logan_ray.connect(data_dir=data_dir)
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

        # Replication: each follower node's replica fetcher (in its gateway) fetches from the leader's
        # gateway with Kafka Fetch (replica_id); the followers join the ISR and their logs end up byte
        # for byte the leader's. The partition led by a node other than the head's is the one whose
        # leader is killed below.
        head = ray.get_runtime_context().get_node_id()
        rep = c.create_topic("rep", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"},
                             activate=False)["partitions"]
        vp = next(i for i, x in enumerate(rep) if x["node_id"] != head)
        victim, followers = rep[vp]["node_id"], rep[vp]["replicas"][1:]
        safe = endpoints[head]
        acked, rerrors = [], []
        def delivered_to(e, m):
            if e:
                rerrors.append(str(e))
            else:
                acked.append([m.offset(), m.value().decode()])
        rp = Producer({"bootstrap.servers": safe, "acks": "all", "linger.ms": 5, "enable.idempotence": True})
        for i in range(200):
            rp.produce("rep", b"r%%d" %% i, partition=vp, on_delivery=delivered_to)
        assert rp.flush(60) == 0
        def rep_state():
            return [ray.get(ray.get_actor(gateway_name(n), namespace="logan_ray").replica_state.remote())
                    .get("rep-%%d" %% vp) for n in followers]
        states, deadline = [], time.monotonic() + 30
        while time.monotonic() < deadline:
            states = rep_state()
            if all(s and s["log_end"] == 200 and s["high_watermark"] == 200 for s in states) and \
                    len(c.describe_topic("rep")["partitions"][vp]["isr"]) == 3:
                break
            time.sleep(0.2)
        out["rep_isr"] = sorted(broker_id(n) for n in c.describe_topic("rep")["partitions"][vp]["isr"])
        out["rep_replicas"] = sorted(broker_id(n) for n in rep[vp]["replicas"])
        out["rep_followers"] = [[s["log_end"], s["high_watermark"]] if s else None for s in states]
        def segments(d):
            return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d)) if n.endswith(".log")}
        lead = segments(os.path.join(data_dir, "rep-%%d" %% vp))
        out["rep_same_bytes"] = [segments(s["directory"]) == lead for s in states if s] + [sum(map(len, lead.values())) > 0]
        # A plain client forging a follower's fetch (issue 32): refused, the leader's view unchanged
        forged = []
        with Wire(endpoints[victim]) as w:
            for n in followers:
                body = fetch_body("rep", [(vp, 2 ** 62, 1 << 20)])
                body["replica_id"] = broker_id(n)
                forged.append(w.call(1, 11, body)["responses"][0]["partitions"][0]["error_code"])
        out["forged"] = forged
        out["ends"] = [c.partition_offsets("spread")[i][1] for i in range(3)]
        stats = {}
        for node in endpoints:
            s = ray.get(ray.get_actor(gateway_name(node), namespace="logan_ray").stats.remote())
            stats[broker_id(node)] = s["channel_calls"]
        out["channel_calls"] = stats

        # Consumer groups fail over with __consumer_offsets (replicated: RF=3 on three nodes). A group
        # whose offsets partition the victim leads (so its coordinator lives there) commits
        # synchronously while it reads; the victim dies below; FindCoordinator then names another
        # node, whose coordinator replayed the partition: the commits are all there and the group
        # goes on from them.
        from logan_ray.actors.group_coordinator import coordinator_on
        from logan_ray.groups.offsets_log import partition_for_group
        offsets_parts = c.describe_topic("__consumer_offsets")["partitions"]
        group = next(g for g in ("failover-%%d" %% i for i in range(1000))
                     if offsets_parts[partition_for_group(g, len(offsets_parts))]["node_id"] == victim)
        gp = partition_for_group(group, len(offsets_parts))
        deadline = time.monotonic() + 30
        while len(c.describe_topic("__consumer_offsets")["partitions"][gp]["isr"]) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        described = c.describe_topic("__consumer_offsets")
        out["offsets_topic"] = [described["replication_factor"], len(described["partitions"][gp]["isr"])]
        def find_coordinator():
            with Wire(safe) as w:
                r = w.call(10, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]
            return [r["error_code"], r["node_id"]]
        out["coordinator_before"] = find_coordinator() + [broker_id(victim)]
        # session 10 s: a member that does not leave cleanly holds the next rebalance up no longer
        gc = Consumer({"bootstrap.servers": safe, "group.id": group, "auto.offset.reset": "earliest",
                       "enable.auto.commit": False, "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
        gc.subscribe(["rep"])
        commits, n, deadline = [], 0, time.monotonic() + 60
        while n < 100 and time.monotonic() < deadline:
            m = gc.poll(0.5)
            if m is None or m.error() is not None or m.partition() != vp:
                continue
            n += 1
            if n %% 10 == 0:  # synchronous: answered once on every ISR member of the offsets partition
                gc.commit(offsets=[TopicPartition("rep", vp, m.offset() + 1)], asynchronous=False)
                commits.append(m.offset() + 1)
        out["group_commits"] = commits

        # Failover: SIGKILL every process of the leader's node (its raylet, workers, gateway, partition
        # actor). The router elects a follower from the ISR with a new epoch; the same idempotent
        # acks=all producer goes on, and every acknowledged record is read back at its offset.
        before_epoch = c.describe_topic("rep")["partitions"][vp]["leader_epoch"]
        node = next(n for n in cluster.list_all_nodes() if n.node_id == victim)
        pids = [ray.get(ray.get_actor(gateway_name(victim), namespace="logan_ray").stats.remote())["pid"],
                ray.get(c.partition_actor("rep", vp).pid.remote()),
                ray.get(coordinator_on(victim).pid.remote()),
                ray.get(c.partition_actor("__consumer_offsets", gp).pid.remote())]
        t0 = time.monotonic()
        cluster.remove_node(node, allow_graceful=False)  # SIGKILL of the node's raylet and Ray processes
        import signal
        for pid in pids:  # and of its gateway and partition actor (they outlive their raylet for a moment)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for i in range(200, 250):  # during the failover
            rp.produce("rep", b"r%%d" %% i, partition=vp, on_delivery=delivered_to)
        after, deadline = None, time.monotonic() + 90
        while time.monotonic() < deadline:
            after = c.describe_topic("rep")["partitions"][vp]
            if after["node_id"] != victim:
                break
            time.sleep(0.2)
        out["election_s"] = time.monotonic() - t0
        for i in range(250, 300):  # after it
            rp.produce("rep", b"r%%d" %% i, partition=vp, on_delivery=delivered_to)
        out["failover_unflushed"] = rp.flush(120)
        out["failover_s"] = time.monotonic() - t0
        out["elected"] = [after["node_id"] in followers, after["leader_epoch"] > before_epoch,
                          victim not in after["isr"]]
        out["rep_errors"] = rerrors
        out["acked"] = acked
        moved, deadline = None, time.monotonic() + 60
        while time.monotonic() < deadline:
            moved = find_coordinator()
            if moved[0] == 0 and moved[1] != broker_id(victim):
                break
            time.sleep(0.1)
        out["coordinator_moved_s"] = time.monotonic() - t0
        out["coordinator_after"] = moved + [broker_id(c.describe_topic("__consumer_offsets")["partitions"][gp]["node_id"])]
        got = gc.committed([TopicPartition("rep", vp)], timeout=30)
        out["committed_after"] = got[0].offset
        out["committed_after_s"] = time.monotonic() - t0
        gc.close()
        gc2 = Consumer({"bootstrap.servers": safe, "group.id": group, "auto.offset.reset": "earliest",
                        "enable.auto.commit": False})
        gc2.subscribe(["rep"])  # the group goes on from its last commit before the kill
        resumed, deadline = [], time.monotonic() + 90
        while not (resumed and max(resumed) >= 299) and time.monotonic() < deadline:
            m = gc2.poll(0.5)
            if m is not None and m.error() is None and m.partition() == vp:
                resumed.append(m.offset())
        out["resumed_s"] = time.monotonic() - t0
        # a commit to the offsets partition's new leader: answered once its remaining follower has it
        t1 = time.monotonic()
        gc2.commit(offsets=[TopicPartition("rep", vp, 300)], asynchronous=False)
        out["commit_after_failover_s"] = round(time.monotonic() - t1, 3)
        gc2.close()
        gc3 = Consumer({"bootstrap.servers": safe, "group.id": group, "enable.auto.commit": False})
        out["committed_last"] = gc3.committed([TopicPartition("rep", vp)], timeout=30)[0].offset
        gc3.close()
        out["resumed"] = [resumed[0] if resumed else None, min(resumed) if resumed else None,
                          set(range(100, 300)) <= set(resumed)]
        out["coordinators"] = {broker_id(n): ray.get(coordinator_on(n).stats.remote())["owned"]
                               for n in endpoints if n != victim}
        rc = Consumer({"bootstrap.servers": safe, "group.id": "rep-check", "enable.auto.commit": False})
        rc.assign([TopicPartition("rep", vp, 0)])
        read, deadline = [], time.monotonic() + 60
        while len(read) < 300 and time.monotonic() < deadline:
            m = rc.poll(1.0)
            if m is not None and m.error() is None:
                read.append([m.offset(), m.value().decode()])
        rc.close()
        out["read"] = read
        stop_gateways()
        ray.get(c.router.shutdown.remote())
    finally:
        print(json.dumps(out), flush=True)
        ray.shutdown()
        cluster.shutdown()
    """
) % HERE


def test_each_node_serves_its_partitions_and_redirects_the_rest():
    try:
        out = run_in_group([sys.executable, "-c", SCRIPT], 400)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"timed out; stdout: {e.stdout!r}"[-6000:]) from None
    result = json.loads(next(ln for ln in reversed(out.stdout.splitlines()) if ln.startswith("{")))
    group_log = [ln for ln in out.stderr.splitlines() if "group coordinator" in ln or "Traceback" in ln or (
        "rdkafka" not in ln and ("gateway:" in ln or "Error" in ln or "File \"" in ln)) or (
        "rdkafka#consumer" in ln and any(w in ln for w in ("HEARTBEAT", "Heartbeat", "JOIN", "member", "session",
                                                             "COORD", "oordinator")))]
    print("\n".join(group_log[-250:]))
    print({k: v for k, v in result.items() if k not in ("acked", "read")})
    assert out.returncode == 0, out.stderr[-3000:]
    gateways = {int(b): e for b, e in result["gateways"].items()}
    assert len(gateways) == 3 and len(set(gateways.values())) == 3
    assert sorted(result["leaders"]) == sorted(gateways)  # one partition on each node
    assert result["errors"] == []
    assert sum(result["per_partition"]) == 300 and all(result["per_partition"])
    assert result["consumed"]  # from all three nodes, through one bootstrap address
    assert result["rep_isr"] == result["rep_replicas"]  # the followers joined the ISR
    assert result["rep_followers"] == [[200, 200], [200, 200]]  # their log ends and high watermark
    assert result["rep_same_bytes"] == [True, True, True]  # the leader's segments, byte for byte
    assert result["forged"] == [29, 29]  # TOPIC_AUTHORIZATION_FAILED: only a broker fetches as a replica
    # failover after SIGKILL of the leader's node: a follower of the ISR leads in a new epoch, the
    # producer goes on, and the history holds every acknowledged record once, at its offset
    assert result["failover_unflushed"] == 0 and result["rep_errors"] == []
    assert result["elected"] == [True, True, True]
    assert len(result["acked"]) == 300
    assert check_history(result["acked"], result["read"]) == []
    assert result["ends"] == result["per_partition"]  # nothing misrouted was written
    for w in result["wrong"]:
        leader = w["expected"]
        for code, hinted, endpoints in (w["produce"], w["fetch"]):
            assert code == 6  # NOT_LEADER_OR_FOLLOWER
            assert hinted == leader
            assert endpoints == [[leader, gateways[leader]]]
    assert all(calls > 0 for calls in result["channel_calls"].values())  # each served its own partition
    # the group coordinator fails over with its __consumer_offsets partition
    assert result["offsets_topic"] == [3, 3]  # replicated on all three nodes, every replica in sync
    code, before, victim = result["coordinator_before"]
    assert code == 0 and before == victim  # the coordinator lived on the node killed
    code, after, new_leader = result["coordinator_after"]
    assert code == 0 and after != victim and after == new_leader  # the gateway of the partition's new leader
    assert result["group_commits"] == list(range(10, 101, 10))
    assert result["committed_after"] == 100  # every commit acknowledged before the kill is still there
    assert result["resumed"] == [100, 100, True]  # the group goes on from there, nothing before it read again
    # a commit after the failover is acknowledged by the new leader and its remaining follower at once
    # (it waited ~30 s for replica.lag.time.max.ms when the follower was served as a consumer)
    assert result["commit_after_failover_s"] < 10 and result["committed_last"] == 300, result
    print({k: v for k, v in result.items() if k.endswith("_s")})
