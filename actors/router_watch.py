"""Node watch, broker heartbeats and retention rounds: what the router does on its own.

A mixin of RouterActor. A node is gone for the controller when either comes first: Ray's
view of nodes (the GCS, polled every ``WATCH_INTERVAL_S``; Ray 2.60 has no public
subscription to node changes) says it is dead, or its gateway's broker session lapsed
(``broker_heartbeat``, checked every ``LAPSE_CHECK_S``; actors/broker_lease.py). Then
replicated partitions it led get a new leader from the ISR; partitions of a gone node
go offline and come back with it. A node Ray announces will go (its drain, read from the
GCS at the same interval) is drained first (actors/router_drain.py). Inactive partitions are checked for retention, and
their offsets and sizes read, without starting their actors.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from logan_ray.storage.config import TopicConfig

from . import reassignment, replica_placement
from .router_rebalance import tell_followers


log = logging.getLogger("logan_ray.router")
WATCH_INTERVAL_S = 2.0  # how often Ray's view of nodes is read (partitions to take offline or bring back)
#: the watch's shortest sleep: a session lapses at most this late (it sleeps until the next possible lapse,
#: BrokerSessions.next_lapse_in, or the next poll of Ray's view, not on a 10 Hz timer: an idle router was
#: woken ten times a second for nothing; bench/idle_cpu.py)
LAPSE_CHECK_S = 0.1


class NodeWatch:
    # ------------------------------------------------------------ node watch
    def _watching(self) -> None:
        # a call reached this incarnation: leases its predecessor granted end one session from now at the
        # latest (gateways may extend theirs while Ray restarts the router: actors/broker_lease.py)
        self._sessions.serving()
        if self._watch is None or self._watch.done():
            self._watch = asyncio.get_running_loop().create_task(self._watch_nodes())
        if self._retention is None or self._retention.done():
            self._retention = asyncio.get_running_loop().create_task(self._retention_rounds())
        self._reassigning()  # actors/router_reassign.py: ongoing reassignments go on after a restart

    async def _retention_rounds(self) -> None:
        while True:
            await asyncio.sleep(self.maintenance_interval_s)
            try:
                await self.retention_pass()
            except Exception:
                log.exception("router: retention pass over inactive partitions failed")

    async def retention_pass(self) -> list[tuple[str, int]]:
        """Retention for inactive partitions without a process each: per node, one task reads their
        folders' file names, sizes and time indexes (``closed_folder_due``); only the partitions with
        a segment to delete are activated, apply their retention and hibernate again. Returns those.

        Runs every ``maintenance_interval_s`` (the interval active partitions check retention at);
        active partitions apply retention themselves.
        """
        if self._stopping:  # partitions going inactive this moment are checked too, once they are
            await asyncio.wait([asyncio.shield(f) for f in list(self._stopping.values())], timeout=30)
        by_node: dict[str, list[tuple[str, int, str, dict[str, str]]]] = {}
        for topic, t in list(self._meta["topics"].items()):
            cfg = self._effective(t)
            if not cfg.deletes or (cfg.retention_ms < 0 and cfg.retention_bytes < 0):
                continue
            for p in range(t["partitions"]):
                key = (topic, p)
                if key in self._handles or key in self._activating or key in self._stopping \
                        or self._is_offline(topic, p):
                    continue
                by_node.setdefault(t["placement"][str(p)]["node_id"], []).append(
                    (topic, p, self._dir(topic, p), cfg.to_dict()))
        nodes = list(by_node)
        answers = await asyncio.gather(*(_retention_due.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(
            [(d, c) for _t, _p, d, c in by_node[node]]) for node in nodes), return_exceptions=True)
        due = []
        for node, answer in zip(nodes, answers):
            if isinstance(answer, BaseException):
                log.warning("retention check of inactive partitions on node %s failed: %s", node, answer)
                continue
            due += [(t, p) for (t, p, _d, _c), yes in zip(by_node[node], answer) if yes]
        for topic, p in due:
            try:
                handle = await self._activate(topic, p)
                deleted = await handle.apply_retention.remote()
                log.info("retention of inactive partition %s-%d: %d segments deleted", topic, p, deleted)
                await self.hibernate(topic, p, idle_only=False)
            except Exception as e:  # deleted meanwhile, its node gone...: the next round sees it again
                log.warning("retention of inactive partition %s-%d failed: %s", topic, p, e)
        return due

    async def closed_stats(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], dict[str, int]]:
        """Log start/end, size and segment count of inactive partitions, read from their folders by one
        task per node (``ClosedLog``: the checkpoints a clean close wrote), without starting them.

        A folder that is not cleanly closed, a failed node task, or a partition that became active
        meanwhile is left out: the caller asks its actor instead.
        """
        by_node: dict[str, list[tuple[tuple[str, int], str]]] = {}
        for topic, p in keys:
            t = self._meta["topics"].get(topic)
            if t is None or (topic, p) in self._handles or (topic, p) in self._activating \
                    or self._is_offline(topic, p):
                continue
            by_node.setdefault(t["placement"][str(p)]["node_id"], []).append(((topic, p), self._dir(topic, p)))
        nodes = list(by_node)
        answers = await asyncio.gather(*(_folder_stats.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(
            [d for _k, d in by_node[node]]) for node in nodes), return_exceptions=True)
        out = {}
        for node, answer in zip(nodes, answers):
            if isinstance(answer, BaseException):
                log.warning("reading inactive partition folders on node %s failed: %s", node, answer)
                continue
            out.update((k, st) for (k, _d), st in zip(by_node[node], answer) if st is not None)
        return out

    async def broker_heartbeat(self, node_id: str, broker_epoch: int) -> int:
        """A node's gateway is alive and reachable (Kafka's BrokerHeartbeat); returns its broker epoch.

        Sent every ``broker.heartbeat.interval.ms``; without one for ``broker.session.timeout.ms``
        the node is fenced: it leads nothing from then on (its replicated partitions get new leaders
        from their ISR) and its gateway is left out of Metadata. A fenced node's next heartbeat
        registers it again under a new broker epoch, and it follows the partitions it led. Idempotent
        (a retried call gets the same epoch).
        """
        self._watching()
        epoch = self._sessions.heartbeat(node_id, broker_epoch)  # NodeDeclaredDeadError for a node Ray declared dead
        if epoch != broker_epoch:
            log.info("router: broker on node %s registered, broker epoch %d", node_id[:8], epoch)
        if self._brokers_to_meta():  # a new or continued registration: a successor continues it
            self._save_later()
        return epoch

    def _electable(self) -> dict[str, str]:
        """Nodes that may lead: alive in Ray's view and not fenced (node id -> address)."""
        return {n: ip for n, ip in self._alive.items() if not self._sessions.fenced(n)}

    async def _watch_nodes(self) -> None:
        """Elect new leaders when a leader's node dies or is fenced, take partitions offline when their
        node dies, bring them back when it returns, and finish deletions that waited for a node."""
        polled = -WATCH_INTERVAL_S
        while True:
            now = time.monotonic()
            try:
                lapsed = self._sessions.lapse()
                if lapsed and self._brokers_to_meta():  # before any election acts on the fence
                    self._save_later()
                for node in lapsed:
                    log.warning("router: broker on node %s fenced (no heartbeat for %d ms) or, dead for Ray, past "
                                "its last lease", node[:8], self.broker_session_timeout_ms)
                if lapsed or now - polled >= WATCH_INTERVAL_S:
                    polled = now
                    await self._check_nodes()
                    await self._follow_ray_drains()  # leaderships leave a node Ray announced will go
            except Exception:
                log.exception("router: node check failed")
            asleep = time.monotonic()
            pause = self._watch_pause(asleep, polled)
            await asyncio.sleep(pause)
            late = time.monotonic() - asleep - pause
            if late > 0.5:
                # the router's event loop was stalled (not the brokers: their heartbeats wait in its
                # queue): that time must not count against their sessions, or one stall fences them all
                self._sessions.stalled(late)

    def _watch_pause(self, now: float, polled: float) -> float:
        """How long the watch may sleep: until Ray's view is due again or a session or a dead node's last
        lease may lapse, whichever comes first (never below ``LAPSE_CHECK_S``). A heartbeat only pushes a
        lapse later, and a session opened during the sleep lapses a session timeout after it began at the
        earliest (the sleep is never longer), so no lapse is seen later than with a ``LAPSE_CHECK_S`` timer."""
        pause = min(WATCH_INTERVAL_S - (now - polled), self._sessions.session_timeout_s)
        lapse_in = self._sessions.next_lapse_in(now)
        if lapse_in is not None:
            pause = min(pause, lapse_in + 0.005)  # asyncio may wake a hair early: not before the lapse
        return max(LAPSE_CHECK_S, pause)

    async def _check_nodes(self) -> None:
        self._refresh_nodes()
        for node in self._sessions.nodes():
            if node not in self._alive:
                self._sessions.declare_dead(node)  # this node id never comes back; its last lease may still run
        if self._brokers_to_meta():
            self._save_later()
        async with self._lock:
            changed = False
            for topic, p in await self._elect_leaders():  # replicated partitions: failover from the ISR
                changed = True
                self._spawn(topic, p, self._meta["topics"][topic])
            shrunk = self._drop_gone_from_isrs()  # and leave the ISR of every partition they followed
            if shrunk:
                await self._save_soon()  # durable before any leader acts on it
                self._tell_isr(shrunk)
            changed |= await self._adopt_returned_replicas()
            for (topic, p) in list(self._handles):
                place = self._meta["topics"][topic]["placement"][str(p)]
                if place["node_id"] not in self._alive:
                    changed |= self._place(topic, p, self._meta["topics"][topic])
                    self._spawn(topic, p, self._meta["topics"][topic])  # offline, or back at the same address
            for (topic, p) in list(self._offline):
                t = self._meta["topics"].get(topic)
                if t is None:
                    self._offline.pop((topic, p), None)
                    continue
                changed |= self._place(topic, p, t)
                if self._spawn(topic, p, t) is not None:
                    log.info("partition %s-%d is back on node %s", topic, p, t["placement"][str(p)]["node_id"])
            if changed:
                self._save()
            await self._grow_internal_topics()  # __consumer_offsets reaches its replication factor as nodes join
            if self._meta["deleting"]:
                await self._finish_deletions()

    async def _adopt_returned_replicas(self) -> bool:
        """Replicas of nodes Ray declared dead go to a node that came back at the same address
        (``replica_placement.adopt_returned_replicas``), each partition in a new leader epoch (a replica
        set change, as a reassignment); saved once, then the leaders and the new nodes' replica fetchers
        are told. A returned leader (no in-sync replica took over) gets the placement too: the offline
        loop that follows starts it there. True when anything changed. The router's lock is held."""
        changed: list[tuple[str, int, dict[str, Any]]] = []
        new_nodes: set[str] = set()
        for topic, t in list(self._meta["topics"].items()):
            for p in range(t["partitions"]):
                if not replica_placement.replicated(t, p):
                    continue
                rec = self._leader(t, p)
                if reassignment.in_progress(rec):  # its target names node ids: the reassignment decides
                    continue
                leader = t["placement"][str(p)]["node_id"]
                swaps = replica_placement.adopt_returned_replicas(rec, leader, self._alive, self.data_dir, topic, p)
                if not swaps:
                    continue
                rec["epoch"] += 1
                for old, new in swaps:
                    if old == leader:  # no in-sync replica took over: it leads again on its files
                        key = (topic, p)
                        await self._stopped(key)
                        with self._replacing(key):
                            # Ray may still list the gone node's actor (restarting, unschedulable there):
                            # end it, or the new node's start would get it by name
                            await self._kill_old_leader(topic, p)
                            t["placement"][str(p)] = {"node_id": new, "node_ip": self._alive[new]}
                        getattr(self, "_unelectable", set()).discard((topic, p))  # warn again if it goes again
                        log.warning("partition %s-%d: its leader's node %s is back as %s at the same address: "
                                    "it leads again on its files; leader epoch %d", topic, p, old[:8], new[:8],
                                    rec["epoch"])
                        continue
                    log.warning("partition %s-%d: replica of gone node %s taken over by %s at the same address, "
                                "on its folder; leader epoch %d", topic, p, old[:8], new[:8], rec["epoch"])
                    new_nodes.add(new)
                changed.append((topic, p, t))
        if not changed:
            return False
        await self._save_soon()  # durable before the leaders or the new nodes act on it
        # all at once: one after the other, a rebooted node's 19 partitions (the queue topic and the internal
        # ones) waited up to 10 s each for a loaded leader, with the router's lock held
        await asyncio.gather(*(self._tell_leader(topic, p, t) for topic, p, t in changed))
        asyncio.get_running_loop().run_in_executor(None, tell_followers, sorted(new_nodes))
        return True

@ray.remote(num_cpus=0, max_retries=1)
def _retention_due(items: list[tuple[str, dict[str, str]]]) -> list[bool]:
    """Runs on a node: for each (inactive partition folder, effective topic config), is retention due?"""
    from logan_ray.storage.retention import closed_folder_due

    now_ms = int(time.time() * 1000)
    return [closed_folder_due(directory, TopicConfig.from_dict(config), now_ms) for directory, config in items]


@ray.remote(num_cpus=0, max_retries=1)
def _folder_stats(directories: list[str]) -> list[dict[str, int] | None]:
    """Runs on a node: the stats of each cleanly closed partition folder (None when it is not)."""
    from logan_ray.storage.closed_log import closed_folder_stats

    return [closed_folder_stats(directory) for directory in directories]
