"""Failover under real faults on a three-node ``ray.cluster_utils.Cluster`` (issue 17).

RF=3, ``min.insync.replicas=2``, idempotent confluent-kafka producers with ``acks=all``
and a consumer group reading back. Ray's own health check is set to 1 s x 30 here, so
Ray would take 30 s to call a node dead: only the broker sessions (heartbeat and lease,
actors/broker_lease.py) can fail a leader over within seconds.

(a) SIGSTOP of every process of the leader's node (raylet, gateway, partition actor...)
    for longer than ``broker.session.timeout.ms``: a follower is elected; a produce sent to
    the stopped gateway and read by it after SIGCONT is refused (the zombie acknowledges
    nothing), and the node then follows the partition in its old folder.
(r) SIGSTOP of the router (the controller) for longer than a lease: acks=all writes to a
    partition whose ISR holds other replicas go on (they need no lease: actors/partition.py).
(b) SIGKILL of the leader's node, then at once of the newly elected leader's: the last
    in-sync replica leads, acks=1 goes on, acks=all is refused with NOT_ENOUGH_REPLICAS.
Every acknowledged record is read back once, at its offset (``check_history``).
One cluster, one child process for both (the session's own Ray runtime stays untouched).
"""
from __future__ import annotations

import os
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tooling"))
from child_result import child_result  # noqa: E402
from cluster_child import run_in_group  # noqa: E402
from history_checks import check_history  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys, tempfile, time
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    sys.path.insert(0, %r)
    import psutil, ray
    from ray.cluster_utils import Cluster
    from confluent_kafka import Consumer, Producer, TopicPartition
    import logan_ray
    from logan_ray.gateway import gateway_name, start_gateways, stop_gateways
    from logan_ray.storage.record_builder import build_batch
    from wire_client import Wire, metadata_body, produce_body

    SESSION_S = 3.0  # broker.session.timeout.ms (the default)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "_system_config": {
        "health_check_initial_delay_ms": 0, "health_check_period_ms": 1000, "health_check_failure_threshold": 30}})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="logan_ray")
    out = {}

    def node_of(node_id):
        return next(n for n in cluster.list_all_nodes() if n.node_id == node_id)

    def node_pids(node_id):
        raylet = psutil.Process(node_of(node_id).all_processes["raylet"][0].process.pid)
        return [raylet.pid] + [p.pid for p in raylet.children(recursive=True)]

    def replicated(c, topic):
        return c.create_topic(topic, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})["partitions"]

    def wait_isr(c, topic, p, n, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            d = c.describe_topic(topic)["partitions"][p]
            if len(d["isr"]) >= n:
                return d
            time.sleep(0.1)
        return c.describe_topic(topic)["partitions"][p]

    def wait_leader_not(c, topic, p, node, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            d = c.describe_topic(topic)["partitions"][p]
            if d["node_id"] != node and not d.get("offline"):
                return d
            time.sleep(0.05)
        return c.describe_topic(topic)["partitions"][p]

    def producer(bootstrap, acked, errors, acks="all"):
        def cb(e, m):
            (errors.append(str(e)) if e else acked.append([m.offset(), m.value().decode()]))
        # socket.timeout.ms 4 s (librdkafka's is 60 s): a request to a stopped broker gets no answer
        # until then, and the client moves to the new leader only after it
        return Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 1, "socket.timeout.ms": 4000,
                         "enable.idempotence": acks == "all"}), cb

    def read_group(bootstrap, topic, p, want, group, subscribe=True):
        cons = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": subscribe})
        if subscribe:  # a consumer group
            cons.subscribe([topic])
        else:  # (b) may have killed the nodes of the group's coordinator (__consumer_offsets is RF=1)
            cons.assign([TopicPartition(topic, p, 0)])
        read, deadline = [], time.monotonic() + 60
        while len(read) < want and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None and m.partition() == p:
                read.append([m.offset(), m.value().decode()])
        cons.close()
        return read

    def actor(c, topic, p):  # the partition's current leader actor (the client's cached route may be old)
        c.partitions(topic, refresh=True)
        return c.partition_actor(topic, p)

    def hw(c, topic, p):  # the partition's high watermark, from its leader's actor
        return ray.get(actor(c, topic, p).offsets.remote())[1]

    try:
        data_dir = tempfile.mkdtemp()
        c = logan_ray.connect(data_dir=data_dir)
        endpoints = start_gateways("127.0.0.1", 0)
        head = ray.get_runtime_context().get_node_id()
        safe = endpoints[head]

        # (a) a stopped leader node: fenced by its lapsed lease, not by Ray
        parts = replicated(c, "zomb")
        vp = next(i for i, x in enumerate(parts) if x["node_id"] != head)
        victim = parts[vp]["node_id"]
        before = wait_isr(c, "zomb", vp, 3)
        acked, errors = [], []
        p, cb = producer(safe, acked, errors)
        for i in range(100):
            p.produce("zomb", b"a%%d" %% i, partition=vp, on_delivery=cb)
        p.flush(60)
        hws = [hw(c, "zomb", vp)]
        zombie = Wire(endpoints[victim])  # connected before the stop: the kernel keeps what is sent later
        pids = node_pids(victim)
        old_actor = ray.get(actor(c, "zomb", vp).pid.remote())
        t0 = time.monotonic()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            probe = []
            p.produce("zomb", b"probe-a", partition=vp,
                      on_delivery=lambda e, m: (cb(e, m), probe.append(time.monotonic())))
            p.flush(60)
            out["a_unavailable_s"] = probe[0] - t0 if probe else None
            after = wait_leader_not(c, "zomb", vp, victim)
            out["a_elected_s"] = time.monotonic() - t0
            out["a_elected"] = [after["node_id"] != victim, after["leader_epoch"] > before["leader_epoch"],
                                victim not in after["isr"]]
            hws.append(hw(c, "zomb", vp))
            # produce to the stopped (zombie) leader, acks=1 and acks=all; it reads them once resumed
            zombie.send(0, 9, produce_body("zomb", vp, build_batch([b"zombie-1"]), acks=1))
            zombie.send(0, 9, produce_body("zomb", vp, build_batch([b"zombie-all"]), acks=-1))
            # the fenced broker is still named by every gateway (Ray counts its node alive), past the
            # gateways' 2 s cache: a broker missing from one gateway's answer while another lists it is
            # decommissioned by librdkafka with the requests in flight there (a consumer then waited
            # 5 minutes for its subscription's metadata before joining its group)
            time.sleep(max(0.0, 2.2 - (time.monotonic() - t0 - out["a_elected_s"])))
            out["a_brokers_while_fenced"] = []
            for n, ep in endpoints.items():
                if n != victim:
                    with Wire(ep) as w:
                        out["a_brokers_while_fenced"].append(len(w.call(3, 12, metadata_body(["zomb"]))["brokers"]))
            stopped_s = time.monotonic() - t0
            if stopped_s < SESSION_S + 1.5:
                time.sleep(SESSION_S + 1.5 - stopped_s)
            out["a_stopped_s"] = time.monotonic() - t0
        finally:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        codes = []
        for _ in range(2):
            _corr, body = zombie.recv()
            codes.append(body["responses"][0]["partition_responses"][0]["error_code"])
        zombie.close()
        out["a_zombie_codes"] = codes
        for i in range(100, 150):
            p.produce("zomb", b"a%%d" %% i, partition=vp, on_delivery=cb)
        out["a_unflushed"] = p.flush(60)
        # the resumed node follows, in the folder it led in, and joins the ISR again
        rejoined = wait_isr(c, "zomb", vp, 3)
        state, deadline = None, time.monotonic() + 30
        while time.monotonic() < deadline:
            state = ray.get(ray.get_actor(gateway_name(victim), namespace="logan_ray").replica_state.remote()
                            ).get("zomb-%%d" %% vp)
            if state and state["log_end"] == hw(c, "zomb", vp):
                break
            time.sleep(0.2)
        out["a_follows"] = [victim in rejoined["isr"], bool(state) and state["directory"] == os.path.join(data_dir, "zomb-%%d" %% vp),
                            bool(state) and state["log_end"] == hw(c, "zomb", vp)]
        hws.append(hw(c, "zomb", vp))
        out["a_hws"] = hws
        out["a_old_actor_alive"] = psutil.pid_exists(old_actor) and psutil.Process(old_actor).status() != "zombie"
        out["a_errors"] = errors
        out["a_acked"] = acked
        out["a_read"] = read_group(safe, "zomb", vp, hw(c, "zomb", vp), "zomb-check")

        # (r) the router (the controller) stopped for 7 s, longer than a lease, while an idempotent acks=all
        # producer writes to a partition led away from it: the GCS still says the router is alive (no lease
        # is carried), yet the writes go on, as the ISR confirms them (Kafka's rule; before, every replicated
        # write stopped 2.5 s into it, when the lease ran out)
        topic = "steady"
        parts = replicated(c, topic)
        vp = next(i for i, x in enumerate(parts) if x["node_id"] != head)
        wait_isr(c, topic, vp, 3)
        acked, errors, times = [], [], []
        p, cb0 = producer(safe, acked, errors)

        def cb(e, m):
            cb0(e, m)
            if not e:
                times.append(time.monotonic())
        for i in range(20):
            p.produce(topic, b"r%%d" %% i, partition=vp, on_delivery=cb)
        p.flush(60)
        router_pid = ray.get(c.router.__ray_call__.remote(lambda self: os.getpid()))
        t_stop = time.monotonic()
        os.kill(router_pid, signal.SIGSTOP)
        try:
            i = 20
            while time.monotonic() < t_stop + 7:
                p.produce(topic, b"r%%d" %% i, partition=vp, on_delivery=cb)
                i += 1
                p.poll(0.02)
        finally:
            os.kill(router_pid, signal.SIGCONT)
        t_cont = time.monotonic()
        out["r_unflushed"] = p.flush(60)
        out["r_acked_past_lease"] = sum(1 for t in times if t_stop + 3.5 < t < t_cont)
        edges = [t_stop] + [t for t in times if t_stop < t < t_cont] + [t_cont]
        out["r_gap_s"] = max(b - a for a, b in zip(edges, edges[1:]))
        out["r_errors"] = errors
        out["r_acked"] = acked
        out["r_read"] = read_group(safe, topic, vp, hw(c, topic, vp), "steady-check", subscribe=False)

        # (b) the leader killed, then at once the replica elected after it
        topic = "twice"
        parts = replicated(c, topic)
        # a partition led away from the head, its assigned order made [leader, other, head] (a reassignment
        # to the same replicas changes only the order): a failover walks that order, so the head leads last
        vp = next(i for i, x in enumerate(parts) if x["node_id"] != head)
        first = parts[vp]["node_id"]
        second = next(n for n in parts[vp]["replicas"] if n not in (first, head))
        c.reassign_partitions({(topic, vp): [first, second, head]})
        before = wait_isr(c, topic, vp, 3)
        acked, errors = [], []
        p, cb = producer(safe, acked, errors)
        for i in range(100):
            p.produce(topic, b"b%%d" %% i, partition=vp, on_delivery=cb)
        p.flush(60)
        hws = [hw(c, topic, vp)]

        def kill(node_id, partition_pid):
            pids = [ray.get(ray.get_actor(gateway_name(node_id), namespace="logan_ray").stats.remote())["pid"],
                    partition_pid]
            cluster.remove_node(node_of(node_id), allow_graceful=False)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

        t0 = time.monotonic()
        kill(first, ray.get(actor(c, topic, vp).pid.remote()))
        mid = wait_leader_not(c, topic, vp, first)
        out["b_first_elected_s"] = time.monotonic() - t0
        kill(second, ray.get(actor(c, topic, vp).pid.remote()))
        last = wait_leader_not(c, topic, vp, second)
        out["b_second_elected_s"] = time.monotonic() - t0
        out["b_elected"] = [mid["node_id"] == second, last["node_id"] == head,
                            last["leader_epoch"] > mid["leader_epoch"] > before["leader_epoch"], last["isr"] == [head]]
        # acks=1 by hand, one request at a time, a new value per attempt: a client's retry of a
        # timed-out acks=1 request may write it twice (Kafka's at-least-once without idempotence)
        ones, one_codes = [], []
        with Wire(safe) as w:
            for attempt in range(60):
                w.call(3, 12, metadata_body([topic]))  # as a client does after NOT_LEADER_OR_FOLLOWER
                value = "b-acks1-%%d" %% attempt
                r = w.call(0, 9, produce_body(topic, vp, build_batch([value.encode()]), acks=1))
                pr = r["responses"][0]["partition_responses"][0]
                one_codes.append(pr["error_code"])
                if pr["error_code"] == 0:
                    ones.append([pr["base_offset"], value])
                    break
                time.sleep(0.2)
        out["b_acks1_s"] = time.monotonic() - t0
        out["b_acks1"] = [len(ones), [c for c in one_codes if c not in (0, 6, 7)]]
        out["b_acks1_codes"] = one_codes
        with Wire(safe) as w:
            r = w.call(0, 9, produce_body(topic, vp, build_batch([b"b-all"]), acks=-1))
        out["b_acks_all_code"] = r["responses"][0]["partition_responses"][0]["error_code"]
        hws.append(hw(c, topic, vp))
        out["b_hws"] = hws
        out["b_errors"] = errors
        out["b_acked"] = acked + ones
        out["b_read"] = read_group(safe, topic, vp, hw(c, topic, vp), "twice-check", subscribe=False)
        print(json.dumps(out), flush=True)
        out = None
        try:  # two nodes are gone (Ray would notice in 30 s): bounded
            stop_gateways([n for n in endpoints if n not in (first, second)], timeout=10)
            ray.get(c.router.shutdown.remote(), timeout=30)
        except Exception as e:
            print("shutdown:", e, file=sys.stderr)
    finally:
        if out is not None:
            print(json.dumps(out), flush=True)
        ray.shutdown()
        cluster.shutdown()
    """
) % HERE


@pytest.fixture(scope="module")
def faults() -> dict:
    out = run_in_group([sys.executable, "-c", SCRIPT], 400)
    result = child_result(out.stdout, out.stderr)
    result["_stderr"] = out.stderr[-4000:]
    print({k: v for k, v in result.items() if k.endswith("_s")})
    return result


@pytest.mark.slow
def test_a_stopped_leader_is_fenced_by_its_lease_acknowledges_nothing_and_then_follows(faults):
    r = faults
    assert "a_follows" in r, r["_stderr"]
    assert r["a_elected"] == [True, True, True]  # while Ray still counts the node alive (30 s)
    assert r["a_stopped_s"] > 3.0  # longer than broker.session.timeout.ms
    # acks=1: NOT_LEADER_OR_FOLLOWER by the lapsed lease. acks=all needs no lease while other replicas are in
    # its ISR (Kafka's rule, what keeps writes going while the router is away): the zombie appends, its high
    # watermark never passes the write (the new leader stopped fetching from it), and the answer is
    # NOT_LEADER_OR_FOLLOWER once it learns it resigned, or REQUEST_TIMED_OUT; never success
    assert r["a_zombie_codes"][0] == 6 and r["a_zombie_codes"][1] in (6, 7), r["a_zombie_codes"]
    assert r["a_brokers_while_fenced"] == [3, 3]  # no gateway leaves the stopped broker out
    assert r["a_unflushed"] == 0 and r["a_errors"] == []
    # available again, under a minute: the time itself is a figure (printed), not asserted (the guide: performance
    # is measured in bench/); under 10 s alone, 15.6 s in a loaded full run of stop 49, goal <= 5 s (issue 32 item 8)
    print(f"first acks=all produce acknowledged {r['a_unavailable_s']} s after the leader's SIGSTOP")
    assert r["a_unavailable_s"] is not None and r["a_unavailable_s"] < 60
    assert r["a_follows"] == [True, True, True]  # in its old folder, caught up, back in the ISR
    assert r["a_old_actor_alive"] is False  # the old leader's actor exited once it ran again (ray.kill)
    assert r["a_hws"] == sorted(r["a_hws"])  # the high watermark never went back
    assert len(r["a_acked"]) == 151
    assert check_history(r["a_acked"], r["a_read"]) == []
    assert not any(v.startswith("zombie") for _o, v in r["a_read"])


@pytest.mark.slow
def test_acks_all_writes_go_on_while_the_router_is_stopped_longer_than_a_lease(faults):
    r = faults
    assert "r_read" in r, r["_stderr"]
    print(f"router stopped 7 s: longest acks=all gap {r['r_gap_s']:.2f} s, "
          f"{r['r_acked_past_lease']} acknowledged after the lease would have run out")
    assert r["r_acked_past_lease"] > 0  # none without the rule: the lease ran out 2.5 s into the stop
    assert r["r_errors"] == [] and r["r_unflushed"] == 0
    assert check_history(r["r_acked"], r["r_read"]) == []


@pytest.mark.slow
def test_killing_the_leader_twice_in_a_row_elects_the_last_in_sync_replica(faults):
    r = faults
    assert "b_read" in r, r["_stderr"]
    assert r["b_elected"] == [True, True, True, True]
    assert r["b_acks1"] == [1, []]  # acks=1 goes on with one replica left (after NOT_LEADER/timeouts at most)
    assert r["b_acks_all_code"] == 19  # NOT_ENOUGH_REPLICAS: min.insync.replicas=2
    assert r["b_errors"] == [] and len(r["b_acked"]) == 101
    assert r["b_hws"] == sorted(r["b_hws"])
    assert check_history(r["b_acked"], r["b_read"]) == []
