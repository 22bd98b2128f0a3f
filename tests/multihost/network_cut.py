"""A network cut of a replicated partition's leader host, on a running `ray up` cluster of the bed.

Used by tests/multihost/test_ray_up.py on its cluster (no bed or Ray cluster of its own):
an RF=3, ``min.insync.replicas=2`` topic; an idempotent ``acks=all`` confluent-kafka
producer and a consumer group in the root namespace; the worker host leading one of its
partitions loses its cable (``TestBed.link``: the root end of its veth goes down; every
process there lives on, unreachable) for longer than ``broker.session.timeout.ms``, while
a client *on that host* keeps producing to it (the only client that can still reach it).
What is recorded, for the test to check: when the producer's first record sent after the
cut is acknowledged (the unavailability), who leads in which epoch before, during and
after, every answer the cut leader gave (with ``time.monotonic``, one clock for every
namespace of the machine), what the consumer read and the high watermarks it saw, and
the cut host's state once it is back.
"""
from __future__ import annotations

import glob
import json
import os
import shlex
import subprocess
import sys
import textwrap
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from netns_hosts import TestBed
from child_result import child_result

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TESTS, "gateway"))

from wire_client import Wire, metadata_body  # noqa: E402

TOPIC = "netcut"
SESSION_S = 3.0  # broker.session.timeout.ms (the default, which the cluster keeps)
LEASE_S = 2.5  # broker.session.timeout.ms - broker.heartbeat.interval.ms (actors/broker_lease.py)
# librdkafka waits socket.timeout.ms (60 s by default) for an answer from a broker it cannot reach
# before it refreshes its metadata and finds the new leader; 4 s as in test_gw_failover_faults.py
CLIENT = {"socket.timeout.ms": 4000}

#: Runs on the head host (where the router is): the controller's view of the topic, Ray's alive
#: nodes, the partition's high watermark and one node's follower state; with ``want`` it first waits
#: until every partition has that many in-sync replicas and the follower caught up with the leader.
STATE = textwrap.dedent("""
    import json, sys, time, ray
    from logan_ray.actors.names import NAMESPACE, ROUTER_NAME, actor_name
    from logan_ray.gateway import gateway_name
    topic, p, follower, want, timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    ray.init(address="auto", namespace=NAMESPACE, logging_level="ERROR", log_to_driver=False)
    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    deadline = time.monotonic() + timeout
    while True:
        parts = ray.get(router.describe_topic.remote(topic))["partitions"]
        nodes = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}
        try:
            hw = ray.get(ray.get_actor(actor_name(topic, p), namespace=NAMESPACE).offsets.remote(), timeout=10)[1]
        except Exception as e:
            hw = repr(e)
        state = None
        if follower != "-":
            try:
                state = ray.get(ray.get_actor(gateway_name(follower), namespace=NAMESPACE).replica_state.remote(),
                                timeout=10).get("%s-%d" % (topic, p))
            except Exception as e:
                state = repr(e)
        ok = all(len(x["isr"]) >= want for x in parts) and (
            follower == "-" or (isinstance(state, dict) and follower in parts[p]["isr"] and state["log_end"] == hw))
        if ok or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    print(json.dumps({"partitions": parts, "nodes": nodes, "hw": hw, "follower": state, "ok": ok}))
""")

#: Runs in the cut host's network namespace: produces to its own gateway (the cut leader) from the
#: moment ``go`` exists until ``stop`` does, acks=1 and acks=all on two connections, one request at a
#: time, a new value each; writes every answer [sent, answered, error code, base offset, value].
PROBE = textwrap.dedent("""
    import json, os, sys, threading, time
    sys.path.insert(0, %r)
    from logan_ray.storage.record_builder import build_batch
    from wire_client import Wire, produce_body
    addr, topic, p, go, stop, out = sys.argv[1:7]
    p = int(p)
    answers = {1: [], -1: []}
    wires = {acks: Wire(addr, timeout=30) for acks in answers}

    def send(acks):
        n = 0
        while not os.path.exists(stop):
            n += 1
            value = "zombie-%%s-%%d" %% ("all" if acks == -1 else "one", n)
            sent = time.monotonic()
            try:
                r = wires[acks].call(0, 9, produce_body(topic, p, build_batch([value.encode()]), acks=acks))
                pr = r["responses"][0]["partition_responses"][0]
                answers[acks].append([sent, time.monotonic(), pr["error_code"], pr["base_offset"], value])
            except Exception as e:
                answers[acks].append([sent, time.monotonic(), repr(e), -1, value])
                return
            time.sleep(0.1)

    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.002)
    threads = [threading.Thread(target=send, args=(acks,)) for acks in answers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(out, "w") as f:
        json.dump({"one": answers[1], "all": answers[-1]}, f)
""") % os.path.join(TESTS, "gateway")


