"""TxnCoordinatorActor: the transactional ids whose ``__transaction_state`` partition this node leads.

As in Kafka, the coordinator of a ``transactional.id`` is the leader of the id's
partition of ``__transaction_state`` (the router creates the compacted topic with the
broker, like ``__consumer_offsets``). Each node has one such actor
(``txn-coordinator-<node id>``, pinned there, created on first use). It hosts one
pure coordinator core (:class:`logan_ray.transactions.TransactionCoordinator`) per
partition it took over, and does what the core's answers ask:

- the records go to ``__transaction_state`` through the partition's actor with
  acks=all before the client is answered; a failed append drops the partition (the
  next request replays it, as the core's contract says);
- the markers go to each partition's leader (``PartitionActor.write_marker``, the
  internal equivalent of WriteTxnMarkers); a marker in ``__consumer_offsets`` also tells
  that partition's group coordinator to apply (commit) or drop (abort) the offsets the
  transaction sent with TxnOffsetCommit; once all are written, the completion is logged.

Takeover replays the partition from its leader (``fetch_to_log_end``) in the leader
epoch, which is the coordinator epoch of the markers; transactions caught between
prepare and complete get their markers again. A timer aborts the transactions older
than their ``transaction.timeout.ms`` and gives up partitions another node leads now.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from typing import Any, Iterable

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from logan_ray.common.errors import NotCoordinatorError
from logan_ray.groups import OFFSETS_TOPIC, offsets_log, ownership
from logan_ray.protocol import errors as E
from logan_ray.storage.batch_header import iter_headers
from logan_ray.storage.producer_state import InvalidProducerEpochError, TransactionCoordinatorFencedError
from logan_ray.storage.records import decode_batch
from logan_ray.transactions import MarkerWrite, Outcome, TransactionCoordinator, TxnLogRecord

from .names import NAMESPACE, ROUTER_NAME

log = logging.getLogger("logan_ray.transactions")

TXN_TOPIC = "__transaction_state"
TXN_PARTITIONS = 8
TXN_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": str(64 << 20)}
#: Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms is 10 s; a check is cheap here.
ABORT_CHECK_S = 1.0
REPLAY_CHUNK = 8 << 20
MARKER_RETRY_S = 0.5
PRODUCER_IDS_KEPT = 2  # producer ids fetched ahead from the router: the core allocates synchronously


#: a core holding nothing, for the shape of a DescribeTransactions entry this node cannot answer
_NOBODY = TransactionCoordinator(new_producer_id=lambda: -1, clock=lambda: 0)


def txn_coordinator_name(node_id: str) -> str:
    return f"txn-coordinator-{node_id}"


def partition_for_txn(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition of a transactional id (Kafka: abs(hashCode) % partitions)."""
    return offsets_log.partition_for_group(transactional_id, partitions)


class _Owned:
    """One partition of ``__transaction_state`` served here: its core, epoch and leader's actor."""

    def __init__(self, part: int, epoch: int, core: TransactionCoordinator, handle: Any) -> None:
        self.part = part
        self.epoch = epoch
        self.core = core
        self.handle = handle
        self.lock = asyncio.Lock()  # one change of the core and its append at a time


