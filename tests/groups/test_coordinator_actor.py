"""The group coordinator actor through the Python API: real Ray, real partition actors, real threads.

Short timeouts keep the file fast: sessions of 1.5 s, heartbeats every 100 ms, an
initial rebalance delay of 200 ms (production keeps Kafka's 3000 ms default).
"""
from __future__ import annotations

import threading
import time
import urllib.request

import pytest
import ray

from logan_ray.actors.group_coordinator import ensure_group_coordinator, group_coordinator
from logan_ray.consumer import OffsetAndMetadata, TopicPartition
from logan_ray.errors import CommitFailedError, GroupIdNotFoundError, NonEmptyGroupError
from logan_ray.groups import OFFSETS_TOPIC
from logan_ray.groups.consumer_protocol import encode_subscription
from logan_ray.protocol import errors as E

SESSION_MS = 1500
FAST = dict(session_timeout_ms=SESSION_MS, heartbeat_interval_ms=100, auto_commit_interval_ms=200,
            max_poll_interval_ms=3000, auto_offset_reset="earliest")


@pytest.fixture(scope="module")
def coordinator(client):
    return ensure_group_coordinator(initial_rebalance_delay_ms=200, min_session_timeout_ms=100)


def wait_for(cond, timeout: float = 30, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Member(threading.Thread):
    """One consumer polling in its own thread, as an application would run it."""

    def __init__(self, client, topic: str, group: str, **kw) -> None:
        super().__init__(daemon=True)
        self.consumer = client.consumer(topic, group=group, **{**FAST, **kw})
        self.records: list = []
        self.assignments: list[list[TopicPartition]] = []
        self.revoked: list[list[TopicPartition]] = []
        self.consumer._on_assign = lambda tps: self.assignments.append(sorted(tps))
        self.consumer._on_revoke = lambda tps: self.revoked.append(sorted(tps))
        self._halt = threading.Event()
        self._crash = False
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                self.records.extend(self.consumer.poll(100))
        except BaseException as e:  # surfaced by the test
            self.error = e
        finally:
            if not self._crash:
                self.consumer.close()

    @property
    def current(self) -> set[TopicPartition]:
        return set(self.assignments[-1]) if self.assignments and self.consumer._group.active else set()

    def stop(self) -> None:
        self._halt.set()
        self.join(30)
        assert self.error is None, self.error

    def crash(self) -> None:
        """Stop polling and heartbeating without leaving: as if the process died."""
        self._crash = True
        self.consumer._group._closed.set()
        self._halt.set()
        self.join(30)


def produce(client, topic: str, n: int, partitions: int, start: int = 0) -> None:
    p = client.producer(linger_ms=1)
    for i in range(start, start + n):
        p.send(topic, b"v%d" % i, partition=i % partitions)
    p.flush()
    p.close()


def shares(members) -> list[set[TopicPartition]]:
    return [m.current for m in members]


def settled(members, partitions: int, topic: str) -> bool:
    got = shares(members)
    every = [tp for s in got for tp in s]
    return len(every) == len(set(every)) == partitions and all(got) and \
        set(every) == {TopicPartition(topic, p) for p in range(partitions)}


def values(members) -> list[bytes]:
    return [r.value for m in members for r in m.records]


def test_three_python_consumers_share_partitions_and_rebalance(client, coordinator, topic_name):
    client.create_topic(topic_name, partitions=6)
    produce(client, topic_name, 600, 6)
    group = f"g-{topic_name}"
    ms = [Member(client, topic_name, group) for _ in range(3)]
    wait_for(lambda: settled(ms, 6, topic_name), what="three members sharing six partitions")
    assert sorted(len(s) for s in shares(ms)) == [2, 2, 2]  # range over six partitions
    wait_for(lambda: len(values(ms)) >= 600, what="600 records")
    d = client.groups.describe(group)
    assert d["group_state"] == "Stable" and len(d["members"]) == 3 and d["protocol_data"] == "range"
    assert sorted(tp for m in d["members"] for tp in m["assignment"]) == [(topic_name, p) for p in range(6)]

    # a member leaves: the other two take over its partitions, records keep flowing
    ms[2].stop()
    wait_for(lambda: settled(ms[:2], 6, topic_name), what="two members taking over")
    assert sorted(len(s) for s in shares(ms[:2])) == [3, 3]
    produce(client, topic_name, 300, 6, start=600)
    wait_for(lambda: len(set(values(ms))) >= 900, what="900 records")
    # a member joins: three shares again
    ms.append(Member(client, topic_name, group))
    wait_for(lambda: settled([ms[0], ms[1], ms[3]], 6, topic_name), what="a new member getting a share")
    produce(client, topic_name, 300, 6, start=900)
    wait_for(lambda: len(set(values(ms))) >= 1200, what="1200 records")
    for m in (ms[0], ms[1], ms[3]):
        m.stop()
    got = values(ms)
    assert set(got) == {b"v%d" % i for i in range(1200)}  # at least once ...
    assert len(got) == len(set(got))  # ... and here exactly once: every revoke committed first
    assert all(m.revoked for m in (ms[0], ms[1])), "eager rebalances revoke before reassigning"
    assert client.groups.describe(group)["group_state"] == "Empty"


def test_session_timeout_moves_partitions_of_a_silent_member(client, coordinator, topic_name):
    client.create_topic(topic_name, partitions=6)
    group = f"g-{topic_name}"
    a, b = Member(client, topic_name, group), Member(client, topic_name, group)
    wait_for(lambda: settled([a, b], 6, topic_name), what="two members")
    lost = b.current
    b.crash()
    started = time.monotonic()
    wait_for(lambda: a.current == {TopicPartition(topic_name, p) for p in range(6)}, what="takeover after timeout")
    took = time.monotonic() - started
    assert took >= SESSION_MS / 1000 * 0.5, f"the silent member was dropped too early ({took:.2f} s)"
    assert lost <= a.current
    d = client.groups.describe(group)
    assert [m["member_id"] for m in d["members"]] == [a.consumer.group_metadata()["member_id"]]
    a.stop()


def test_commit_restart_coordinator_resume_with_metadata(client, coordinator, topic_name):
    client.create_topic(topic_name, partitions=2)
    produce(client, topic_name, 60, 2)
    group = f"g-{topic_name}"
    c = client.consumer(topic_name, group=group, enable_auto_commit=False, **{**FAST, "auto_commit_interval_ms": 5000})
    got = []
    wait_for(lambda: got.extend(c.poll(200)) or len(got) >= 60, what="all records")
    t0, t1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    c.commit({t0: OffsetAndMetadata(10, "checkpoint é 10"), t1: (20, "")})
    assert c.committed([t0, t1]) == {t0: OffsetAndMetadata(10, "checkpoint é 10"), t1: OffsetAndMetadata(20, "")}
    c.close()

    handle = group_coordinator(group)
    old_pid = ray.get(handle.pid.remote())
    ray.kill(handle, no_restart=False)  # Ray restarts it; it replays __consumer_offsets
    wait_for(lambda: _restarted(handle, old_pid), what="coordinator restart")
    stats = ray.get(handle.stats.remote())
    assert stats["loaded_records"] >= 2 and stats["offsets_partitions"] == len(client.partitions(OFFSETS_TOPIC))
    ensure_group_coordinator(initial_rebalance_delay_ms=200, min_session_timeout_ms=100)  # restart -> defaults

    c2 = client.consumer(topic_name, group=group, enable_auto_commit=False, **FAST)
    first: dict[int, int] = {}
    rest = []
    wait_for(lambda: rest.extend(c2.poll(200)) or len(rest) >= 30, what="resumed records")
    for r in rest:
        first.setdefault(r.partition, r.offset)
    assert first == {0: 10, 1: 20}
    assert c2.committed()[t0] == OffsetAndMetadata(10, "checkpoint é 10")
    c2.close()
    d = client.groups.describe(group)
    assert {(o["partition"], o["committed"], o["end"], o["lag"]) for o in d["offsets"]} == {(0, 10, 30, 20),
                                                                                            (1, 20, 30, 10)}


def test_a_coordinator_restarted_after_sigkill_replays_its_offsets_without_being_asked(client, coordinator,
                                                                                      topic_name):
    """Groups are served from memory at once after a crash: the replay starts in the restarted actor
    itself, not at the first group request (stats() does not replay)."""
    import os
    import signal

    client.create_topic(topic_name, partitions=1)
    group = f"g-{topic_name}"
    handle = group_coordinator(group)
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",  # a standalone commit
            "topics": [{"name": topic_name, "partitions": [{"partition_index": 0, "committed_offset": 3}]}]}
    assert ray.get(handle.offset_commit.remote(body, 9))["topics"][0]["partitions"][0]["error_code"] == E.NONE
    old_pid = ray.get(handle.pid.remote())
    os.kill(old_pid, signal.SIGKILL)
    try:
        def replayed() -> bool:
            try:
                stats = ray.get(handle.stats.remote(), timeout=5)
            except Exception:  # still restarting
                return False
            return stats["pid"] != old_pid and stats["load_ms"] > 0 and stats["loaded_records"] >= 1

        wait_for(replayed, timeout=60, what="the replay of the restarted coordinator")
    finally:
        ensure_group_coordinator(initial_rebalance_delay_ms=200, min_session_timeout_ms=100)  # restart -> defaults