def controller_state(bed: TestBed, head, p: int, follower: str = "-", want: int = 0, timeout: float = 0) -> dict:
    cmd = f"RAY_AUTH_MODE=token python3 -c {shlex.quote(STATE)} {TOPIC} {p} {follower} {want} {timeout}"
    out = bed.run(head, cmd, timeout=timeout + 90)
    return child_result(out.stdout)


def leader_seen(bootstrap: str, p: int) -> tuple[int, int]:
    """(leader broker id, leader epoch) of the partition in the head gateway's Metadata v12."""
    with Wire(bootstrap, timeout=5) as w:
        body = w.call(3, 12, metadata_body([TOPIC]))
    part = next(x for x in body["topics"][0]["partitions"] if x["partition_index"] == p)
    return part["leader_id"], part["leader_epoch"]


class Traffic:
    """The root namespace's clients: an idempotent acks=all producer writing to partition ``p`` without
    pause, and a consumer group member reading the topic, each on its own thread."""

    def __init__(self, bootstrap: str, p: int) -> None:
        self.p = p
        self.acked: list[list] = []  # [offset, value, sent, acknowledged]
        self.errors: list[str] = []
        self.read: list[list] = []  # [offset, value] of partition p, in the order read
        self.hws: list[int] = []  # the high watermarks of partition p the consumer saw, in order
        self.read_errors: list[str] = []
        self.unflushed = None
        self._stop_producing = threading.Event()
        self._stop_reading = threading.Event()
        self._bootstrap = bootstrap
        self._threads = [threading.Thread(target=self._produce, daemon=True),
                         threading.Thread(target=self._consume, daemon=True)]
        for t in self._threads:
            t.start()

    def _produce(self) -> None:
        producer = Producer({"bootstrap.servers": self._bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, **CLIENT})
        sent_at: dict[str, float] = {}

        def report(err, msg) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                value = msg.value().decode()
                self.acked.append([msg.offset(), value, sent_at[value], time.monotonic()])

        i = 0
        while not self._stop_producing.is_set():
            value = f"c-{i}"
            sent_at[value] = time.monotonic()
            producer.produce(TOPIC, value.encode(), partition=self.p, on_delivery=report)
            i += 1
            producer.poll(0.02)
        self.unflushed = producer.flush(60)

    def _consume(self) -> None:
        consumer = Consumer({"bootstrap.servers": self._bootstrap, "group.id": "netcut-readers",
                             "auto.offset.reset": "earliest", "enable.auto.commit": True, **CLIENT})
        consumer.subscribe([TOPIC])
        tp = TopicPartition(TOPIC, self.p)
        try:
            while not self._stop_reading.is_set():
                for m in consumer.consume(1000, timeout=0.2):
                    if m.error() is not None:
                        self.read_errors.append(str(m.error()))
                    elif m.partition() == self.p:
                        self.read.append([m.offset(), m.value().decode()])
                hw = consumer.get_watermark_offsets(tp, cached=True)[1]
                if hw >= 0:
                    self.hws.append(hw)
        finally:
            consumer.close()

    def acked_since(self, t: float) -> list[list]:
        return [a for a in list(self.acked) if a[2] > t]

    def stop(self, timeout: float = 90) -> None:
        """Stop producing (everything sent is flushed), then read until the consumer has every record."""
        self._stop_producing.set()
        self._threads[0].join(timeout)
        end = max((a[0] for a in self.acked), default=-1) + 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len({o for o, _v in self.read}) < end:
            time.sleep(0.2)
        self._stop_reading.set()
        self._threads[1].join(timeout)


def segments(folder: str) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".log"):
            with open(os.path.join(folder, name), "rb") as f:
                out[name] = f.read()
    return out