class TxnCoordinatorActor:
    def __init__(self, abort_check_s: float = ABORT_CHECK_S) -> None:
        self.node_id = ray.get_runtime_context().get_node_id()
        self.abort_check_s = abort_check_s
        self._owned: dict[int, _Owned] = {}
        self._taking: dict[int, asyncio.Task] = {}
        self._pids: list[int] = []
        self._partitions = TXN_PARTITIONS
        self._offsets_partitions = 1
        self._started: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self.aborted_on_timeout = 0

    # ============================================================ routing and takeover
    async def _router(self) -> Any:
        return ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)

    async def _routes(self) -> dict[str, Any]:
        routes = await (await self._router()).route_with_ids.remote([TXN_TOPIC, OFFSETS_TOPIC])
        if routes.get(TXN_TOPIC) is None:
            raise RuntimeError(f"{TXN_TOPIC} does not exist (the router creates it at its start)")
        return routes

    async def _start(self) -> None:
        if self._started is None:
            self._started = asyncio.get_running_loop().create_task(self._start_once())
        await asyncio.shield(self._started)

    async def _start_once(self) -> None:
        routes = await self._routes()
        self._partitions = len(routes[TXN_TOPIC]["partitions"])
        if routes.get(OFFSETS_TOPIC) is not None:
            self._offsets_partitions = len(routes[OFFSETS_TOPIC]["partitions"])
        self._spawn(self._timer_loop())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _own(self, transactional_id: str) -> _Owned:
        """The partition of ``transactional_id``, replayed here first if needed; NotCoordinatorError
        when another node leads it (the client asks FindCoordinator again)."""
        await self._start()
        part = partition_for_txn(transactional_id, self._partitions)
        if part not in self._owned:
            task = self._taking.get(part)
            if task is None or task.done():
                task = self._taking[part] = asyncio.get_running_loop().create_task(self._take_over(part))
            await asyncio.shield(task)
        owned = self._owned.get(part)
        if owned is None:
            raise NotCoordinatorError(f"{TXN_TOPIC}-{part} is not led by this node ({self.node_id[:8]})")
        return owned

    async def _take_over(self, part: int) -> None:
        lead = ownership.leadership((await self._routes())[TXN_TOPIC], part)
        if not ownership.owns(self.node_id, lead):
            return
        started = time.perf_counter()
        handle = await (await self._router()).activate.remote(TXN_TOPIC, part)
        records = await self._read_all(handle)
        core = TransactionCoordinator(new_producer_id=self._next_producer_id, clock=lambda: int(time.time() * 1000),
                                      offsets_partition=self._offsets_partition)
        pending = core.load(records, coordinator_epoch=lead.epoch)
        if ownership.leadership((await self._routes())[TXN_TOPIC], part) != lead:
            return  # it moved during the replay
        owned = self._owned[part] = _Owned(part, lead.epoch, core, handle)
        log.info("txn coordinator on %s: took over %s-%d (epoch %d): %d ids from %d records in %.1f ms",
                 self.node_id[:8], TXN_TOPIC, part, lead.epoch, len(core.txns), len(records),
                 (time.perf_counter() - started) * 1e3)
        if pending.markers:  # transactions prepared but not completed: their markers again
            self._spawn(self._complete(owned, pending.markers))

    async def _read_all(self, handle: Any) -> list[tuple[bytes, bytes | None]]:
        """Every record of the partition, log start to log end (what this leader holds, as Kafka's replay)."""
        pos = (await handle.offsets.remote())[0]
        out: list[tuple[bytes, bytes | None]] = []
        while True:
            data, end, log_start = await handle.fetch_to_log_end.remote(pos, REPLAY_CHUNK)
            if not data:
                if log_start > pos:
                    pos = log_start
                    continue
                return out
            nxt = pos
            for bpos, h in iter_headers(data):
                nxt = max(nxt, h.next_offset)
                if h.is_control:
                    continue
                _, recs = decode_batch(data, bpos)
                out += [(r.key, r.value) for r in recs if r.offset >= pos]
            if nxt == pos or nxt >= end:
                return out
            pos = nxt

    def _offsets_partition(self, group_id: str) -> int:
        return offsets_log.partition_for_group(group_id, self._offsets_partitions)

    def _next_producer_id(self) -> int:
        if not self._pids:
            raise RuntimeError("no producer id reserved")
        return self._pids.pop(0)

    async def _reserve_producer_ids(self) -> None:
        while len(self._pids) < PRODUCER_IDS_KEPT:
            self._pids.append(await (await self._router()).allocate_producer_id.remote())

    def _drop(self, owned: _Owned, why: str) -> None:
        if self._owned.get(owned.part) is owned:
            del self._owned[owned.part]
            log.warning("txn coordinator on %s: gave up %s-%d: %s", self.node_id[:8], TXN_TOPIC, owned.part, why)

    # ============================================================ running the core
    async def _append(self, owned: _Owned, records: Iterable[TxnLogRecord]) -> None:
        """Append with acks=all. A refused append is tried once more on the partition's current actor
        if this node still leads it in the same epoch (the actor hibernated after ``partition.idle.ms``
        or was restarted in place); otherwise the error goes up and the caller drops the partition."""
        batch = offsets_log.build_records([(r.key, r.value) for r in records])
        try:
            await owned.handle.append_durable.remote(batch, internal=True)
            return
        except Exception as e:
            first = e
        router = await self._router()
        handle, _ = await router.reactivate.remote(TXN_TOPIC, owned.part, owned.handle._actor_id.hex())
        lead = ownership.leadership((await self._routes())[TXN_TOPIC], owned.part)
        if not ownership.owns(self.node_id, lead) or lead.epoch != owned.epoch:
            raise first
        owned.handle = handle
        await handle.append_durable.remote(batch, internal=True)

    async def _apply(self, transactional_id: str, call: Any, wait_markers: bool = True) -> Outcome:
        """Run ``call(core)`` under the partition's lock, log its records, then write its markers."""
        try:
            owned = await self._own(transactional_id)
        except NotCoordinatorError:
            return Outcome(error=E.NOT_COORDINATOR)
        async with owned.lock:
            if self._owned.get(owned.part) is not owned:
                return Outcome(error=E.NOT_COORDINATOR)
            await self._reserve_producer_ids()
            out = call(owned.core)
            if out.records:
                try:
                    await self._append(owned, out.records)
                except Exception as e:  # the core changed but the log did not: replay before serving again
                    self._drop(owned, f"an append failed: {e!r}")
                    return Outcome(error=E.NOT_COORDINATOR)
        if out.markers:
            if wait_markers:
                await self._complete(owned, out.markers)
            else:
                self._spawn(self._complete(owned, out.markers))
        return out

    async def _complete(self, owned: _Owned, markers: Iterable[MarkerWrite]) -> None:
        """Write each transaction's markers, then log its completion (retrying until done or given up)."""
        by_txn: dict[tuple[str, int, int], list[MarkerWrite]] = defaultdict(list)
        for m in markers:
            by_txn[(m.transactional_id, m.producer_id, m.producer_epoch)].append(m)
        await asyncio.gather(*(self._complete_one(owned, key, ms) for key, ms in by_txn.items()))

    async def _complete_one(self, owned: _Owned, key: tuple[str, int, int], markers: list[MarkerWrite]) -> None:
        left = list(markers)
        while left and self._owned.get(owned.part) is owned:
            results = await asyncio.gather(*(self._write_marker(m) for m in left), return_exceptions=True)
            failed = [(m, r) for m, r in zip(left, results) if isinstance(r, BaseException)]
            for m, r in failed:
                log.warning("txn coordinator: marker for %s-%d of %s failed, retrying: %r", m.topic, m.partition,
                            m.transactional_id, r)
            left = [m for m, _ in failed]
            if left:
                await asyncio.sleep(MARKER_RETRY_S)
        if left:
            return  # given up: the next coordinator's replay writes them again
        async with owned.lock:
            if self._owned.get(owned.part) is not owned:
                return
            out = owned.core.markers_written(*key)
            if out.records:
                try:
                    await self._append(owned, out.records)
                except Exception as e:
                    self._drop(owned, f"an append failed: {e!r}")

    async def _write_marker(self, m: MarkerWrite) -> None:
        router = await self._router()
        handle = await router.activate.remote(m.topic, m.partition)
        try:
            await handle.write_marker.remote(m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch)
        except (InvalidProducerEpochError, TransactionCoordinatorFencedError) as e:
            # a newer epoch already ended this producer's transaction there: nothing left to end
            log.warning("txn coordinator: marker for %s-%d refused (%s); taken as written", m.topic, m.partition, e)
        if m.topic == OFFSETS_TOPIC:
            from .group_coordinator import coordinator_on

            route = (await router.route_with_ids.remote([OFFSETS_TOPIC]))[OFFSETS_TOPIC]
            node = ownership.leadership(route, m.partition).node_id
            if node is None:
                raise RuntimeError(f"{OFFSETS_TOPIC}-{m.partition} has no leader")
            await coordinator_on(node).complete_txn_offsets.remote(m.partition, m.producer_id, m.commit)

    # ============================================================ timers
    async def _timer_loop(self) -> None:
        while True:
            await asyncio.sleep(self.abort_check_s)
            try:
                await self._tick()
            except Exception:
                log.exception("txn coordinator: timer failed")

    async def _tick(self) -> None:
        routes = await self._routes()
        for part in ownership.lost(self.node_id, {p: o.epoch for p, o in self._owned.items()}, routes[TXN_TOPIC]):
            self._drop(self._owned[part], "another node or epoch leads it")
        for owned in list(self._owned.values()):
            async with owned.lock:
                if self._owned.get(owned.part) is not owned:
                    continue
                out = owned.core.abort_expired()
                if out.records:
                    try:
                        await self._append(owned, out.records)
                    except Exception as e:
                        self._drop(owned, f"an append failed: {e!r}")
                        continue
            if out.markers:
                self.aborted_on_timeout += len({m.transactional_id for m in out.markers})
                self._spawn(self._complete(owned, out.markers))

    # ============================================================ the APIs
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = -1,
                               producer_epoch: int = -1) -> tuple[int, int, int]:
        """(error, producer id, epoch). An ongoing transaction is aborted first (CONCURRENT_TRANSACTIONS),
        its markers written off the request path, as Kafka does."""
        out = await self._apply(transactional_id, lambda c: c.init_producer_id(
            transactional_id, timeout_ms, producer_id, producer_epoch), wait_markers=False)
        return out.error, out.producer_id, out.producer_epoch

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[tuple[str, int]]) -> int:
        out = await self._apply(transactional_id, lambda c: c.add_partitions(
            transactional_id, producer_id, producer_epoch, partitions))
        return out.error

    async def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """KIP-890 verification for a partition leader: is each partition in the ongoing transaction?"""
        try:
            owned = await self._own(transactional_id)
        except NotCoordinatorError:
            return {p: E.NOT_COORDINATOR for p in partitions}
        return owned.core.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> int:
        out = await self._apply(transactional_id, lambda c: c.add_offsets(
            transactional_id, producer_id, producer_epoch, group_id))
        return out.error

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                      transaction_version: int = 0) -> tuple[int, int, int]:
        """(error, producer id, epoch): answered once the markers are written and the completion logged."""
        out = await self._apply(transactional_id, lambda c: c.end_txn(
            transactional_id, producer_id, producer_epoch, commit, transaction_version))
        return out.error, out.producer_id, out.producer_epoch

    async def describe(self, transactional_ids: list[str]) -> list[dict]:
        out = []
        for tid in transactional_ids:
            try:
                owned = await self._own(tid or " ")
            except NotCoordinatorError:
                out.append({**_NOBODY.describe(tid or " "), "transactional_id": tid, "error_code": E.NOT_COORDINATOR})
                continue
            out.append(owned.core.describe(tid))
        return out

    async def list_transactions(self, state_filters: list[str], producer_id_filters: list[int],
                                duration_filter_ms: int = -1) -> dict:
        """ListTransactions over every partition this node leads (each taken over first)."""
        await self._start()
        route = (await self._routes())[TXN_TOPIC]
        mine = [p for p in range(len(route["partitions"]))
                if ownership.owns(self.node_id, ownership.leadership(route, p))]
        for part in mine:
            if part not in self._owned:
                await self._take_over(part)
        merged = {"error_code": E.NONE, "unknown_state_filters": [], "transaction_states": []}
        for part in sorted(self._owned):
            got = self._owned[part].core.list_transactions(state_filters, producer_id_filters, duration_filter_ms)
            merged["unknown_state_filters"] = got["unknown_state_filters"]
            merged["transaction_states"] += got["transaction_states"]
        return merged

    async def stats(self) -> dict:
        return {"owned": sorted(self._owned), "aborted_on_timeout": self.aborted_on_timeout,
                "transactions": sum(len(o.core.txns) for o in self._owned.values())}


def txn_coordinator_class() -> Any:
    return ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0, max_concurrency=10_000)(TxnCoordinatorActor)


def txn_coordinator_on(node_id: str, abort_check_s: float = ABORT_CHECK_S) -> Any:
    """The transaction coordinator actor of node ``node_id``, created there (detached, pinned) when absent."""
    try:
        return ray.get_actor(txn_coordinator_name(node_id), namespace=NAMESPACE)
    except ValueError:
        pass
    return txn_coordinator_class().options(
        name=txn_coordinator_name(node_id), namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
    ).remote(abort_check_s)
