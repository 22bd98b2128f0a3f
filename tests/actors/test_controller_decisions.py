"""The controller's leader and ISR decisions are compare-and-sets (issue 32, item 4; item 8's ISR drop).

An election waits (the candidate's handover, the old leader's end) between reading the
ISR and writing the new leader. During that wait the old leader's ``alter_isr`` and a
Ray-restarted actor's ``open_partition`` are served. Without the rule, a replica that
had just left the ISR was elected, and two leaders shared one epoch. These tests drive
that race deterministically: the candidate's ``stop_following`` blocks until both calls
are in. They use the router's own methods on a stand-in host (no Ray).
"""
from __future__ import annotations

import asyncio
import types
from typing import Any

import pytest

from logan_ray.actors import router_leaders
from logan_ray.actors.router import RouterActor
from logan_ray.actors.router_leaders import LeaderControl
from logan_ray.storage.config import TopicConfig
from logan_ray.storage.errors import FencedLeaderEpochError

A, B, C = "a" * 56, "b" * 56, "c" * 56  # Ray node ids; A led and is gone
TOPIC, TID = "t", "0" * 32


class Sessions:
    def __init__(self, fenced=()) -> None:
        self._fenced = set(fenced)

    def fenced(self, node: str) -> bool:
        return node in self._fenced


class Controller(LeaderControl):
    """The router's leader control over a stand-in for the rest of RouterActor."""

    _replacing = RouterActor._replacing
    _stopped = RouterActor._stopped
    _dir = RouterActor._dir
    _existing = RouterActor._existing
    _topic = RouterActor._topic
    _electable = RouterActor._electable

    def __init__(self, isr: list[str], alive: list[str], fenced=()) -> None:
        self.data_dir = "/nonexistent"
        self.replica_lag_time_max_ms = 30_000
        self._alive = {n: "127.0.0.1" for n in alive}
        self._sessions = Sessions(fenced)
        self._draining: set[str] = set()
        self._stopping: dict = {}
        self._offline: dict = {}
        self._handles: dict = {}
        self._pending_save = None
        self.saves = 0
        replicas = [{"node_id": n, "node_ip": "127.0.0.1"} for n in (A, B, C)]
        self._meta = {"topics": {TOPIC: {
            "topic_id": TID, "partitions": 1, "replication_factor": 3, "config": {},
            "placement": {"0": {"node_id": A, "node_ip": "127.0.0.1"}},
            "leaders": {"0": {"epoch": 5, "incarnation": "old", "replicas": replicas, "isr": list(isr)}}}}}

    def _save(self) -> None:
        self.saves += 1

    def _save_beside_loop(self) -> asyncio.Future:
        self._save()
        written = asyncio.get_running_loop().create_future()
        written.set_result(None)
        return written

    def _effective(self, t: dict[str, Any]) -> TopicConfig:
        return TopicConfig.from_dict(t.get("config", {}))

    def _producer_settings(self, node_id: str) -> dict:
        return {}

    async def _kill_old_leader(self, topic: str, partition: int) -> None:
        await asyncio.sleep(0)

    @property
    def rec(self) -> dict:
        return self._meta["topics"][TOPIC]["leaders"]["0"]

    @property
    def leader(self) -> str:
        return self._meta["topics"][TOPIC]["placement"]["0"]["node_id"]


def gateways(blocking: dict[str, asyncio.Event], released: list) -> Any:
    """``ray`` as router_leaders uses it: gateway actors whose ``stop_following`` may block."""
    def get_actor(name: str, namespace: str = ""):
        node = next(n for n in (A, B, C) if n[:8] in name)

        async def stop_following(topic, partition, epoch):
            released.append((node, epoch))
            if node in blocking:
                await blocking[node].wait()
            return True
        return types.SimpleNamespace(stop_following=types.SimpleNamespace(remote=stop_following))
    return types.SimpleNamespace(get_actor=get_actor)


def test_an_election_does_not_elect_a_replica_that_left_the_isr_or_reuse_an_epoch(monkeypatch):
    ctl = Controller(isr=[A, B, C], alive=[B, C])
    handover = asyncio.Event()
    released: list = []
    monkeypatch.setattr(router_leaders, "ray", gateways({B: handover}, released))

    async def race() -> tuple[bool, dict]:
        t = ctl._meta["topics"][TOPIC]
        election = asyncio.ensure_future(ctl._elect(TOPIC, 0, t))
        for _ in range(1000):  # until B was asked to hand over its follower log (it does not answer yet)
            if released:
                break
            await asyncio.sleep(0)
        assert released == [(B, 6)]
        # meanwhile the old leader (still epoch 5) drops B from the ISR, and Ray restarts its actor
        shrunk = await ctl.alter_isr(TOPIC, 0, 5, [A, C], ctl.rec.get("isr_version", 0))
        reopened = await ctl.open_partition(TOPIC, 0, TID, "restarted-by-ray")
        handover.set()
        return await election, {"shrunk": shrunk, "reopened_epoch": reopened["leader_epoch"]}

    elected, seen = asyncio.run(race())
    assert seen["shrunk"]["accepted"] and seen["reopened_epoch"] == 6
    assert elected and ctl.leader == C  # not B, which had left the ISR
    assert ctl.rec["epoch"] > 6  # above the epoch the restarted actor took
    assert ctl.rec["isr"] == [C]


