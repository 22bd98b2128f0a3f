"""``__consumer_offsets`` reaches offsets.topic.replication.factor as nodes join (issue 32, item 7): the plan."""
from __future__ import annotations

from logan_ray.actors.reassignment import grown


def offsets(layout: list[list[str]]) -> dict[tuple[str, int], list[str]]:
    return {("__consumer_offsets", p): nodes for p, nodes in enumerate(layout)}


def test_one_copy_on_the_head_grows_to_three_spread_over_the_joined_nodes():
    targets = grown(offsets([["head"]] * 6), ["head", "w1", "w2"], 3)
    assert len(targets) == 6
    assert all(t[0] == "head" and sorted(t) == ["head", "w1", "w2"] for t in targets.values())  # the leader stays first


def test_growth_spreads_the_new_copies_evenly_and_never_moves_or_removes_one():
    targets = grown(offsets([["a"], ["a"], ["b"], ["b"]]), ["a", "b", "c", "d"], 2)
    added = [t[1] for t in targets.values()]
    assert sorted(added) == ["c", "c", "d", "d"]
    assert [t[0] for t in targets.values()] == ["a", "a", "b", "b"]


def test_nothing_changes_at_the_factor_or_with_too_few_nodes_for_more():
    assert grown(offsets([["a", "b"]] * 3), ["a", "b"], 3) == {}  # two nodes: two copies are all there can be
    assert grown(offsets([["a", "b", "c"]] * 3), ["a", "b", "c", "d"], 3) == {}
