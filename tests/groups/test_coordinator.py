"""The whole coordinator: deleting and describing groups, replaying __consumer_offsets, its timers."""
from __future__ import annotations

from logan_ray.groups import offsets_log
from logan_ray.groups.group import EMPTY, PREPARING, STABLE
from logan_ray.protocol import errors as E

from group_driver import SESSION, meta, make, full_join, sync, hb, stable_pair


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