def test_isr_changes_are_refused_while_the_leadership_is_replaced():
    ctl = Controller(isr=[A, B, C], alive=[A, B, C])

    async def run() -> None:
        with ctl._replacing((TOPIC, 0)):
            with pytest.raises(FencedLeaderEpochError, match="being replaced"):
                await ctl.alter_isr(TOPIC, 0, 5, [A, B])

    asyncio.run(run())
    assert ctl.rec["isr"] == [A, B, C]


def test_an_isr_change_made_against_an_older_version_is_refused_with_the_stored_state():
    ctl = Controller(isr=[A, B, C], alive=[A, B, C])

    async def run() -> list[dict]:
        first = await ctl.alter_isr(TOPIC, 0, 5, [A, B], 0)  # C left
        stale = await ctl.alter_isr(TOPIC, 0, 5, [A, B, C], 0)  # made before the leader saw version 1
        return [first, stale]

    first, stale = asyncio.run(run())
    assert first == {"isr": [A, B], "isr_version": 1, "accepted": True}
    assert not stale["accepted"] and stale["isr"] == [A, B] and stale["isr_version"] == 1
    assert ctl.rec["isr"] == [A, B]


def test_a_dead_or_fenced_replica_is_not_added_to_the_isr():
    ctl = Controller(isr=[A], alive=[A, B], fenced=[B])  # C dead, B fenced
    for joining in ([A, B], [A, C]):
        answer = asyncio.run(ctl.alter_isr(TOPIC, 0, 5, joining, 0))
        assert not answer["accepted"] and "ineligible" in answer["reason"]
    assert ctl.rec["isr"] == [A]


def test_a_follower_ray_declared_dead_leaves_every_isr_at_once_a_fenced_one_by_the_lag():
    ctl = Controller(isr=[A, B, C], alive=[A, B], fenced=[B])  # A leads; B fenced (maybe only slow), C dead
    changed = ctl._drop_gone_from_isrs()
    assert changed == [(TOPIC, 0)]
    assert ctl.rec["isr"] == [A, B] and ctl.rec["isr_version"] == 1
    assert ctl._drop_gone_from_isrs() == []  # nothing more to drop


def test_elections_of_many_partitions_do_not_wait_on_each_other(monkeypatch):
    """One partition's candidate hangs in its handover (up to 10 s each before): the others are elected."""
    ctl = Controller(isr=[A, B, C], alive=[B, C])
    for i in range(1, 20):  # 20 partitions led by the gone node A
        ctl._meta["topics"][f"t{i}"] = {**ctl._meta["topics"][TOPIC], "topic_id": f"{i:032d}",
                                        "placement": {"0": {"node_id": A, "node_ip": "127.0.0.1"}},
                                        "leaders": {"0": {**ctl.rec, "isr": [A, C, B],
                                                          "replicas": [{"node_id": n, "node_ip": "127.0.0.1"}
                                                                       for n in (A, C, B)]}}}
    ctl._sessions.declare_dead = lambda node: None
    ctl._sessions.replaceable = lambda node: node == A
    stuck = asyncio.Event()
    released: list = []
    monkeypatch.setattr(router_leaders, "ray", gateways({B: stuck}, released))

    async def run() -> list:
        elections = asyncio.ensure_future(ctl._elect_leaders())
        for _ in range(200):
            await asyncio.sleep(0.01)
            done = [t for t, v in ctl._meta["topics"].items() if v["placement"]["0"]["node_id"] != A]
            if len(done) == 19:
                break
        stuck.set()
        await elections
        return done

    done = asyncio.run(run())
    assert len(done) == 19 and TOPIC not in done  # the 19 whose candidate C answered, while B hung
    assert ctl.leader == B  # and the hung one too, once B answered


def test_a_fenced_leader_changes_no_isr():
    """A leader stopped past the lag shrank its ISR to itself as it woke, while its election waited on the
    candidate's handover: the candidate had "left the ISR" and the partition went offline. A fenced
    broker changes no ISR (Kafka refuses AlterPartition under a stale broker epoch)."""
    ctl = Controller(isr=[A, B, C], alive=[A, B, C], fenced=[A])

    async def run() -> None:
        with pytest.raises(FencedLeaderEpochError, match="is fenced"):
            await ctl.alter_isr(TOPIC, 0, 5, [A])

    asyncio.run(run())
    assert ctl.rec["isr"] == [A, B, C]
    ctl._sessions._fenced.clear()  # registered again (and still its leader): its changes count again
    answer = asyncio.run(ctl.alter_isr(TOPIC, 0, 5, [A, B]))
    assert answer["accepted"] and ctl.rec["isr"] == [A, B]
