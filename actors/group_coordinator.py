"""GroupCoordinatorActor: consumer groups and committed offsets for the whole cluster.

One detached, named async actor hosts the classic group state machine
(:mod:`logan_ray.groups.coordinator`). Its methods take and return the Kafka
protocol's request/response bodies as dicts, so the Kafka gateway's handlers are
one call each, and the Python API's group members speak the very same protocol
(Python apps and Kafka clients can share a group).

Durability: offset commits (and deletes) are appended to the internal compacted
topic ``__consumer_offsets`` through its partition actors, with acks=all (on one
node: fsynced, as Kafka's ``offsets.commit.required.acks`` = -1), before they are
acknowledged; each generation's group metadata is appended too. On start the
actor replays every partition of that topic from its log start, so a restarted
coordinator (or broker) knows every committed offset and every stable group.

Routing: :func:`coordinator_name` maps a group to its coordinator. Today every
group maps to the one actor; splitting means giving each coordinator a share of
the ``__consumer_offsets`` partitions (a group's records all live in the
partition its id hashes to), with no change to the record format.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from logan_ray.common.errors import PartitionHibernatedError, TopicExistsError
from logan_ray.groups import OFFSETS_TOPIC, offsets_log
from logan_ray.groups.coordinator import Coordinator
from logan_ray.groups.core import GroupConfig
from logan_ray.protocol import errors as E
from logan_ray.storage.batch_header import iter_headers
from logan_ray.storage.records import decode_batch

from .group_metrics import GroupMetrics
from .names import COORDINATOR_NAME, NAMESPACE, ROUTER_NAME

log = logging.getLogger("logan_ray.groups")

OFFSETS_PARTITIONS = 8
REPLAY_CHUNK = 8 << 20
TOPIC_CACHE_S = 5.0
OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": str(64 << 20)}


def coordinator_name(group_id: str) -> str:
    """The actor that coordinates ``group_id`` (one for all groups for now)."""
    return COORDINATOR_NAME


class GroupCoordinatorActor:
    def __init__(self, config: dict[str, Any] | None = None, offsets_partitions: int = OFFSETS_PARTITIONS,
                 metrics_interval_s: float = 10.0) -> None:
        self.config = GroupConfig(**(config or {}))
        self.offsets_partitions = offsets_partitions
        self.metrics_interval_s = metrics_interval_s
        self.coord = Coordinator(self.config)
        self._load_task: asyncio.Task | None = None
        self._create_lock = asyncio.Lock()
        self._handles: list[Any] = []
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
        logging.getLogger("logan_ray").setLevel(logging.INFO)
        ctx = ray.get_runtime_context()
        if ctx.was_current_actor_reconstructed:
            ctx.current_actor.ready.remote()  # replay right away after a crash, not on the first request

    # ============================================================ loading
    async def ready(self) -> int:
        """Wait until __consumer_offsets is replayed; returns how many groups are known."""
        await self._ensure_loaded()
        return len(self.coord.groups)

    async def _ensure_loaded(self) -> None:
        if self._load_task is None:
            self._load_task = asyncio.get_running_loop().create_task(self._load())
        await asyncio.shield(self._load_task)

    async def _router(self):
        return ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)

    async def _route_offsets_topic(self, create: bool = False) -> None:
        """Handles of the __consumer_offsets partitions (None for one not started); with ``create``
        the topic is created first if missing (folders and metadata only: its partitions start
        when a group needs them)."""
        router = await self._router()
        if create:
            try:
                await router.create_topic.remote(OFFSETS_TOPIC, self.offsets_partitions, OFFSETS_TOPIC_CONFIG)
            except Exception as e:
                if not isinstance(getattr(e, "cause", e), TopicExistsError) and not isinstance(e, TopicExistsError):
                    raise
        routes = await router.route.remote([OFFSETS_TOPIC], activate=False)  # None: not started (yet)
        self._handles = [h for h, _ in routes[OFFSETS_TOPIC]] if routes.get(OFFSETS_TOPIC) else []

    async def _handle(self, part: int) -> Any:
        """The actor of __consumer_offsets partition ``part``, started if inactive (a write or a
        replay needs it). Partitions no group writes to stay closed files: no process each."""
        handle = self._handles[part]
        if handle is None:
            router = await self._router()
            handle = self._handles[part] = await router.activate.remote(OFFSETS_TOPIC, part)
        return handle

    def _prepare_offsets_topic(self, group_id: str) -> None:
        """A group is forming: create __consumer_offsets and start the group's partition of it now,
        during the rebalance (which waits ``group.initial.rebalance.delay.ms`` for a new group
        anyway), so neither its first metadata write nor its first commit, made while its
        members' traffic flows, waits for a process to start."""
        self._background([asyncio.get_running_loop().create_task(self._prepare(group_id))])

    async def _prepare(self, group_id: str) -> None:
        await self._writable()
        if self._handles:  # asks the router each time: a handle kept here may be of a hibernated actor
            part = self._partition(group_id)
            self._handles[part] = await (await self._router()).activate.remote(OFFSETS_TOPIC, part)

    async def _writable(self) -> None:
        if not self._handles:
            async with self._create_lock:
                if not self._handles:
                    await self._route_offsets_topic(create=True)

    async def _load(self) -> None:
        started = time.perf_counter()
        await self._route_offsets_topic()  # the router created the topic at its start (no process)
        n = 0
        # Offsets read from the folders of inactive partitions: only those holding records start.
        ranges = await (await self._router()).offsets.remote(OFFSETS_TOPIC) if self._handles else {}
        for part, (start, end) in sorted(ranges.items()):
            if start >= end:
                continue
            handle = await self._handle(part)
            pos = start
            while pos < end:
                data, _hw, log_start = await handle.fetch.remote(pos, REPLAY_CHUNK)
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
                    log.error("group coordinator: cannot read %s past offset %d; replay stops there",
                              OFFSETS_TOPIC, pos)
                    break
                pos = nxt
        self.coord.finish_loading()
        self.loaded_records = n
        self.load_ms = (time.perf_counter() - started) * 1e3
        self._wake = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._timer_loop()), loop.create_task(self._metrics_loop())]
        log.info("group coordinator up: %d groups from %d records of %s in %.1f ms", len(self.coord.groups), n,
                 OFFSETS_TOPIC, self.load_ms)

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

    def _partition(self, group_id: str) -> int:
        return offsets_log.partition_for_group(group_id, len(self._handles) or self.offsets_partitions)

    def _enqueue(self, part: int, records: list[tuple[bytes, bytes | None]]) -> asyncio.Future:
        """Queue records for one partition; one writer per partition appends them in order, batched."""
        fut = asyncio.get_running_loop().create_future()
        self._queues.setdefault(part, []).append((records, fut))
        writer = self._writers.get(part)
        if writer is None or writer.done():
            self._writers[part] = asyncio.get_running_loop().create_task(self._write(part))
        return fut

    async def _write(self, part: int) -> None:
        queue = self._queues[part]
        try:
            await self._writable()
        except Exception as e:
            for _, fut in queue:
                if not fut.done():
                    fut.set_exception(e)
            queue.clear()
            log.warning("group coordinator: cannot create %s: %s", OFFSETS_TOPIC, e)
            return
        while queue:
            items = list(queue)
            queue.clear()
            batch = offsets_log.build_records([r for recs, _ in items for r in recs])
            error: BaseException | None = None
            for attempt in range(2):
                try:
                    await (await self._handle(part)).append_durable.remote(batch, internal=True)
                    error = None
                    break
                except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError,
                        PartitionHibernatedError) as e:
                    error = e
                    try:  # the partition actor hibernated or was replaced: ask the router for the current one
                        stale = self._handles[part]
                        router = await self._router()
                        self._handles[part], _ = await router.reactivate.remote(OFFSETS_TOPIC, part,
                                                                                stale._actor_id.hex())
                    except Exception as e2:
                        error = e2
                        break
                except Exception as e:
                    error = e
                    break
            for _, fut in items:
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

        (The first write creates __consumer_offsets, which takes seconds; no SyncGroup should wait for it.)
        """
        def done(f: asyncio.Future) -> None:
            if not f.cancelled() and f.exception() is not None:
                log.warning("group coordinator: storing group metadata failed: %s", f.exception())

        for f in futs:
            f.add_done_callback(done)

    # ========================================================= membership
    async def join_group(self, body: dict, version: int = 9, client_id: str = "", client_host: str = "") -> dict:
        """JoinGroup: returns when the rebalance completes (or at once for errors and MEMBER_ID_REQUIRED)."""
        await self._ensure_loaded()
        self._prepare_offsets_topic(body["group_id"])
        fut = asyncio.get_running_loop().create_future()
        self.coord.join_group(body, lambda r: fut.done() or fut.set_result(r), version=version,
                              client_id=client_id, client_host=client_host)
        self._background(self._after())
        return {"throttle_time_ms": 0, **(await fut)}

    async def sync_group(self, body: dict, version: int = 5) -> dict:
        await self._ensure_loaded()
        fut = asyncio.get_running_loop().create_future()
        self.coord.sync_group(body, lambda r: fut.done() or fut.set_result(r), version=version)
        self._background(self._after())
        return {"throttle_time_ms": 0, **(await fut)}

    async def heartbeat(self, body: dict) -> dict:
        await self._ensure_loaded()
        resp = self.coord.heartbeat(body)
        self._background(self._after())
        return {"throttle_time_ms": 0, **resp}

    async def leave_group(self, body: dict, version: int = 5) -> dict:
        await self._ensure_loaded()
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

    async def offset_commit(self, body: dict, version: int = 9) -> dict:
        """OffsetCommit: acknowledged only once the commit records are in __consumer_offsets."""
        await self._ensure_loaded()
        gid = body["group_id"]
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
        errors, accepted = self.coord.validate_commit(gid, body.get("generation_id_or_member_epoch", -1),
                                                      body.get("member_id") or "", body.get("group_instance_id"),
                                                      parts, unknown)
        self._background(self._after())
        if accepted:
            records = [(gid, offsets_log.offset_key(gid, t, p), offsets_log.encode_offset(e)) for t, p, e in accepted]
            try:
                await self._write_records(records)
            except Exception:
                for t, p, _ in accepted:
                    errors[(t, p)] = E.COORDINATOR_NOT_AVAILABLE
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

    async def offset_fetch(self, body: dict, version: int = 9) -> dict:
        """OffsetFetch for one group (v0-7) or several (v8+); unknown partitions read as offset -1."""
        await self._ensure_loaded()
        if version >= 8:
            groups = []
            for g in body.get("groups") or ():
                groups.append({"group_id": g["group_id"], "topics": self._fetch_group(g["group_id"], g.get("topics"),
                                                                                      version),
                               "error_code": E.NONE})
            return {"throttle_time_ms": 0, "groups": groups}
        return {"throttle_time_ms": 0, "topics": self._fetch_group(body["group_id"], body.get("topics"), version),
                "error_code": E.NONE}

    # ============================================================== admin
    async def list_groups(self, body: dict | None = None) -> dict:
        await self._ensure_loaded()
        body = body or {}
        return {"throttle_time_ms": 0, "error_code": E.NONE,
                "groups": self.coord.list_groups(body.get("states_filter") or (), body.get("types_filter") or ())}

    async def describe_groups(self, body: dict, version: int = 5) -> dict:
        await self._ensure_loaded()
        out = []
        for gid in body.get("groups") or ():
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
        await self._ensure_loaded()
        names = list(body.get("groups_names") or ())
        results, tombstones = self.coord.delete_groups(names)
        self._background(self._after())
        if tombstones:
            try:
                await self._write_records(tombstones)
            except Exception:
                for gid in {g for g, _, _ in tombstones}:
                    results[gid] = E.COORDINATOR_NOT_AVAILABLE
        return {"throttle_time_ms": 0, "results": [{"group_id": g, "error_code": results[g]} for g in names]}

    async def offset_delete(self, body: dict) -> dict:
        await self._ensure_loaded()
        gid = body["group_id"]
        parts = [(t["name"], p["partition_index"]) for t in body.get("topics") or () for p in t.get("partitions") or ()]
        top, errors, tombstones = self.coord.delete_offsets(gid, parts)
        self._background(self._after())
        if tombstones:
            try:
                await self._write_records(tombstones)
            except Exception:
                top = E.COORDINATOR_NOT_AVAILABLE
        topics: dict[str, list[dict]] = {}
        if top == E.NONE:
            for t, p in parts:
                topics.setdefault(t, []).append({"partition_index": p, "error_code": errors[(t, p)]})
        return {"error_code": top, "throttle_time_ms": 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

    # ========================================================= for Python
    async def describe(self, group_id: str) -> dict | None:
        """One group for the CLI and the Python API: state, members, and per partition committed/end/lag."""
        await self._ensure_loaded()
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
        await self._ensure_loaded()
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
        await self._ensure_loaded()
        return {"groups": len(self.coord.groups), "loaded_records": self.loaded_records, "load_ms": self.load_ms,
                "skipped_records": self.skipped_records,
                "timers": len(self.coord.timers), "offsets_partitions": len(self._handles),
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


def _create(config: dict[str, Any] | None, offsets_partitions: int | None):
    node = ray.get_runtime_context().get_node_id()
    return coordinator_actor_class().options(
        name=COORDINATOR_NAME, namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True),
    ).remote(config, offsets_partitions or OFFSETS_PARTITIONS)


def group_coordinator(group_id: str = "", *, create: bool = True):
    """The coordinator actor handle for ``group_id`` (created, detached, when absent and ``create``)."""
    try:
        return ray.get_actor(coordinator_name(group_id), namespace=NAMESPACE)
    except ValueError:
        if not create:
            raise
    return _create(None, None)


def ensure_group_coordinator(offsets_partitions: int | None = None, timeout: float = 120, **config: Any):
    """Create (or find) the coordinator, apply ``config`` (GroupConfig fields), wait until it has replayed."""
    try:
        handle = ray.get_actor(COORDINATOR_NAME, namespace=NAMESPACE)
    except ValueError:
        handle = _create(config or None, offsets_partitions)
    if config:
        ray.get(handle.configure.remote(**config), timeout=timeout)
    ray.get(handle.ready.remote(), timeout=timeout)
    return handle


def stop_group_coordinator() -> None:
    """Remove the coordinator actor (its state is in __consumer_offsets; nothing to flush)."""
    try:
        handle = ray.get_actor(COORDINATOR_NAME, namespace=NAMESPACE)
    except ValueError:
        return
    ray.kill(handle, no_restart=True)
