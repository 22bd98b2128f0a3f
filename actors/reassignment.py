"""Partition reassignment (Kafka's KIP-455): the controller's rules, as pure functions on a partition's record.

A reassignment moves a partition's replicas to a target list without ever placing the
partition away from its data: the replicas being added become followers first (their
node's replica fetcher builds them by fetching from the leader, as any follower), and only
once every one of them is in the ISR does the target become the replica set. Until then the
replica set is the union, the target replicas first in target order after the leader (Kafka's
``targetReplicas ++ originReplicas``, distinct), which Metadata reports, and the original
list is kept so a cancel can return to it.

The record lives in the router's durable metadata next to the replicas and ISR
(``topics.<t>.leaders.<p>.reassignment = {"target", "original"}``), saved before anything
acts on it, so a restarted router carries on. Node ids throughout; the wire's broker ids are
resolved to alive nodes by :func:`resolve_target`. No Ray, no I/O: the router
(``actors/router_reassign.py``) calls these under its lock.
"""
from __future__ import annotations

from typing import Any, Iterable

from logan_ray.common.errors import InvalidReplicaAssignmentError

from .names import broker_id


def resolve_target(asked: Iterable[int | str], alive: Iterable[str]) -> list[str]:
    """The node ids of a target replica list given as broker ids (ints) or node ids (hex strings, or a
    unique prefix); InvalidReplicaAssignmentError (Kafka's words) for an empty list, duplicates or a
    broker that is not alive."""
    asked = list(asked)
    alive = list(alive)
    if not asked:
        raise InvalidReplicaAssignmentError("The manual partition assignment includes an empty replica list.")
    by_broker = {broker_id(n): n for n in alive}
    nodes = []
    for a in asked:
        if isinstance(a, int) and not isinstance(a, bool):
            node = by_broker.get(a)
        else:
            found = [n for n in alive if n.startswith(str(a).lower())]
            node = found[0] if len(found) == 1 else None
        if node is None:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes broker {a}, which does not exist or is not alive.")
        nodes.append(node)
    if len(set(nodes)) != len(nodes):
        raise InvalidReplicaAssignmentError(
            f"The manual partition assignment includes duplicate replicas: {list(asked)}.")
    return nodes


def in_progress(rec: dict[str, Any]) -> dict[str, Any] | None:
    """The partition's ongoing reassignment ({"target", "original"}), None when there is none."""
    return rec.get("reassignment")


def adding(rec: dict[str, Any]) -> list[str]:
    """Target replicas not in the original list (being built by fetching)."""
    r = in_progress(rec)
    return [n for n in r["target"] if n not in r["original"]] if r else []


def removing(rec: dict[str, Any]) -> list[str]:
    """Original replicas not in the target (dropped once the target is complete)."""
    r = in_progress(rec)
    return [n for n in r["original"] if n not in r["target"]] if r else []


def _ordered(leader: str, nodes: list[str]) -> list[str]:
    return [leader] + [n for n in nodes if n != leader] if leader in nodes else list(nodes)


def _nodes(rec: dict[str, Any]) -> list[str]:
    return [r["node_id"] for r in rec.get("replicas", ())]


def begin(rec: dict[str, Any], target: list[str], alive: dict[str, str]) -> list[str] | None:
    """Start (or replace) a reassignment of the partition whose leader record is ``rec`` to ``target``.

    The replica set becomes the union of target and current replicas (leader first); the original
    list is the one before any reassignment (a new target replaces an ongoing one, as Kafka). Returns
    the nodes dropped from the replica set (replicas a replaced target was adding and the new one does
    not want: they stop following), or None when there is nothing to do (the target is the current
    replica set and none is ongoing; its order still becomes the assignment, so its first replica is
    the preferred one).
    """
    current = _nodes(rec)
    leader = current[0]
    ongoing = in_progress(rec)
    original = list(ongoing["original"]) if ongoing else current
    if ongoing is None and set(target) == set(current):
        rec["assignment"] = list(target)
        return None
    ips = {r["node_id"]: r.get("node_ip") for r in rec["replicas"]}
    union = list(dict.fromkeys([*target, *original, *current]))
    if ongoing is not None:  # replicas added by the replaced target and not wanted now go again
        union = [n for n in union if n in target or n in original or n == leader]
    rec["replicas"] = [{"node_id": n, "node_ip": ips.get(n) or alive.get(n)} for n in _ordered(leader, union)]
    rec["isr"] = [n for n in rec.get("isr") or [leader] if n in union]
    rec["reassignment"] = {"target": list(target), "original": original}
    return [n for n in current if n not in union]


def complete(rec: dict[str, Any]) -> bool:
    """True when every replica being added is in the ISR: the target may become the replica set."""
    r = in_progress(rec)
    return r is not None and set(adding(rec)) <= set(rec.get("isr") or ())


def successor(rec: dict[str, Any], wanted: list[str], alive: Iterable[str], draining: Iterable[str] = ()
              ) -> str | None:
    """Who leads once the replica set becomes ``wanted`` when the leader is not in it: the first of
    ``wanted`` (in its order) that is in the ISR, alive and not draining; None when none is yet."""
    isr, up, off = set(rec.get("isr") or ()), set(alive), set(draining)
    return next((n for n in wanted if n in isr and n in up and n not in off), None)


