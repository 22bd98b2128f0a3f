"""The node's replica fetcher: keeps this node's follower replicas in step with their leaders.

Kafka's ``ReplicaFetcherThread``, in the gateway actor (one per node, pinned
there): no process per follower. Every follower replica this node holds is a
:class:`~logan_ray.storage.log.PartitionLog` in its own folder
(``replica_placement.follower_dir``), opened here. For each leader node one
loop sends real Kafka Fetch requests (v12) over TCP to that leader's gateway,
logged in as this broker first (``broker_link.py``: the inter-broker listener, TLS
when it has it, the LOGAN-RAY-BROKER login), all its partitions in one request, with ``replica_id`` = this broker's id, the
``current_leader_epoch`` it knows and ``last_fetched_epoch`` (KIP-320/595): the
fetch offset is the follower's log end, which is how the leader learns the
follower's position (there is no separate report). Records are written with
``append_as_follower`` (the leader's bytes, as they are); a ``diverging_epoch``
answer is resolved as Kafka's ``getOffsetTruncationState`` and cut with
``truncate_to`` before the next fetch; an OFFSET_OUT_OF_RANGE answer to a
follower whose log ends below the leader's log start empties it and restarts it
there (``truncate_fully_and_start_at``). The follower's high watermark is the
leader's, from each answer, and its log start follows the leader's (retention,
DeleteRecords) up to that high watermark. Leader changes are followed by re-reading the
assignments from the router (the controller) every second, at once after a
fencing or not-leader error.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from logan_ray.actors.names import broker_id
from logan_ray.storage.batch_header import LOG_OVERHEAD, header_at
from logan_ray.storage.config import TopicConfig
from logan_ray.storage.hw_checkpoint import CHECKPOINT_INTERVAL_S, read_high_watermark, write_high_watermark
from logan_ray.storage.log import PartitionLog

from .broker_link import BrokerLink, InterBrokerListener

log = logging.getLogger("logan_ray.replica_fetcher")

FETCH_VERSION = 12  # topic names, replica_id at the top, last_fetched_epoch and diverging_epoch
REFRESH_S = 1.0  # how often the assignments are re-read from the router
MAX_WAIT_MS = 500  # long poll at the leader (Kafka's replica.fetch.wait.max.ms)
PARTITION_MAX_BYTES = 1 << 20  # Kafka's replica.fetch.max.bytes
RESPONSE_MAX_BYTES = 10 << 20  # Kafka's replica.fetch.response.max.bytes
BACKOFF_S = 0.5  # after a failed fetch (Kafka's replica.fetch.backoff.ms is 1000)
OFFSET_OUT_OF_RANGE = 1
_REFRESH_ERRORS = {3, 6, 74, 75, 100}  # unknown partition, not leader, fenced/unknown epoch, unknown topic id


@dataclass
class Follower:
    topic: str
    partition: int
    leader: str
    leader_epoch: int
    log: PartitionLog
    high_watermark: int = 0
    saved_hw: int | None = None  # the value in its replication-offset-checkpoint


async def checkpoint(f: Follower) -> None:
    """Write a follower's high watermark to its folder when it moved (``hw_checkpoint``)."""
    if f.high_watermark != f.saved_hw:
        hw = f.high_watermark
        await asyncio.to_thread(write_high_watermark, f.log.directory, hw)
        f.saved_hw = hw


def whole_batches(buf: bytes | memoryview) -> memoryview:
    """The leading whole batches of fetched bytes (a leader may cut the last one at the size limit)."""
    view = memoryview(buf)
    pos = 0
    while pos + LOG_OVERHEAD <= len(view):
        end = pos + LOG_OVERHEAD + int.from_bytes(view[pos + 8:pos + 12], "big", signed=True)
        if end > len(view):
            break
        pos = end
    return view[:pos]


def truncation_offset(log_: PartitionLog, epoch: int, end_offset: int) -> int:
    """Where a follower cuts on ``diverging_epoch`` {epoch, end_offset} (Kafka's getOffsetTruncationState).

    The follower's own end of the largest epoch <= the leader's: if that is the
    leader's epoch, the smaller of both ends; otherwise the follower's end of its
    own older epoch (the next fetch checks again from there).
    """
    local_epoch, local_end = log_.end_offset_for_epoch(epoch)
    if local_epoch < 0:
        return min(end_offset, log_.log_end_offset) if local_end < 0 else local_end
    if local_epoch == epoch:
        return min(end_offset, local_end)
    return local_end


