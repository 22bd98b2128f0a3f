"""PartitionActor: one Ray actor per topic-partition, sole owner of its log folder.

Why an actor per partition: it serialises appends (offsets are assigned in one
place), keeps the log's open files and indexes warm in one process, and lets Ray
restart it (it recovers from disk) without touching other partitions. The actor
is async so long-poll fetches wait on an event instead of occupying a thread.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
import uuid
from collections import OrderedDict
from typing import Any, Awaitable, Callable, TypeVar

import ray

from logan_ray.common.errors import (BrokerFencedError, NotEnoughReplicasError, NotLeaderOrFollowerError,
                                     PartitionHibernatedError)
from logan_ray.storage.append_rules import check_client_batch
from logan_ray.storage.batch_header import BatchHeader, iter_headers, validate_batch
from logan_ray.storage.config import TopicConfig
from logan_ray.storage.control_records import EndTxnMarker, build_marker_batch
from logan_ray.storage.errors import KafkaStorageError, OffsetOutOfRangeError
from logan_ray.storage.leader_epochs import CHECKPOINT_FILE, fence, read_checkpoint_file
from logan_ray.storage.log import PartitionLog
from logan_ray.storage.partition_dir import claim, mark_for_deletion, remove_marked
from logan_ray.storage.recovery import CLEAN_SHUTDOWN_FILE
from logan_ray.storage.producer_state import DEFAULT_EXPIRATION_MS, OutOfOrderSequenceError

from .channel import ChannelServer, serve_channel
from .group_commit import GroupCommit
from .isr import DEFAULT_REPLICA_LAG_TIME_MAX_MS
from .heap_settle import settle_heap
from .lease_board import LeaseReader
from .offsets_board import BoardWriter, board_path
from .leader_replication import LeaderReplication
from .leader_resign import wait_caught_up
from .metrics import PartitionMetrics
from .names import NAMESPACE
from .fault_points import pause_point
from .topic_names import is_internal, refuse_internal

log = logging.getLogger("logan_ray.partition")

SEQUENCE_WAIT_S = 5.0  # how long a batch that arrived early waits for its predecessor
EXPIRED_IDS_KEPT = 10_000  # producer ids this actor expired, whose next batch needs no wait


CONFIG_LOAD_TIMEOUT_S = 120.0  # a restarting router answers once it has re-read its metadata


DEFAULT_IDLE_MS = 300_000  # partition.idle.ms: five minutes without traffic, then the process exits
IDLE_RECHECK_S = 30.0  # an idle watcher wakes at least this often (picks up a changed partition.idle.ms)

_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])


def in_use(method: _F) -> _F:
    """Mark a call as traffic: it keeps the partition awake while it runs and resets its idle clock.

    A call that reaches an actor which has started hibernating is refused with
    PartitionHibernatedError before doing anything, so the caller may repeat it on
    the partition's next actor. Monitoring calls (``stats``, ``identity``,
    ``cleaning_view``, ``channel``) are not traffic: polling ``status`` or the
    cleaner's rounds must not keep idle partitions awake.
    """
    @functools.wraps(method)
    async def wrapper(self: "PartitionActor", *args: Any, **kwargs: Any) -> Any:
        if self._hibernated:
            raise PartitionHibernatedError(f"partition {self.topic}-{self.partition} is hibernating; "
                                           "its next use starts it again")
        self._in_flight += 1
        self._start_idle_watch()
        try:
            return await method(self, *args, **kwargs)
        finally:
            self._in_flight -= 1
            self._last_used = time.monotonic()
    return wrapper  # type: ignore[return-value]


def passive(method: _F) -> _F:
    """Mark a read that is not traffic: a Kafka consumer's fetch and long-poll (the gateway's ``locate``
    and ``wait_for_data``). Consumers poll all the time; if their polls kept a partition awake, no
    partition with a reader would ever hibernate. A hibernation ends such a wait at once with
    PartitionHibernatedError (nothing was read, so the gateway goes on reading the closed files).
    """
    @functools.wraps(method)
    async def wrapper(self: "PartitionActor", *args: Any, **kwargs: Any) -> Any:
        if self._hibernated:
            raise PartitionHibernatedError(f"partition {self.topic}-{self.partition} is hibernating; "
                                           "its files answer reads")
        self._start_idle_watch()
        return await method(self, *args, **kwargs)
    return wrapper  # type: ignore[return-value]


def _router(router_name: str):
    deadline = time.monotonic() + CONFIG_LOAD_TIMEOUT_S
    while True:
        try:
            return ray.get_actor(router_name, namespace=NAMESPACE)
        except ValueError:  # the router is being replaced: wait for the new one
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def load_topic_config(router_name: str, topic: str, partition: int, topic_id: str) -> dict[str, Any]:
    """The effective config of ``topic`` from the router's durable metadata.

    Fails (so the actor does not start) when the topic is gone or is another
    topic of the same name: a deleted topic's partition must not come back.
    """
    return ray.get(_router(router_name).partition_config.remote(topic, partition, topic_id),
                   timeout=CONFIG_LOAD_TIMEOUT_S)


def newest_local_epoch(directory: str) -> int:
    """The newest leader epoch in the folder's checkpoint (-1 if none), read before the log opens."""
    entries = read_checkpoint_file(os.path.join(directory, CHECKPOINT_FILE)) or []
    return max((e.epoch for e in entries), default=-1)


