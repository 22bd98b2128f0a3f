"""The reassignment state machine (actors/reassignment.py): Kafka's KIP-455 rules on a partition's record."""
from __future__ import annotations

import pytest

from logan_ray.actors import reassignment as ra
from logan_ray.actors.isr import FollowerStates
from logan_ray.actors.names import broker_id
from logan_ray.common.errors import InvalidReplicaAssignmentError

A, B, C, D = "a" * 56, "b" * 56, "c" * 56, "d" * 56
ALIVE = {A: "10.0.0.1", B: "10.0.0.2", C: "10.0.0.3", D: "10.0.0.4"}


def record(replicas, isr=None, epoch=3):
    return {"epoch": epoch, "incarnation": "x", "replicas": [{"node_id": n, "node_ip": ALIVE[n]} for n in replicas],
            "isr": list(isr if isr is not None else replicas)}


def nodes(rec):
    return [r["node_id"] for r in rec["replicas"]]


def test_resolve_target_takes_broker_ids_and_node_ids():
    assert ra.resolve_target([broker_id(C), B], list(ALIVE)) == [C, B]
    assert ra.resolve_target(["cccc", "aa"], list(ALIVE)) == [C, A]


@pytest.mark.parametrize("asked, why", [([], "empty"), ([broker_id(A), broker_id(A)], "duplicate"),
                                        ([broker_id(A), 12345], "does not exist"), ([B, "ffff"], "ffff")])
def test_resolve_target_refuses_like_kafka(asked, why):
    with pytest.raises(InvalidReplicaAssignmentError, match=why) as e:
        ra.resolve_target(asked, list(ALIVE))
    assert e.value.code == 39  # INVALID_REPLICA_ASSIGNMENT


def test_begin_makes_the_union_leader_first_and_keeps_the_original():
    rec = record([A, B])
    assert ra.begin(rec, [B, C], ALIVE) == []
    assert nodes(rec) == [A, B, C]  # leader first, then target order, then the rest of the original
    assert rec["reassignment"] == {"target": [B, C], "original": [A, B]}
    assert ra.adding(rec) == [C] and ra.removing(rec) == [A]
    assert ra.describe(rec) == {"replicas": [A, B, C], "adding": [C], "removing": [A]}
    assert rec["isr"] == [A, B]  # the adding replica joins only once caught up
    assert not ra.complete(rec)
    rec["isr"].append(C)
    assert ra.complete(rec)


def test_begin_with_the_same_set_changes_only_the_order():
    rec = record([A, B])
    assert ra.begin(rec, [B, A], ALIVE) is None
    assert ra.in_progress(rec) is None and rec["assignment"] == [B, A] and nodes(rec) == [A, B]


def test_a_new_target_replaces_an_ongoing_one_and_drops_what_it_no_longer_adds():
    rec = record([A, B])
    ra.begin(rec, [A, C], ALIVE)
    assert ra.begin(rec, [A, D], ALIVE) == [C]
    assert nodes(rec) == [A, D, B]
    assert rec["reassignment"]["original"] == [A, B]  # still the list before any reassignment


def test_settle_with_the_leader_in_the_target():
    rec = record([A, B])
    ra.begin(rec, [A, C], ALIVE)
    rec["isr"] = [A, B, C]
    assert ra.settle(rec, [A, C], ALIVE) == [B]
    assert nodes(rec) == [A, C] and rec["isr"] == [A, C] and rec["assignment"] == [A, C]
    assert ra.in_progress(rec) is None


def test_a_removed_leader_hands_over_to_the_first_target_replica_in_sync():
    rec = record([A, B])
    ra.begin(rec, [C, B], ALIVE)
    rec["isr"] = [A, B]
    assert ra.successor(rec, [C, B], ALIVE) == B  # C is not in sync yet
    rec["isr"] = [A, B, C]
    assert ra.successor(rec, [C, B], ALIVE) == C
    assert ra.successor(rec, [C, B], ALIVE, draining=[C]) == B
    assert ra.successor(rec, [C, B], [A]) is None
    with pytest.raises(AssertionError):
        ra.settle(rec, [C, B], ALIVE)  # the leader must move first