class ReplicaFetcher:
    def __init__(self, router: Any, node_id: str, listener: InterBrokerListener | None = None) -> None:
        self._router = router
        self.node_id = node_id
        self.broker_id = broker_id(node_id)
        self._listener = listener or InterBrokerListener()
        self._secret: str | None = None  # the cluster's broker secret (broker_link's login), asked once
        self._followers: dict[tuple[str, int], Follower] = {}
        self._loops: dict[str, tuple[tuple[str, int], asyncio.Task]] = {}  # leader node -> (endpoint, loop)
        self._task: asyncio.Task | None = None
        self._stale = asyncio.Event()
        #: partitions handed over to a new leader on this node: (topic, partition) -> its leader epoch
        self._released: dict[tuple[str, int], int] = {}

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        tasks = [t for _e, t in self._loops.values()] + ([self._task] if self._task else [])
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loops.clear()
        self._task = None
        for f in list(self._followers.values()):
            try:
                await checkpoint(f)
            except OSError:
                pass
            await asyncio.to_thread(f.log.close)
        self._followers.clear()

    async def release(self, topic: str, partition: int, leader_epoch: int) -> bool:
        """Stop following a partition and close its log, before this node's new leader opens it
        (Kafka's makeLeader removes it from the fetcher). Assignments older than ``leader_epoch``
        cannot bring it back. True when a follower log was open here."""
        key = (topic, partition)
        self._released[key] = max(leader_epoch, self._released.get(key, -1))
        f = self._followers.pop(key, None)
        if f is not None:
            await checkpoint(f)  # the new leader starts its high watermark there
            await asyncio.to_thread(f.log.close)
            log.info("replica fetcher: %s-%d handed over to the new leader here (epoch %d)", topic, partition,
                     leader_epoch)
        return f is not None

    def refresh_soon(self) -> None:
        """Re-read the assignments from the router now (a leadership changed), not at the next round."""
        self._stale.set()

    def state(self) -> dict[str, dict[str, Any]]:
        """{"topic-partition": {log_start, log_end, high_watermark, leader, leader_epoch, directory}} of every
        follower."""
        return {f"{t}-{p}": {"log_start": f.log.log_start_offset, "log_end": f.log.log_end_offset,
                             "high_watermark": f.high_watermark,
                             "leader": f.leader, "leader_epoch": f.leader_epoch, "directory": f.log.directory}
                for (t, p), f in self._followers.items()}

    async def _run(self) -> None:
        saved = time.monotonic()
        while True:
            if time.monotonic() - saved >= CHECKPOINT_INTERVAL_S:
                saved = time.monotonic()
                for f in list(self._followers.values()):
                    try:
                        await checkpoint(f)
                    except OSError as e:
                        log.warning("replica fetcher: %s-%d: high watermark checkpoint not written: %s",
                                    f.topic, f.partition, e)
            try:
                await self._refresh()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the router may be restarting: try again next round
                log.warning("replica fetcher: reading assignments failed: %s", e)
            try:
                await asyncio.wait_for(self._stale.wait(), REFRESH_S)
            except asyncio.TimeoutError:
                pass
            self._stale.clear()

    async def _refresh(self) -> None:
        assignments = await self._router.follower_assignments.remote(self.node_id)
        if not assignments and not self._followers and not self._loops:
            return  # nothing to follow, before or now: the leaders' addresses are not needed (one call a second less)
        if self._listener.name is None:
            gateways = await self._router.gateways.remote()
        else:  # the leaders' addresses on the inter-broker listener
            gateways = await self._router.listener_gateways.remote(self._listener.name)
        wanted = {(a["topic"], a["partition"]): a for a in assignments
                  if a["leader_epoch"] > self._released.get((a["topic"], a["partition"]), -1)}
        for key in [k for k in self._followers if k not in wanted]:
            f = self._followers.pop(key)
            await checkpoint(f)
            await asyncio.to_thread(f.log.close)
        for key, a in wanted.items():
            f = self._followers.get(key)
            if f is None:
                plog = await asyncio.to_thread(PartitionLog, a["directory"], TopicConfig.from_dict(a["config"]))
                saved = await asyncio.to_thread(read_high_watermark, a["directory"])
                f = self._followers[key] = Follower(a["topic"], a["partition"], a["leader"], a["leader_epoch"], plog,
                                                    min(saved or 0, plog.log_end_offset), saved)
                log.info("replica fetcher: following %s-%d from offset %d", key[0], key[1], plog.log_end_offset)
            f.leader, f.leader_epoch = a["leader"], a["leader_epoch"]
        leaders = {f.leader for f in self._followers.values()}
        for leader in list(self._loops):
            endpoint, task = self._loops[leader]
            if leader not in leaders or gateways.get(leader) != endpoint or task.done():
                task.cancel()
                del self._loops[leader]
        for leader in leaders:
            if leader not in self._loops and gateways.get(leader) is not None:
                endpoint = tuple(gateways[leader])
                self._loops[leader] = (endpoint, asyncio.get_running_loop().create_task(
                    self._fetch_loop(leader, endpoint)))

    async def _fetch_loop(self, leader: str, endpoint: tuple[str, int]) -> None:
        """One connection to ``leader``'s gateway, logged in as this broker, one Fetch after another for all
        its partitions here."""
        while True:
            link = None
            try:
                if self._secret is None:
                    self._secret = await self._router.broker_secret.remote()
                link = await BrokerLink.open(endpoint, self.broker_id, self._secret, self._listener,
                                             f"replica-{self.broker_id}")
                while True:
                    parts = [f for f in self._followers.values() if f.leader == leader]
                    if not parts:
                        return
                    body = await link.call(1, FETCH_VERSION, self._request(parts))
                    if not await self._apply(parts, body):
                        await asyncio.sleep(BACKOFF_S)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # leader gone or restarting: the refresh finds the new one
                log.warning("replica fetcher: fetching from %s at %s failed: %s", leader[:8], endpoint, e)
                self._stale.set()
                await asyncio.sleep(BACKOFF_S)
            finally:
                if link is not None:
                    link.close()

    def _request(self, parts: list[Follower]) -> dict[str, Any]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for f in parts:
            topics.setdefault(f.topic, []).append({
                "partition": f.partition, "current_leader_epoch": f.leader_epoch,
                "fetch_offset": f.log.log_end_offset, "last_fetched_epoch": f.log.leader_epoch,
                "log_start_offset": f.log.log_start_offset, "partition_max_bytes": PARTITION_MAX_BYTES})
        return {"replica_id": self.broker_id, "max_wait_ms": MAX_WAIT_MS, "min_bytes": 1,
                "max_bytes": RESPONSE_MAX_BYTES, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [], "rack_id": ""}

    async def _apply(self, parts: list[Follower], body: dict[str, Any]) -> bool:
        """Write one answer into the follower logs; False when nothing could be done (back off)."""
        by_key = {(f.topic, f.partition): f for f in parts}
        progressed = True
        if body.get("error_code"):
            self._stale.set()
            return False
        for t in body["responses"]:
            for p in t["partitions"]:
                f = by_key.get((t["topic"], p["partition_index"]))
                if f is None or self._followers.get((f.topic, f.partition)) is not f:
                    continue  # no longer followed here
                code = p["error_code"]
                leader_start = p.get("log_start_offset", -1)
                if code == OFFSET_OUT_OF_RANGE and leader_start > f.log.log_end_offset:
                    # Behind the leader's log start (a new replica of a partition whose retention or
                    # DeleteRecords moved on, or away longer than the retention): start over there,
                    # as Kafka's fetcher does (truncateFullyAndStartAt).
                    await asyncio.to_thread(f.log.truncate_fully_and_start_at, leader_start)
                    f.high_watermark = leader_start
                    continue
                if code:
                    progressed = False
                    if code in _REFRESH_ERRORS:
                        self._stale.set()
                    log.info("replica fetcher: %s-%d: error %d from leader %s", f.topic, f.partition, code,
                             f.leader[:8])
                    continue
                div = p.get("diverging_epoch") or {}
                if div.get("end_offset", -1) >= 0 and div.get("epoch", -1) >= 0:
                    cut = truncation_offset(f.log, div["epoch"], div["end_offset"])
                    end = await asyncio.to_thread(f.log.truncate_to, cut)
                    log.info("replica fetcher: %s-%d diverged at epoch %d: truncated to %d", f.topic, f.partition,
                             div["epoch"], end)
                    continue
                data = whole_batches(p.get("records") or b"")
                if len(data):
                    first = header_at(data)
                    end = f.log.log_end_offset
                    if f.log.log_start_offset == end and first.base_offset < end <= \
                            first.base_offset + first.last_offset_delta:
                        # an empty log restarted at the leader's log start, which lies inside this batch
                        # (DeleteRecords): start at the batch instead, as Kafka's follower does; the log
                        # start follows the leader's again below
                        await asyncio.to_thread(f.log.truncate_fully_and_start_at, first.base_offset)
                    await asyncio.to_thread(f.log.append_as_follower, data)
                f.high_watermark = min(p["high_watermark"], f.log.log_end_offset)
                if f.log.log_start_offset < leader_start and f.log.log_start_offset < f.high_watermark:
                    # the leader's retention or DeleteRecords moved its log start: follow it (up to our
                    # high watermark), so this replica, if elected, serves no record the leader deleted
                    await asyncio.to_thread(f.log.delete_records, min(leader_start, f.high_watermark),
                                            high_watermark=f.high_watermark)
        return progressed