def open_partition(router_name: str, topic: str, partition: int, topic_id: str, incarnation: str,
                   directory: str) -> dict[str, Any]:
    """{"config", "leader_epoch"} for this start of the actor, from the router's durable metadata.

    As :func:`load_topic_config`, and the router saves this incarnation's leader epoch
    before answering (the same ``incarnation`` asked again gets the same epoch). A folder
    closed cleanly (hibernation, a clean shutdown) keeps its epoch: see the router.
    """
    clean = os.path.exists(os.path.join(directory, CLEAN_SHUTDOWN_FILE))  # hibernated: the same leader wakes
    return ray.get(_router(router_name).open_partition.remote(
        topic, partition, topic_id, incarnation, newest_local_epoch(directory), clean), timeout=CONFIG_LOAD_TIMEOUT_S)


class PartitionActor:
    """Append, read, locate and long-poll on one partition log."""

    def __init__(self, topic: str, partition: int, directory: str, topic_id: str, router_name: str,
                 maintenance_interval_s: float = 300.0,
                 producer_id_expiration_ms: int = DEFAULT_EXPIRATION_MS, idle_ms: int = DEFAULT_IDLE_MS) -> None:
        """Open the partition; Ray runs this again on every restart (crash, OOM kill).

        The config is asked of the router (the durable topic metadata: defaults plus
        overrides) on every start, never taken from arguments, which Ray replays
        unchanged and would bring back the creation-time config after an alter.
        The folder is claimed for ``topic_id`` first: a folder of an earlier topic
        of the same name is removed, never served.
        """
        self.topic = topic
        self.partition = partition
        self.directory = directory
        self.topic_id = topic_id
        self._internal = is_internal(topic)
        self._router_name = router_name
        self._in_flight = 0  # calls running now (appends, fetches and long-polls, acks=all waits, admin)
        self._last_used = time.monotonic()
        self._hibernated = False
        self._resigned = False  # handing leadership to another replica: writes are refused (resign)
        self._idle_ms = idle_ms
        self._idle_watch: asyncio.Task | None = None
        started = time.perf_counter()
        opened = open_partition(router_name, topic, partition, topic_id, uuid.uuid4().hex, directory)
        config = opened["config"]
        pause_point(directory, "activate-config")
        stray = claim(directory, topic_id)
        if stray is not None:
            log.warning("partition %s-%d: the folder held topic id %s, not this topic's %s; kept aside as %s "
                        "(remove it, or move it back if the metadata was lost)", topic, partition, stray[0],
                        topic_id, stray[1])
        # The log loads idempotent-producer state from its newest snapshot plus the batches after it;
        # the broker's producer.id.expiration.* come with the config (dynamic: they may have changed).
        self._producer_id_expiration_ms = opened.get("producer_id_expiration_ms", producer_id_expiration_ms)
        self._expiration_check_s = opened.get("producer_id_expiration_check_interval_ms", 600_000) / 1000.0
        self._expiry: asyncio.Task | None = None
        self._expired: OrderedDict[int, None] = OrderedDict()  # producers forgotten here while this actor ran
        self._log = PartitionLog(directory, TopicConfig.from_dict(config),
                                 producer_id_expiration_ms=self._producer_id_expiration_ms)
        self._leader_epoch = opened["leader_epoch"]
        self._isr_size = len(opened.get("isr") or ()) or 1  # replicas in sync (the leader alone with one replica)
        self._log.start_leader_epoch(self._leader_epoch)
        self._producers = self._log.producer_state
        self._group_commit = GroupCommit(self._log)
        self._lag_max_ms = opened.get("replica_lag_time_max_ms") or DEFAULT_REPLICA_LAG_TIME_MAX_MS
        self._replication = self._leader_replication(opened)
        #: this node's broker lease, as its gateway publishes it (only replicated partitions are fenced by it)
        self._node_lease = LeaseReader(ray.get_runtime_context().get_node_id())
        self._new_data: asyncio.Event | None = None
        self._maintenance_interval_s = maintenance_interval_s
        self._maintenance: asyncio.Task | None = None
        self._channel: ChannelServer | None = None
        self._channel_started = False
        self._board: BoardWriter | None = None  # its log end for the node's gateway (actors/offsets_board.py)
        self._markers = 0  # transaction markers begun (on the board: KIP-890 verification cache, gateway/txn.py)
        self._metrics = PartitionMetrics(topic, partition)
        pause_point(directory, "activate-opened")
        log.info("partition %s-%d opened in %.1f ms: offsets [%d, %d), leader epoch %d", topic, partition,
                 (time.perf_counter() - started) * 1e3, self._log.log_start_offset, self._log.log_end_offset,
                 self._leader_epoch)
        settle_heap()  # the collector walks what serving makes, not the startup objects of the process
        # Ray runs an async actor's constructor on its event loop. Watching idleness from here covers a
        # restart by Ray after a crash too, which no router call follows: unused, it still hibernates.
        self._start_idle_watch()

    # ------------------------------------------------------------------ writes
    @in_use
    async def append(self, data: bytes, internal: bool = False) -> tuple[int, int, int]:
        """Append one or more v2 batches; returns (base_offset, log_append_time, log_start_offset).

        This is ``acks=1``: the batches are in the log (the page cache), not yet
        necessarily on disk. Idempotent batches (producer id and sequence set)
        that repeat one of the producer's last five batches are acknowledged
        with their original offset and not written again. ``internal``: the
        broker itself writes (Kafka's internalTopicsAllowed); clients cannot
        append to an internal topic.
        """
        return await self._append(data, internal, durable=False)

    async def _append(self, data: bytes, internal: bool, durable: bool) -> tuple[int, int, int]:
        if self._internal and not internal:
            refuse_internal(self.topic, "append to")
        self._refuse_if_resigned()
        self._refuse_if_fenced(durable)
        self._start_maintenance()
        started = time.perf_counter()
        located = list(iter_headers(data))
        if not internal:
            config = self._log.config
            compacted, window = config.compacts, config.timestamp_window(int(time.time() * 1000))
            for i, (pos, h) in enumerate(located):
                # transactional batches are verified by the gateway with the transaction coordinator
                # (KIP-890) before they get here: see logan_ray/gateway/txn.py
                check_client_batch(data, pos, h, compacted, f"batch {i} at byte {pos} of {len(data)}", window,
                                   transactions=True)
        headers = [h for _, h in located]
        try:
            if any(h.producer_id >= 0 and h.base_sequence >= 0 for h in headers):
                result = await self._append_idempotent(data, headers)
            else:
                info = self._log.append(data, leader_epoch=self._leader_epoch)
                result = (info.base_offset, info.log_append_time, info.log_start_offset)
        except BaseException:
            self._publish_board()  # a log that went offline is answered by the actor, with its error
            raise
        self._after_append(sum(h.record_count for h in headers), len(data), started)
        # the lease ran out during the append (this process was stopped): not acknowledged
        self._refuse_if_fenced(durable)
        return result

    def _refuse_if_fenced(self, durable: bool = False) -> None:
        """A replicated partition acknowledges nothing once its node's broker lease ran out: the controller
        may have elected another leader by then (``lease_board.py``), whichever way the write came.

        Except ``acks=all`` while another replica is in the (maximal) ISR: such a write is acknowledged only
        once the high watermark passed it, so it is on every replica an election could pick, and a leader
        the controller replaced stalls instead (``LeaderReplication.confirmed_by_others``). So a router that
        is away (restarting, or lost with the head) stops no ``acks=all`` write to a healthy partition, as in
        Kafka; ``acks=0`` and ``acks=1``, which no other replica confirms, still stop with the lease."""
        if self._replication is not None and self._node_lease.lapsed() and not (
                durable and self._replication.confirmed_by_others):
            raise BrokerFencedError(f"partition {self.topic}-{self.partition}: this node's broker lease "
                                           "with the controller ran out (fenced)")

    @in_use
    async def append_durable(self, data: bytes, internal: bool = False) -> tuple[int, int, int]:
        """``acks=all`` on one replica: :meth:`append`, answered once the batches are fsynced.

        The wait is a group commit (see ``actors/group_commit.py``): one
        fdatasync covers every append that arrived while the previous one ran.
        A repeated idempotent batch waits too, as its first write may not be
        on disk yet.
        """
        if (self._replication.isr_size if self._replication is not None else self._isr_size) \
                < self._log.config.min_insync_replicas:
            raise NotEnoughReplicasError(
                f"partition {self.topic}-{self.partition}: {self._isr_size} in-sync replicas, "
                f"min.insync.replicas={self._log.config.min_insync_replicas}")
        result = await self._append(data, internal, durable=True)
        end = self._log.log_end_offset
        await self._group_commit.wait(end)
        if self._replication is not None:
            await self._replication.wait_replicated(end, self._log.config.min_insync_replicas)
            self._refuse_if_fenced(durable=True)
        return result

    @in_use
    async def write_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                           coordinator_epoch: int) -> int:
        """Append a COMMIT or ABORT marker (the coordinator's WriteTxnMarkers, called directly), acks=all.

        The producer state refuses a marker of an older producer epoch or coordinator epoch
        first, so a late marker can never end a later transaction. Returns the marker's offset.
        """
        marker = EndTxnMarker(commit, coordinator_epoch)
        data = build_marker_batch(producer_id, producer_epoch, marker, timestamp=int(time.time() * 1000))
        _, h = next(iter(iter_headers(data)))
        self._producers.check_marker(h, marker)
        self._markers += 1  # on the board before the marker is: a gateway's cached verification ends now
        self._publish_board()
        base, _, _ = await self.append_durable(data, internal=True)
        return base

    async def _check_sequence(self, h: BatchHeader) -> tuple[int, int] | None:
        """Producer-state check that waits briefly for a predecessor batch still in flight.

        Ray may start pipelined calls of an async actor out of submission order;
        a batch whose sequence is ahead waits for the missing one instead of failing.
        """
        deadline = time.monotonic() + SEQUENCE_WAIT_S
        while True:
            try:
                return self._producers.check(h)
            except OutOfOrderSequenceError as e:
                if not e.ahead:
                    raise
                if e.unknown_producer and h.producer_id in self._expired:
                    return None  # expired here: no earlier batch of it can still be on its way
                if time.monotonic() >= deadline:
                    if e.unknown_producer:
                        return None  # its earlier batches are older than the state we keep
                    raise
            if self._new_data is None:
                self._new_data = asyncio.Event()
            try:
                await asyncio.wait_for(self._new_data.wait(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                pass

    async def _append_idempotent(self, data: bytes, headers: list[BatchHeader]) -> tuple[int, int, int]:
        view = memoryview(data)
        first: tuple[int, int] | None = None
        pos = 0
        for h in headers:
            duplicate = await self._check_sequence(h)
            self._refuse_if_resigned()  # it may have resigned while this batch waited for its predecessor
            if duplicate is not None:
                validate_batch(view, pos, end=pos + h.size)  # never acknowledge a corrupt retry
                outcome = duplicate
            else:
                # The log records the producer state, also when a flush after the write fails
                # (KafkaStorageError with ``appended``): a retry is then answered as a duplicate.
                info = self._log.append(view[pos:pos + h.size], leader_epoch=self._leader_epoch)
                outcome = (info.base_offset, info.log_append_time)
            first = first or outcome
            pos += h.size
        assert first is not None
        return first[0], first[1], self._log.log_start_offset

    def _refuse_if_resigned(self) -> None:
        if self._resigned:
            raise NotLeaderOrFollowerError(f"partition {self.topic}-{self.partition}: leadership is moving to "
                                           "another replica")

    async def resign(self, leader_epoch: int, successor: str, timeout_s: float) -> int:
        """The first half of a controlled leader move: stop taking writes, wait for ``successor`` to
        have all of this log, and return the log end it has.

        From here on every append is refused with NOT_LEADER_OR_FOLLOWER before it writes anything
        (clients retry on the new leader). The successor's replica fetcher keeps fetching; once its
        fetch offset reaches this log's end it holds every record this leader ever wrote, so it can
        lead without truncating anything. Raises (and keeps refusing writes until :meth:`unresign`)
        when the epoch is not this leader's or the successor does not catch up in ``timeout_s``.
        """
        self._check_leader_epoch(leader_epoch)
        if self._replication is None:
            raise ValueError(f"partition {self.topic}-{self.partition} has one replica: no one to hand over to")
        self._resigned = True
        self._publish_board()
        await wait_caught_up(self._replication.states, successor, lambda: self._log.log_end_offset, timeout_s)
        return self._log.log_end_offset

    async def unresign(self) -> None:
        """A move that did not happen: take writes again."""
        self._resigned = False
        self._publish_board()

    async def reassigned(self, leader_epoch: int, replicas: list[str], isr: list[str],
                         isr_version: int | None = None) -> int:
        """The controller changed this partition's replica set (a reassignment, actors/router_reassign.py)
        and saved it in ``leader_epoch``: lead on in that epoch (it starts at this log's end, durably,
        before anything else is written in it) with those followers and that ISR. An epoch not newer than
        this leader's changes nothing (a retry, or a router restarted after telling it). Returns the epoch.

        A leader alone so far (replication factor 1) starts its follower bookkeeping here (its high
        watermark starts at its log end: every record it has was in its ISR of one); a replica set cut
        to this leader alone ends it (the high watermark is the log end again)."""
        if leader_epoch <= self._leader_epoch or self._hibernated:
            return self._leader_epoch  # a hibernated leader learns it from the router when it starts again
        self._log.start_leader_epoch(leader_epoch)
        self._leader_epoch = leader_epoch
        self._isr_size = len(isr) or 1
        if self._replication is None:
            if len(replicas) >= 2:
                self._replication = self._leader_replication({"replicas": replicas, "isr": isr,
                                                              "isr_version": isr_version or 0})
        else:
            self._replication.reassigned(leader_epoch, replicas, isr, isr_version)  # wakes acks=all waiters
            if len(replicas) < 2:  # they see the leader alone: their records are replicated
                self._replication.stop()
                self._replication = None
        self._publish_board()
        log.info("partition %s-%d: replicas %s, ISR %s, leader epoch %d", self.topic, self.partition,
                 [r[:8] for r in replicas], [r[:8] for r in isr], leader_epoch)
        return self._leader_epoch

    async def isr_changed(self, leader_epoch: int, isr: list[str], isr_version: int) -> bool:
        """The controller changed the ISR in this leader's epoch (a dead or fenced follower left it at
        once, router_leaders._drop_gone_from_isrs); another epoch's change is not this leader's."""
        if leader_epoch != self._leader_epoch or self._replication is None:
            return False
        adopted = self._replication.isr_changed(isr, isr_version)
        self._isr_size = self._replication.isr_size
        return adopted

    def _leader_replication(self, opened: dict[str, Any]) -> LeaderReplication | None:
        """The follower bookkeeping of a replicated partition; None with one replica (HW = log end)."""
        replicas = opened.get("replicas") or []
        if len(replicas) < 2:
            return None
        lr = LeaderReplication(f"{self.topic}-{self.partition}", _router(self._router_name), self.topic,
                               self.partition, replicas[0], replicas, opened.get("isr") or [replicas[0]],
                               log_start=self._log.log_start_offset, log_end=lambda: self._log.log_end_offset,
                               epoch=self._leader_epoch,
                               lag_max_ms=self._lag_max_ms,
                               directory=self._log.directory, isr_version=opened.get("isr_version", 0))
        return lr

    def _high_watermark(self) -> int:
        return self._log.log_end_offset if self._replication is None else self._replication.high_watermark

    @in_use
    async def replica_fetched(self, node_id: str, fetch_offset: int, current_leader_epoch: int = -1) -> int:
        """A follower on ``node_id`` fetches from ``fetch_offset`` (its log end): returns the high watermark.

        Kafka's leader learns follower positions from their Fetch requests; the
        replica fetcher (or the gateway serving it) reports them here.
        """
        self._check_leader_epoch(current_leader_epoch)
        if self._replication is None:
            raise ValueError(f"partition {self.topic}-{self.partition} has one replica: no follower fetches")
        self._replication.start()
        before = self._replication.high_watermark
        hw = await self._replication.follower_fetched(node_id, fetch_offset)
        if hw != before and self._new_data is not None:  # consumers long-polling below the HW
            self._new_data.set()
            self._new_data = None
        return hw

    def _after_append(self, records: int, nbytes: int, started: float) -> None:
        self._publish_board()
        if self._replication is not None:
            self._replication.appended(self._log.log_end_offset)
        if self._new_data is not None:
            self._new_data.set()
            self._new_data = None
        self._metrics.appended(records, nbytes, (time.perf_counter() - started) * 1e3)

    # ------------------------------------------------------------------- reads
    async def _wait_until(self, predicate, max_wait_ms: int) -> None:
        """Sleep until an append makes ``predicate()`` true or the wait expires."""
        deadline = time.monotonic() + max_wait_ms / 1000.0
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if self._new_data is None:
                self._new_data = asyncio.Event()
            try:
                await asyncio.wait_for(self._new_data.wait(), remaining)
            except asyncio.TimeoutError:
                return
            finally:
                if self._hibernated:  # only passive reads wait while it hibernates: they end here
                    raise PartitionHibernatedError(f"partition {self.topic}-{self.partition} hibernated")

    @passive
    async def locate(self, offset: int, max_bytes: int, max_wait_ms: int = 0, min_bytes: int = 1,
                     max_offset: int | None = None, current_leader_epoch: int = -1,
                     replica: str | None = None) -> tuple[list[tuple[str, int, int]], int, int]:
        """File slices for a local server to ``sendfile``: (slices, high_watermark, log_start_offset).

        Waits up to ``max_wait_ms`` for ``min_bytes`` of data past ``offset``.
        ``current_leader_epoch``: the client's view (Fetch v9+), fenced as Kafka does.
        ``replica``: the node id of a follower fetching (a Fetch with ``replica_id``): its
        offset is its log end (high watermark, ISR) and it reads past the high watermark.
        """
        self._check_leader_epoch(current_leader_epoch)
        started = time.perf_counter()
        if replica is not None:
            await self.replica_fetched(replica, offset)
        elif self._replication is not None:  # consumers see only what every in-sync replica has
            max_offset = self._high_watermark() if max_offset is None else min(max_offset, self._high_watermark())
        slices = self._log.locate(offset, max_bytes, max_offset=max_offset)
        if max_wait_ms > 0 and sum(s.length for s in slices) < min_bytes:
            def enough() -> bool:
                return self._log.log_end_offset > offset and sum(
                    s.length for s in self._log.locate(offset, max_bytes, max_offset=max_offset)) >= min_bytes
            await self._wait_until(enough, max_wait_ms)
            slices = self._log.locate(offset, max_bytes, max_offset=max_offset)
        end = self._high_watermark()
        self._metrics.served(max(0, end - offset) if slices else 0, sum(s.length for s in slices),
                             (time.perf_counter() - started) * 1e3)
        return [tuple(s) for s in slices], end, self._log.log_start_offset

    @passive
    async def locate_committed(self, offset: int, max_bytes: int, max_wait_ms: int = 0, min_bytes: int = 1,
                               current_leader_epoch: int = -1) -> tuple[list, int, int, int, list[tuple[int, int]]]:
        """:meth:`locate` for a ``read_committed`` fetch: only batches below the last stable offset.

        Returns (slices, high watermark, log start offset, last stable offset, aborted
        transactions as (producer id, first offset)) overlapping the range read, from the
        ``.txnindex`` files, so the client can drop the records of aborted transactions.
        """
        self._check_leader_epoch(current_leader_epoch)

        def found() -> list:
            return self._log.locate(offset, max_bytes, max_offset=self._log.last_stable_offset(self._high_watermark()))

        slices = found()
        if max_wait_ms > 0 and sum(s.length for s in slices) < min_bytes:
            await self._wait_until(lambda: sum(s.length for s in found()) >= min_bytes, max_wait_ms)
            slices = found()
        hw = self._high_watermark()
        lso = self._log.last_stable_offset(hw)
        aborted = [(a.producer_id, a.first_offset) for a in self._log.aborted_transactions(offset, lso)] \
            if slices else []
        return [tuple(s) for s in slices], hw, self._log.log_start_offset, lso, aborted

    @in_use
    async def fetch(self, offset: int, max_bytes: int = 1 << 20, max_wait_ms: int = 0,
                    min_bytes: int = 1, current_leader_epoch: int = -1) -> tuple[bytes, int, int]:
        """Batch bytes for remote callers: (concatenated batches, high_watermark, log_start_offset)."""
        self._check_leader_epoch(current_leader_epoch)
        started = time.perf_counter()
        if max_wait_ms > 0 and self._log.log_end_offset <= offset:
            await self._wait_until(lambda: self._log.log_end_offset > offset, max_wait_ms)
        hw = self._high_watermark()
        data = self._log.read(offset, max_bytes, max_offset=None if self._replication is None else hw) \
            if offset < hw or self._replication is None else b""
        self._metrics.served(max(0, hw - offset) if data else 0, len(data),
                             (time.perf_counter() - started) * 1e3)
        return data, hw, self._log.log_start_offset

    @in_use
    async def fetch_to_log_end(self, offset: int, max_bytes: int = 1 << 20) -> tuple[bytes, int, int]:
        """(batch bytes from ``offset``, log end offset, log start offset), past the high watermark.

        For the group coordinator's replay of ``__consumer_offsets``, which, like Kafka's
        (``FetchIsolation.LOG_END``), reads all this leader holds: a new leader's high watermark
        may trail its log for a moment after a failover, and an acknowledged commit must not be
        missed. A leader never cuts its own log; if another leader is elected, it is replayed again."""
        return self._log.read(offset, max_bytes), self._log.log_end_offset, self._log.log_start_offset

    @in_use
    async def read_records(self, offset: int, max_bytes: int = 1 << 20) -> list:
        """Decoded records from ``offset`` (convenience for Python callers and tests)."""
        return self._log.read_records(offset, max_bytes)

    @passive
    async def wait_for_data(self, offset: int, max_wait_ms: int) -> int:
        """Return the log end offset as soon as it passes ``offset`` (or on timeout)."""
        await self._wait_until(lambda: self._log.log_end_offset > offset, max_wait_ms)
        return self._log.log_end_offset

    @passive
    async def log_gauges(self) -> dict[str, int]:
        """Log start/end offset, size and segment count, for the gauges the node's gateway publishes.
        Not traffic (every 10 s)."""
        return {"log_start_offset": self._log.log_start_offset, "log_end_offset": self._log.log_end_offset,
                "size_bytes": self._log.size_bytes, "segment_count": self._log.segment_count}

    @passive
    async def offsets(self) -> tuple[int, int]:
        """(log start, high watermark): ListOffsets "latest" is the high watermark, as in Kafka.

        Not traffic: the consumer-lag gauges of every group ask it of each partition every
        ``metrics_interval_s`` (10 s), so as traffic it kept every partition a group reads awake."""
        return self._log.log_start_offset, self._high_watermark()

    @in_use
    async def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        if timestamp_ms == -1 and self._replication is not None:
            return self._high_watermark(), -1
        return self._log.offset_for_timestamp(timestamp_ms)

    @in_use
    async def max_timestamp_offset(self) -> tuple[int, int] | None:
        return self._log.max_timestamp_offset()

    # ------------------------------------------------------------ leader epochs
    def _check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320 fencing: -1 (or any negative) skips the check, as in Kafka."""
        fence(f"{self.topic}-{self.partition}", current_leader_epoch, self._leader_epoch)

    async def leader_epoch(self) -> int:
        return self._leader_epoch

    @in_use
    async def end_offset_for_epoch(self, leader_epoch: int, current_leader_epoch: int = -1) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) of ``leader_epoch`` in this log, (-1, -1) if undefined."""
        self._check_leader_epoch(current_leader_epoch)
        return self._log.end_offset_for_epoch(leader_epoch)

    @in_use
    async def diverging_epoch(self, offset: int, last_fetched_epoch: int,
                              current_leader_epoch: int = -1) -> tuple[int, int] | None:
        """Fetch v12+ with ``last_fetched_epoch`` (a follower): the (epoch, end offset) where the fetcher's
        log diverges from this one, or None when it does not (then it simply fetches).

        Kafka's rule: diverging when this log's end of that epoch is before ``offset`` or the
        epoch is unknown here (a smaller one is found); an undefined answer is OFFSET_OUT_OF_RANGE.
        """
        self._check_leader_epoch(current_leader_epoch)
        epoch, end = self._log.end_offset_for_epoch(last_fetched_epoch)
        if epoch < 0 or end < 0 or offset < self._log.log_start_offset:
            raise OffsetOutOfRangeError(f"partition {self.topic}-{self.partition}: cannot place offset {offset} "
                                        f"of epoch {last_fetched_epoch} in the log")
        if epoch < last_fetched_epoch or end < offset:
            return epoch, end
        return None

    @in_use
    async def list_offset(self, timestamp: int, current_leader_epoch: int = -1,
                          read_committed: bool = False) -> tuple[int, int, int] | None:
        """ListOffsets for one partition: (offset, timestamp, leader epoch of that offset), None if none.

        ``timestamp`` is a time or one of -1 (latest), -2 (earliest), -3 (max timestamp). As in
        Kafka, answers end at the last fetchable offset: the high watermark, or with
        ``read_committed`` (isolation_level 1) the last stable offset, so a read_committed
        consumer's "latest" never points past an open transaction.
        """
        self._check_leader_epoch(current_leader_epoch)
        fetchable = self._high_watermark()
        if read_committed:
            fetchable = self._log.last_stable_offset(fetchable)
        if timestamp == -1 and (self._replication is not None or read_committed):
            found = (fetchable, -1)  # latest is the last fetchable offset, as in Kafka
        else:
            found = self._log.offset_for_timestamp(timestamp)
            if found is not None and read_committed and timestamp != -2 and found[0] >= fetchable:
                found = None  # Kafka's filter: only offsets a read_committed fetch may return
        if found is None:
            return None
        offset, ts = found
        return offset, ts, self._log.epoch_for_offset(offset)

    # ------------------------------------------------------------- management
    @in_use
    async def delete_records(self, before_offset: int) -> int:
        refuse_internal(self.topic, "delete records of")
        try:
            return self._log.delete_records(before_offset, high_watermark=self._high_watermark())
        finally:
            self._publish_board()

    @in_use
    async def reconfigure(self, config: dict[str, Any]) -> None:
        self._log.update_config(TopicConfig.from_dict(config))

    @in_use
    async def config(self) -> dict[str, str]:
        """The config this partition's log runs with now."""
        return self._log.config.to_dict()

    async def identity(self) -> tuple[str, str]:
        """(topic id, node id): which topic this actor serves, and where."""
        self._start_idle_watch()  # the router asks this of every actor it starts
        self._start_expiry()
        return self.topic_id, ray.get_runtime_context().get_node_id()

    @in_use
    async def flush(self) -> int:
        self._log.flush()
        return self._log.log_end_offset

    @in_use
    async def reopen(self) -> tuple[int, int]:
        """Operator recovery after a disk error: close the log and open it again from disk.

        Opening rescans everything past the last recovery point, so only what
        the disk really holds is served afterwards; idempotent-producer state is
        rebuilt from it. Returns the (log start, log end) offsets.
        """
        self._group_commit.close()
        try:
            self._log.close()
        except KafkaStorageError as e:
            log.warning("closing %s-%d before reopening: %s", self.topic, self.partition, e)
        finally:
            self._publish_board()  # closed: the gateway asks the actor until the log is open again
        config = self._log.config
        # A reopened log may have lost an unsynced tail: it leads in a new epoch, saved by the router first.
        opened = await _router(self._router_name).open_partition.remote(
            self.topic, self.partition, self.topic_id, uuid.uuid4().hex, newest_local_epoch(self.directory))
        self._producer_id_expiration_ms = opened.get("producer_id_expiration_ms", self._producer_id_expiration_ms)
        self._log = PartitionLog(self.directory, config, producer_id_expiration_ms=self._producer_id_expiration_ms)
        self._leader_epoch = opened["leader_epoch"]
        self._isr_size = len(opened.get("isr") or ()) or 1
        if self._replication is not None:
            self._replication.stop()
        self._lag_max_ms = opened.get("replica_lag_time_max_ms") or self._lag_max_ms
        self._replication = self._leader_replication(opened)
        self._log.start_leader_epoch(self._leader_epoch)
        self._producers = self._log.producer_state
        self._group_commit = GroupCommit(self._log)
        self._publish_board()
        log.warning("partition %s-%d reopened: offsets [%d, %d)", self.topic, self.partition,
                    self._log.log_start_offset, self._log.log_end_offset)
        return self._log.log_start_offset, self._log.log_end_offset

    @in_use
    async def apply_retention(self) -> int:
        try:
            return self._log.apply_retention()
        finally:
            self._publish_board()

    # ------------------------------------------------------------ compaction
    async def cleaning_view(self, roll: bool = False):
        """Segment snapshot for the node's cleaner, which rewrites closed segments in its own process.

        ``roll`` closes the active segment first (and fsyncs it), so an
        on-demand compaction covers everything produced so far.
        """
        if roll and self._log.segments[-1].size:
            self._log.roll()
            self._log.flush()
        return self._log.cleaning_view()

    @in_use
    async def install_cleaned(self, result) -> tuple[int, int, int, int]:
        """Swap the cleaner's finished segments in: the only compaction work done in this actor (ms)."""
        report = self._log.install_cleaned(result)
        return tuple(report)

    async def stats(self) -> dict[str, Any]:
        s = dict(self._log.stats())
        s.update(topic=self.topic, partition=self.partition, node_id=ray.get_runtime_context().get_node_id(),
                 pid=os.getpid(), leader_epoch=self._leader_epoch)
        if self._log.config.compacts:
            s["dirty_ratio"] = self._log.dirty_stats().ratio
        return s

    async def channel(self) -> str | None:
        """Path of this actor's node-local Unix socket (started on first call), or None if unavailable.

        The node's gateway, and Python producers and consumers running on this node
        (``logan_ray/local_path.py``), send appends and fetch requests through it
        instead of Ray calls; see ``actors/channel.py``.
        """
        if not self._channel_started:
            self._channel_started = True
            self._channel = await serve_channel(self.directory, {
                "append": self.append, "append_durable": self.append_durable, "locate": self.locate,
                "fetch": self.fetch, "offsets": self.offsets,
                "wait_for_data": self.wait_for_data, "offset_for_timestamp": self.offset_for_timestamp,
                "max_timestamp_offset": self.max_timestamp_offset, "delete_records": self.delete_records,
                "list_offset": self.list_offset, "end_offset_for_epoch": self.end_offset_for_epoch,
                "diverging_epoch": self.diverging_epoch, "locate_committed": self.locate_committed,
            })
            if self._channel is not None:
                try:
                    self._board = BoardWriter(board_path(self._channel.path))
                except OSError as e:  # no board: the gateway asks the actor every time, as before
                    log.info("partition %s-%d: no offsets board: %s", self.topic, self.partition, e)
                self._publish_board()
        return self._channel.path if self._channel is not None else None

    def _publish_board(self) -> None:
        """Tell the node's gateway this log's end, start and epoch, and whether it may answer a Fetch at
        the log end from them: only with one replica (the high watermark is the log end) and a log open
        and healthy, not hibernating or handing over its leadership."""
        board = self._board
        if board is None:
            return
        lg = self._log
        usable = (self._replication is None and lg.offline is None and not lg.closed and not self._hibernated
                  and not self._resigned)
        board.publish(lg.log_end_offset, lg.log_start_offset, self._leader_epoch, usable, self._markers)

    async def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    async def pid(self) -> int:
        return os.getpid()

    # ------------------------------------------------------------- hibernation
    def _quiet(self) -> bool:
        """Nothing would be lost or left waiting by closing now: no call runs (so no append is
        being written, no acks=all waits for its fsync, no fetch long-polls, no early idempotent
        batch waits for its predecessor), the log is healthy and no leader move is under way."""
        return self._in_flight == 0 and self._log.offline is None and not self._log.closed and not self._resigned

    def _idle_s(self) -> float:
        return self._idle_ms / 1000.0

    async def set_idle_ms(self, idle_ms: int) -> None:
        """The broker's ``partition.idle.ms`` changed (the router tells every active partition)."""
        self._idle_ms = idle_ms
        if self._idle_watch is not None and not self._hibernated:  # wake it to count with the new value
            self._idle_watch.cancel()
            self._idle_watch = None
            self._start_idle_watch()

    def _start_idle_watch(self) -> None:
        if self._idle_watch is None:
            self._idle_watch = asyncio.get_running_loop().create_task(self._watch_idle())

    async def _watch_idle(self) -> None:
        """After ``partition.idle.ms`` without traffic, ask the router to hibernate this partition
        (the router is the one place that knows and changes partition state; it calls
        :meth:`hibernate` back, then stops this actor)."""
        while not self._hibernated:
            wait = self._last_used + self._idle_s() - time.monotonic()
            if wait > 0 or not self._quiet():
                await asyncio.sleep(min(max(wait, 0.01), IDLE_RECHECK_S) if wait > 0 else min(self._idle_s(), 1.0))
                continue
            try:
                router = ray.get_actor(self._router_name, namespace=NAMESPACE)
                await router.hibernate.remote(self.topic, self.partition, self.topic_id)
            except Exception as e:  # the router is restarting: try again after another idle period
                log.info("partition %s-%d: hibernation not arranged: %s", self.topic, self.partition, e)
            if not self._hibernated:
                await asyncio.sleep(min(self._idle_s(), IDLE_RECHECK_S))

    async def hibernate(self, idle_only: bool = True) -> bool:
        """Close the log cleanly and refuse every later call; the router stops this actor next.

        Only when :meth:`_quiet` (and, with ``idle_only``, idle for ``partition.idle.ms``);
        False otherwise, and the partition stays as it is. Closing flushes and fsyncs the
        log, writes its indexes, the idempotent-producer snapshot and the clean-shutdown
        marker, so the next activation opens it without a scan and no acknowledged record
        or producer state is lost. Runs without yielding to the event loop up to the
        refusal flag, so no call can slip in between the check and the close.
        """
        if self._hibernated:
            return True
        if not self._quiet() or (idle_only and time.monotonic() - self._last_used < self._idle_s()):
            return False
        self._hibernated = True  # from here on every traffic call is refused, before it does anything
        self._publish_board()
        if self._new_data is not None:  # passive reads waiting for data end now (see passive)
            self._new_data.set()
            self._new_data = None
        pause_point(self.directory, "hibernate-closing")
        await self.close()
        pause_point(self.directory, "hibernate-closed")
        log.info("partition %s-%d hibernated at offsets [%d, %d)", self.topic, self.partition,
                 self._log.log_start_offset, self._log.log_end_offset)
        return True

    async def usage(self) -> tuple[int, float]:
        """(calls in flight, monotonic time of the last call's end): for the router's LRU choice."""
        return self._in_flight, self._last_used

    async def state(self) -> str:
        """"active", or "hibernated" once :meth:`hibernate` closed the log (the router then stops it)."""
        return "hibernated" if self._hibernated else "active"

    async def close(self) -> None:
        """Flush and write the clean-shutdown marker so the next open skips recovery."""
        if self._maintenance is not None:
            self._maintenance.cancel()
        if self._expiry is not None:
            self._expiry.cancel()
        if self._idle_watch is not None and self._idle_watch is not asyncio.current_task():
            self._idle_watch.cancel()
        self._close_channel()
        self._group_commit.close()
        self._log.close()

    async def delete(self) -> None:
        """Remove the folder: renamed out of the way first (one durable step), then removed, here on
        the partition's own node. A crash in between leaves only a ``-delete`` folder."""
        if self._maintenance is not None:
            self._maintenance.cancel()
        if self._expiry is not None:
            self._expiry.cancel()
        self._close_channel()
        doomed = mark_for_deletion(self.directory)
        self._log.delete()  # closes the files; the folder's name is already free
        remove_marked(doomed)

    # ---------------------------------------------------------------- helpers
    def _close_channel(self) -> None:
        if self._board is not None:
            self._board.retire()
            self._board = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def _start_maintenance(self) -> None:
        if self._maintenance is None:
            self._maintenance = asyncio.get_running_loop().create_task(self._maintain())
        self._start_expiry()

    def _start_expiry(self) -> None:
        if self._expiry is None:
            self._expiry = asyncio.get_running_loop().create_task(self._expire_producers())

    async def _expire_producers(self) -> None:
        """Kafka's producer-expiration check: every ``producer.id.expiration.check.interval.ms``,
        forget idempotent producers idle for ``producer.id.expiration.ms``."""
        while True:
            await asyncio.sleep(self._expiration_check_s)
            if self._log.offline is not None or self._log.closed:
                continue
            try:
                gone = self._log.expire_producers()
            except Exception:
                log.exception("producer expiration of %s-%d failed", self.topic, self.partition)
                continue
            for pid in gone:
                self._expired[pid] = None
            while len(self._expired) > EXPIRED_IDS_KEPT:
                self._expired.popitem(last=False)

    async def set_producer_expiration(self, producer_id_expiration_ms: int,
                                      producer_id_expiration_check_interval_ms: int | None = None) -> None:
        """The broker's ``producer.id.expiration.ms`` changed (dynamic; the router tells every active partition)."""
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._log.set_producer_id_expiration_ms(producer_id_expiration_ms)
        if producer_id_expiration_check_interval_ms is not None:
            self._expiration_check_s = producer_id_expiration_check_interval_ms / 1000.0
        if self._expiry is not None and not self._hibernated:  # count the next check with the new values
            self._expiry.cancel()
            self._expiry = None
            self._start_expiry()

    async def _maintain(self) -> None:
        """Retention and time-based flush on a timer, as Kafka's log manager does."""
        while True:
            flush_ms = self._log.config.flush_ms
            interval = min(self._maintenance_interval_s, max(flush_ms / 1000.0, 0.05))
            await asyncio.sleep(interval)
            if self._log.offline is not None:
                continue  # waits for reopen(); every client call reports the error meanwhile
            try:
                if flush_ms < self._maintenance_interval_s * 1000:
                    self._log.flush()
                self._log.apply_retention()
            except Exception:  # keep maintaining; the error is logged for the operator
                log.exception("maintenance of %s-%d failed", self.topic, self.partition)
            self._publish_board()


@functools.cache
def partition_actor_class():
    """The Ray actor class with the options every partition uses, made once per process.

    Each new remote class is exported to the GCS at its first creation: pickled, and
    disassembled (``dis``) for Ray's collision check. Made anew per activation, that was
    30-45% of the router's CPU in a burst of activations (py-spy, docs/benchmarks.md), its
    event loop stalled behind the GIL and missed broker heartbeats."""
    return ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0, max_concurrency=1000)(PartitionActor)