def settle(rec: dict[str, Any], wanted: list[str], alive: dict[str, str]) -> list[str]:
    """Make ``wanted`` (the target, or the original list on cancel) the replica set: leader first, the ISR
    cut to it, the assigned order kept as ``assignment`` (its first is the preferred replica), the
    reassignment record gone. The leader must be in ``wanted`` (move it first). Returns the nodes
    removed from the replica set (they stop following; their folders go)."""
    current = _nodes(rec)
    leader = current[0]
    assert leader in wanted, f"leader {leader} not in {wanted}"
    ips = {r["node_id"]: r.get("node_ip") for r in rec["replicas"]}
    rec["replicas"] = [{"node_id": n, "node_ip": ips.get(n) or alive.get(n)} for n in _ordered(leader, wanted)]
    rec["isr"] = [n for n in rec.get("isr") or [leader] if n in wanted]
    if leader not in rec["isr"]:
        rec["isr"].insert(0, leader)
    rec["assignment"] = list(wanted)
    rec.pop("reassignment", None)
    gone = [n for n in current if n not in wanted]
    return gone


def describe(rec: dict[str, Any]) -> dict[str, list[str]]:
    """ListPartitionReassignments' view: the replica set now (the union), adding and removing replicas."""
    return {"replicas": _nodes(rec), "adding": adding(rec), "removing": removing(rec)}


def spread(partitions: dict[tuple[str, int], list[str]], alive: list[str]) -> dict[tuple[str, int], list[str]]:
    """Targets that spread the replicas of ``partitions`` ({(topic, p): replica node ids, preferred
    first}) evenly over the ``alive`` nodes (``logan-ray partitions rebalance``, e.g. after a node
    joined): replicas on nodes that are not alive go first; then each topic is spread by itself (as
    a Kafka user expects of every topic after a node joins, not just the total: the internal
    ``__consumer_offsets`` filling the new node alone would balance the count and no topic's load),
    then the cluster as a whole. Spreading moves one replica at a time from the most to the least
    loaded node while they differ by two or more, preferring a partition the first does not lead
    and, among equally loaded nodes, the one with the lower total. A replaced replica keeps its
    position in the list, so a moved preferred replica is replaced by the new node as preferred.
    Returns only the partitions whose list changed."""
    if not alive:
        return {}
    total = {n: 0 for n in alive}
    targets = {k: list(v) for k, v in partitions.items()}
    for nodes in targets.values():
        for n in nodes:
            if n in total:
                total[n] += 1

    def least(exclude: list[str]) -> str | None:
        free = [n for n in alive if n not in exclude]
        return min(free, key=lambda n: (total[n], alive.index(n))) if free else None

    for key, nodes in sorted(targets.items()):
        for i, n in enumerate(nodes):
            if n not in total:
                new = least(nodes)
                if new is not None:
                    nodes[i] = new
                    total[new] += 1
    for topic in sorted({topic for topic, _p in targets}):
        _even_out(targets, sorted(k for k in targets if k[0] == topic), alive, total)
    _even_out(targets, sorted(targets), alive, total, keep_topics_even=True)
    return {k: v for k, v in targets.items() if v != partitions[k]}


def _even_out(targets: dict[tuple[str, int], list[str]], keys: list[tuple[str, int]], alive: list[str],
              total: dict[str, int], keep_topics_even: bool = False) -> None:
    """Move replicas among the partitions ``keys`` (in ``targets``, in place) until, counting those
    partitions only, no alive node holds two more than another (or no pair of nodes two apart has
    a partition that can move: a replica set holds a node once); ``total`` (every
    partition's count per node) breaks ties and is kept up to date. ``keep_topics_even``: move a
    partition only from a node holding more of its topic than the receiving node, so a topic spread
    evenly stays so (and a second rebalance finds nothing to do)."""
    load = {n: 0 for n in alive}
    per_topic: dict[str, dict[str, int]] = {}
    for k in keys:
        counts = per_topic.setdefault(k[0], {n: 0 for n in alive})
        for n in targets[k]:
            if n in load:
                load[n] += 1
                counts[n] += 1
    while True:
        move = None
        for most in sorted(alive, key=lambda n: (-load[n], -total[n], alive.index(n))):
            for low in sorted(alive, key=lambda n: (load[n], total[n], alive.index(n))):
                if load[most] - load[low] <= 1:
                    break
                movable = [k for k in keys if most in targets[k] and low not in targets[k]
                           and (not keep_topics_even or per_topic[k[0]][most] > per_topic[k[0]][low])]
                if movable:
                    move = most, low, movable
                    break
            if move is not None:
                break
        if move is None:  # even, or no pair of nodes two apart has a partition to move
            return
        most, low, movable = move
        key = next((k for k in movable if targets[k][0] != most), movable[0])
        nodes = targets[key]
        nodes[nodes.index(most)] = low
        for count in (load, total, per_topic[key[0]]):
            count[most] -= 1
            count[low] += 1


def grown(partitions: dict[tuple[str, int], list[str]], eligible: list[str], factor: int
          ) -> dict[tuple[str, int], list[str]]:
    """Targets that give each partition ``factor`` replicas (at most the ``eligible`` nodes), the new
    ones on the nodes holding the fewest replicas of these partitions: an internal topic created
    while few nodes were up reaches its configured replication factor as nodes join (Kafka waits
    for ``offsets.topic.replication.factor`` brokers before it creates ``__consumer_offsets``; a
    one-node logan-ray creates it at once, with fewer copies). Replicas are only added, never moved
    or removed. Returns only the partitions that change."""
    want = min(factor, len(eligible))
    load = {n: 0 for n in eligible}
    for nodes in partitions.values():
        for n in nodes:
            if n in load:
                load[n] += 1
    out = {}
    for key, nodes in sorted(partitions.items()):
        target = list(nodes)
        while len([n for n in target if n in load]) < want:
            new = min((n for n in eligible if n not in target), key=lambda n: (load[n], eligible.index(n)))
            target.append(new)
            load[new] += 1
        if target != nodes:
            out[key] = target
    return out
