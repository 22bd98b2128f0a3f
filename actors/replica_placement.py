"""Where a partition's replicas live: the controller's rules for ``replication.factor``.

Kafka's rules, applied to Ray nodes (a node is a broker): a partition has
``replication.factor`` replicas on distinct nodes, the first being the leader;
a factor below 1 (other than -1, "the broker's ``default.replication.factor``")
or above the number of alive nodes is refused with INVALID_REPLICATION_FACTOR,
with Kafka's own messages. Followers go to the nodes holding the fewest
replicas so far, so replicas spread as the leaders do.

With one replica nothing is recorded beyond the leader's placement: the
metadata of a replication factor 1 topic is exactly what it was before
replication existed. Pure functions, no Ray: the router calls them under its lock.
"""
from __future__ import annotations

import os

from typing import Any, Iterable

from logan_ray.common.errors import InvalidReplicationFactorError

MAX_REPLICATION_FACTOR = 32767  # an INT16 on the wire


def resolve_factor(requested: int | None, default: int, alive_nodes: int) -> int:
    """The replication factor a new topic gets, or InvalidReplicationFactorError as Kafka words it."""
    factor = default if requested in (None, -1) else requested
    if not isinstance(factor, int) or factor < 1 or factor > MAX_REPLICATION_FACTOR:
        raise InvalidReplicationFactorError(
            "Replication factor must be larger than 0, or -1 to use the default value.")
    if factor > alive_nodes:
        raise InvalidReplicationFactorError(
            f"Replication factor: {factor} larger than available brokers: {alive_nodes}.")
    return factor


def replica_load(topics: Iterable[dict[str, Any]], alive: dict[str, str]) -> dict[str, int]:
    """Replicas (leaders and followers) each alive node holds now."""
    load = {node: 0 for node in alive}
    for t in topics:
        leaders = t.get("leaders", {})
        for p, place in t.get("placement", {}).items():
            nodes = [r["node_id"] for r in leaders.get(p, {}).get("replicas", ())] or [place.get("node_id")]
            for node in nodes:
                if node in load:
                    load[node] += 1
    return load


def placeable(alive: dict[str, str], draining: Iterable[str] = ()) -> dict[str, str]:
    """The alive nodes a new partition's leader may be placed on: those not draining (they are about to
    leave), or every alive node when all of them drain (a one-node cluster must still create topics)."""
    staying = {n: ip for n, ip in alive.items() if n not in set(draining)}
    return staying or dict(alive)


def choose_followers(leader: dict[str, str], factor: int, alive: dict[str, str],
                     load: dict[str, int], draining: Iterable[str] = ()) -> list[dict[str, str]]:
    """``factor - 1`` alive nodes other than the leader's, fewest replicas first (then node order).

    Draining nodes come last: one gets a new replica only when the factor needs every alive node
    (refusing would make a topic impossible to create while a node leaves). ``load`` is updated,
    so placing several partitions in a row spreads them.
    """
    leaving = set(draining)
    others = sorted((n for n in alive if n != leader["node_id"]), key=lambda n: (n in leaving, load.get(n, 0), n))
    if len(others) < factor - 1:
        raise InvalidReplicationFactorError(
            f"Replication factor: {factor} larger than available brokers: {len(others) + 1}.")
    chosen = others[:factor - 1]
    for n in chosen:
        load[n] = load.get(n, 0) + 1
    return [{"node_id": n, "node_ip": alive[n]} for n in chosen]


def assign_replicas(leader_record: dict[str, Any], leader: dict[str, str], factor: int, alive: dict[str, str],
                    load: dict[str, int], draining: Iterable[str] = ()) -> None:
    """Record a new partition's replicas (leader first) and its first ISR in ``leader_record``.

    The ISR starts with the leader alone: a follower joins it once it has fetched
    up to the high watermark (Kafka's expansion rule), so no replica is counted
    in sync before it holds the data.
    """
    if factor <= 1:
        return
    followers = choose_followers(leader, factor, alive, load, draining)
    leader_record["replicas"] = [dict(leader), *followers]
    leader_record["isr"] = [leader["node_id"]]


