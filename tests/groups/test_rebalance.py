"""The rebalance protocol (join, sync, heartbeat, leave, timeouts) with a fake clock: no Ray, no sockets, milliseconds per test."""
from __future__ import annotations

from logan_ray.groups.group import COMPLETING, EMPTY, PREPARING, STABLE
from logan_ray.protocol import errors as E

from group_driver import SESSION, REBALANCE, meta, make, join, full_join, sync, hb, stable_pair


def test_two_step_join_and_single_member_generation(clock):
    c = make(clock)
    first = join(c)
    assert first.value["error_code"] == E.MEMBER_ID_REQUIRED and first.value["generation_id"] == -1
    second = join(c, member_id=first.value["member_id"])
    v = second.value
    assert v["error_code"] == 0 and v["generation_id"] == 1 and v["leader"] == v["member_id"]
    assert v["protocol_name"] == "range" and v["protocol_type"] == "consumer"
    assert v["members"] == [{"member_id": v["member_id"], "group_instance_id": None, "metadata": meta("t")}]
    assert c.groups["g"].state == COMPLETING
    s = sync(c, v["member_id"], 1, {v["member_id"]: b"x"})
    assert s.value == {"error_code": 0, "protocol_type": "consumer", "protocol_name": "range", "assignment": b"x"}
    assert c.groups["g"].state == STABLE
    assert hb(c, v["member_id"], 1) == 0


def test_old_join_version_adds_member_without_member_id_required(clock):
    c = make(clock)
    box = join(c, version=3)
    assert box.value["error_code"] == 0 and box.value["generation_id"] == 1 and box.value["member_id"]


def test_rebalance_on_join_gives_leader_all_members_and_followers_their_share(clock):
    c = make(clock)
    stable_pair(c)


def test_leave_triggers_rebalance_and_remaining_member_rejoins(clock):
    c = make(clock)
    la, lb, gen = stable_pair(c)
    res = c.leave_group({"group_id": "g", "members": [{"member_id": lb, "group_instance_id": None}]}, version=3)
    assert res == {"error_code": 0, "members": [{"member_id": lb, "group_instance_id": None, "error_code": 0}]}
    assert c.groups["g"].state == PREPARING
    assert hb(c, la, gen) == E.REBALANCE_IN_PROGRESS
    again = join(c, member_id=la)
    assert again.value["generation_id"] == gen + 1 and [m["member_id"] for m in again.value["members"]] == [la]
    # v0-2 leave of an unknown member: the member's error is the top-level error
    assert c.leave_group({"group_id": "g", "member_id": "nope"}, version=1)["error_code"] == E.UNKNOWN_MEMBER_ID


def test_session_timeout_removes_silent_member(clock):
    c = make(clock)
    la, lb, gen = stable_pair(c)
    for _ in range(4):  # a keeps heartbeating, b is silent
        clock.now += SESSION / 4
        assert hb(c, la, gen) == 0
        c.tick()
    clock.now += 1
    c.tick()
    g = c.groups["g"]
    assert lb not in g.members and g.state == PREPARING
    assert hb(c, lb, gen) == E.UNKNOWN_MEMBER_ID
    a = join(c, member_id=la)
    assert a.value["generation_id"] == gen + 1 and len(a.value["members"]) == 1


def test_rebalance_timeout_drops_members_that_do_not_rejoin(clock):
    c = make(clock)
    la, lb, gen = stable_pair(c)
    c_box = full_join(c)  # third member: rebalance; a rejoins, b never does
    a = join(c, member_id=la)
    assert not a.done
    clock.now += REBALANCE / 2
    assert hb(c, lb, gen) == E.REBALANCE_IN_PROGRESS  # b is alive but does not rejoin
    clock.now += REBALANCE / 2 + 1
    c.tick()
    assert a.done and c_box.done
    assert lb not in c.groups["g"].members
    assert {m["member_id"] for m in a.value["members"]} == {la, c_box.value["member_id"]}


