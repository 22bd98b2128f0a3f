"""Replica placement rules (actors/replica_placement.py): distinct nodes, Kafka's refusals, spreading."""
from __future__ import annotations

import pytest

from logan_ray.actors import replica_placement as rp
from logan_ray.common.errors import InvalidReplicationFactorError

ALIVE = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3", "n4": "10.0.0.4"}


def test_factor_defaults_and_kafkas_refusals():
    assert rp.resolve_factor(-1, 1, 3) == 1
    assert rp.resolve_factor(None, 3, 3) == 3
    assert rp.resolve_factor(2, 1, 3) == 2
    with pytest.raises(InvalidReplicationFactorError, match=r"^Replication factor: 4 larger than available brokers: 3\.$"):
        rp.resolve_factor(4, 1, 3)
    with pytest.raises(InvalidReplicationFactorError, match="larger than 0, or -1"):
        rp.resolve_factor(0, 1, 3)
    with pytest.raises(InvalidReplicationFactorError):
        rp.resolve_factor(-1, 2, 1)  # the default itself needs the nodes


def test_replicas_go_to_distinct_nodes_leader_first_and_spread():
    t = {"placement": {}, "leaders": {}}
    load = rp.replica_load([t], ALIVE)
    for p, leader in enumerate(("n1", "n2", "n3", "n4")):
        t["placement"][str(p)] = {"node_id": leader, "node_ip": ALIVE[leader]}
        load[leader] += 1
        rec = t["leaders"].setdefault(str(p), {"epoch": 0, "incarnation": None})
        rp.assign_replicas(rec, t["placement"][str(p)], 3, ALIVE, load)
        nodes = rp.replicas_of(t, p)
        assert nodes[0] == leader and len(set(nodes)) == 3
        assert rp.isr_of(t, p) == [leader]  # followers join once they have caught up
    assert rp.replica_load([t], ALIVE) == {"n1": 3, "n2": 3, "n3": 3, "n4": 3}  # 12 replicas, 3 each


def test_one_replica_records_nothing_new():
    t = {"placement": {"0": {"node_id": "n1", "node_ip": "10.0.0.1"}}, "leaders": {}}
    rec = {"epoch": 0, "incarnation": None}
    rp.assign_replicas(rec, t["placement"]["0"], 1, ALIVE, {})
    assert rec == {"epoch": 0, "incarnation": None}
    assert rp.replicas_of(t, 0) == rp.isr_of(t, 0) == ["n1"] and rp.replication_factor(t) == 1


def test_election_takes_the_isr_in_replica_order_and_unclean_only_when_enabled():
    replicas = ["n1", "n2", "n3"]
    alive = ["n2", "n3", "n4"]  # n1, the leader, is gone
    assert rp.election_candidates(replicas, ["n1", "n3", "n2"], "n1", alive) == (["n2", "n3"], False)
    assert rp.election_candidates(replicas, ["n1", "n3"], "n1", alive) == (["n3"], False)
    # no alive in-sync replica: offline (Kafka's default), unless unclean election is enabled
    assert rp.election_candidates(replicas, ["n1"], "n1", alive) == ([], False)
    assert rp.election_candidates(replicas, ["n1"], "n1", alive, unclean=True) == (["n2", "n3"], True)
    # unclean is never used while an in-sync replica is alive
    assert rp.election_candidates(replicas, ["n1", "n3"], "n1", alive, unclean=True) == (["n3"], False)
    assert rp.election_candidates(replicas, ["n1"], "n1", ["n4"], unclean=True) == ([], True)


def test_a_draining_node_gets_no_new_leader_and_a_follower_only_when_the_factor_needs_every_node():
    assert rp.placeable(ALIVE, ["n2"]) == {n: ip for n, ip in ALIVE.items() if n != "n2"}
    assert rp.placeable({"n1": "x"}, ["n1"]) == {"n1": "x"}  # every node drains: a topic can still be made
    leader = {"node_id": "n1", "node_ip": ALIVE["n1"]}
    # n2 holds the fewest replicas but drains: the followers go to n3 and n4
    load = {"n1": 5, "n2": 0, "n3": 4, "n4": 4}
    assert [f["node_id"] for f in rp.choose_followers(leader, 3, ALIVE, load, ["n2"])] == ["n3", "n4"]
    assert load["n2"] == 0
    # RF 4 on 4 nodes needs the draining one too (last choice, not a refusal)
    rec = {"epoch": 0, "incarnation": None}
    rp.assign_replicas(rec, leader, 4, ALIVE, {n: 0 for n in ALIVE}, draining=["n2"])
    assert [r["node_id"] for r in rec["replicas"]] == ["n1", "n3", "n4", "n2"]