#: Kafka's ``offsets.topic.replication.factor`` default
DEFAULT_OFFSETS_TOPIC_REPLICATION_FACTOR = 3


def internal_topic_factor(configured: int | None, alive_nodes: int) -> int:
    """Replicas of ``__consumer_offsets`` when the broker creates it: ``offsets.topic.replication.factor``
    capped at the alive nodes (Kafka would wait for enough brokers; a one-node logan-ray must
    still have groups), at least 1."""
    return max(1, min(configured or DEFAULT_OFFSETS_TOPIC_REPLICATION_FACTOR, alive_nodes))


def replicas_of(t: dict[str, Any], partition: int) -> list[str]:
    """Node ids of a partition's replicas, leader first."""
    rec = t.get("leaders", {}).get(str(partition), {})
    if rec.get("replicas"):
        return [r["node_id"] for r in rec["replicas"]]
    return [t["placement"][str(partition)]["node_id"]]


def isr_of(t: dict[str, Any], partition: int) -> list[str]:
    """Node ids of a partition's in-sync replicas (the leader alone for one replica)."""
    rec = t.get("leaders", {}).get(str(partition), {})
    if rec.get("isr"):
        return list(rec["isr"])
    return [t["placement"][str(partition)]["node_id"]]


def replication_gauges(t: dict[str, Any], partition: int) -> dict[str, int]:
    """A partition's replica and in-sync replica counts and whether it is under-replicated, as the node
    gateways publish them (Kafka's per-partition ReplicasCount, InSyncReplicasCount, UnderReplicated):
    what an operator alerts on when a follower falls behind or its node is gone."""
    replicas, isr = len(replicas_of(t, partition)), len(isr_of(t, partition))
    return {"replicas": replicas, "in_sync_replicas": isr, "under_replicated": int(isr < replicas)}


def replication_factor(t: dict[str, Any]) -> int:
    return int(t.get("replication_factor", 1))


def replicated(t: dict[str, Any], partition: int) -> bool:
    """Whether a partition runs the replication machinery (ISR, elections, followers, leader moves):
    its topic has more than one replica, or its replica set was recorded since (a replication factor 1
    partition reassigned to another node is built there by fetching, as any follower, and keeps its
    replica record afterwards, whatever its number of replicas)."""
    return replication_factor(t) > 1 or bool(t.get("leaders", {}).get(str(partition), {}).get("replicas"))


def record_single_replica(rec: dict[str, Any], leader: dict[str, str]) -> None:
    """Give a one-replica partition's leader record the replica set and ISR a replicated one has (the
    leader alone), so a reassignment can grow it: nothing changes for its readers and writers."""
    if not rec.get("replicas"):
        rec["replicas"] = [{"node_id": leader["node_id"], "node_ip": leader.get("node_ip")}]
        rec["isr"] = [leader["node_id"]]


def election_candidates(replicas: list[str], isr: list[str], dead: str, alive: Iterable[str],
                        unclean: bool = False, draining: Iterable[str] = ()) -> tuple[list[str], bool]:
    """Who may lead after ``dead`` (the leader) is gone, in order of preference, and whether that is unclean.

    Kafka's rule: the alive members of the ISR, in replica order (the preferred replica first).
    Only when none is alive and ``unclean.leader.election.enable`` is true, any alive replica:
    an unclean election, which may lose acknowledged records (the new ISR is the new leader alone).
    Replicas on ``draining`` nodes come after the others (they are about to leave: electing one
    would mean another move soon), but are still elected when no other is eligible.
    """
    up = set(alive) - {dead}
    leaving = set(draining)
    clean = [n for n in replicas if n in isr and n in up]
    if not clean and unclean:
        return _staying_first([n for n in replicas if n in up], leaving), True
    return _staying_first(clean, leaving), False


def _staying_first(nodes: list[str], draining: set[str]) -> list[str]:
    return [n for n in nodes if n not in draining] + [n for n in nodes if n in draining]