def test_stale_generation_and_unknown_member_errors(clock):
    c = make(clock)
    la, lb, gen = stable_pair(c)
    assert hb(c, la, gen - 1) == E.ILLEGAL_GENERATION
    assert hb(c, "ghost", gen) == E.UNKNOWN_MEMBER_ID
    assert hb(c, la, gen, group="other") == E.UNKNOWN_MEMBER_ID
    assert sync(c, la, gen - 1).value["error_code"] == E.ILLEGAL_GENERATION
    assert sync(c, "ghost", gen).value["error_code"] == E.UNKNOWN_MEMBER_ID
    errors, accepted = c.validate_commit("g", gen - 1, la, None, [("t", 0, 5, -1, "m")])
    assert errors == {("t", 0): E.ILLEGAL_GENERATION} and accepted == []
    errors, _ = c.validate_commit("g", gen, "ghost", None, [("t", 0, 5, -1, "m")])
    assert errors == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # a known member id that is not in the group
    assert join(c, member_id="ghost").value["error_code"] == E.UNKNOWN_MEMBER_ID
    # a simple (generation -1) commit is refused while the group has members
    errors, _ = c.validate_commit("g", -1, "", None, [("t", 0, 5, -1, None)])
    assert errors == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # a commit with a generation for a group that does not exist
    errors, _ = c.validate_commit("nope", 3, "x", None, [("t", 0, 5, -1, None)])
    assert errors == {("t", 0): E.ILLEGAL_GENERATION}


def test_initial_rebalance_delay_collects_members_into_one_generation(clock):
    c = make(clock, delay=3000)
    a = full_join(c, rebalance=10_000)
    clock.now += 2000
    c.tick()
    b = full_join(c, rebalance=10_000)
    assert not a.done and not b.done
    clock.now += 1001  # first delay ends, but a member arrived during it: wait another delay
    c.tick()
    assert not a.done
    clock.now += 3000
    c.tick()
    assert a.done and b.done
    assert a.value["generation_id"] == b.value["generation_id"] == 1
    assert len([x for x in (a.value, b.value) if x["members"]]) == 1  # one leader


def test_initial_delay_bounded_by_rebalance_timeout(clock):
    c = make(clock, delay=3000)
    a = full_join(c, rebalance=4000)
    for _ in range(3):  # keep adding members: the delay is extended at most up to the rebalance timeout
        clock.now += 1500
        c.tick()
        full_join(c, rebalance=4000)
    clock.now += 1500
    c.tick()
    assert a.done