def test_cancel_returns_to_the_original_replicas():
    rec = record([A, B])
    ra.begin(rec, [B, C], ALIVE)
    dropped = ra.begin(rec, list(rec["reassignment"]["original"]), ALIVE)  # what a cancel does
    assert dropped == [C] and nodes(rec) == [A, B] and ra.complete(rec)
    assert ra.settle(rec, [A, B], ALIVE) == []
    assert nodes(rec) == [A, B] and ra.in_progress(rec) is None


def test_followers_change_with_the_replica_set():
    states = FollowerStates(A, [A, B], [A, B], high_watermark=10, epoch_start_offset=0, now_ms=0)
    states.set_replicas([A, B, C], [A, B], leader_leo=10, now_ms=5)
    assert states.followers == [B, C] and states.leo[C] == -1 and states.leo[B] == 10
    states.fetched(C, 10, 10, 6)
    assert states.to_expand(C) == [A, B, C]
    states.set_replicas([A, C], [A, B, C], leader_leo=10, now_ms=7)
    assert states.followers == [C] and states.isr == [A, C]


def test_spread_moves_replicas_to_a_node_that_joined():
    current = {("t", p): r for p, r in enumerate([[A, B], [B, C], [C, A], [A, B], [B, C], [C, A]])}
    targets = ra.spread(current, [A, B, C, D])
    after = {k: targets.get(k, v) for k, v in current.items()}
    load = {n: sum(n in r for r in after.values()) for n in (A, B, C, D)}
    assert max(load.values()) - min(load.values()) <= 1 and load[D] == 3
    assert all(len(set(r)) == len(r) for r in after.values())
    assert all(sum(a != b for a, b in zip(current[k], targets[k])) == 1 for k in targets)


def test_spread_replaces_replicas_on_gone_nodes_and_leaves_a_balanced_cluster_alone():
    assert ra.spread({("t", 0): [A, B], ("t", 1): [B, C], ("t", 2): [C, A]}, [A, B, C]) == {}
    targets = ra.spread({("t", 0): [A, D], ("t", 1): [B, C]}, [A, B, C])
    assert targets == {("t", 0): [A, B]} or targets == {("t", 0): [A, C]}


def test_spread_spreads_each_topic_not_only_the_total():
    # "bal" sits on A and B only; a topic with more replicas ("big") already loads C: spreading the
    # total alone would leave "bal" off C. Each topic is spread by itself, then the whole.
    current = {("bal", 0): [A, B], ("bal", 1): [B, A], ("bal", 2): [A, B]}
    current.update({("big", p): [C, A] if p % 2 else [C, B] for p in range(6)})
    targets = ra.spread(current, [A, B, C])
    after = {k: targets.get(k, v) for k, v in current.items()}
    for topic in ("bal", "big"):
        load = [sum(n in r for k, r in after.items() if k[0] == topic) for n in (A, B, C)]
        assert max(load) - min(load) <= 1, (topic, load)
    total = [sum(n in r for r in after.values()) for n in (A, B, C)]
    assert max(total) - min(total) <= 1, total
    assert all(len(set(r)) == len(r) for r in after.values())


def test_a_second_rebalance_finds_nothing_to_do():
    # `logan-ray partitions rebalance` run twice moves nothing the second time, whatever the layout
    import random

    for seed in range(500):
        r = random.Random(seed)
        nodes = [f"n{i}" for i in range(r.randint(2, 5))]
        alive = nodes[: r.randint(2, len(nodes))] + (["joined"] if r.random() < 0.7 else [])
        current = {}
        for t in range(r.randint(1, 4)):
            factor = r.randint(1, min(3, len(nodes)))
            for p in range(r.randint(1, 8)):
                current[(f"t{t}", p)] = r.sample(nodes, factor)
        first = ra.spread(current, alive)
        after = {k: first.get(k, v) for k, v in current.items()}
        assert all(len(set(v)) == len(v) for v in first.values()), seed  # a node once per replica set
        assert ra.spread(after, alive) == {}, seed