def follower_dir(data_dir: str, node_id: str, topic: str, partition: int) -> str:
    """A follower replica's folder: apart from the leader's ``<data-dir>/<topic>-<partition>``, so
    that nodes sharing one file system (Ray nodes on one machine) never write the same files."""
    return os.path.join(data_dir, "replicas", node_id[:8], f"{topic}-{partition}")


def remember_assignment(rec: dict[str, Any]) -> None:
    """Keep the replica order as assigned (Kafka's replica assignment) before a leader change reorders
    ``replicas`` (the leader first): its first node stays the partition's preferred replica."""
    if rec.get("replicas") and "assignment" not in rec:
        rec["assignment"] = [r["node_id"] for r in rec["replicas"]]


def election_order(t: dict[str, Any], partition: int) -> list[str]:
    """A partition's replicas in the order a failover tries them: its assignment (Kafka's
    offline-partition election walks the assigned replicas, not the order a past leader change
    left), then any replica not assigned (being added by a reassignment)."""
    current = replicas_of(t, partition)
    assigned = [n for n in t.get("leaders", {}).get(str(partition), {}).get("assignment") or () if n in current]
    return assigned + [n for n in current if n not in assigned]


def preferred_replica(t: dict[str, Any], partition: int) -> str:
    """The partition's preferred replica: the first of its assigned replicas (Kafka's rule)."""
    rec = t.get("leaders", {}).get(str(partition), {})
    return (rec.get("assignment") or replicas_of(t, partition))[0]


def follower_dir_of(data_dir: str, rec: dict[str, Any], node_id: str, topic: str, partition: int) -> str:
    """The folder of ``node_id``'s follower replica: where it was when it led (a leader that handed over
    in a controlled move follows on its own files), else :func:`follower_dir`."""
    return rec.get("follower_dirs", {}).get(node_id) or follower_dir(data_dir, node_id, topic, partition)


def adopt_returned_replicas(rec: dict[str, Any], leader: str, alive: dict[str, str], data_dir: str, topic: str,
                            partition: int) -> list[tuple[str, str]]:
    """Give a replica whose node is gone to the alive node at its address: [(old node id, new)].

    A machine that Ray declared dead comes back as a new Ray node (a new node id) with the same
    address and the same disk, so the replica's folder is there: the new node takes the replica
    over on that folder instead of the replica staying on a node id that never returns (an ISR
    that could never grow back to the factor). Never a node that is a replica already. Changes
    ``rec`` in place.

    - A follower: on its folder (``follower_dirs``); its replica fetcher follows the leader from
      the folder's log end, truncated by leader epoch; not into the ISR (the leader adds it back
      once it caught up).
    - The leader (``leader``, the partition's placement), gone with no in-sync replica alive to
      take over (else an election did): it leads again on its own files, keeping its place in the
      ISR, as a Kafka broker back with the partition's last in-sync log does. The caller moves the
      placement to the new node. Not while another in-sync replica is alive, even if no election ran
      yet (the controller was away with the lost head): the returned machine's disk may have been
      wiped, and the election from the ISR comes first; it then returns as that leader's follower.
    """
    swaps = []
    ids = {r["node_id"] for r in rec.get("replicas") or ()}
    for r in rec.get("replicas") or ():
        old = r["node_id"]
        if old in alive:
            continue
        if old == leader and any(n in alive for n in rec.get("isr") or () if n != old):
            continue
        new = next((n for n, ip in sorted(alive.items()) if ip == r.get("node_ip") and n not in ids), None)
        if new is None:
            continue
        if old != leader:
            follower_dirs = rec.setdefault("follower_dirs", {})
            follower_dirs[new] = follower_dirs.pop(old, None) or follower_dir(data_dir, old, topic, partition)
            rec["isr"] = [n for n in rec.get("isr") or () if n != old]
        else:
            rec["isr"] = [new if n == old else n for n in rec.get("isr") or ()]
        r["node_id"] = new
        ids.add(new)
        if rec.get("assignment"):
            rec["assignment"] = [new if n == old else n for n in rec["assignment"]]
        swaps.append((old, new))
    return swaps
