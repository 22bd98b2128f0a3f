"""auto.leader.rebalance.enable's rule (actors/leader_balance.py) and the preferred replica it uses."""
from __future__ import annotations

from logan_ray.actors import replica_placement as rp
from logan_ray.actors.leader_balance import to_rebalance

ALIVE = ["n1", "n2", "n3"]


def _topic(leaders_and_assignments: list[tuple[str, list[str], list[str]]]) -> dict:
    """A replicated topic: per partition (current leader, assigned replica order, ISR)."""
    t = {"partitions": len(leaders_and_assignments), "replication_factor": 3, "placement": {}, "leaders": {}}
    for p, (leader, assigned, isr) in enumerate(leaders_and_assignments):
        t["placement"][str(p)] = {"node_id": leader, "node_ip": "x"}
        replicas = [leader] + [n for n in assigned if n != leader]
        t["leaders"][str(p)] = {"epoch": 1, "replicas": [{"node_id": n, "node_ip": "x"} for n in replicas],
                                "assignment": assigned, "isr": [leader] + [n for n in isr if n != leader]}
    return t


def test_preferred_replica_is_the_first_assigned_even_after_a_leader_change_reordered_replicas():
    rec = {"replicas": [{"node_id": "n1"}, {"node_id": "n2"}, {"node_id": "n3"}]}
    rp.remember_assignment(rec)
    rec["replicas"] = [{"node_id": "n2"}, {"node_id": "n1"}, {"node_id": "n3"}]  # n2 elected
    rp.remember_assignment(rec)  # a second change keeps the first order
    t = {"placement": {"0": {"node_id": "n2"}}, "leaders": {"0": rec}}
    assert rp.preferred_replica(t, 0) == "n1" and rp.replicas_of(t, 0)[0] == "n2"
    plain = {"placement": {"0": {"node_id": "n3"}}, "leaders": {"0": {"replicas": [{"node_id": "n3"}, {"node_id": "n1"}]}}}
    assert rp.preferred_replica(plain, 0) == "n3"  # never moved: the leader is the preferred replica


def test_a_node_above_the_imbalance_percentage_gets_its_partitions_back():
    # n1 is preferred for 2 partitions and leads neither: 100% > 10%
    topics = {"a": _topic([("n2", ["n1", "n2", "n3"], ALIVE), ("n3", ["n1", "n3", "n2"], ALIVE),
                           ("n2", ["n2", "n3", "n1"], ALIVE)])}
    assert to_rebalance(topics, ALIVE, 10) == [("a", 0, "n1"), ("a", 1, "n1")]


def test_imbalance_at_or_below_the_percentage_is_left_alone():
    # n1 preferred for 10 partitions, one led elsewhere: 10% is not above 10%
    rows = [("n2", ["n1", "n2", "n3"], ALIVE)] + [("n1", ["n1", "n2", "n3"], ALIVE)] * 9
    topics = {"a": _topic(rows)}
    assert to_rebalance(topics, ALIVE, 10) == []
    assert to_rebalance(topics, ALIVE, 9) == [("a", 0, "n1")]


def test_a_preferred_replica_that_is_dead_draining_or_out_of_the_isr_is_not_given_leadership():
    topics = {"a": _topic([("n2", ["n1", "n2", "n3"], ["n2", "n3"]),  # n1 out of the ISR
                           ("n3", ["n1", "n3", "n2"], ALIVE)])}
    assert to_rebalance(topics, ALIVE, 10) == [("a", 1, "n1")]
    assert to_rebalance(topics, ["n2", "n3"], 10) == []  # n1 dead
    assert to_rebalance(topics, ALIVE, 10, excluded=["n1"]) == []  # n1 draining


def test_topics_with_one_replica_never_count():
    t = {"partitions": 1, "placement": {"0": {"node_id": "n2", "node_ip": "x"}}}
    assert to_rebalance({"single": t}, ALIVE, 0) == []
