"""Consumer groups over the wire: FindCoordinator, the group APIs, and real Kafka clients in groups.

Every client test runs the issue's scenario on a 6-partition topic while a
producer keeps writing: three consumers share the partitions disjointly, one
leaves, another joins, and in the end every produced record has been consumed
(at-least-once; duplicates are allowed only around rebalances). Timeouts are
shortened (session 6 s, heartbeats 200-500 ms, initial rebalance delay 200 ms)
so the file stays fast; the defaults stay Kafka's in production.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import ray

from logan_ray.actors.group_coordinator import ensure_group_coordinator, stop_group_coordinator
from logan_ray.groups.consumer_protocol import decode_assignment, encode_assignment, encode_subscription
from logan_ray.protocol import errors as codes
from wire_client import Wire

FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC = 10, 11, 12, 13, 14
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE, LIST, DELETE, OFFSET_DELETE = 8, 9, 15, 16, 42, 47
PARTITIONS = 6
NODE_DIR = os.path.join(os.path.dirname(__file__), "..", "clients", "node")


@pytest.fixture(scope="module")
def coordinator(client, gateway):
    return ensure_group_coordinator(initial_rebalance_delay_ms=200, min_session_timeout_ms=100)


def wait_for(cond, timeout: float = 60, what: str = "condition", interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


# ------------------------------------------------------------------ the wire
def _join_body(group: str, member_id: str = "", topics=("t",)) -> dict:
    return {"group_id": group, "session_timeout_ms": 6000, "rebalance_timeout_ms": 10000, "member_id": member_id,
            "group_instance_id": None, "protocol_type": "consumer", "reason": None,
            "protocols": [{"name": "range", "metadata": encode_subscription(list(topics))}]}


def test_a_joining_group_starts_its_offsets_partition_during_the_rebalance(client, gateway, coordinator, topic_name):
    """Issue 12 item 8: the group's ``__consumer_offsets`` partition starts when the group
    forms, not at its first metadata write or commit, which come while its members' traffic
    flows (a process start then stalled that traffic). Only that partition starts."""
    from logan_ray.actors.names import NAMESPACE, ROUTER_NAME
    from logan_ray.groups import OFFSETS_TOPIC
    from logan_ray.groups.offsets_log import partition_for_group

    group = f"forming-{topic_name}"
    client.create_topic(topic_name, 1)
    with Wire(gateway) as w:  # __consumer_offsets exists (its partitions may be active or not)
        assert w.call(JOIN, 3, _join_body(f"{group}-setup", topics=[topic_name]))["error_code"] == 0
    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    ours = partition_for_group(group, len(ray.get(router.offsets.remote(OFFSETS_TOPIC))))

    def active() -> set[int]:
        return {r["partition"] for r in ray.get(router.status.remote())
                if r["topic"] == OFFSETS_TOPIC and r.get("active")}

    wait_for(lambda: ours not in active() or ray.get(router.hibernate.remote(OFFSETS_TOPIC, ours, idle_only=False))
             and ours not in active(), what=f"{OFFSETS_TOPIC}-{ours} hibernated")
    with Wire(gateway) as w:  # the first step of a join only: no SyncGroup, nothing written
        first = w.call(JOIN, 5, _join_body(group, topics=[topic_name]))
        assert first["error_code"] == codes.MEMBER_ID_REQUIRED
        wait_for(lambda: ours in active(), timeout=30, what=f"{OFFSETS_TOPIC}-{ours} started by the join")


def test_find_coordinator_and_group_apis_on_the_wire(client, gateway, coordinator, topic_name):
    client.create_topic(topic_name, 2)
    group = f"wire-{topic_name}"
    host, port = gateway.rsplit(":", 1)
    with Wire(gateway) as w:
        fc = w.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]
        assert (fc["error_code"], fc["host"], fc["port"]) == (0, host, int(port)) and fc["node_id"] >= 0
        old = w.call(FIND_COORDINATOR, 0, {"key": group})
        assert (old["error_code"], old["host"], old["port"]) == (0, host, int(port))
        # two-step join (v4+), then the full member list for the leader
        first = w.call(JOIN, 5, _join_body(group, topics=[topic_name]))
        assert first["error_code"] == codes.MEMBER_ID_REQUIRED and first["member_id"]
        joined = w.call(JOIN, 5, _join_body(group, first["member_id"], topics=[topic_name]))
        mid, gen = joined["member_id"], joined["generation_id"]
        assert joined["error_code"] == 0 and joined["leader"] == mid and joined["protocol_name"] == "range"
        assert [m["member_id"] for m in joined["members"]] == [mid]
        assignment = encode_assignment({topic_name: [0, 1]})
        synced = w.call(SYNC, 3, {"group_id": group, "generation_id": gen, "member_id": mid,
                                  "group_instance_id": None, "assignments": [{"member_id": mid,
                                                                              "assignment": assignment}]})
        assert synced["error_code"] == 0 and decode_assignment(synced["assignment"]).partitions == [(topic_name, [0, 1])]
        hb = {"group_id": group, "generation_id": gen, "member_id": mid, "group_instance_id": None}
        assert w.call(HEARTBEAT, 3, hb)["error_code"] == 0
        assert w.call(HEARTBEAT, 3, {**hb, "generation_id": gen - 1})["error_code"] == codes.ILLEGAL_GENERATION
        assert w.call(HEARTBEAT, 0, {**hb, "member_id": "stranger"})["error_code"] == codes.UNKNOWN_MEMBER_ID
        # JoinGroup v0-3 has no two-step join; v0 has no rebalance timeout
        assert w.call(JOIN, 3, _join_body(group + "-old"))["error_code"] == 0
        # offsets: commit (v8, flexible) with metadata, read back with v1, v5 and v8 (groups form)
        commit = {"group_id": group, "generation_id_or_member_epoch": gen, "member_id": mid,
                  "group_instance_id": None, "topics": [{"name": topic_name, "partitions": [
                      {"partition_index": 0, "committed_offset": 17, "committed_leader_epoch": -1,
                       "committed_metadata": "meta:é"},
                      {"partition_index": 1, "committed_offset": 3, "committed_leader_epoch": -1,
                       "committed_metadata": None}]}]}
        res = w.call(OFFSET_COMMIT, 8, commit)
        assert [p["error_code"] for p in res["topics"][0]["partitions"]] == [0, 0]
        stale = w.call(OFFSET_COMMIT, 2, {**commit, "generation_id_or_member_epoch": gen + 1, "retention_time_ms": -1})
        assert {p["error_code"] for p in stale["topics"][0]["partitions"]} == {codes.ILLEGAL_GENERATION}
        for version in (1, 5):
            got = w.call(OFFSET_FETCH, version, {"group_id": group, "topics": [
                {"name": topic_name, "partition_indexes": [0, 1]}]})
            parts = {p["partition_index"]: (p["committed_offset"], p["metadata"]) for p in got["topics"][0]["partitions"]}
            assert parts == {0: (17, "meta:é"), 1: (3, "")}
        got = w.call(OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": True})
        assert got["groups"][0]["topics"][0]["partitions"][0]["committed_offset"] == 17
        # admin APIs
        listed = w.call(LIST, 4, {"states_filter": ["Stable"]})["groups"]
        assert {"group_id": group, "protocol_type": "consumer", "group_state": "Stable"} in \
            [{k: g[k] for k in ("group_id", "protocol_type", "group_state")} for g in listed]
        described = w.call(DESCRIBE, 5, {"groups": [group], "include_authorized_operations": False})["groups"][0]
        assert described["group_state"] == "Stable" and described["members"][0]["client_id"] == "wire-test"
        assert described["members"][0]["client_host"] == "/127.0.0.1"
        assert w.call(DELETE, 2, {"groups_names": [group]})["results"][0]["error_code"] == codes.NON_EMPTY_GROUP
        od = w.call(OFFSET_DELETE, 0, {"group_id": group, "topics": [{"name": topic_name, "partitions": [
            {"partition_index": 0}]}]})
        assert od["error_code"] == 0 and od["topics"][0]["partitions"][0]["error_code"] == codes.GROUP_SUBSCRIBED_TO_TOPIC
        left = w.call(LEAVE, 4, {"group_id": group, "members": [{"member_id": mid, "group_instance_id": None,
                                                                  "reason": None}]})
        assert left["error_code"] == 0 and left["members"][0]["error_code"] == 0
        assert w.call(DELETE, 2, {"groups_names": [group, group + "-nope"]})["results"] == [
            {"group_id": group, "error_code": 0}, {"group_id": group + "-nope", "error_code": codes.GROUP_ID_NOT_FOUND}]
        gone = w.call(OFFSET_FETCH, 5, {"group_id": group, "topics": [{"name": topic_name, "partition_indexes": [0]}]})
        assert gone["topics"][0]["partitions"][0]["committed_offset"] == -1


# ---------------------------------------------------------- the scenario
class Feed:
    """A producer that keeps writing numbered records round-robin over the partitions."""

    def __init__(self, client, topic: str) -> None:
        self.producer = client.producer(linger_ms=2)
        self.topic = topic
        self.sent = 0
        self._halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._halt.is_set():
            for _ in range(12):
                self.producer.send(self.topic, b"r%06d" % self.sent, partition=self.sent % PARTITIONS)
                self.sent += 1
            self.producer.flush()
            time.sleep(0.02)

    def stop(self) -> set[bytes]:
        self._halt.set()
        self.thread.join(30)
        self.producer.close()
        return {b"r%06d" % i for i in range(self.sent)}


def group_settled(client, group: str, members: int, topic: str) -> bool:
    try:
        d = client.groups.describe(group)
    except Exception:
        return False
    owned = [tp for m in d["members"] for tp in m["assignment"]]
    return d["group_state"] == "Stable" and len(d["members"]) == members and len(owned) == len(set(owned)) and \
        sorted(owned) == [(topic, p) for p in range(PARTITIONS)]


def run_scenario(client, topic: str, group: str, start, label: str) -> str:
    """start(name) -> handle with .values (list of bytes) and .stop(); the issue's join/leave scenario.

    Returns the assignment strategy the group chose."""
    client.create_topic(topic, PARTITIONS)
    feed = Feed(client, topic)
    everyone = []

    def add(name: str):
        m = start(name)
        everyone.append(m)
        return m

    members = {n: add(n) for n in ("c1", "c2", "c3")}
    wait_for(lambda: group_settled(client, group, 3, topic), what=f"{label}: three members, disjoint shares")
    strategy = client.groups.describe(group)["protocol_data"]
    time.sleep(0.5)
    members.pop("c3").stop()
    wait_for(lambda: group_settled(client, group, 2, topic), what=f"{label}: two members after a leave")
    members["c4"] = add("c4")
    wait_for(lambda: group_settled(client, group, 3, topic), what=f"{label}: a new member joins")
    produced = feed.stop()
    wait_for(lambda: produced <= {v for m in everyone for v in m.values}, timeout=60,
             what=f"{label}: every record consumed")
    for m in members.values():
        m.stop()
    assert len(produced) > 100
    assert all(m.values for m in everyone[:3]), "each of the first three members consumed records"
    return strategy


# ------------------------------------------------------------ confluent-kafka
class ConfluentMember:
    def __init__(self, gateway: str, topic: str, group: str, **conf) -> None:
        from confluent_kafka import Consumer

        self.values: list[bytes] = []
        self.consumer = Consumer({"bootstrap.servers": gateway, "group.id": group, "auto.offset.reset": "earliest",
                                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                                  "fetch.wait.max.ms": 100, **conf})
        self.consumer.subscribe([topic])
        self._halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._halt.is_set():
            for m in self.consumer.consume(500, 0.1):
                if m.error() is None:
                    self.values.append(m.value())
        self.consumer.close()  # commits stored offsets and leaves the group

    def stop(self) -> None:
        self._halt.set()
        self.thread.join(30)


@pytest.mark.parametrize("strategy", ["range,roundrobin", "cooperative-sticky"])
def test_confluent_kafka_group(client, gateway, coordinator, topic_name, strategy):
    """librdkafka's default eager strategies, and the incremental cooperative protocol (KIP-429),
    which needs nothing from the coordinator but passing owned partitions through untouched."""
    group = f"ck-{topic_name}"
    chosen = run_scenario(client, topic_name, group, lambda n: ConfluentMember(
        gateway, topic_name, group, **{"partition.assignment.strategy": strategy}), f"confluent {strategy}")
    assert chosen == strategy.split(",")[0]


# --------------------------------------------------------------- kafka-python
class KafkaPythonMember:
    def __init__(self, gateway: str, topic: str, group: str) -> None:
        self.values: list[bytes] = []
        self.args = (gateway, topic, group)
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from kafka import KafkaConsumer

        gateway, topic, group = self.args
        try:
            c = KafkaConsumer(topic, bootstrap_servers=gateway, group_id=group, auto_offset_reset="earliest",
                              session_timeout_ms=6000, heartbeat_interval_ms=300, fetch_max_wait_ms=100,
                              auto_commit_interval_ms=200, client_id="kafka-python-group-test")
            while not self._halt.is_set():
                for records in c.poll(timeout_ms=100).values():
                    self.values.extend(r.value for r in records)
            c.close()  # commits and leaves the group
        except BaseException as e:  # reported by stop()
            self.error = e

    def stop(self) -> None:
        self._halt.set()
        self.thread.join(30)
        assert self.error is None, self.error


def test_kafka_python_group(client, gateway, coordinator, topic_name):
    group = f"kp-{topic_name}"
    run_scenario(client, topic_name, group, lambda n: KafkaPythonMember(gateway, topic_name, group), "kafka-python")


# ------------------------------------------------------------------- aiokafka
class AiokafkaMember:
    def __init__(self, gateway: str, topic: str, group: str) -> None:
        self.values: list[bytes] = []
        self.args = (gateway, topic, group)
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self.thread.start()

    async def _main(self) -> None:
        from aiokafka import AIOKafkaConsumer

        gateway, topic, group = self.args
        try:
            c = AIOKafkaConsumer(topic, bootstrap_servers=gateway, group_id=group, auto_offset_reset="earliest",
                                 session_timeout_ms=6000, heartbeat_interval_ms=300, fetch_max_wait_ms=100,
                                 auto_commit_interval_ms=200)
            await c.start()
            try:
                while not self._halt.is_set():
                    for records in (await c.getmany(timeout_ms=100)).values():
                        self.values.extend(r.value for r in records)
            finally:
                await c.stop()  # commits and leaves the group
        except BaseException as e:
            self.error = e

    def stop(self) -> None:
        self._halt.set()
        self.thread.join(30)
        assert self.error is None, self.error


def test_aiokafka_group(client, gateway, coordinator, topic_name):
    group = f"aio-{topic_name}"
    run_scenario(client, topic_name, group, lambda n: AiokafkaMember(gateway, topic_name, group), "aiokafka")


# -------------------------------------------------------------------- kafkajs
class NodeGroup:
    """One Node.js process running kafkajs consumers of one group, commanded over stdin."""

    def __init__(self, gateway: str, topic: str, group: str) -> None:
        assert os.path.isdir(os.path.join(NODE_DIR, "node_modules", "kafkajs")), \
            "run `npm install` in tests/clients/node (scripts/setup.sh --test does)"
        self.proc = subprocess.Popen(["node", "group.js"], cwd=NODE_DIR, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        self.values: dict[str, list[bytes]] = {}
        self.events: list[dict] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.command(cmd="config", bootstrap=gateway, topic=topic, group=group)
        self.wait_event(lambda e: e["event"] == "ready")

    def _read(self) -> None:
        for line in self.proc.stdout:
            e = json.loads(line)
            if e["event"] == "values":
                self.values.setdefault(e["name"], []).extend(v.encode() for v in e["values"])
            else:
                self.events.append(e)

    def command(self, **msg) -> None:
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def wait_event(self, match, timeout: float = 60) -> dict:
        def found():
            errors = [e for e in self.events if e["event"] == "error"]
            assert not errors, errors
            return next((e for e in self.events if match(e)), None)

        return wait_for(found, timeout, what="a kafkajs event")

    def member(self, name: str):
        group = self
        self.values.setdefault(name, [])
        self.command(cmd="add", name=name)
        self.wait_event(lambda e: e["event"] == "added" and e["name"] == name)

        class Handle:
            values = self.values[name]

            def stop(self_inner) -> None:
                group.command(cmd="remove", name=name)
                group.wait_event(lambda e: e["event"] == "removed" and e["name"] == name)

        return Handle()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.command(cmd="exit")
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        err = self.proc.stderr.read()
        assert self.proc.returncode == 0, err


def test_kafkajs_group(client, gateway, coordinator, topic_name):
    group = f"js-{topic_name}"
    node = NodeGroup(gateway, topic_name, group)
    try:
        run_scenario(client, topic_name, group, node.member, "kafkajs")
    finally:
        node.close()
    joins = [e for e in node.events if e["event"] == "join"]
    assert {e["name"] for e in joins} >= {"c1", "c2", "c3", "c4"}


# -------------------------------------------------------------- mixed group
def test_mixed_group_python_api_and_confluent(client, gateway, coordinator, topic_name):
    from logan_ray.consumer import TopicPartition

    client.create_topic(topic_name, PARTITIONS)
    group = f"mixed-{topic_name}"
    py = client.consumer(topic_name, group=group, auto_offset_reset="earliest", session_timeout_ms=6000,
                         heartbeat_interval_ms=200, auto_commit_interval_ms=200)
    py_values: list[bytes] = []
    halt = threading.Event()

    def poll_python() -> None:
        while not halt.is_set():
            py_values.extend(r.value for r in py.poll(100))
        py.close()

    t = threading.Thread(target=poll_python, daemon=True)
    t.start()
    ck = ConfluentMember(gateway, topic_name, group)
    try:
        wait_for(lambda: group_settled(client, group, 2, topic_name), what="a mixed group of two")
        d = client.groups.describe(group)
        assert d["protocol_data"] == "range"  # the one strategy both offer
        by_client = {m["client_id"]: sorted(p for _, p in m["assignment"]) for m in d["members"]}
        assert by_client["logan-ray-python"] in ([0, 1, 2], [3, 4, 5]) and len(by_client) == 2
        # produced once both are members: the first to join (alone, all partitions) reads nothing before
        p = client.producer()
        for i in range(120):
            p.send(topic_name, b"m%03d" % i, partition=i % PARTITIONS)
        p.close()
        wait_for(lambda: len(set(py_values) | set(ck.values)) == 120, what="all records between the two")
        assert set(py_values).isdisjoint(ck.values) and py_values and ck.values
        py_parts = {TopicPartition(topic_name, p) for p in by_client["logan-ray-python"]}
        assert {int(v[1:]) % PARTITIONS for v in py_values} == {tp.partition for tp in py_parts}
    finally:
        halt.set()
        t.join(30)
        ck.stop()


# ------------------------------------------------------------ session timeout
CHILD = r"""
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": 3000,
              "heartbeat.interval.ms": 200, "auto.offset.reset": "earliest"})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.1)
    if c.assignment():
        print("assigned", flush=True)
