"""Controlled leader moves: preferred-leader election (ElectLeaders) and ``auto.leader.rebalance.enable``.

A mixin of RouterActor. Unlike a failover (``router_leaders._elect``, the old leader is
dead), here the old leader is alive and hands over:

1. it stops taking writes (``PartitionActor.resign``: appends get NOT_LEADER_OR_FOLLOWER,
   which clients retry after refreshing their metadata),
2. it waits until the new leader's replica fetcher has fetched up to its log end, so the
   new leader holds every record the old one wrote (nothing is truncated, nothing
   acknowledged can be lost, whatever ``acks``),
3. the new leader's gateway closes its follower log (``stop_following``, as in a failover),
4. the old leader's actor closes its log cleanly and stops,
5. the new epoch, leader (first in ``replicas``), ISR and folders are saved, fsynced,
6. only then the partition actor starts on the new leader's node, on its follower files;
   the old leader's node follows from then on, on the files it led with
   (``follower_dirs``), at the same log end: it stays in the ISR.

If step 1 or 2 fails (the successor does not catch up in time), the old leader takes
writes again and nothing changed.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any

import ray

from logan_ray.common.errors import UnknownPartitionError
from logan_ray.protocol import errors as codes

from . import replica_placement
from .leader_balance import DEFAULT_CHECK_INTERVAL_S, DEFAULT_PER_BROKER_PERCENTAGE, to_rebalance
from .names import NAMESPACE, actor_name, gateway_name
from .router_hibernation import _name_released

log = logging.getLogger("logan_ray.router")
CATCH_UP_TIMEOUT_S = 5.0  # how long a resigning leader waits for its successor to fetch its log end
CALL_TIMEOUT_S = 10.0  # other steps of a move (a stopped node may never answer)
PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election types


class LeaderRebalance:
    def _init_rebalance(self, enable: bool | None, interval_s: int | None, percentage: int | None) -> None:
        #: Kafka's auto.leader.rebalance.enable, leader.imbalance.check.interval.seconds and
        #: leader.imbalance.per.broker.percentage (broker settings, Kafka's defaults)
        self.auto_leader_rebalance_enable = True if enable is None else bool(enable)
        self.leader_imbalance_check_interval_s = interval_s or DEFAULT_CHECK_INTERVAL_S
        self.leader_imbalance_per_broker_percentage = DEFAULT_PER_BROKER_PERCENTAGE if percentage is None \
            else percentage
        self._rebalance_task: asyncio.Task | None = None
        #: when each step of the latest controlled moves ended, in seconds after the move began (diagnostics)
        self._move_steps: deque[dict[str, Any]] = deque(maxlen=100)

    async def move_timings(self) -> list[dict[str, Any]]:
        """The latest controlled moves (at most 100): topic, partition, reason, when it began (``at``, this
        machine's monotonic clock) and the seconds from then to the end of each step (caught_up,
        handed_over, old_stopped, new_started)."""
        return list(self._move_steps)

    def _rebalancing(self) -> None:
        """Start the imbalance check (once; called with the node watch)."""
        if self.auto_leader_rebalance_enable and (self._rebalance_task is None or self._rebalance_task.done()):
            self._rebalance_task = asyncio.get_running_loop().create_task(self._rebalance_rounds())

    async def set_leader_imbalance_check_interval(self, seconds: int) -> int:
        """Change ``leader.imbalance.check.interval.seconds`` while the broker runs (not saved: the broker
        setting wins at the next start); the next check comes one new interval from now. Returns the
        previous value."""
        if not isinstance(seconds, int) or seconds < 1:
            raise ValueError(f"leader.imbalance.check.interval.seconds must be at least 1, got {seconds!r}")
        previous, self.leader_imbalance_check_interval_s = self.leader_imbalance_check_interval_s, seconds
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        self._rebalancing()
        return previous

    async def _rebalance_rounds(self) -> None:
        while True:
            await asyncio.sleep(self.leader_imbalance_check_interval_s)
            try:
                await self.rebalance_leaders()
            except Exception:
                log.exception("router: leader rebalance check failed")

    async def rebalance_leaders(self) -> list[tuple[str, int]]:
        """One ``auto.leader.rebalance.enable`` round: move partitions back to their preferred replica
        on every node whose imbalance is above ``leader.imbalance.per.broker.percentage``; returns the
        partitions moved."""
        moved = []
        for topic, p, node in to_rebalance(self._meta["topics"], self._alive,
                                           self.leader_imbalance_per_broker_percentage, self._draining):
            if await self.move_leader(topic, p, node, "leader imbalance") == codes.NONE:
                moved.append((topic, p))
        return moved

    async def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None = None
                            ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """Kafka's ElectLeaders: {(topic, partition): (error code, message)} for each partition asked
        (every replicated partition when None, as Kafka's null topic list).

        PREFERRED (0): move the leadership to the preferred replica (a controlled move) when it is
        alive, in the ISR and not leading (ELECTION_NOT_NEEDED when it leads,
        PREFERRED_LEADER_NOT_AVAILABLE when it cannot). UNCLEAN (1): only for a partition without a
        leader (ELECTION_NOT_NEEDED otherwise): the failover's election, allowed to pick a replica
        outside the ISR when no in-sync one is alive (ELIGIBLE_LEADERS_NOT_AVAILABLE when none is).
        """
        if partitions is None:
            partitions = [(name, p) for name, t in self._meta["topics"].items()
                          for p in range(t["partitions"]) if replica_placement.replicated(t, p)]
        out = {}
        for topic, p in partitions:
            t = self._meta["topics"].get(topic)
            if t is None or not 0 <= p < t["partitions"]:
                out[(topic, p)] = (codes.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{p}")
            elif election_type == PREFERRED:
                preferred = replica_placement.preferred_replica(t, p)
                code = await self.move_leader(topic, p, preferred, "preferred leader election")
                out[(topic, p)] = (code, None if code == codes.NONE else
                                   f"preferred replica {preferred[:8]} already leads" if code == codes.ELECTION_NOT_NEEDED
                                   else f"preferred replica {preferred[:8]} is not alive and in sync, or did not "
                                        "catch up")
            elif election_type == UNCLEAN:
                out[(topic, p)] = await self._elect_unclean(topic, p, t)
            else:
                out[(topic, p)] = (codes.INVALID_REQUEST, f"unknown election type {election_type}")
        return out

    async def _elect_unclean(self, topic: str, partition: int, t: dict[str, Any]) -> tuple[int, str | None]:
        async with self._lock:
            self._refresh_nodes()
            if t["placement"][str(partition)]["node_id"] in self._alive:
                return codes.ELECTION_NOT_NEEDED, "the partition has a leader"
            if await self._elect(topic, partition, t, unclean=True):
                self._spawn(topic, partition, t)
                return codes.NONE, None
            return codes.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no replica of the partition is alive"

    async def move_leader(self, topic: str, partition: int, target: str, reason: str = "requested") -> int:
        """Move a replicated partition's leadership to ``target`` (a replica in its ISR) by a controlled
        move (see the module docstring); returns a Kafka error code: NONE once moved,
        ELECTION_NOT_NEEDED when ``target`` leads already, PREFERRED_LEADER_NOT_AVAILABLE when it is
        not an alive in-sync replica or the move did not happen (the old leader leads on)."""
        t = self._topic(topic)
        if not 0 <= partition < t["partitions"]:
            raise UnknownPartitionError(f"topic {topic!r} has no partition {partition}")
        async with self._lock:
            return await self._move_leader(topic, partition, t, target, reason)

    async def _move_leader(self, topic: str, partition: int, t: dict[str, Any], target: str, reason: str) -> int:
        key = (topic, partition)
        old = t["placement"][str(partition)]["node_id"]
        if target == old:
            return codes.ELECTION_NOT_NEEDED
        rec = self._leader(t, partition)
        if not replica_placement.replicated(t, partition) or target not in (rec.get("isr") or ()) \
                or target not in self._alive or target in self._draining or old not in self._alive:
            return codes.PREFERRED_LEADER_NOT_AVAILABLE
        epoch, new_epoch = rec["epoch"], rec["epoch"] + 1
        steps = {"started": time.monotonic()}
        try:
            handle = await self._activate(topic, partition)  # an inactive partition starts to hand over
            end = await asyncio.wait_for(handle.resign.remote(epoch, target, CATCH_UP_TIMEOUT_S),
                                         CATCH_UP_TIMEOUT_S + CALL_TIMEOUT_S)
            steps["caught_up"] = time.monotonic()
            gateway = await asyncio.to_thread(ray.get_actor, gateway_name(target), namespace=NAMESPACE)
            await asyncio.wait_for(gateway.stop_following.remote(topic, partition, new_epoch), CALL_TIMEOUT_S)
            steps["handed_over"] = time.monotonic()
        except Exception as e:
            if isinstance(e, ray.exceptions.ActorUnschedulableError) and await self._elect(topic, partition, t):
                # Ray refuses to start the leader's actor on its node (the node drains): it never ran in
                # this epoch, so it acknowledged nothing the ISR lacks; an election replaces the move
                await self._spawn_async(topic, partition, t)
                log.warning("partition %s-%d: its leader's actor cannot start on %s (%s): elected from the ISR",
                            topic, partition, old[:8], reason)
                return codes.NONE
            log.warning("partition %s-%d: leadership stays on %s, not moved to %s (%s): %s", topic, partition,
                        old[:8], target[:8], reason, e)
            if (handle := self._handles.get(key)) is not None:
                handle.unresign.remote()
            return codes.PREFERRED_LEADER_NOT_AVAILABLE
        if key in self._stopping:  # it began to hibernate meanwhile: it leads on where it is
            handle.unresign.remote()
            return codes.PREFERRED_LEADER_NOT_AVAILABLE
        with self._replacing(key):  # no activation until the new leader's placement holds
            old_dir = self._dir(topic, partition)
            self._handles.pop(key, None)
            try:
                await asyncio.wait_for(handle.close.remote(), CALL_TIMEOUT_S)  # flush + clean-shutdown marker
            except Exception as e:  # its files are recovered by whoever opens them next
                log.warning("partition %s-%d: the old leader did not close cleanly: %s", topic, partition, e)
            ray.kill(handle, no_restart=True)
            await _name_released(actor_name(topic, partition))
            steps["old_stopped"] = time.monotonic()
            # the last wait is over: what it let change is read again, then written with no await between
            if target not in (rec.get("isr") or ()) or t["placement"][str(partition)]["node_id"] != old:
                # the old leader dropped the target from the ISR meanwhile: no move. It starts again where
                # it was, in an epoch above the one the target released its follower log at (so it follows)
                rec.update(epoch=max(new_epoch, rec["epoch"]), incarnation="moved-not")
                await self._save_soon()
                log.warning("partition %s-%d: %s left the ISR during the move; leadership stays on %s", topic,
                            partition, target[:8], old[:8])
                return codes.PREFERRED_LEADER_NOT_AVAILABLE
            new_epoch = max(new_epoch, rec["epoch"] + 1)  # above any epoch a restarted old actor took meanwhile
            replica_placement.remember_assignment(rec)
            replicas = rec["replicas"]
            rec["replicas"] = [r for r in replicas if r["node_id"] == target] + \
                [r for r in replicas if r["node_id"] != target]
            rec["isr"] = [target] + [n for n in rec["isr"] if n != target]
            follower_dirs = rec.setdefault("follower_dirs", {})
            new_dir = follower_dirs.pop(target, None) or replica_placement.follower_dir(self.data_dir, target, topic,
                                                                                       partition)
            follower_dirs[old] = old_dir  # the old leader follows on the files it led with
            rec.update(epoch=new_epoch, incarnation=None, directory=new_dir)
            t["placement"][str(partition)] = {"node_id": target, "node_ip": self._alive[target]}
            await self._save_soon()  # durable before the new leader (or anyone) uses the epoch
            self._feed.publish(old, topic, partition, None)
            await self._spawn_async(topic, partition, t)
        steps["new_started"] = time.monotonic()
        self._move_steps.append({"topic": topic, "partition": partition, "reason": reason, "at": steps["started"], **{
            k: round(v - steps["started"], 3) for k, v in steps.items() if k != "started"}})
        # the followers (the old leader first of all) follow the new leader now, not at their next refresh
        asyncio.get_running_loop().run_in_executor(None, tell_followers, [r["node_id"] for r in rec["replicas"][1:]])
        log.info("partition %s-%d: leadership moved from %s to %s at offset %d (%s), leader epoch %d; steps %s",
                 topic, partition, old[:8], target[:8], end, reason, new_epoch, self._move_steps[-1])
        return codes.NONE


def tell_followers(nodes: list[str]) -> None:
    """Ask these nodes' gateways to re-read their follower assignments (off the router's event loop:
    looking an actor up is a blocking GCS round trip)."""
    for node in nodes:
        try:
            ray.get_actor(gateway_name(node), namespace=NAMESPACE).assignments_changed.remote()
        except Exception:  # no gateway there: no replica fetcher either
            pass
