"""Drives the group coordinator's state machine in tests: a fake clock, parked answers, request helpers."""
from __future__ import annotations

from logan_ray.groups.consumer_protocol import encode_subscription
from logan_ray.groups.coordinator import Coordinator
from logan_ray.groups.core import GroupConfig
from logan_ray.groups.group import PREPARING, STABLE
from logan_ray.protocol import errors as E

SESSION = 10_000
REBALANCE = 30_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Box:
    """Collects the answer of a parked request."""

    def __init__(self) -> None:
        self.value: dict | None = None
        self.calls = 0

    def __call__(self, value: dict) -> None:
        self.value = value
        self.calls += 1

    @property
    def done(self) -> bool:
        return self.value is not None


def meta(*topics: str) -> bytes:
    return encode_subscription(list(topics))


def join_req(member_id: str = "", group: str = "g", protocols=(("range", None),), instance: str | None = None,
             session: int = SESSION, rebalance: int = REBALANCE, ptype: str = "consumer") -> dict:
    return {"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
            "member_id": member_id, "group_instance_id": instance, "protocol_type": ptype,
            "protocols": [{"name": n, "metadata": m if m is not None else meta("t")} for n, m in protocols]}


def make(clock, delay: int = 0, **kw) -> Coordinator:
    return Coordinator(GroupConfig(initial_rebalance_delay_ms=delay, min_session_timeout_ms=100, **kw), clock=clock,
                       wall_clock=lambda: 1234)


def join(c: Coordinator, version: int = 9, **kw) -> Box:
    box = Box()
    c.join_group(join_req(**kw), box, version=version, client_id="cli", client_host="/127.0.0.1")
    return box


def full_join(c: Coordinator, **kw) -> Box:
    """Two-step join (v4+): MEMBER_ID_REQUIRED, then join with the given id."""
    first = join(c, **kw)
    assert first.value["error_code"] == E.MEMBER_ID_REQUIRED
    mid = first.value["member_id"]
    assert mid.startswith("cli-")
    kw.pop("member_id", None)
    return join(c, member_id=mid, **kw)


def sync(c: Coordinator, member_id: str, generation: int, assignments=None, group: str = "g") -> Box:
    box = Box()
    c.sync_group({"group_id": group, "generation_id": generation, "member_id": member_id,
                  "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]}, box)
    return box


def hb(c: Coordinator, member_id: str, generation: int, group: str = "g", instance: str | None = None) -> int:
    return c.heartbeat({"group_id": group, "generation_id": generation, "member_id": member_id,
                        "group_instance_id": instance})["error_code"]


def stable_pair(c: Coordinator):
    """Two members in a stable generation; returns (leader id, follower id, generation)."""
    a = full_join(c)
    assert a.value["error_code"] == 0 and a.value["generation_id"] == 1
    la = a.value["member_id"]
    sa = sync(c, la, 1, {la: b"A1"})
    assert sa.value["assignment"] == b"A1"
    b = full_join(c)  # triggers a rebalance; the leader must rejoin
    assert not b.done and c.groups["g"].state == PREPARING
    assert hb(c, la, 1) == E.REBALANCE_IN_PROGRESS
    a2 = join(c, member_id=la)
    assert a2.done and b.done
    lb = b.value["member_id"]
    gen = a2.value["generation_id"]
    assert gen == 2 and b.value["generation_id"] == 2
    assert a2.value["leader"] == la and b.value["leader"] == la
    assert [m["member_id"] for m in a2.value["members"]] == [la, lb] and b.value["members"] == []
    sb = sync(c, lb, gen)
    assert not sb.done
    sa = sync(c, la, gen, {la: b"AA", lb: b"BB"})
    assert sa.value["assignment"] == b"AA" and sb.value["assignment"] == b"BB"
    assert c.groups["g"].state == STABLE
    return la, lb, gen