"""


def test_member_that_stops_heartbeating_is_removed_after_session_timeout(client, gateway, coordinator, topic_name):
    client.create_topic(topic_name, PARTITIONS)
    group = f"st-{topic_name}"
    child = subprocess.Popen([sys.executable, "-c", CHILD, gateway, group, topic_name], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "assigned"
        survivor = ConfluentMember(gateway, topic_name, group)
        wait_for(lambda: group_settled(client, group, 2, topic_name), what="two members")
        os.kill(child.pid, signal.SIGKILL)  # no LeaveGroup, no more heartbeats
        killed = time.monotonic()
        wait_for(lambda: group_settled(client, group, 1, topic_name), what="the dead member's partitions moving")
        took = time.monotonic() - killed
        assert 2.0 <= took <= 15, took  # after its 3 s session timeout, not before
        assert [m["client_id"] for m in client.groups.describe(group)["members"]] == ["rdkafka"]
        survivor.stop()
    finally:
        child.kill()
        child.wait(10)


# ------------------------------------------------------------- broker restart
def _restart_broker(restart_router, gateway: str) -> None:
    """Stop gateway, coordinator and router (partitions flushed and closed), then start them again."""
    from logan_ray.gateway import start_gateways, stop_gateways

    here = ray.get_runtime_context().get_node_id()
    stop_gateways([here])
    stop_group_coordinator()
    restart_router()
    ensure_group_coordinator(initial_rebalance_delay_ms=200, min_session_timeout_ms=100)
    host, port = gateway.rsplit(":", 1)
    assert start_gateways(host, int(port), nodes=[here])[here] == gateway


def test_committed_offsets_survive_a_broker_restart(client, restart_router, gateway, coordinator, topic_name):
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    client.create_topic(topic_name, 2)
    p = client.producer()
    for i in range(40):
        p.send(topic_name, b"x%02d" % i, partition=i % 2)
    p.close()
    ck_group, kp_group = f"rck-{topic_name}", f"rkp-{topic_name}"
    ck = Consumer({"bootstrap.servers": gateway, "group.id": ck_group, "enable.auto.commit": False,
                   "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    ck.subscribe([topic_name])
    wait_for(lambda: ck.poll(0.2) is not None and len(ck.assignment()) == 2, what="confluent assignment")
    ck.commit(offsets=[TopicPartition(topic_name, 0, 7, metadata="ck-meta-0"),
                       TopicPartition(topic_name, 1, 11, metadata="ck-meta-1")], asynchronous=False)
    ck.close()
    kp = KafkaConsumer(topic_name, bootstrap_servers=gateway, group_id=kp_group, enable_auto_commit=False,
                       auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=300)
    wait_for(lambda: kp.poll(timeout_ms=200) is not None and len(kp.assignment()) == 2, what="kafka-python assignment")
    kp.commit({KTP(topic_name, 0): OffsetAndMetadata(13, "kp-meta", -1), KTP(topic_name, 1): OffsetAndMetadata(5, "", -1)})
    kp.close()

    _restart_broker(restart_router, gateway)

    ck2 = Consumer({"bootstrap.servers": gateway, "group.id": ck_group, "enable.auto.commit": False,
                    "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    committed = ck2.committed([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)], timeout=30)
    assert [(c.offset, c.metadata) for c in committed] == [(7, "ck-meta-0"), (11, "ck-meta-1")]
    ck2.subscribe([topic_name])
    first: dict[int, int] = {}
    wait_for(lambda: [first.setdefault(m.partition(), m.offset()) for m in ck2.consume(100, 0.2) if not m.error()]
             and len(first) == 2, what="confluent resuming")
    assert first == {0: 7, 1: 11}
    ck2.close()
    kp2 = KafkaConsumer(topic_name, bootstrap_servers=gateway, group_id=kp_group, enable_auto_commit=False,
                        auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=300)
    got = kp2.committed(KTP(topic_name, 0), metadata=True)
    assert (got.offset, got.metadata) == (13, "kp-meta")
    first = {}

    def kp_first():
        for tp, records in kp2.poll(timeout_ms=200).items():
            first.setdefault(tp.partition, records[0].offset)
        return len(first) == 2

    wait_for(kp_first, what="kafka-python resuming")
    assert first == {0: 13, 1: 5}
    kp2.close()
