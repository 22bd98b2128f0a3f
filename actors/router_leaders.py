"""The controller's leader state: epochs, incarnations and the ISR of every partition.

A mixin of RouterActor. Every change is saved (group-committed) before the caller
is told it, and every call is idempotent, since Ray may retry it.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import ray

from logan_ray.storage.errors import FencedLeaderEpochError

from . import replica_placement
from .names import NAMESPACE, actor_name, gateway_name

log = logging.getLogger("logan_ray.router")
HANDOVER_TIMEOUT_S = 10.0  # how long an elected replica's gateway may take to close its follower log
KILL_WAIT_S = 5.0  # how long the old leader's actor name may take to be released after ray.kill


class LeaderControl:
    async def open_partition(self, topic: str, partition: int, topic_id: str, incarnation: str,
                             log_epoch: int = -1, clean: bool = False) -> dict[str, Any]:
        """What a starting partition actor needs: its config and its leader epoch.

        ``incarnation`` names this start of the actor (one per ``__init__``/reopen): a new one
        bumps the epoch (the first one of a new partition takes epoch 0), saved before the
        answer; the same one again (Ray retrying this call) gets the same epoch. The epoch is
        also made larger than ``log_epoch``, the newest epoch the partition's files hold,
        so metadata older than the log can never hand out an epoch already used. ``clean``: the
        folder was closed cleanly (its clean-shutdown marker: hibernation, a clean stop), so
        the same leader starts again on the same files and keeps its epoch.
        """
        t = self._existing(topic, partition, topic_id)
        leader = self._leader(t, partition)
        if clean and leader["incarnation"] is not None and log_epoch <= leader["epoch"]:
            # A hibernated (or cleanly stopped) partition woken on the same node by the same
            # leader: its log is exactly what it acknowledged, nothing was truncated, so as in
            # Kafka (the epoch changes with leadership only) it keeps its epoch, and clients
            # are not fenced by a wake. Nothing to save: any incarnation gets this epoch.
            leader["incarnation"] = incarnation
        elif leader["incarnation"] != incarnation:
            epoch = leader["epoch"] + (0 if leader["incarnation"] is None else 1)
            if log_epoch >= epoch:
                epoch = log_epoch + 1
            bumped = epoch != leader["epoch"]
            leader.update(epoch=epoch, incarnation=incarnation)
            if bumped:  # a first start keeps epoch 0: nothing to save (a lost incarnation only means
                # the next start bumps, as its checkpoint already holds epoch 0 then: log_epoch)
                await self._save_soon()
            log.info("partition %s-%d: leader epoch %d", topic, partition, epoch)
        return {"config": self._effective(t).to_dict(), "leader_epoch": leader["epoch"],
                "isr": replica_placement.isr_of(t, partition), "isr_version": leader.get("isr_version", 0),
                "replicas": replica_placement.replicas_of(t, partition),
                "replica_lag_time_max_ms": self.replica_lag_time_max_ms,
                **self._producer_settings(t["placement"][str(partition)]["node_id"])}

    async def alter_isr(self, topic: str, partition: int, leader_epoch: int, isr: list[str],
                        isr_version: int | None = None) -> dict[str, Any]:
        """A leader's ISR change (Kafka's AlterPartition): a compare-and-set, saved before the answer.

        Returns ``{"isr", "isr_version", "accepted"}``: the ISR stored now and its version (the
        partition epoch of KIP-903: it grows with every ISR change that keeps the leader epoch,
        this one's or the controller's). Refused, with the stored state for the leader to adopt:
        a change made against another version than the stored one (the leader had not seen a
        change yet: it would undo it), and one adding a replica whose node is dead or fenced
        (Kafka's INELIGIBLE_REPLICA, KIP-841). Only the leader of the current epoch may ask (a
        zombie of an older epoch gets FencedLeaderEpochError), and not while its leadership is
        being replaced (an election or a move between its reads and its writes). The ISR must be
        replicas of the partition, the leader among them. The same change asked again (Ray
        retrying) is answered the same. No ``await`` between the checks and the write.
        """
        t = self._topic(topic)
        rec = self._leader(t, partition)
        if rec["epoch"] != leader_epoch:
            raise FencedLeaderEpochError(f"partition {topic}-{partition}: ISR change from leader epoch "
                                         f"{leader_epoch}, the current epoch is {rec['epoch']}")
        if (topic, partition) in self._stopping:
            raise FencedLeaderEpochError(f"partition {topic}-{partition}: its leadership is being replaced; "
                                         f"no ISR change in epoch {leader_epoch}")
        leader = t["placement"][str(partition)]["node_id"]
        if self._sessions.fenced(leader):
            # Kafka refuses AlterPartition under a stale broker epoch: a fenced broker changes no ISR. Here a
            # leader stopped for longer than the lag shrank its ISR to itself as it woke (its followers'
            # fetches had not been served), before its election reached the handover: the candidate "left
            # the ISR" and the partition went offline (CI's queue-checker run)
            raise FencedLeaderEpochError(f"partition {topic}-{partition}: its leader's broker (node {leader[:8]}) "
                                         f"is fenced; no ISR change until it registers again")
        replicas = replica_placement.replicas_of(t, partition)
        if not isr or isr[0] != replicas[0] or not set(isr) <= set(replicas) or len(set(isr)) != len(isr):
            raise ValueError(f"partition {topic}-{partition}: ISR {isr} is not the leader plus replicas of {replicas}")
        stored = {"isr": replica_placement.isr_of(t, partition), "isr_version": rec.get("isr_version", 0)}
        if stored["isr"] == list(isr):
            return {**stored, "accepted": True}
        if isr_version is not None and isr_version != stored["isr_version"]:
            return {**stored, "accepted": False, "reason": f"made at ISR version {isr_version}, the stored one is "
                                                          f"{stored['isr_version']}"}
        ineligible = [n for n in isr if n not in stored["isr"] and (n not in self._alive or self._sessions.fenced(n))]
        if ineligible:
            return {**stored, "accepted": False, "reason": f"ineligible replicas {[n[:8] for n in ineligible]} "
                                                          f"(dead or fenced)"}
        rec["isr"] = list(isr)
        rec["isr_version"] = stored["isr_version"] + 1
        await self._save_soon()
        log.info("partition %s-%d: ISR %s (version %d)", topic, partition, [n[:8] for n in isr], rec["isr_version"])
        return {"isr": list(isr), "isr_version": rec["isr_version"], "accepted": True}

    def _drop_gone_from_isrs(self) -> list[tuple[str, int]]:
        """A node Ray declared dead leaves the ISR of every partition it follows, at once (as Kafka's
        controller on a broker's fencing), not after ``replica.lag.time.max.ms`` of each leader: until
        then every ``acks=all`` write of those partitions waited for it. Partitions it led are for the
        election. Returns the partitions changed (saved by the caller, then their leaders are told:
        :meth:`_tell_isr`). The router's lock is held; no ``await``."""
        changed = []
        for topic, t in self._meta["topics"].items():
            for p in range(t["partitions"]):
                if not replica_placement.replicated(t, p) or (topic, p) in self._stopping:
                    continue
                leader = t["placement"][str(p)]["node_id"]
                if leader not in self._alive or self._sessions.fenced(leader):
                    continue
                rec = self._leader(t, p)
                isr = replica_placement.isr_of(t, p)
                # dead for Ray only: a fenced node may be a slow one (a starved machine misses heartbeats), and
                # dropping it from every ISR at once turned such false fencing into ISRs of one on the test bed;
                # a fenced follower leaves by its leader's replica.lag.time.max.ms as before
                kept = [n for n in isr if n == leader or n in self._alive]
                if kept != isr:
                    rec["isr"] = kept
                    rec["isr_version"] = rec.get("isr_version", 0) + 1
                    log.warning("partition %s-%d: ISR %s -> %s (dead or fenced replicas leave it at once)", topic, p,
                                [n[:8] for n in isr], [n[:8] for n in kept])
                    changed.append((topic, p))
        return changed

    def _tell_isr(self, partitions: list[tuple[str, int]]) -> None:
        """Tell running leaders the ISR the controller saved (an inactive one reads it when it starts; a
        leader that misses this learns it from its next ISR change, refused as stale)."""
        for topic, p in partitions:
            handle = self._handles.get((topic, p))
            t = self._meta["topics"].get(topic)
            if handle is None or t is None:
                continue
            rec = self._leader(t, p)
            handle.isr_changed.remote(rec["epoch"], replica_placement.isr_of(t, p), rec.get("isr_version", 0))

    async def follower_assignments(self, node_id: str) -> list[dict[str, Any]]:
        """The follower replicas ``node_id`` holds, for its replica fetcher: where each one's leader is.

        One entry per partition this node follows (not leads): topic, partition, topic id,
        leader node and epoch, the follower's folder on this node and the topic's config (the
        follower's segments roll as the leader's). Offline partitions (leader's node gone) are
        left out: there is no one to fetch from.
        """
        self._watching()
        out: list[dict[str, Any]] = []
        if self._sessions.fenced(node_id):
            return out  # its old leaders may still run there (a zombie): it follows once registered again
        for topic, t in self._meta["topics"].items():
            for p in range(t["partitions"]):
                leader = t["placement"][str(p)]["node_id"]
                if not replica_placement.replicated(t, p) or node_id == leader or node_id not in replica_placement.replicas_of(t, p) \
                        or self._is_offline(topic, p):
                    continue
                out.append({"topic": topic, "partition": p, "topic_id": t["topic_id"], "leader": leader,
                            "leader_epoch": self._epoch(t, p), "config": self._effective(t).to_dict(),
                            "directory": replica_placement.follower_dir_of(
                                self.data_dir, self._leader(t, p), node_id, topic, p)})
        return out

    async def _elect_leaders(self) -> list[tuple[str, int]]:
        """Failover: a new leader for every replicated partition whose leader's node is fenced (its broker
        session lapsed: ``broker_heartbeat``) or dead in Ray's view *and past its last lease* (Ray calls a
        node dead when its raylet stops answering, while its gateway and partition actors may run on and
        still acknowledge under the lease of their last heartbeat); returns them.

        Kafka's clean election (``unclean.leader.election.enable`` false, its default): the new
        leader is the first alive replica of the ISR (which the old leader kept, through
        ``alter_isr``, to the replicas holding every acknowledged record); with none, the
        partition stays offline and waits. The new epoch, leader, ISR (the old leader out) and the
        new leader's folder are saved before the new leader's partition actor starts. Its node's
        replica fetcher first closes its follower log (``stop_following``), so one process at a time
        writes the folder. The old leader can no longer acknowledge: its node is dead in Ray's view,
        or its lease ran out before its session did (actors/broker_lease.py); its partition actor is
        killed (it may be stopped, not dead) so the name is free for the new one, and its folder is
        remembered as that node's replica: if the node comes back it follows there, truncated by
        leader epoch by its replica fetcher.
        """
        due = []
        for topic, t in list(self._meta["topics"].items()):
            for p in range(t["partitions"]):
                if not replica_placement.replicated(t, p):
                    continue
                leader = t["placement"][str(p)]["node_id"]
                if leader not in self._alive:
                    self._sessions.declare_dead(leader)  # (a node without a gateway holds no lease: at once)
                if self._sessions.replaceable(leader):
                    due.append((topic, p, t))
        # all at once: each waits for its own candidate's handover and old actor, never for another's
        outcomes = await asyncio.gather(*(self._elect(topic, p, t) for topic, p, t in due), return_exceptions=True)
        elected = []
        for (topic, p, _t), outcome in zip(due, outcomes):
            if isinstance(outcome, BaseException):
                log.error("partition %s-%d: election failed: %r", topic, p, outcome)
            elif outcome:
                elected.append((topic, p))
        return elected

    async def _elect(self, topic: str, partition: int, t: dict[str, Any], unclean: bool = False) -> bool:
        """``unclean``: allowed whatever the topic's config says (ElectLeaders UNCLEAN, router_rebalance).

        The decision is a compare-and-set: the waits (the candidate's handover, the old leader's
        end) let the old leader's ``alter_isr`` and a restarted actor's ``open_partition`` run, so
        after the last wait the ISR and the epoch are read again, with no ``await`` until they are
        written: a candidate that left the ISR meanwhile is not elected (the election starts over),
        and the new epoch is above any epoch handed out meanwhile (two leaders never share one).
        """
        allow_unclean = unclean
        for _attempt in range(3):
            outcome = await self._elect_once(topic, partition, t, allow_unclean)
            if outcome is not None:
                return outcome
        log.warning("partition %s-%d: its ISR kept changing during the election; tried again next round",
                    topic, partition)
        return False

    async def _elect_once(self, topic: str, partition: int, t: dict[str, Any], unclean: bool) -> bool | None:
        """One election (see :meth:`_elect`); None when the ISR changed under it and it must start over."""
        rec = self._leader(t, partition)
        dead = t["placement"][str(partition)]["node_id"]

        def candidates_now() -> tuple[list[str], bool]:
            return replica_placement.election_candidates(
                replica_placement.election_order(t, partition), rec.get("isr") or [], dead, self._electable(),
                unclean or self._effective(t).unclean_leader_election_enable, self._draining)

        candidates, was_unclean = candidates_now()
        for i, new in enumerate(candidates):
            # a candidate that did not answer may still release later at its epoch: the next one gets a
            # higher epoch, so that late release cannot keep it from following the one elected
            epoch = rec["epoch"] + 1 + i
            try:
                gateway = ray.get_actor(gateway_name(new), namespace=NAMESPACE)
                # bounded: the router's node lock is held, and a stopped (not dead) node may never answer
                await asyncio.wait_for(gateway.stop_following.remote(topic, partition, epoch), HANDOVER_TIMEOUT_S)
            except Exception as e:  # no gateway there: no fetcher either, so no follower log to take over
                log.warning("partition %s-%d: ISR member %s cannot take over: %s", topic, partition, new[:8], e)
                continue
            key = (topic, partition)
            await self._stopped(key)  # hibernating: its old actor goes first
            with self._replacing(key):  # no activation on the old node until the new placement holds
                await self._kill_old_leader(topic, partition)
                # the last wait is over: read again what the waits let change, then write, no await between
                now, was_unclean = candidates_now()
                if new not in now or t["placement"][str(partition)]["node_id"] != dead:
                    log.warning("partition %s-%d: %s left the ISR during its election; electing again", topic,
                                partition, new[:8])
                    return None
                epoch = max(epoch, rec["epoch"] + 1)
                replica_placement.remember_assignment(rec)  # the preferred replica stays the first assigned
                follower_dirs = rec.setdefault("follower_dirs", {})
                follower_dirs[dead] = self._dir(topic, partition)  # the old leader follows there if it returns
                directory = follower_dirs.pop(new, None) or replica_placement.follower_dir(self.data_dir, new, topic,
                                                                                           partition)
                replicas = rec["replicas"]
                rec["replicas"] = [r for r in replicas if r["node_id"] == new] + \
                    [r for r in replicas if r["node_id"] != new]
                rec["isr"] = [new] if was_unclean else [new] + [n for n in now if n != new]
                rec.update(epoch=epoch, incarnation=None, directory=directory)
                t["placement"][str(partition)] = {"node_id": new, "node_ip": self._alive[new]}
                self._offline.pop((topic, partition), None)
                await self._save_soon()  # durable before the new leader (or anyone) uses the epoch
                getattr(self, "_unelectable", set()).discard((topic, partition))
                log.warning("partition %s-%d: leader %s is gone; elected %s %s, leader epoch %d, ISR %s",
                            topic, partition, dead[:8], new[:8],
                            "UNCLEANLY (no in-sync replica alive; acknowledged records may be lost)" if was_unclean
                            else "from the ISR", epoch, [n[:8] for n in rec["isr"]])
                return True
        if not getattr(self, "_unelectable", set()) >= {(topic, partition)}:
            self._unelectable = getattr(self, "_unelectable", set()) | {(topic, partition)}
            log.warning("partition %s-%d: leader %s is gone and no replica it may elect is alive; offline "
                        "(unclean.leader.election.enable=%s)", topic, partition, dead[:8],
                        str(self._effective(t).unclean_leader_election_enable).lower())
        return False

    async def _kill_old_leader(self, topic: str, partition: int) -> None:
        """End the old leader's partition actor for good and wait until its name is free.

        Its node may be alive (fenced: stopped, cut off) and the actor with it; Ray's GCS marks it
        dead and frees the name at once, and the process, if it ever runs again, is told to exit.
        Until then it cannot acknowledge anything: its gateway's lease ran out.
        """
        handle = self._handles.pop((topic, partition), None)

        def kill() -> None:
            h = handle
            deadline = time.monotonic() + KILL_WAIT_S
            while True:
                if h is None:
                    try:
                        h = ray.get_actor(actor_name(topic, partition), namespace=NAMESPACE)
                    except ValueError:
                        return  # no such actor (dead, hibernated): nothing to end
                try:
                    ray.kill(h, no_restart=True)
                except Exception as e:  # already dead
                    log.debug("partition %s-%d: old leader's actor: %s", topic, partition, e)
                h = None
                if time.monotonic() > deadline:
                    log.warning("partition %s-%d: the old leader's actor still holds its name", topic, partition)
                    return
                time.sleep(0.05)

        await asyncio.to_thread(kill)

    @staticmethod
    def _leader(t: dict[str, Any], partition: int) -> dict[str, Any]:
        """{"epoch", "incarnation"} of a partition's leader (epoch 0, none yet, for metadata from before epochs)."""
        return t.setdefault("leaders", {}).setdefault(str(partition), {"epoch": 0, "incarnation": None})

    def _epoch(self, t: dict[str, Any], partition: int) -> int:
        return t.get("leaders", {}).get(str(partition), {}).get("epoch", 0)

    async def _save_soon(self) -> None:
        """Save the metadata once for every change made before the save starts (a group commit).

        Many partitions start at once (a broker restart, a topic's first use); each must
        have its epoch on disk before it is answered, but one write can cover them all.
        """
        fut = self._pending_save
        if fut is None:
            loop = asyncio.get_running_loop()
            fut = self._pending_save = loop.create_future()
            loop.call_soon(self._save_pending)
        await asyncio.shield(fut)

    def _save_pending(self) -> None:
        """Encode now (the state every waiter changed), write beside the event loop (the fsync and
        the GCS call), in order with every other save."""
        fut, self._pending_save = self._pending_save, None
        try:
            written = self._save_beside_loop()
        except BaseException as e:  # noqa: BLE001 - every waiter gets the error
            fut.set_exception(e)
            return

        def settle(w: asyncio.Future) -> None:
            if w.exception() is not None:
                fut.set_exception(w.exception())
            else:
                fut.set_result(None)

        written.add_done_callback(settle)
