"""Partition reassignment (Kafka's AlterPartitionReassignments / ListPartitionReassignments, KIP-455).

A mixin of RouterActor (the controller). A reassignment never places a partition away from its
data (rules in ``actors/reassignment.py``):

1. the target is saved first, with the replica set as the union of target and current replicas
   and a new leader epoch, in ``cluster-metadata.json`` (fsynced): a restarted router carries on;
2. the leader's partition actor is told the new replica set and epoch (``PartitionActor.reassigned``);
   the adding replicas' nodes see them in ``follower_assignments``, and their gateways' replica
   fetchers build them by fetching from the leader, as any follower, in a fresh follower folder;
3. a watch (``_reassign_rounds``, every ``ROUND_S``) sees every adding replica join the ISR (the
   leader's own rule: caught up to the high watermark); if the leader is being removed, leadership
   first moves to a target replica in the ISR by the controlled move of ``router_rebalance``
   (nothing truncated, nothing lost); then the target becomes the replica set in a new epoch, saved,
   and the leader is told;
4. each removed replica's node stops following it (``stop_following``) and its folder is deleted on
   its node. The folders to delete are saved with step 3 (``strays``), so a crash in between deletes
   them later; a folder on a node that is gone is deleted if the node returns.

Cancelling (replicas null) returns to the original replicas the same way (the replicas being added
stop following and their folders go). A partition of a ``replication.factor`` 1 topic moves the same
way: its record gets the replica set of one (``replica_placement.record_single_replica``), grows by
the adding replicas, and runs the replication machinery from then on (``replica_placement.replicated``),
as Kafka, where a partition's replicas, not its topic, decide. Any target of one replica or more is taken.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from logan_ray.common.errors import (InvalidReplicationFactorError, NoReassignmentInProgressError,
                                     UnknownPartitionError)
from logan_ray.protocol import errors as codes
from logan_ray.storage.errors import LoganError

from . import reassignment, replica_placement
from .names import NAMESPACE, gateway_name

log = logging.getLogger("logan_ray.router")
ROUND_S = 0.5  # how often ongoing reassignments are checked for completion
CALL_TIMEOUT_S = 10.0  # a control call to a partition actor or a gateway


class PartitionReassignment:
    def _init_reassign(self) -> None:
        self._reassign_task: asyncio.Task | None = None
        self._told: dict[tuple[str, int], int] = {}  # partition -> the epoch its leader actor was told
        self._resynced = False

    def _reassigning(self) -> None:
        """Start the reassignment watch (once; with the node watch, so a restarted router resumes)."""
        if self._reassign_task is None or self._reassign_task.done():
            self._reassign_task = asyncio.get_running_loop().create_task(self._reassign_rounds())

    # ----------------------------------------------------------------- API
    async def alter_partition_reassignments(self, asked: list[tuple[str, int, list[Any] | None]],
                                            allow_replication_factor_change: bool = True
                                            ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """Kafka's AlterPartitionReassignments: {(topic, partition): (error code, message)}.

        ``asked``: (topic, partition, target replicas as broker ids or node ids, or None to cancel).
        ``allow_replication_factor_change`` false (KIP-860): a target with another number of replicas
        than the partition has (before any ongoing reassignment) gets INVALID_REPLICATION_FACTOR.
        Answered once each target is saved and the leader told (the data moves afterwards; follow it
        with :meth:`list_partition_reassignments`).
        """
        out: dict[tuple[str, int], tuple[int, str | None]] = {}
        async with self._lock:
            self._refresh_nodes()
            for topic, p, replicas in asked:
                try:
                    await self._reassign(topic, p, replicas, allow_replication_factor_change)
                    out[(topic, p)] = (codes.NONE, None)
                except LoganError as e:
                    out[(topic, p)] = (e.code, str(e))
        self._reassigning()
        return out

    async def list_partition_reassignments(self, partitions: list[tuple[str, int]] | None = None
                                           ) -> dict[tuple[str, int], dict[str, list[str]]]:
        """Kafka's ListPartitionReassignments: {(topic, partition): {"replicas", "adding", "removing"}} (node
        ids) of the ongoing reassignments among ``partitions`` (all when None); others are left out."""
        self._reassigning()
        out = {}
        for topic, t in self._meta["topics"].items():
            for key, rec in t.get("leaders", {}).items():
                p = int(key)
                if reassignment.in_progress(rec) and (partitions is None or (topic, p) in partitions):
                    out[(topic, p)] = reassignment.describe(rec)
        return dict(sorted(out.items()))

    async def rebalance_replicas(self, dry_run: bool = False) -> dict[tuple[str, int], dict[str, Any]]:
        """Spread the replicas of every partition (whatever its replication factor) evenly over the alive
        nodes (after a node joined, or to move replicas off a gone node) by issuing reassignments: {(topic, partition):
        {"from", "to" (node ids), "error_code", "error_message"}} for each partition whose replicas change.
        Partitions being reassigned are left as they are."""
        async with self._lock:
            self._refresh_nodes()
            alive = sorted(n for n in self._alive if not self._sessions.fenced(n))
            current = {}
            for topic, t in self._meta["topics"].items():
                for p in range(t["partitions"]):
                    rec = t.get("leaders", {}).get(str(p), {})
                    if not reassignment.in_progress(rec):
                        current[(topic, p)] = list(rec.get("assignment") or replica_placement.replicas_of(t, p))
            targets = reassignment.spread(current, alive)
            out: dict[tuple[str, int], dict[str, Any]] = {}
            for (topic, p), target in sorted(targets.items()):
                code, message = codes.NONE, None
                if not dry_run:
                    try:
                        await self._reassign(topic, p, target)
                    except LoganError as e:
                        code, message = e.code, str(e)
                out[(topic, p)] = {"from": current[(topic, p)], "to": target, "error_code": code,
                                   "error_message": message}
        if targets and not dry_run:
            self._reassigning()
        return out

    async def _grow_internal_topics(self) -> bool:
        """``__consumer_offsets`` and ``__transaction_state`` created while fewer nodes were up than
        ``offsets.topic.replication.factor`` get their missing replicas as nodes join (reassignments
        adding them; committed offsets and transaction states then survive the loss of any one host,
        with cluster.yaml's broker started before its workers). True when any reassignment began.
        One topic grows at a time, one growth per topic at a time. The router's lock is held."""
        from .group_coordinator import OFFSETS_TOPIC
        from .txn_coordinator import TXN_TOPIC

        eligible = sorted(n for n in self._alive if not self._sessions.fenced(n) and n not in self._draining)
        factor = min(self.offsets_topic_replication_factor or replica_placement.DEFAULT_OFFSETS_TOPIC_REPLICATION_FACTOR,
                     len(eligible))
        for name in (OFFSETS_TOPIC, TXN_TOPIC):
            t = self._meta["topics"].get(name)
            if t is None or replica_placement.replication_factor(t) >= factor:
                continue
            current = {}
            for p in range(t["partitions"]):
                rec = t.get("leaders", {}).get(str(p), {})
                if reassignment.in_progress(rec):
                    return False  # one growth at a time: the next round looks again once it is done
                current[(name, p)] = replica_placement.replicas_of(t, p)
            targets = reassignment.grown(current, eligible, factor)
            for (topic, p), target in sorted(targets.items()):
                await self._reassign(topic, p, target)
            t["replication_factor"] = factor
            await self._save_soon()
            log.warning("router: %s grows to %d replicas per partition (offsets.topic.replication.factor %d, %d "
                        "nodes up): %d partitions reassigned", name, factor, self.offsets_topic_replication_factor,
                        len(eligible), len(targets))
            self._reassigning()
            if targets:
                return True
        return False

    # ------------------------------------------------------------ controller
    async def _reassign(self, topic: str, partition: int, replicas: list[Any] | None,
                        allow_replication_factor_change: bool = True) -> None:
        """Start, replace or (``replicas`` None) cancel one partition's reassignment; the router's lock is held."""
        t = self._meta["topics"].get(topic)
        if t is None or not isinstance(partition, int) or not 0 <= partition < t["partitions"]:
            raise UnknownPartitionError(f"no partition {topic}-{partition}")
        rec = self._leader(t, partition)
        if replicas is None:
            ongoing = reassignment.in_progress(rec)
            if ongoing is None:
                raise NoReassignmentInProgressError(f"no reassignment of {topic}-{partition} is in progress")
            target = list(ongoing["original"])  # back where it was, alive or not
        else:
            target = reassignment.resolve_target(replicas, [n for n in self._alive if not self._sessions.fenced(n)])
            before = (reassignment.in_progress(rec) or {}).get("original") or replica_placement.replicas_of(t, partition)
            if not allow_replication_factor_change and len(target) != len(before):
                raise InvalidReplicationFactorError(
                    f"The replication factor is changed from {len(before)} to {len(target)} but "
                    "allowReplicationFactorChange is false")
            if not replica_placement.replicated(t, partition):
                place = t["placement"][str(partition)]
                if target == [place["node_id"]]:
                    return  # where it is already
                replica_placement.record_single_replica(rec, place)
        dropped = reassignment.begin(rec, target, self._alive)
        if dropped is None:
            await self._save_soon()  # the order changed at most (the preferred replica)
            return
        self._stray(topic, partition, rec, dropped)
        for n in target:
            rec.get("strays", {}).pop(n, None)  # added again before its old folder went: it fetches on it
        rec["epoch"] += 1
        await self._save_soon()  # durable before anyone acts on it
        log.warning("partition %s-%d: reassignment to %s: replicas %s, adding %s, removing %s, leader epoch %d",
                    topic, partition, [n[:8] for n in target], [r["node_id"][:8] for r in rec["replicas"]],
                    [n[:8] for n in reassignment.adding(rec)], [n[:8] for n in reassignment.removing(rec)],
                    rec["epoch"])
        await self._tell_leader(topic, partition, t)
        if reassignment.complete(rec):  # e.g. a cancel of a reassignment whose adding replicas never joined
            await self._advance(topic, partition, t)

    def _stray(self, topic: str, partition: int, rec: dict[str, Any], nodes: list[str]) -> None:
        """Remember the folders of replicas no longer in the set, to delete them on their nodes."""
        for n in nodes:
            directory = replica_placement.follower_dir_of(self.data_dir, rec, n, topic, partition)
            rec.get("follower_dirs", {}).pop(n, None)
            rec.setdefault("strays", {})[n] = directory

    async def _tell_leader(self, topic: str, partition: int, t: dict[str, Any]) -> None:
        """Tell the running leader actor the replica set and epoch saved (an inactive one reads them when it
        starts); a failure is retried by the next round."""
        key = (topic, partition)
        rec = self._leader(t, partition)
        handle = self._handles.get(key)
        if handle is None:
            self._told[key] = rec["epoch"]
            return
        try:
            await asyncio.wait_for(handle.reassigned.remote(rec["epoch"], replica_placement.replicas_of(t, partition),
                                                            replica_placement.isr_of(t, partition),
                                                            rec.get("isr_version", 0)), CALL_TIMEOUT_S)
            self._told[key] = rec["epoch"]
        except Exception as e:
            log.warning("partition %s-%d: the leader did not take the new replica set yet: %s", topic, partition, e)

    async def _advance(self, topic: str, partition: int, t: dict[str, Any]) -> bool:
        """Finish a reassignment whose adding replicas are all in the ISR; True once done. The lock is held."""
        rec = self._leader(t, partition)
        ongoing = reassignment.in_progress(rec)
        if ongoing is None or not reassignment.complete(rec):
            return False
        target = list(ongoing["target"])
        leader = t["placement"][str(partition)]["node_id"]
        if leader not in target:
            new = reassignment.successor(rec, target, self._alive, self._draining)
            if new is None:
                return False
            if await self._move_leader(topic, partition, t, new, "reassignment") != codes.NONE:
                return False  # the old leader leads on; the next round tries again
            rec = self._leader(t, partition)
        gone = reassignment.settle(rec, target, self._alive)
        self._stray(topic, partition, rec, gone)
        rec["epoch"] += 1
        await self._save_soon()
        log.warning("partition %s-%d: reassignment done: replicas %s, ISR %s, leader epoch %d", topic, partition,
                    [r["node_id"][:8] for r in rec["replicas"]], [n[:8] for n in rec["isr"]], rec["epoch"])
        await self._tell_leader(topic, partition, t)
        await self._delete_strays(topic, partition, t)
        return True

    async def _delete_strays(self, topic: str, partition: int, t: dict[str, Any]) -> None:
        """Stop the removed replicas' fetchers and delete their folders on their nodes (those alive)."""
        rec = self._leader(t, partition)
        strays = rec.get("strays") or {}
        done = []
        for node, directory in list(strays.items()):
            if node not in self._alive:
                continue  # deleted if it returns
            try:
                gateway = ray.get_actor(gateway_name(node), namespace=NAMESPACE)
                await asyncio.wait_for(gateway.stop_following.remote(topic, partition, rec["epoch"]), CALL_TIMEOUT_S)
            except ValueError:
                pass  # no gateway there: no fetcher holds the folder
            except Exception as e:
                log.warning("partition %s-%d: node %s did not stop following yet: %s", topic, partition, node[:8], e)
                continue
            try:
                from .router_admin import _remove_partition_dir

                await asyncio.wait_for(_remove_partition_dir.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(
                    directory, t["topic_id"]), CALL_TIMEOUT_S)
            except Exception as e:
                log.warning("partition %s-%d: folder %s on node %s not deleted yet: %s", topic, partition, directory,
                            node[:8], e)
                continue
            done.append(node)
            log.info("partition %s-%d: removed replica on node %s, folder %s deleted", topic, partition, node[:8],
                     directory)
        for node in done:
            strays.pop(node, None)
        if done:
            if not strays:
                rec.pop("strays", None)
            await self._save_soon()

    async def _reassign_rounds(self) -> None:
        while True:
            await asyncio.sleep(ROUND_S)
            try:
                await self._reassign_round()
            except Exception:
                log.exception("router: reassignment round failed")

    async def _reassign_round(self) -> None:
        if not self._resynced:  # a router restarted between saving a change and telling the leader
            self._resynced = True
            for (topic, p), handle in list(self._handles.items()):
                t = self._meta["topics"].get(topic)
                if t is not None and replica_placement.replicated(t, p):
                    handle.reassigned.remote(self._epoch(t, p), replica_placement.replicas_of(t, p),
                                             replica_placement.isr_of(t, p))  # no-op unless its epoch is older
        pending = [(topic, int(p)) for topic, t in self._meta["topics"].items()
                   for p, rec in t.get("leaders", {}).items() if rec.get("reassignment") or rec.get("strays")]
        if not pending:
            return
        async with self._lock:
            self._refresh_nodes()
            for topic, p in pending:
                t = self._meta["topics"].get(topic)
                if t is None:
                    continue
                rec = self._leader(t, p)
                if self._told.get((topic, p)) != rec["epoch"]:
                    await self._tell_leader(topic, p, t)
                if rec.get("reassignment"):
                    await self._advance(topic, p, t)
                if rec.get("strays"):
                    await self._delete_strays(topic, p, t)