def test_protocol_selection_and_inconsistent_protocol(clock):
    c = make(clock)
    a = full_join(c, protocols=(("roundrobin", None), ("range", None)))
    sync(c, a.value["member_id"], 1, {})
    b = full_join(c, protocols=(("range", None), ("cooperative-sticky", None)))
    a2 = join(c, member_id=a.value["member_id"], protocols=(("roundrobin", None), ("range", None)))
    assert a2.value["protocol_name"] == "range" and b.value["protocol_name"] == "range"
    bad = join(c, protocols=(("sticky", None),))
    assert bad.value["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    other_type = join(c, ptype="connect")
    assert other_type.value["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert join(c, group="fresh", protocols=()).value["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert "fresh" not in c.groups


def test_votes_pick_most_preferred_common_protocol(clock):
    c = make(clock)
    a = full_join(c, protocols=(("range", None), ("roundrobin", None)))
    sync(c, a.value["member_id"], 1, {})
    b = full_join(c, protocols=(("roundrobin", None), ("range", None)))
    cc = full_join(c, protocols=(("roundrobin", None), ("range", None)))
    join(c, member_id=a.value["member_id"], protocols=(("range", None), ("roundrobin", None)))
    assert b.value["protocol_name"] == "roundrobin" and cc.value["protocol_name"] == "roundrobin"


def test_invalid_session_timeout_and_group_id(clock):
    c = make(clock)
    assert join(c, session=50).value["error_code"] == E.INVALID_SESSION_TIMEOUT
    assert join(c, group="").value["error_code"] == E.INVALID_GROUP_ID
    assert hb(c, "x", 1, group="") == E.INVALID_GROUP_ID


def test_pending_member_expires(clock):
    c = make(clock)
    a = full_join(c)
    sync(c, a.value["member_id"], 1, {})
    first = join(c)  # gets MEMBER_ID_REQUIRED but never comes back
    assert first.value["error_code"] == E.MEMBER_ID_REQUIRED
    assert first.value["member_id"] in c.groups["g"].pending_members
    clock.now += SESSION + 1
    c.tick()
    assert not c.groups["g"].pending_members


def test_static_member_rejoin_keeps_assignment_without_rebalance(clock):
    c = make(clock)
    first = join(c, instance="i-a")  # static members skip MEMBER_ID_REQUIRED
    assert first.value["error_code"] == 0 and first.value["generation_id"] == 1
    sync(c, first.value["member_id"], 1, {})
    s = join(c, instance="i-b")
    assert not s.done
    a = join(c, member_id=first.value["member_id"], instance="i-a")
    assert a.done and s.done
    la, lb = a.value["member_id"], s.value["member_id"]
    leader = la if a.value["members"] else lb
    gen = a.value["generation_id"]
    sync(c, lb if leader == la else la, gen)
    sync(c, leader, gen, {la: b"for-a", lb: b"for-b"})
    assert c.groups["g"].state == STABLE
    # instance i-b restarts with a new process: unknown member id, same instance id
    again = join(c, instance="i-b")
    assert again.value["error_code"] == 0 and again.value["generation_id"] == gen
    new_b = again.value["member_id"]
    assert new_b != lb and c.groups["g"].state == STABLE
    assert sync(c, new_b, gen).value["assignment"] == b"for-b"
    # the old incarnation is fenced
    assert hb(c, lb, gen, instance="i-b") == E.FENCED_INSTANCE_ID
    assert join(c, member_id=lb, instance="i-b").value["error_code"] == E.FENCED_INSTANCE_ID
    assert sync(c, lb, gen).value["error_code"] == E.UNKNOWN_MEMBER_ID


def test_static_leader_rejoin_skips_assignment(clock):
    c = make(clock)
    a = join(c, instance="solo")
    gen = a.value["generation_id"]
    sync(c, a.value["member_id"], gen, {a.value["member_id"]: b"all"})
    v9 = join(c, instance="solo")
    assert v9.value["skip_assignment"] is True and v9.value["leader"] == v9.value["member_id"]
    assert len(v9.value["members"]) == 1
    old = join(c, instance="solo", version=8)
    assert old.value["skip_assignment"] is False and old.value["leader"] == v9.value["member_id"]
    assert old.value["members"] == []
    assert sync(c, old.value["member_id"], gen).value["assignment"] == b"all"


def test_leave_by_instance_id_and_unknown_group(clock):
    c = make(clock)
    a = join(c, instance="i1")
    sync(c, a.value["member_id"], 1, {})
    res = c.leave_group({"group_id": "g", "members": [{"member_id": "", "group_instance_id": "i1"}]}, version=4)
    assert res["members"][0]["error_code"] == 0
    assert c.groups["g"].state == EMPTY and c.groups["g"].generation == 2
    res = c.leave_group({"group_id": "none", "members": [{"member_id": "m", "group_instance_id": None}]}, version=3)
    assert res["error_code"] == 0 and res["members"][0]["error_code"] == E.UNKNOWN_MEMBER_ID


def test_sync_timeout_removes_member_that_never_syncs(clock):
    c = make(clock)
    la, lb, gen = stable_pair(c)
    x = full_join(c)
    join(c, member_id=la)
    join(c, member_id=lb)
    assert x.done
    gen2 = x.value["generation_id"]
    sync(c, la, gen2, {})
    sync(c, lb, gen2)  # x never syncs
    for _ in range(6):
        clock.now += REBALANCE / 5
        hb(c, la, gen2)
        hb(c, lb, gen2)
        c.tick()
    assert x.value["member_id"] not in c.groups["g"].members