def test_a_failover_prefers_replicas_that_are_not_draining():
    replicas, alive = ["n1", "n2", "n3"], ["n2", "n3"]
    assert rp.election_candidates(replicas, replicas, "n1", alive, draining=["n2"]) == (["n3", "n2"], False)
    # a draining in-sync replica still leads when it is the only one (better than offline)
    assert rp.election_candidates(replicas, ["n1", "n2"], "n1", alive, draining=["n2"]) == (["n2"], False)
    # unclean: the same preference among the alive replicas
    assert rp.election_candidates(replicas, ["n1"], "n1", alive, unclean=True, draining=["n2"]) == (["n3", "n2"], True)


def test_consumer_offsets_factor_is_offsets_topic_replication_factor_capped_at_the_alive_nodes():
    assert rp.DEFAULT_OFFSETS_TOPIC_REPLICATION_FACTOR == 3  # Kafka's offsets.topic.replication.factor
    assert rp.internal_topic_factor(None, 1) == 1  # one node: not replicated, as before
    assert rp.internal_topic_factor(None, 2) == 2
    assert rp.internal_topic_factor(None, 5) == 3
    assert rp.internal_topic_factor(5, 4) == 4 and rp.internal_topic_factor(1, 3) == 1


def test_a_follower_of_a_node_ray_declared_dead_goes_to_the_node_back_at_its_address_on_its_folder():
    rec = {"replicas": [{"node_id": "lead", "node_ip": "10.0.0.1"}, {"node_id": "gone", "node_ip": "10.0.0.2"},
                        {"node_id": "ok", "node_ip": "10.0.0.3"}],
           "isr": ["lead", "ok"], "assignment": ["gone", "lead", "ok"], "epoch": 4}
    alive = {"lead": "10.0.0.1", "ok": "10.0.0.3", "back": "10.0.0.2", "other": "10.0.0.9"}
    swaps = rp.adopt_returned_replicas(rec, "lead", alive, "/data", "t", 0)
    assert swaps == [("gone", "back")]
    assert [r["node_id"] for r in rec["replicas"]] == ["lead", "back", "ok"]
    assert rec["assignment"] == ["back", "lead", "ok"]  # still the preferred replica
    assert rec["isr"] == ["lead", "ok"]  # joins the ISR only once it caught up
    # on the folder the gone node's replica was written in, not a new empty one
    assert rec["follower_dirs"]["back"] == rp.follower_dir("/data", "gone", "t", 0)
    assert rp.adopt_returned_replicas(rec, "lead", alive, "/data", "t", 0) == []  # once


def test_a_replica_is_not_adopted_by_another_address_or_by_a_replica_node():
    rec = {"replicas": [{"node_id": "lead", "node_ip": "10.0.0.1"}, {"node_id": "gone", "node_ip": "10.0.0.2"},
                        {"node_id": "ok", "node_ip": "10.0.0.3"}], "isr": ["lead", "gone", "ok"],
           "follower_dirs": {"gone": "/data/gone-led-here"}}
    # nobody back at 10.0.0.2
    assert rp.adopt_returned_replicas(rec, "lead", {"lead": "10.0.0.1", "ok": "10.0.0.3"}, "/data", "t", 0) == []
    # the only node at 10.0.0.2 is a replica already: it cannot hold two replicas of one partition
    rec["replicas"][2]["node_ip"] = "10.0.0.2"
    assert rp.adopt_returned_replicas(rec, "lead", {"lead": "10.0.0.1", "ok": "10.0.0.2"}, "/data", "t", 0) == []
    # a folder the gone node led in (a controlled move) is the one taken over; it leaves the ISR
    rec["replicas"][2]["node_ip"] = "10.0.0.3"
    assert rp.adopt_returned_replicas(
        rec, "lead", {"lead": "10.0.0.1", "ok": "10.0.0.3", "back": "10.0.0.2"}, "/data", "t", 0) == [("gone", "back")]
    assert rec["follower_dirs"] == {"back": "/data/gone-led-here"} and rec["isr"] == ["lead", "ok"]


def test_a_gone_leader_back_at_its_address_leads_again_on_its_files_and_keeps_its_isr_place():
    """No in-sync replica was alive to take over (the partition waited, offline): the leader's machine
    returns as a new Ray node and leads again, as a Kafka broker back with the last in-sync log does."""
    rec = {"replicas": [{"node_id": "gone-lead", "node_ip": "10.0.0.1"}, {"node_id": "gone", "node_ip": "10.0.0.2"}],
           "isr": ["gone-lead"], "assignment": ["gone-lead", "gone"], "directory": "/data/t-0", "epoch": 7}
    swaps = rp.adopt_returned_replicas(rec, "gone-lead", {"back": "10.0.0.1"}, "/data", "t", 0)
    assert swaps == [("gone-lead", "back")]
    assert [r["node_id"] for r in rec["replicas"]] == ["back", "gone"] and rec["assignment"] == ["back", "gone"]
    assert rec["isr"] == ["back"]  # in the ISR: it holds every acknowledged record
    assert "follower_dirs" not in rec and rec["directory"] == "/data/t-0"  # its own leader folder
    # the follower's machine returns later: a follower again, outside the ISR until caught up
    assert rp.adopt_returned_replicas(rec, "back", {"back": "10.0.0.1", "back2": "10.0.0.2"}, "/data", "t", 0) \
        == [("gone", "back2")]
    assert rec["isr"] == ["back"] and rec["follower_dirs"]["back2"] == rp.follower_dir("/data", "gone", "t", 0)