def cut_a_leader(bed: TestBed, tmp_path, port: int) -> dict:
    """Everything the network-cut test checks (see the module docstring), as a dict."""
    head = bed.hosts[0]
    bootstrap = f"{head.ip}:{port}"
    out: dict = {}
    t_start = time.monotonic()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, replication_factor=3, config={"min.insync.replicas": "2"})])[TOPIC].result(60)
    before = controller_state(bed, head, 0, want=3, timeout=60)
    assert before["ok"], before
    ip_of = before["nodes"]
    # a partition led by a worker host (the head keeps the router: it must stay reachable)
    p, part = next((i, x) for i, x in enumerate(before["partitions"]) if ip_of[x["node_id"]] != head.ip)
    cut = bed.host(ip_of[part["node_id"]])
    cut_node = part["node_id"]
    out.update(partition=p, host=cut.name, before=part)
    broker_of = {}  # broker id -> host name, from Metadata
    with Wire(bootstrap, timeout=5) as w:
        for b in w.call(3, 12, metadata_body([TOPIC]))["brokers"]:
            broker_of[b["node_id"]] = bed.host(b["host"]).name

    traffic = Traffic(bootstrap, p)
    probe = None
    try:
        go, stop, probe_out = (str(tmp_path / n) for n in ("probe-go", "probe-stop", "probe.json"))
        probe = subprocess.Popen(["ip", "netns", "exec", cut.netns, sys.executable, "-c", PROBE, f"{cut.ip}:{port}",
                                  TOPIC, str(p), go, stop, probe_out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        assert probe.stdout.readline().strip() == "ready", probe.stderr.read()
        deadline = time.monotonic() + 30
        while len(traffic.acked) < 50 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(traffic.acked) >= 50 and not traffic.errors, (len(traffic.acked), traffic.errors)
        epoch_before = leader_seen(bootstrap, p)[1]

        # ---- the cut: the leader's host loses its cable; its processes live on
        bed.link(cut, up=False)
        t0 = time.monotonic()
        open(go, "w").close()
        try:
            elected = None
            deadline = t0 + 60
            while time.monotonic() < deadline:
                if elected is None:
                    try:
                        leader, epoch = leader_seen(bootstrap, p)
                    except (OSError, ConnectionError):
                        leader, epoch = None, -1
                    if leader is not None and leader >= 0 and broker_of.get(leader) != cut.name:
                        elected = [time.monotonic() - t0, broker_of.get(leader), epoch]
                since = traffic.acked_since(t0)
                if elected and since and time.monotonic() - t0 > SESSION_S + 1.5:
                    break
                time.sleep(0.05)
            since = traffic.acked_since(t0)
            out["unavailable_s"] = min(a[3] for a in since) - t0 if since else None
            out["elected"] = elected
            out["epoch_before"] = epoch_before
            out["cut_s"] = time.monotonic() - t0
        finally:
            bed.link(cut, up=True)
        t_back = time.monotonic()
        out["back_at_s"] = t_back - t0
        open(stop, "w").close()
        probe_stdout, probe_stderr = probe.communicate(timeout=60)
        with open(probe_out) as f:
            answers = json.load(f)
        out["probe"] = {k: [[round(s - t0, 3), round(a - t0, 3), code, offset, value]
                            for s, a, code, offset, value in v] for k, v in answers.items()}

        # ---- back: the node follows in the folder it led in, is cut back to the new leader's log, catches
        # up and joins the ISR again; the producer stops once that happened, the group reads everything
        time.sleep(1.0)
        traffic.stop()
        after = controller_state(bed, head, p, follower=cut_node, want=3, timeout=60)
        out["rejoined_s"] = time.monotonic() - t0
        out["after"] = after["partitions"][p]
        out["after_ok"] = after["ok"]
        out["cut_node_alive_in_ray"] = cut_node in after["nodes"]
        out["follower"] = after["follower"]
        out["hw"] = after["hw"]
        new_leader = bed.host(ip_of[after["partitions"][p]["node_id"]])
        mine = segments(os.path.join(cut.data_dir, f"{TOPIC}-{p}"))
        theirs = [segments(d) for d in glob.glob(os.path.join(new_leader.data_dir, "replicas", "*", f"{TOPIC}-{p}"))]
        out["same_bytes"] = [mine == t for t in theirs]
        out["zombie_bytes_left"] = any(b"zombie" in data for data in mine.values())
        out["follower_dir"] = os.path.join(bed.data_path, f"{TOPIC}-{p}")
    finally:
        if probe is not None and probe.poll() is None:
            probe.kill()
            probe.wait(10)
        traffic.stop(timeout=30)
    out["acked"] = [[o, v] for o, v, _s, _a in traffic.acked]
    out["errors"] = traffic.errors
    out["unflushed"] = traffic.unflushed
    out["read"] = traffic.read
    out["read_errors"] = traffic.read_errors
    out["hws"] = traffic.hws
    out["total_s"] = time.monotonic() - t_start
    return out
