"""Committed offsets checked against the membership, with a fake clock: no Ray, no sockets."""
from __future__ import annotations

from logan_ray.groups import offsets_log
from logan_ray.groups.group import COMPLETING, EMPTY
from logan_ray.protocol import errors as E

from group_driver import make, join, full_join, stable_pair


def test_commit_during_completing_rebalance_and_preparing(clock):
    c = make(clock)
    la, lb, gen = stable_pair(c)
    newcomer = full_join(c)
    # PreparingRebalance: members of the current generation may still commit
    errors, accepted = c.validate_commit("g", gen, la, None, [("t", 0, 7, -1, "x")])
    assert errors == {("t", 0): 0} and len(accepted) == 1
    join(c, member_id=la)
    join(c, member_id=lb)
    assert c.groups["g"].state == COMPLETING and newcomer.done
    errors, _ = c.validate_commit("g", gen + 1, la, None, [("t", 0, 7, -1, "x")])
    assert errors == {("t", 0): E.REBALANCE_IN_PROGRESS}


def test_offsets_commit_fetch_metadata_and_limits(clock):
    c = make(clock, max_metadata_bytes=10)
    errors, accepted = c.validate_commit("solo", -1, "", None,
                                         [("t", 0, 5, 3, "meta"), ("t", 1, 6, -1, "x" * 11), ("u", 0, 1, -1, None)],
                                         unknown={("u", 0)})
    assert errors == {("t", 0): 0, ("t", 1): E.OFFSET_METADATA_TOO_LARGE, ("u", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    c.apply_commit("solo", accepted)
    got = c.fetch_offsets("solo", [("t", [0, 1])])
    assert got["t"][0] == (0, offsets_log.OffsetEntry(5, 3, "meta", 1234)) and got["t"][1] == (1, None)
    assert list(c.fetch_offsets("solo", None)) == ["t"]
    assert c.fetch_offsets("unknown-group", [("t", [0])]) == {"t": [(0, None)]}
    assert c.list_groups() == [{"group_id": "solo", "protocol_type": "", "group_state": EMPTY,
                                "group_type": "classic"}]


def test_transactional_commits_without_member_are_accepted_while_the_group_has_members(clock):
    """TxnOffsetCommit v0-2 has no member id or generation (aiokafka sends v0): Kafka's classic
    group accepts it from a non-member even while the group has members, and a member's during a
    rebalance's completing phase; a plain OffsetCommit is refused in both cases."""
    c = make(clock)
    la, lb, gen = stable_pair(c)
    part = [("t", 0, 3, -1, "")]
    assert c.validate_commit("g", -1, "", None, part)[0] == {("t", 0): E.UNKNOWN_MEMBER_ID}
    errors, accepted = c.validate_commit("g", -1, "", None, part, transactional=True)
    assert errors == {("t", 0): 0} and len(accepted) == 1
    assert c.validate_commit("g", gen, "stranger", None, part, transactional=True)[0] == {
        ("t", 0): E.UNKNOWN_MEMBER_ID}  # a member id given is still checked
    full_join(c)
    join(c, member_id=la)
    join(c, member_id=lb)
    assert c.groups["g"].state == COMPLETING
    assert c.validate_commit("g", gen + 1, la, None, part)[0] == {("t", 0): E.REBALANCE_IN_PROGRESS}
    assert c.validate_commit("g", gen + 1, la, None, part, transactional=True)[0] == {("t", 0): 0}