def _restarted(handle, old_pid) -> bool:
    try:
        return ray.get(handle.pid.remote(), timeout=5) != old_pid and ray.get(handle.ready.remote(), timeout=30) >= 0
    except Exception:
        return False


def _join(coord, group: str, member_id: str = "", version: int = 9, session_ms: int = SESSION_MS) -> dict:
    body = {"group_id": group, "session_timeout_ms": session_ms, "rebalance_timeout_ms": 3000, "member_id": member_id,
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": encode_subscription(["t"])}]}
    return ray.get(coord.join_group.remote(body, version, "raw", "/127.0.0.1"))


def test_protocol_errors_through_the_actor(client, coordinator, topic_name):
    group = f"raw-{topic_name}"
    # this member never heartbeats between steps: give it a session long enough for a loaded machine
    first = _join(coordinator, group, session_ms=60_000)
    assert first["error_code"] == E.MEMBER_ID_REQUIRED
    joined = _join(coordinator, group, first["member_id"], session_ms=60_000)
    mid, gen = joined["member_id"], joined["generation_id"]
    assert joined["error_code"] == 0 and joined["leader"] == mid and gen >= 1
    sync = ray.get(coordinator.sync_group.remote({"group_id": group, "generation_id": gen, "member_id": mid,
                                                   "assignments": [{"member_id": mid, "assignment": b"x"}]}))
    assert sync["error_code"] == 0 and sync["assignment"] == b"x"

    def hb(member, generation):
        return ray.get(coordinator.heartbeat.remote({"group_id": group, "generation_id": generation,
                                                      "member_id": member}))["error_code"]

    assert hb(mid, gen) == 0
    assert hb(mid, gen + 5) == E.ILLEGAL_GENERATION
    assert hb("nobody", gen) == E.UNKNOWN_MEMBER_ID
    assert _join(coordinator, group, "nobody")["error_code"] == E.UNKNOWN_MEMBER_ID
    client.create_topic(topic_name, partitions=1)
    commit = {"group_id": group, "generation_id_or_member_epoch": gen - 1, "member_id": mid,
              "topics": [{"name": topic_name, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                              "committed_metadata": None}]}]}
    res = ray.get(coordinator.offset_commit.remote(commit, 9))
    assert res["topics"][0]["partitions"][0]["error_code"] == E.ILLEGAL_GENERATION
    res = ray.get(coordinator.offset_commit.remote({**commit, "generation_id_or_member_epoch": gen,
                                                    "topics": [{"name": "no-such-" + topic_name, "partitions": [
                                                        {"partition_index": 0, "committed_offset": 1}]}]}, 9))
    assert res["topics"][0]["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    listed = ray.get(coordinator.list_groups.remote({"states_filter": ["stable"]}))["groups"]
    assert {"group_id": group, "protocol_type": "consumer", "group_state": "Stable",
            "group_type": "classic"} in listed
    described = ray.get(coordinator.describe_groups.remote({"groups": [group, "missing-" + group]}, 6))["groups"]
    assert described[0]["members"][0]["member_assignment"] == b"x"
    assert described[1]["error_code"] == E.GROUP_ID_NOT_FOUND and described[1]["group_state"] == "Dead"
    left = ray.get(coordinator.leave_group.remote({"group_id": group, "member_id": mid}, 1))
    assert left["error_code"] == 0


def test_commit_after_rebalance_fails_and_manual_assign_commits(client, coordinator, topic_name):
    client.create_topic(topic_name, partitions=2)
    produce(client, topic_name, 10, 2)
    group = f"g-{topic_name}"
    a = client.consumer(topic_name, group=group, enable_auto_commit=False, **FAST)
    wait_for(lambda: a.poll(100) is not None and a.assignment(), what="first member assigned")
    b = Member(client, topic_name, group)  # forces a rebalance that `a` has not noticed yet
    wait_for(lambda: ray.get(coordinator.describe.remote(group))["group_state"] != "Stable", what="rebalance")
    wait_for(lambda: ray.get(coordinator.describe.remote(group))["group_state"] == "Stable", timeout=30,
             what="rebalance finished without the first member")  # rebalance timeout drops `a`
    with pytest.raises(CommitFailedError):
        a.commit({(topic_name, 0): 3})
    b.stop()
    a.close()
    # a consumer with a group but manual assignment commits outside group management
    m = client.consumer(group=group + "-manual", enable_auto_commit=False)
    m.assign([(topic_name, 1)])
    m.commit({(topic_name, 1): OffsetAndMetadata(4, "manual")})
    assert m.committed([(topic_name, 1)]) == {TopicPartition(topic_name, 1): OffsetAndMetadata(4, "manual")}
    m.close()


def test_group_admin_and_cli(client, coordinator, topic_name, capsys):
    from logan_ray import cli

    client.create_topic(topic_name, partitions=3)
    produce(client, topic_name, 30, 3)
    group = f"g-{topic_name}"
    c = client.consumer(topic_name, group=group, enable_auto_commit=False, **FAST)
    got = []
    wait_for(lambda: got.extend(c.poll(200)) or len(got) >= 30, what="records")
    c.commit({(topic_name, 0): 4, (topic_name, 1): 10})
    with pytest.raises(NonEmptyGroupError):
        client.groups.delete(group)
    with pytest.raises(NonEmptyGroupError):
        client.groups.reset_offsets(group, topic_name, to="earliest")
    assert cli.main(["groups", "describe", group]) == 0
    out = capsys.readouterr().out
    assert "Stable" in out
    row0 = next(ln.split() for ln in out.splitlines() if ln.split()[:2] == [topic_name, "0"])
    assert row0[2:5] == ["4", "10", "6"]  # committed, log end, lag
    c.close()

    assert cli.main(["groups", "list"]) == 0
    listed = capsys.readouterr().out
    assert any(ln.split()[:2] == [group, "Empty"] for ln in listed.splitlines())
    assert cli.main(["groups", "reset-offsets", group, "--topic", topic_name, "--to-offset", "7"]) == 0
    capsys.readouterr()
    offs = {o["partition"]: o["committed"] for o in client.groups.describe(group)["offsets"]}
    assert offs == {0: 7, 1: 7, 2: 7}
    assert cli.main(["groups", "reset-offsets", group, "--topic", topic_name, "--to-latest"]) == 0
    assert cli.main(["groups", "reset-offsets", group, "--topic", topic_name, "--to-earliest", "--dry-run"]) == 0
    capsys.readouterr()
    assert {o["lag"] for o in client.groups.describe(group)["offsets"]} == {0}
    assert cli.main(["groups", "delete", group]) == 0
    with pytest.raises(GroupIdNotFoundError):
        client.groups.describe(group)
    assert cli.main(["groups", "describe", group]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err


def _metrics_text() -> str:
    node = next(n for n in ray.nodes() if n["Alive"] and n["NodeID"] == ray.get_runtime_context().get_node_id())
    url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode()


def test_group_metrics_exported(client, coordinator, topic_name):
    client.create_topic(topic_name, partitions=1)
    produce(client, topic_name, 25, 1)
    group = f"g-{topic_name}"
    c = client.consumer(group=group, enable_auto_commit=False)
    c.assign([(topic_name, 0)])
    c.commit({(topic_name, 0): 5})
    c.close()
    ray.get(coordinator.publish_metrics.remote())
    deadline = time.monotonic() + 60
    lines: list[str] = []
    while time.monotonic() < deadline:
        lines = [ln for ln in _metrics_text().splitlines() if group in ln and not ln.startswith("#")]
        if any("logan_ray_group_lag" in ln for ln in lines) and any("logan_ray_group_members" in ln for ln in lines):
            break
        time.sleep(1)
    lag = [ln for ln in lines if "logan_ray_group_lag" in ln]
    assert lag and float(lag[0].rsplit(" ", 1)[1]) == 20.0, lines
    assert any("logan_ray_group_generation" in ln for ln in lines)


def test_static_member_restart_keeps_its_partitions_without_rebalance(client, coordinator, topic_name):
    client.create_topic(topic_name, partitions=4)
    group = f"g-{topic_name}"
    a = Member(client, topic_name, group, group_instance_id="node-a")
    b = Member(client, topic_name, group, group_instance_id="node-b")
    wait_for(lambda: settled([a, b], 4, topic_name), what="two static members")
    before = a.current
    b_revocations = len(b.revoked)
    generation = ray.get(coordinator.describe.remote(group))["generation"]
    a.stop()  # a static member does not leave on close: its place waits for it (session timeout)
    assert len(ray.get(coordinator.describe.remote(group))["members"]) == 2
    a2 = Member(client, topic_name, group, group_instance_id="node-a")
    wait_for(lambda: a2.current, what="the restarted static member's assignment")
    assert a2.current == before
    d = ray.get(coordinator.describe.remote(group))
    assert d["generation"] == generation and d["group_state"] == "Stable"  # no rebalance happened
    assert len(b.revoked) == b_revocations  # b kept consuming throughout
    a2.stop()
    b.stop()


def test_a_broker_starts_its_coordinators_when_a_node_leading_consumer_offsets_is_gone(client, coordinator,
                                                                                      monkeypatch):
    """A new head's broker starts while the controller still names the lost head as a leader of
    __consumer_offsets partitions: before, ensure_group_coordinator failed the start with
    ActorUnschedulableError (a coordinator pinned to a node Ray declared dead); now that node gets none."""
    from logan_ray.actors import group_coordinator as gc
    from logan_ray.actors.names import NAMESPACE

    here = ray.get_runtime_context().get_node_id()
    gone = "ab" * 28  # a node id Ray does not know: what it answers for a node it declared dead
    monkeypatch.setattr(gc, "coordinator_nodes", lambda: [gone, here])
    try:
        started = time.monotonic()
        handle = gc.ensure_group_coordinator(timeout=60)
        assert time.monotonic() - started < 30
        assert handle._actor_id == coordinator._actor_id  # this node's, the one already running
    finally:
        try:
            ray.kill(ray.get_actor(gc.coordinator_name(gone), namespace=NAMESPACE), no_restart=True)
        except ValueError:
            pass
