"""The whole coordinator: deleting and describing groups, replaying __consumer_offsets, its timers."""
from __future__ import annotations

from logan_ray.groups import offsets_log
from logan_ray.groups.group import EMPTY, PREPARING, STABLE
from logan_ray.protocol import errors as E

from group_driver import SESSION, meta, make, join, full_join, sync, hb, stable_pair


def test_delete_groups_and_offsets(clock):
    c = make(clock)
    _, accepted = c.validate_commit("empty", -1, "", None, [("t", 0, 1, -1, None), ("t", 1, 2, -1, None)])
    c.apply_commit("empty", accepted)
    la, lb, gen = stable_pair(c)
    results, tombs = c.delete_groups(["empty", "g", "missing"])
    assert results == {"empty": 0, "g": E.NON_EMPTY_GROUP, "missing": E.GROUP_ID_NOT_FOUND}
    assert {offsets_log.decode_key(k) for _, k, _ in tombs} == {
        ("offset", "empty", "t", 0), ("offset", "empty", "t", 1), ("group", "empty")}
    assert "empty" not in c.groups
    _, accepted = c.validate_commit("g", gen, la, None, [("t", 0, 9, -1, None), ("other", 0, 3, -1, None)])
    c.apply_commit("g", accepted)
    top, errors, tombs = c.delete_offsets("g", [("t", 0), ("other", 0)])
    assert top == 0 and errors == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): 0}
    assert [offsets_log.decode_key(k) for _, k, _ in tombs] == [("offset", "g", "other", 0)]
    assert c.delete_offsets("missing", [("t", 0)])[0] == E.GROUP_ID_NOT_FOUND


def test_describe_group(clock):
    c = make(clock)
    la, lb, gen = stable_pair(c)
    d = c.describe_group("g")
    assert d["group_state"] == STABLE and d["protocol_data"] == "range" and d["protocol_type"] == "consumer"
    assert [(m["member_id"], m["member_assignment"]) for m in d["members"]] == [(la, b"AA"), (lb, b"BB")]
    assert d["members"][0]["member_metadata"] == meta("t") and d["members"][0]["client_host"] == "/127.0.0.1"
    assert c.describe_group("nope") is None
    full_join(c)
    d = c.describe_group("g")
    assert d["group_state"] == PREPARING and d["protocol_data"] == "" and d["members"][0]["member_assignment"] == b""


def test_replay_restores_offsets_and_stable_group(clock):
    c = make(clock)
    la, lb, gen = stable_pair(c)
    _, accepted = c.validate_commit("g", gen, la, None, [("t", 0, 42, 1, "hello")])
    records = [(offsets_log.offset_key("g", t, p), offsets_log.encode_offset(e)) for t, p, e in accepted]
    c.apply_commit("g", accepted)
    records += [(k, v) for _, k, v in c.outbox]
    _, acc2 = c.validate_commit("gone", -1, "", None, [("t", 0, 1, -1, None)])
    records.append((offsets_log.offset_key("gone", "t", 0), offsets_log.encode_offset(acc2[0][2])))
    records += [(offsets_log.offset_key("gone", "t", 0), None), (offsets_log.group_key("gone"), None)]
    # through a real batch, as the actor writes them
    from logan_ray.storage.records import decode_records

    batch = offsets_log.build_records(records)
    fresh = make(clock)
    for r in decode_records(batch):
        fresh.load(r.key, r.value)
    fresh.finish_loading()
    g = fresh.groups["g"]
    assert "gone" not in fresh.groups
    assert g.state == STABLE and g.generation == gen and g.protocol_name == "range" and g.leader == la
    assert g.offsets[("t", 0)] == offsets_log.OffsetEntry(42, 1, "hello", 1234)
    assert hb(fresh, lb, gen) == 0
    assert sync(fresh, lb, gen).value["assignment"] == b"BB"
    clock.now += SESSION + 1  # nobody heartbeats: the loaded members expire
    fresh.tick()
    assert fresh.groups["g"].state in (PREPARING, EMPTY)


def test_next_deadline_tracks_timers(clock):
    c = make(clock)
    assert c.next_deadline() is None
    a = full_join(c)
    assert c.next_deadline() is not None
    sync(c, a.value["member_id"], 1, {})
    d = c.next_deadline()
    assert d == clock.now + SESSION


def test_unload_gives_groups_up_answers_waiting_requests_not_coordinator_and_spares_the_others(clock):
    """The group's __consumer_offsets partition moved to another leader: a JoinGroup or SyncGroup
    waiting here is answered NOT_COORDINATOR (its client finds the new coordinator), the group's
    timers and unwritten metadata go; groups of other partitions carry on untouched."""
    c = make(clock)
    a = full_join(c)
    la = a.value["member_id"]
    assert sync(c, la, 1, {la: b"A"}).value["error_code"] == 0
    b = full_join(c)  # a second member: the group rebalances
    a2 = join(c, member_id=la)
    assert a2.done and b.done
    waiting_sync = sync(c, b.value["member_id"], a2.value["generation_id"])  # waits for the leader's SyncGroup
    assert not waiting_sync.done
    other = full_join(c, group="other")  # "other": a stable group of another partition
    om = other.value["member_id"]
    assert sync(c, om, 1, {om: b"O"}, group="other").value["error_code"] == 0
    fa = full_join(c, group="forming")
    assert sync(c, fa.value["member_id"], 1, {fa.value["member_id"]: b"F"}, group="forming").value["error_code"] == 0
    waiting_join = full_join(c, group="forming")  # waits for the first member to rejoin
    assert not waiting_join.done
    assert c.unload(["g", "forming", "missing"]) == ["g", "forming"]
    assert "g" not in c.groups and "forming" not in c.groups and "other" in c.groups
    assert waiting_join.value["error_code"] == E.NOT_COORDINATOR
    assert waiting_sync.value["error_code"] == E.NOT_COORDINATOR
    assert all(key[1] == "other" for key in c.timers._live)
    assert not [r for r in c.outbox if r[0] in ("g", "forming")]
    assert hb(c, om, 1, group="other") == 0 and c.groups["other"].state == STABLE
    clock.now += 10 * SESSION
    c.tick()  # no timer of a dropped group fires (it would recreate or touch it)
    assert "g" not in c.groups and "forming" not in c.groups


def test_finish_loading_only_touches_the_groups_just_replayed(clock):
    c = make(clock)
    a = full_join(c, group="busy")  # another partition's group in the middle of a rebalance
    assert a.value["error_code"] == 0
    before = c.groups["busy"].state
    c.load(offsets_log.offset_key("new", "t", 0), offsets_log.encode_offset(offsets_log.OffsetEntry(5, -1, "", 1)))
    c.finish_loading(["new"])
    assert c.groups["busy"].state == before  # not forced to Empty as a full replay would
    assert c.fetch_offsets("new", [("t", [0])])["t"][0][1].offset == 5