def test_a_gone_leader_back_at_its_address_waits_for_the_election_while_an_in_sync_replica_lives():
    """Issue 33: the head (leader) lost with its disk while the controller was away too, so no election
    ran; the machine returned at its address, empty. It used to lead again on its empty folder, and the
    in-sync followers were cut back to it: 1,876 acknowledged records gone in the ray up test."""
    rec = {"replicas": [{"node_id": "gone-lead", "node_ip": "10.0.0.1"}, {"node_id": "f", "node_ip": "10.0.0.2"}],
           "isr": ["gone-lead", "f"], "assignment": ["gone-lead", "f"], "directory": "/data/t-0", "epoch": 7}
    alive = {"back": "10.0.0.1", "f": "10.0.0.2"}
    assert rp.adopt_returned_replicas(rec, "gone-lead", alive, "/data", "t", 0) == []
    assert rec["isr"] == ["gone-lead", "f"] and rec["replicas"][0]["node_id"] == "gone-lead"
    # elected from the ISR (the router's election): the returned machine then takes the old replica as a follower
    rec["isr"] = ["f"]
    assert rp.adopt_returned_replicas(rec, "f", alive, "/data", "t", 0) == [("gone-lead", "back")]
    assert rec["isr"] == ["f"] and "back" in rec["follower_dirs"]


def test_a_one_replica_partition_is_replicated_once_a_reassignment_records_its_replica_set():
    from logan_ray.actors import reassignment

    t = {"replication_factor": 1, "placement": {"0": {"node_id": "n1", "node_ip": ALIVE["n1"]},
                                                "1": {"node_id": "n2", "node_ip": ALIVE["n2"]}}, "leaders": {}}
    rec = t["leaders"].setdefault("0", {"epoch": 0, "incarnation": None})
    assert not rp.replicated(t, 0) and not rp.replicated(t, 1)
    rp.record_single_replica(rec, t["placement"]["0"])
    assert rp.replicas_of(t, 0) == ["n1"] == rp.isr_of(t, 0)
    assert reassignment.begin(rec, ["n3"], ALIVE) == []
    assert rp.replicas_of(t, 0) == ["n1", "n3"] and rp.isr_of(t, 0) == ["n1"]  # n3 joins once caught up
    assert rp.replicated(t, 0) and not rp.replicated(t, 1)  # the partition, not its topic, decides
    rec["isr"] = ["n1", "n3"]
    assert reassignment.complete(rec)
    assert {"node_id": "n3", "node_ip": ALIVE["n3"]} in rec["replicas"]
    assert rp.replicated({"replication_factor": 3, "placement": {}}, 0)


def test_a_partition_with_a_follower_out_of_the_isr_is_published_as_under_replicated():
    t = {"replication_factor": 3, "placement": {"0": {"node_id": "n1", "node_ip": ALIVE["n1"]},
                                                 "1": {"node_id": "n2", "node_ip": ALIVE["n2"]}},
         "leaders": {"0": {"replicas": [{"node_id": n} for n in ("n1", "n2", "n3")], "isr": ["n1", "n3"]},
                     "1": {"replicas": [{"node_id": n} for n in ("n2", "n3", "n1")], "isr": ["n2", "n3", "n1"]}}}
    assert rp.replication_gauges(t, 0) == {"replicas": 3, "in_sync_replicas": 2, "under_replicated": 1}
    assert rp.replication_gauges(t, 1) == {"replicas": 3, "in_sync_replicas": 3, "under_replicated": 0}
    one = {"placement": {"0": {"node_id": "n1", "node_ip": ALIVE["n1"]}}}
    assert rp.replication_gauges(one, 0) == {"replicas": 1, "in_sync_replicas": 1, "under_replicated": 0}


def test_a_failover_walks_the_assigned_order_not_the_order_a_past_leader_change_left():
    # assigned n1, n2, n3; n3 led once, so the replica list reads n3 first; n3 is gone now
    t = {"placement": {"0": {"node_id": "n3"}}, "leaders": {"0": {
        "replicas": [{"node_id": n} for n in ("n3", "n1", "n2")], "assignment": ["n2", "n1", "n3"]}}}
    assert rp.election_order(t, 0) == ["n2", "n1", "n3"]
    assert rp.election_candidates(rp.election_order(t, 0), ["n1", "n2", "n3"], "n3", ["n1", "n2"]) == (["n2", "n1"], False)
    # a replica being added (not assigned yet) comes after the assigned ones
    t["leaders"]["0"]["replicas"].append({"node_id": "n4"})
    assert rp.election_order(t, 0) == ["n2", "n1", "n3", "n4"]
    # no assignment recorded: the replica list as it is
    del t["leaders"]["0"]["assignment"]
    assert rp.election_order(t, 0) == ["n3", "n1", "n2", "n4"]
