"""Which __consumer_offsets partitions a node's coordinator keeps (logan_ray.groups.ownership)."""
from __future__ import annotations

from logan_ray.groups.ownership import Leadership, leadership, lost, owns


def route(nodes, epochs, offline=()):
    return {"partitions": [(None, n) for n in nodes], "leader_epochs": list(epochs), "offline": list(offline)}


def test_leadership_reads_node_and_epoch_and_an_offline_partition_has_no_leader():
    r = route(["a", "b", "a"], [0, 3, 1], offline=[2])
    assert leadership(r, 1) == Leadership("b", 3)
    assert leadership(r, 2) == Leadership(None, 1)
    assert owns("b", leadership(r, 1)) and not owns("a", leadership(r, 1)) and not owns("a", leadership(r, 2))


def test_a_partition_is_lost_when_another_node_or_a_later_epoch_leads_it():
    owned = {0: 0, 1: 2, 2: 5, 3: 1}
    r = route(["me", "other", "me", "me"], [0, 2, 6, 1], offline=[3])
    # 0: same node, same epoch (kept; a hibernation keeps the epoch); 1: moved to another node;
    # 2: same node in a later epoch (its actor crashed: replay again); 3: offline (its node is gone)
    assert lost("me", owned, r) == [1, 2, 3]
    assert lost("me", {}, r) == []
    assert lost("me", {7: 0}, r) == [7]  # no such partition (never happens; still given up)
