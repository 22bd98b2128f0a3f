"""GroupCoordinatorActor: the consumer groups whose ``__consumer_offsets`` partition this node leads.

As in Kafka, the coordinator of a group is the leader of the group's partition of
``__consumer_offsets`` (a group's records all live in the partition its id hashes
to). Each node has one coordinator actor (``group-coordinator-<node id>``, pinned
there, created on first use), hosting the classic group state machine
(:mod:`logan_ray.groups.coordinator`) for the partitions its node leads. Its methods
take and return the Kafka protocol's request/response bodies as dicts, so the Kafka
gateway's handlers are one call each, and the Python API's group members speak the
very same protocol (Python apps and Kafka clients can share a group).

Durability: offset commits (and deletes) are appended to ``__consumer_offsets``
through its partition actors with acks=all (Kafka's ``offsets.commit.required.acks``
= -1: fsynced on the leader and, when the topic is replicated, on every ISR member)
before they are acknowledged; each generation's group metadata is appended too.

Failover: a coordinator takes a partition over on the first request for one of its
groups (or at ``ready()``) by replaying it from the leader, and keeps it only while its
node leads it in the epoch it replayed it in (:mod:`logan_ray.groups.ownership`): a
watch asks the router every second, and a write the partition refuses (its leader was
killed, resigned or restarted) makes it check at once. A partition led elsewhere is
given up: its groups are dropped and their requests answered NOT_COORDINATOR, so
clients find the new coordinator (FindCoordinator names the leader's gateway), which
replays the partition. The old coordinator cannot write after the move: only the
partition's leader appends, and the old leader's actor is killed (failover) or refuses
appends (controlled move) before the new one is elected.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from logan_ray.common.errors import LeaderNotAvailableError, NotCoordinatorError, NotLeaderOrFollowerError, PartitionHibernatedError
from logan_ray.groups import OFFSETS_TOPIC, offsets_log, ownership
from logan_ray.groups.coordinator import Coordinator
from logan_ray.groups.core import GroupConfig
from logan_ray.protocol import errors as E
from logan_ray.storage.batch_header import iter_headers
from logan_ray.storage.errors import FencedLeaderEpochError
from logan_ray.storage.records import decode_batch

from .group_metrics import GroupMetrics
from .group_txn_offsets import TxnOffsets
from .names import COORDINATOR_NAME, NAMESPACE, ROUTER_NAME

log = logging.getLogger("logan_ray.groups")

OFFSETS_PARTITIONS = 8
_UNREAD = object()  # no closed-folder figures read ahead for a partition
REPLAY_CHUNK = 8 << 20
TOPIC_CACHE_S = 5.0
WATCH_INTERVAL_S = 1.0  # how often a coordinator checks that its node still leads its partitions
OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": str(64 << 20)}


def coordinator_name(node_id: str) -> str:
    """The name of the coordinator actor of node ``node_id``."""
    return f"{COORDINATOR_NAME}-{node_id}"


class GroupCoordinatorActor:
    def __init__(self, config: dict[str, Any] | None = None, offsets_partitions: int = OFFSETS_PARTITIONS,
                 metrics_interval_s: float = 10.0) -> None:
        self.config = GroupConfig(**(config or {}))
        self.offsets_partitions = offsets_partitions  # until the router says how many the topic has
        self.metrics_interval_s = metrics_interval_s
        self.node_id = ray.get_runtime_context().get_node_id()
        self.coord = Coordinator(self.config)
        #: offsets held by open transactions (TxnOffsetCommit), applied or dropped by their markers
        self._txn_offsets = TxnOffsets(self.coord, self._own, self._commit_parts, self._partition,
                                       self._write_records)
        self._started: asyncio.Task | None = None
        self._owned: dict[int, int] = {}  # partition -> leader epoch it was replayed in (served here)
        self._taking: dict[int, asyncio.Task] = {}  # partitions being replayed
        #: closed-folder figures of inactive partitions read for a takeover together (_take_all), used once
        self._closed_read: dict[int, dict | None] = {}
        self._handles: dict[int, Any] = {}  # partition -> its leader's actor (absent: not started yet)
        self._queues: dict[int, list[tuple[list, asyncio.Future]]] = {}
        self._writers: dict[int, asyncio.Task] = {}
        self._wake: asyncio.Event | None = None
        self._tasks: list[asyncio.Task] = []
        self._topics: dict[str, int | None] = {}
        self._topics_at: dict[str, float] = {}
        self._metrics = GroupMetrics()
        self.loaded_records = 0
        self.skipped_records = 0  # undecodable records/batches of __consumer_offsets skipped during replay
        self.load_ms = 0.0
        self.takeovers = 0  # partitions replayed here
        self.resignations = 0  # partitions given up because another node (or epoch) leads them
        logging.getLogger("logan_ray").setLevel(logging.INFO)
        self._restart_replay: asyncio.Task | None = None
        if ray.get_runtime_context().was_current_actor_reconstructed:
            # Replay right away after a crash, not on the first request. A task on our own loop (an
            # async actor's constructor runs on it), not a call to our own handle: Ray fails a call
            # submitted while it still sees this actor as restarting.
            self._restart_replay = asyncio.get_running_loop().create_task(self._replay_after_restart())

    async def _replay_after_restart(self) -> None:
        try:
            await self.ready()
        except Exception as e:  # the first request replays then
            log.warning("group coordinator: replay after a restart failed: %s", e)

    # ============================================================ loading
    async def ready(self) -> int:
        """Replay every ``__consumer_offsets`` partition this node leads; returns how many groups it serves."""
        started = time.perf_counter()
        await self._take_all()
        self.load_ms = (time.perf_counter() - started) * 1e3
        log.info("group coordinator on %s up: %d groups from %d records of %s (partitions %s) in %.1f ms",
                 self.node_id[:8], len(self.coord.groups), self.loaded_records, OFFSETS_TOPIC, sorted(self._owned),
                 self.load_ms)
        return len(self.coord.groups)

    async def _start(self) -> None:
        if self._started is None:
            self._started = asyncio.get_running_loop().create_task(self._start_loops())
        await asyncio.shield(self._started)

    async def _start_loops(self) -> None:
        route = await self._route()
        self.offsets_partitions = len(route["partitions"])
        self._wake = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._timer_loop()), loop.create_task(self._metrics_loop()),
                       loop.create_task(self._watch_loop())]

    async def _router(self):
        return ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)

    async def _route(self) -> dict[str, Any]:
        """The router's view of __consumer_offsets: leader node, epoch and handle of each partition."""
        routes = await (await self._router()).route_with_ids.remote([OFFSETS_TOPIC])
        route = routes.get(OFFSETS_TOPIC)
        if route is None:
            raise RuntimeError(f"{OFFSETS_TOPIC} does not exist (the router creates it at its start)")
        return route

    def _partition(self, group_id: str) -> int:
        return offsets_log.partition_for_group(group_id, self.offsets_partitions)

    def _groups_of(self, part: int) -> list[str]:
        return [gid for gid in self.coord.groups if self._partition(gid) == part]

    async def _own(self, group_id: str) -> int:
        """The partition of ``group_id``, replayed here first if needed; NotCoordinatorError when another
        node leads it (the client asks FindCoordinator again)."""
        await self._start()
        part = self._partition(group_id)
        if part not in self._owned:
            await self._take_over(part)
        if part not in self._owned:
            raise NotCoordinatorError(f"group {group_id!r}: {OFFSETS_TOPIC}-{part} is not led by this node "
                                      f"({self.node_id[:8]}); find the coordinator again")
        return part

    async def _owner(self, group_id: str) -> int | None:
        """:meth:`_own` for APIs that answer per group: None instead of NotCoordinatorError."""
        try:
            return await self._own(group_id)
        except NotCoordinatorError:
            return None

    async def _take_all(self) -> None:
        """Take over every partition this node leads (ListGroups, metrics and ``ready`` need them all)."""
        await self._start()
        route = await self._route()
        mine = [p for p in range(len(route["partitions"]))
                if p not in self._owned and ownership.owns(self.node_id, ownership.leadership(route, p))]
        inactive = [p for p in mine if route["partitions"][p][0] is None and p not in self._taking]
        if len(inactive) > 1:
            # one read of their folders for all of them: a read each ran a Ray task each at once, and Ray
            # started a worker process for each (eight per node at every start, ~1 s of CPU apiece here)
            stats = await (await self._router()).closed_stats.remote([(OFFSETS_TOPIC, p) for p in inactive])
            self._closed_read.update((p, stats.get((OFFSETS_TOPIC, p))) for p in inactive)
        try:
            await asyncio.gather(*(self._take_over(p) for p in mine))
        finally:  # figures not used now (a takeover already under way) must not serve a later one
            for p in inactive:
                self._closed_read.pop(p, None)

    async def _take_over(self, part: int) -> None:
        task = self._taking.get(part)
        if task is None or task.done():
            task = self._taking[part] = asyncio.get_running_loop().create_task(self._replay_partition(part))
        await asyncio.shield(task)

    async def _replay_partition(self, part: int) -> None:
        """Become the coordinator of ``part``'s groups if this node leads it: replay it from its leader."""
        route = await self._route()
        lead = ownership.leadership(route, part)
        if not ownership.owns(self.node_id, lead) or part in self._owned:
            return
        started = time.perf_counter()
        router = await self._router()
        closed = None  # an inactive partition's offsets, read from its folder without starting it
        read_before = self._closed_read.pop(part, _UNREAD)
        if route["partitions"][part][0] is None:
            closed = read_before if read_before is not _UNREAD else (
                await router.closed_stats.remote([(OFFSETS_TOPIC, part)])).get((OFFSETS_TOPIC, part))
        handle = None
        n = 0
        if closed is None or closed["log_start_offset"] < closed["log_end_offset"]:  # an empty one stays closed
            handle = await router.activate.remote(OFFSETS_TOPIC, part)
            n = await self._replay(part, handle)
        gids = self._groups_of(part)
        if ownership.leadership(await self._route(), part) != lead:  # it moved during the replay
            self.coord.unload(gids)
            return
        self.coord.finish_loading(gids)
        if handle is not None:
            self._handles[part] = handle
        self._owned[part] = lead.epoch
        self.loaded_records += n
        self.takeovers += 1
        if self._wake is not None:
            self._wake.set()
        log.info("group coordinator on %s: took over %s-%d (epoch %d): %d groups from %d records in %.1f ms",
                 self.node_id[:8], OFFSETS_TOPIC, part, lead.epoch, len(gids), n,
                 (time.perf_counter() - started) * 1e3)

    async def _replay(self, part: int, handle: Any) -> int:
        """Apply the partition from its log start to its log end (not the high watermark: see
        ``PartitionActor.fetch_to_log_end``); returns the records applied."""
        pos, n = (await handle.offsets.remote())[0], 0
        end = pos + 1
        while pos < end:
            data, end, log_start = await handle.fetch_to_log_end.remote(pos, REPLAY_CHUNK)
            if not data:
                if log_start > pos:
                    pos = log_start
                    continue
                break
            nxt = pos
            for bpos, h in iter_headers(data):
                nxt = max(nxt, h.next_offset)
                n += self._replay_batch(data, bpos, pos)
            if nxt == pos:  # nothing readable here: a broken tail; stop rather than spin
                log.error("group coordinator: cannot read %s-%d past offset %d; replay stops there",
                          OFFSETS_TOPIC, part, pos)
                break
            pos = nxt
        return n

    def _prepare(self, part: int) -> None:
        """A group is joining: start its partition's actor now, during the rebalance (which waits
        ``group.initial.rebalance.delay.ms`` for a new group anyway), so neither its first metadata
        write nor its first commit, made while its members' traffic flows, waits for a process."""
        epoch = self._owned.get(part)
        if epoch is not None:  # asks the router each time: a handle kept here may be of a hibernated actor
            self._background([asyncio.get_running_loop().create_task(self._leader_handle(part, epoch, fresh=True))])

    def _give_up(self, part: int, why: str) -> None:
        """Another node (or a later epoch) leads ``part``: drop its groups; their clients get NOT_COORDINATOR."""
        if self._owned.pop(part, None) is None:
            return
        self._handles.pop(part, None)
        gone = self.coord.unload(self._groups_of(part))
        self.resignations += 1
        log.warning("group coordinator on %s: gave up %s-%d (%s): %d groups", self.node_id[:8], OFFSETS_TOPIC,
                    part, why, len(gone))

    async def _check_ownership(self) -> None:
        route = await self._route()
        for part in ownership.lost(self.node_id, self._owned, route):
            lead = ownership.leadership(route, part) if part < len(route["partitions"]) else None
            self._give_up(part, f"led by {lead.node_id[:8] if lead and lead.node_id else 'no node'} "
                                f"in epoch {lead.epoch if lead else '?'}")

    async def _watch_loop(self) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL_S)
            if not self._owned:
                continue
            try:
                await self._check_ownership()
            except Exception as e:  # the router restarting: try again next round
                log.warning("group coordinator: ownership check failed: %s", e)

    def _replay_batch(self, data: bytes, bpos: int, start: int) -> int:
        """Apply one batch of __consumer_offsets; a batch or record that cannot be decoded is
        logged and skipped, so one bad record cannot make every group API fail forever."""
        try:
            h, records = decode_batch(data, bpos)
        except Exception as e:  # CRC, framing, a decompression bomb...
            self.skipped_records += 1
            log.error("group coordinator: skipping an undecodable batch of %s at position %d: %s",
                      OFFSETS_TOPIC, bpos, e)
            return 0
        if h.is_control:
            return 0
        n = 0
        for r in records:
            if r.offset < start:
                continue
            try:
                self.coord.load(r.key, r.value)
                n += 1
            except Exception as e:
                self.skipped_records += 1
                log.error("group coordinator: skipping record %d of %s: cannot decode it: %r",
                          r.offset, OFFSETS_TOPIC, e)
        return n

    # ============================================================= timers
    async def _timer_loop(self) -> None:
        assert self._wake is not None
        while True:
            deadline = self.coord.next_deadline()
            timeout = None if deadline is None else max(0.0, (deadline - self.coord.clock()) / 1000.0)
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            try:
                self.coord.tick()
                self._background(self._flush_outbox())
            except Exception:  # a bug in one timer must not stop session expiry for every group
                log.exception("group coordinator: timer failed")

    def _after(self) -> list[asyncio.Future]:
        """After every state change: re-arm the timer loop and write queued group metadata."""
        if self._wake is not None:
            self._wake.set()
        return self._flush_outbox()

    # ============================================================= writes
    def _flush_outbox(self) -> list[asyncio.Future]:
        out, self.coord.outbox = self.coord.outbox, []
        by_part: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for gid, key, value in out:
            by_part.setdefault(self._partition(gid), []).append((key, value))
        return [self._enqueue(p, recs) for p, recs in by_part.items()]

    def _enqueue(self, part: int, records: list[tuple[bytes, bytes | None]]) -> asyncio.Future:
        """Queue records for one partition; one writer per partition appends them in order, batched.

        Each entry carries the epoch the partition is owned in now: records made from state
        that was given up since (another leader, or a later epoch replayed again) are refused."""
        fut = asyncio.get_running_loop().create_future()
        self._queues.setdefault(part, []).append((records, fut, self._owned.get(part)))
        writer = self._writers.get(part)
        if writer is None or writer.done():
            self._writers[part] = asyncio.get_running_loop().create_task(self._write(part))
        return fut

    async def _leader_handle(self, part: int, epoch: int, fresh: bool = False) -> Any:
        """The actor of the partition while this node leads it in ``epoch`` (started if inactive;
        ``fresh``: asked of the router even when one is known)."""
        handle = None if fresh else self._handles.get(part)
        if handle is None:
            handle = await (await self._router()).activate.remote(OFFSETS_TOPIC, part)
            if self._owned.get(part) != epoch:
                raise NotCoordinatorError(f"{OFFSETS_TOPIC}-{part} moved while it started")
            self._handles[part] = handle
        return handle

    async def _still_leading(self, part: int, epoch: int, stale: Any) -> Any:
        """After an append failed on the partition's actor: its current actor if this node still leads
        it in ``epoch`` (the actor hibernated: same leader, same epoch), else give it up (NOT_COORDINATOR).
        A killed or resigned leader means the partition moved; a restarted one may have cut its log."""
        router = await self._router()
        handle, _hibernated = await router.reactivate.remote(OFFSETS_TOPIC, part,
                                                             stale._actor_id.hex() if stale is not None else None)
        lead = ownership.leadership(await self._route(), part)
        if ownership.owns(self.node_id, lead) and lead.epoch == epoch and self._owned.get(part) == epoch:
            self._handles[part] = handle
            return handle
        self._give_up(part, f"its append was refused; led by {(lead.node_id or 'no node')[:8]} in epoch {lead.epoch}")
        raise NotCoordinatorError(f"{OFFSETS_TOPIC}-{part} is no longer led by this node")

    async def _write(self, part: int) -> None:
        queue = self._queues[part]
        while queue:
            epoch = queue[0][2]
            items = []
            while queue and queue[0][2] == epoch:
                items.append(queue.pop(0))
            error: BaseException | None = None
            if epoch is None or self._owned.get(part) != epoch:
                error = NotCoordinatorError(f"{OFFSETS_TOPIC}-{part} is no longer led by this node")
            else:
                batch = offsets_log.build_records([r for recs, _, _ in items for r in recs])
                handle = None
                for attempt in range(2):
                    try:
                        handle = await self._leader_handle(part, epoch)
                        await handle.append_durable.remote(batch, internal=True)
                        error = None
                        break
                    except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError,
                            PartitionHibernatedError, NotLeaderOrFollowerError, FencedLeaderEpochError) as e:
                        error = e
                        if attempt:
                            break
                        try:  # hibernated (retry on its next actor), or the partition moved (give it up)
                            await self._still_leading(part, epoch, handle)
                        except Exception as e2:
                            error = e2
                            break
                    except Exception as e:
                        error = e
                        break
            for _, fut, _ in items:
                if fut.done():
                    continue
                if error is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(error)
            if error is not None:
                log.warning("group coordinator: writing %s-%d failed: %s", OFFSETS_TOPIC, part, error)

    async def _write_records(self, records: list[tuple[str, bytes, bytes | None]]) -> None:
        by_part: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for gid, key, value in records:
            by_part.setdefault(self._partition(gid), []).append((key, value))
        await asyncio.gather(*(self._enqueue(p, recs) for p, recs in by_part.items()))

    @staticmethod
    def _background(futs: list[asyncio.Future]) -> None:
        """Group metadata is written best-effort, off the request path: a failure is logged, not returned.

        (The first write may start the partition's actor, which takes seconds; no SyncGroup should wait for it.)
        """
        def done(f: asyncio.Future) -> None:
            if not f.cancelled() and f.exception() is not None:
                log.warning("group coordinator: storing group metadata failed: %s", f.exception())

        for f in futs:
            f.add_done_callback(done)

    # ========================================================= membership
    async def join_group(self, body: dict, version: int = 9, client_id: str = "", client_host: str = "") -> dict:
        """JoinGroup: returns when the rebalance completes (or at once for errors and MEMBER_ID_REQUIRED)."""
        part = await self._own(body["group_id"])
        self._prepare(part)
        fut = asyncio.get_running_loop().create_future()
        self.coord.join_group(body, lambda r: fut.done() or fut.set_result(r), version=version,
                              client_id=client_id, client_host=client_host)
        self._background(self._after())
        return {"throttle_time_ms": 0, **(await fut)}

    async def sync_group(self, body: dict, version: int = 5) -> dict:
        await self._own(body["group_id"])
        fut = asyncio.get_running_loop().create_future()
        self.coord.sync_group(body, lambda r: fut.done() or fut.set_result(r), version=version)
        self._background(self._after())
        return {"throttle_time_ms": 0, **(await fut)}

    async def heartbeat(self, body: dict) -> dict:
        await self._own(body["group_id"])
        resp = self.coord.heartbeat(body)
        self._background(self._after())
        return {"throttle_time_ms": 0, **resp}

    async def leave_group(self, body: dict, version: int = 5) -> dict:
        await self._own(body["group_id"])
        resp = self.coord.leave_group(body, version=version)
        self._background(self._after())
        return {"throttle_time_ms": 0, **resp}

    # ============================================================ offsets
    async def _partition_counts(self, topics: set[str]) -> dict[str, int | None]:
        """Partition counts (None: no such topic), cached briefly; a miss asks the router."""
        now = time.monotonic()
        stale = [t for t in topics if t not in self._topics or now - self._topics_at.get(t, 0) > TOPIC_CACHE_S]
        if stale:
            router = await self._router()
            routes = await router.route.remote(stale, activate=False)  # counts only: wake nothing
            for t in stale:
                self._topics[t] = None if routes.get(t) is None else len(routes[t])
                self._topics_at[t] = now
        return {t: self._topics[t] for t in topics}

    async def _commit_parts(self, body: dict) -> tuple[list[tuple], set[tuple[str, int]]]:
        """The (topic, partition, offset, leader epoch, metadata) of an OffsetCommit or TxnOffsetCommit
        body, and those of unknown partitions (a topic created a moment ago is asked again first)."""
        parts = [(t["name"], p["partition_index"], p["committed_offset"], p.get("committed_leader_epoch", -1),
                  p.get("committed_metadata"))
                 for t in body.get("topics") or () for p in t.get("partitions") or ()]
        counts = await self._partition_counts({t for t, *_ in parts})
        unknown = {(t, p) for t, p, *_ in parts if counts.get(t) is None or not 0 <= p < counts[t]}
        if unknown:  # maybe created a moment ago: ask again before refusing
            for t in {t for t, _ in unknown}:
                self._topics_at.pop(t, None)
            counts = await self._partition_counts({t for t, _ in unknown})
            unknown = {(t, p) for t, p in unknown if counts.get(t) is None or not 0 <= p < counts[t]}
        return parts, unknown

    async def offset_commit(self, body: dict, version: int = 9) -> dict:
        """OffsetCommit: acknowledged only once the commit records are in __consumer_offsets (acks=all)."""
        gid = body["group_id"]
        await self._own(gid)
        parts, unknown = await self._commit_parts(body)
        errors, accepted = self.coord.validate_commit(gid, body.get("generation_id_or_member_epoch", -1),
                                                      body.get("member_id") or "", body.get("group_instance_id"),
                                                      parts, unknown)
        self._background(self._after())
        if accepted:
            records = [(gid, offsets_log.offset_key(gid, t, p), offsets_log.encode_offset(e)) for t, p, e in accepted]
            try:
                await self._write_records(records)
            except Exception as e:
                code = E.NOT_COORDINATOR if isinstance(e, NotCoordinatorError) else E.COORDINATOR_NOT_AVAILABLE
                for t, p, _ in accepted:
                    errors[(t, p)] = code
            else:
                self.coord.apply_commit(gid, accepted)
        topics: dict[str, list[dict]] = {}
        for t, p, *_ in parts:
            topics.setdefault(t, []).append({"partition_index": p, "error_code": errors[(t, p)]})
        return {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

    def _fetch_group(self, gid: str, topics: list[dict] | None, version: int) -> list[dict]:
        wanted = None if topics is None else [(t["name"], list(t.get("partition_indexes") or ())) for t in topics]
        got = self.coord.fetch_offsets(gid, wanted)
        out = []
        for name, rows in got.items():
            out.append({"name": name, "partitions": [
                {"partition_index": p, "committed_offset": e.offset if e else -1,
                 "committed_leader_epoch": e.leader_epoch if e else -1,
                 "metadata": e.metadata if e is not None and e.metadata is not None else "",
                 "error_code": E.NONE} for p, e in rows]})
        return out

    async def txn_offset_commit(self, body: dict, version: int = 3) -> dict:
        """TxnOffsetCommit: checked like OffsetCommit, held until the transaction's marker (group_txn_offsets.py)."""
        return await self._txn_offsets.commit_request(body)

    async def complete_txn_offsets(self, partition: int, producer_id: int, commit: bool) -> int:
        """The transaction coordinator wrote ``producer_id``'s marker into ``__consumer_offsets``-``partition``:
        apply (commit) or drop (abort) the offsets its transaction held there; returns how many were written."""
        return await self._txn_offsets.complete(partition, producer_id, commit)

    async def offset_fetch(self, body: dict, version: int = 9) -> dict:
        """OffsetFetch for one group (v0-7) or several (v8+); unknown partitions read as offset -1."""
        if version >= 8:
            groups = []
            for g in body.get("groups") or ():
                if await self._owner(g["group_id"]) is None:
                    groups.append({"group_id": g["group_id"], "topics": [], "error_code": E.NOT_COORDINATOR})
                    continue
                groups.append({"group_id": g["group_id"], "topics": self._fetch_group(g["group_id"], g.get("topics"),
                                                                                      version),
                               "error_code": E.NONE})
            return {"throttle_time_ms": 0, "groups": groups}
        await self._own(body["group_id"])
        return {"throttle_time_ms": 0, "topics": self._fetch_group(body["group_id"], body.get("topics"), version),
                "error_code": E.NONE}

    # ============================================================== admin
    async def list_groups(self, body: dict | None = None) -> dict:
        """The groups this node coordinates (a Kafka admin client asks every broker, as here)."""
        await self._take_all()
        body = body or {}
        return {"throttle_time_ms": 0, "error_code": E.NONE,
                "groups": self.coord.list_groups(body.get("states_filter") or (), body.get("types_filter") or ())}

    async def describe_groups(self, body: dict, version: int = 5) -> dict:
        out = []
        for gid in body.get("groups") or ():
            if await self._owner(gid) is None:
                out.append({"error_code": E.NOT_COORDINATOR, "error_message": None, "group_id": gid,
                            "group_state": "", "protocol_type": "", "protocol_data": "", "members": [],
                            "authorized_operations": -(2**31)})
                continue
            d = self.coord.describe_group(gid)
            if d is None:
                code = E.GROUP_ID_NOT_FOUND if version >= 6 else E.NONE
                out.append({"error_code": code, "error_message": f"group {gid} not found" if version >= 6 else None,
                            "group_id": gid, "group_state": "Dead", "protocol_type": "", "protocol_data": "",
                            "members": [], "authorized_operations": -(2**31)})
                continue
            out.append({"error_code": E.NONE, "error_message": None, "group_id": gid,
                        "group_state": d["group_state"], "protocol_type": d["protocol_type"],
                        "protocol_data": d["protocol_data"], "members": d["members"],
                        "authorized_operations": -(2**31)})
        return {"throttle_time_ms": 0, "groups": out}

    async def delete_groups(self, body: dict) -> dict:
        names = list(body.get("groups_names") or ())
        mine = [g for g in names if await self._owner(g) is not None]
        results, tombstones = self.coord.delete_groups(mine)
        results.update({g: E.NOT_COORDINATOR for g in names if g not in mine})
        self._background(self._after())
        if tombstones:
            try:
                await self._write_records(tombstones)
            except Exception as e:
                code = E.NOT_COORDINATOR if isinstance(e, NotCoordinatorError) else E.COORDINATOR_NOT_AVAILABLE
                for gid in {g for g, _, _ in tombstones}:
                    results[gid] = code
        return {"throttle_time_ms": 0, "results": [{"group_id": g, "error_code": results[g]} for g in names]}

    async def offset_delete(self, body: dict) -> dict:
        gid = body["group_id"]
        await self._own(gid)
        parts = [(t["name"], p["partition_index"]) for t in body.get("topics") or () for p in t.get("partitions") or ()]
        top, errors, tombstones = self.coord.delete_offsets(gid, parts)
        self._background(self._after())
        if tombstones:
            try:
                await self._write_records(tombstones)
            except Exception as e:
                top = E.NOT_COORDINATOR if isinstance(e, NotCoordinatorError) else E.COORDINATOR_NOT_AVAILABLE
        topics: dict[str, list[dict]] = {}
        if top == E.NONE:
            for t, p in parts:
                topics.setdefault(t, []).append({"partition_index": p, "error_code": errors[(t, p)]})
        return {"error_code": top, "throttle_time_ms": 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

    # ========================================================= for Python
    async def describe(self, group_id: str) -> dict | None:
        """One group for the CLI and the Python API: state, members, and per partition committed/end/lag."""
        await self._own(group_id)
        g = self.coord.groups.get(group_id)
        if g is None:
            return None
        d = self.coord.describe_group(group_id)
        ends = await self._end_offsets({t for t, _ in g.offsets})
        offsets = []
        for (t, p), e in sorted(g.offsets.items()):
            end = ends.get((t, p))
            offsets.append({"topic": t, "partition": p, "committed": e.offset, "metadata": e.metadata,
                            "end": end, "lag": None if end is None else max(0, end - e.offset)})
        d["offsets"] = offsets
        return d

    async def _end_offsets(self, topics: set[str]) -> dict[tuple[str, int], int]:
        if not topics:
            return {}
        router = await self._router()
        out: dict[tuple[str, int], int] = {}
        results = await asyncio.gather(*(router.offsets.remote(t) for t in sorted(topics)), return_exceptions=True)
        for t, res in zip(sorted(topics), results):
            if isinstance(res, BaseException):
                continue
            for p, (_start, end) in res.items():
                out[(t, int(p))] = end
        return out

    async def overview(self) -> list[dict]:
        """The groups this node coordinates (the console and metrics gather every node's)."""
        await self._take_all()
        return self.coord.overview()

    async def configure(self, **config: Any) -> dict:
        """Change group settings at runtime (tests use short delays and session timeouts)."""
        unknown = set(config) - GroupConfig.fields()
        if unknown:
            raise ValueError(f"unknown group settings: {sorted(unknown)}")
        for k, v in config.items():
            setattr(self.config, k, v)
        return dict(self.config.__dict__)

    async def stats(self) -> dict:
        await self._start()
        return {"groups": len(self.coord.groups), "loaded_records": self.loaded_records, "load_ms": self.load_ms,
                "skipped_records": self.skipped_records, "owned": dict(sorted(self._owned.items())),
                "takeovers": self.takeovers, "resignations": self.resignations,
                "timers": len(self.coord.timers), "offsets_partitions": self.offsets_partitions,
                "node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "config": dict(self.config.__dict__)}

    async def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    async def pid(self) -> int:
        return os.getpid()

    # ============================================================ metrics
    async def _metrics_loop(self) -> None:
        while True:
            try:
                await self.publish_metrics()
            except Exception as e:
                log.warning("group coordinator: metrics failed: %s", e)
            await asyncio.sleep(self.metrics_interval_s)

    async def publish_metrics(self) -> int:
        """Members, generation, state and per-partition lag of every group, to Ray's metrics endpoint."""
        groups = list(self.coord.groups.values())
        ends = await self._end_offsets({t for g in groups for t, _ in g.offsets})
        for g in groups:
            self._metrics.group(g.group_id, len(g.members), g.generation, g.state, g.rebalances)
            for (t, p), e in g.offsets.items():
                end = ends.get((t, p))
                self._metrics.partition(g.group_id, t, p, e.offset, None if end is None else max(0, end - e.offset))
        return len(groups)


def coordinator_actor_class():
    return ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0, max_concurrency=10_000)(GroupCoordinatorActor)


def coordinator_on(node_id: str, config: dict[str, Any] | None = None, offsets_partitions: int | None = None):
    """The coordinator actor of node ``node_id``, created there (detached, pinned) when absent."""
    try:
        return ray.get_actor(coordinator_name(node_id), namespace=NAMESPACE)
    except ValueError:
        pass
    return coordinator_actor_class().options(
        name=coordinator_name(node_id), namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
    ).remote(config, offsets_partitions or OFFSETS_PARTITIONS)


def coordinator_node(group_id: str) -> str:
    """The node leading ``group_id``'s partition of __consumer_offsets (where its coordinator lives);
    LeaderNotAvailableError while that partition has no leader."""
    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    route = ray.get(router.route_with_ids.remote([OFFSETS_TOPIC]))[OFFSETS_TOPIC]
    part = offsets_log.partition_for_group(group_id, len(route["partitions"]))
    lead = ownership.leadership(route, part)
    if lead.node_id is None:
        raise LeaderNotAvailableError(f"{OFFSETS_TOPIC}-{part} (group {group_id!r}) has no leader yet",
                                      route["partitions"][part][1], None)
    return lead.node_id


def group_coordinator(group_id: str = ""):
    """The coordinator actor handle for ``group_id``: the one on the node leading its partition."""
    return coordinator_on(coordinator_node(group_id))


def coordinator_nodes() -> list[str]:
    """The nodes leading some partition of __consumer_offsets (their coordinators hold every group)."""
    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    route = ray.get(router.route_with_ids.remote([OFFSETS_TOPIC]))[OFFSETS_TOPIC]
    leads = (ownership.leadership(route, p).node_id for p in range(len(route["partitions"])))
    return sorted({n for n in leads if n is not None})


#: a coordinator that cannot run where it was asked to: its node is gone (Ray declared it dead)
_NODE_GONE = (ray.exceptions.ActorUnschedulableError, ray.exceptions.RayActorError)


def ensure_group_coordinator(offsets_partitions: int | None = None, timeout: float = 120, **config: Any):
    """Create (or find) the coordinator of every node leading a partition of __consumer_offsets, apply
    ``config`` (GroupConfig fields), wait until each has replayed its partitions; returns this node's
    (or, when this node leads none, the first one's) handle.

    A node that leads some of those partitions but is gone for Ray (a lost head whose partitions the
    controller has not moved yet, when a new head's broker starts) gets none: its partitions move to a
    living node, whose coordinator starts when a group asks for it (``group_coordinator``). Before, the
    start failed with ActorUnschedulableError (tests/multihost/test_ray_up.py, the head's loss)."""
    here = ray.get_runtime_context().get_node_id()
    deadline = time.monotonic() + timeout
    while True:
        nodes = coordinator_nodes() or [here]
        handles = {n: coordinator_on(n, config or None, offsets_partitions) for n in nodes}
        gone: set[str] = set()
        for method, kwargs in ((("configure", config),) if config else ()) + (("ready", {}),):
            refs = {n: getattr(h, method).remote(**kwargs) for n, h in handles.items() if n not in gone}
            for n, ref in refs.items():
                try:
                    ray.get(ref, timeout=max(0.1, deadline - time.monotonic()))
                except _NODE_GONE:
                    gone.add(n)
        if not gone:
            return handles.get(here) or handles[nodes[0]]
        alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        ready = [n for n in nodes if n not in gone]
        if ready and not gone & alive:
            log.warning("group coordinators: none on node(s) %s, gone for Ray; their groups follow their "
                        "__consumer_offsets partitions to a living node", [n[:8] for n in sorted(gone)])
            return handles.get(here) or handles[ready[0]]
        if time.monotonic() > deadline:
            raise TimeoutError(f"no group coordinator started on node(s) {sorted(gone)} within {timeout} s")
        time.sleep(1.0)  # a node Ray still counts alive (or every node gone): leadership moves, ask again


def stop_group_coordinator() -> None:
    """Remove every node's coordinator actor (their state is in __consumer_offsets; nothing to flush)."""
    prefix = COORDINATOR_NAME + "-"
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry.get("namespace") == NAMESPACE and entry.get("name", "").startswith(prefix):
            try:
                ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE), no_restart=True)
            except ValueError:
                pass
