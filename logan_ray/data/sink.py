"""``write_topic``: a Ray Dataset into a topic through the partition actors.

Each write task partitions a block's rows with the producer's murmur2 rule
(vectorised over the key column), builds whole v2 batches per partition and
sends them in ``append`` calls of at most five batches, so a block costs one
actor call per partition it touches and five batches. Batches carry an
idempotent producer id and sequence, so a resend after a partition actor
restart is deduplicated by the actor instead of written twice: the broker
remembers a producer's last five batches (Kafka's duplicate window), which is
why no append carries more, and why a partition's appends go one at a time.
A batch never exceeds min(``batch_bytes``, the topic's ``max.message.bytes``)
with its framing; a record that cannot fit fails the write with RecordTooLargeError.

``exactly_once=True`` writes in two phases, as Flink's Kafka sink: task ``i`` opens a
transaction under the transactional id ``f"{prefix}-{i}"`` (InitProducerId fences an
earlier attempt of the same task and aborts its open transaction), writes its batches as
transactional ones and returns the transaction uncommitted; the driver commits them all
once every task has returned (``on_write_complete``). A retried task therefore never
writes twice: only the attempt whose answer reached the driver can be committed.
"""
from __future__ import annotations

import random
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa
import ray
from ray.data import Dataset
from ray.data.block import BlockAccessor
from ray.data.datasource import Datasink

from logan_ray._ray import ACTOR_GONE, get
from logan_ray.errors import ExactlyOnceCommitError, RecordTooLargeError
from logan_ray.prepared_txn import (PreparedTransaction, add_partitions, commit_prepared_transaction, open_transaction,
                                    start_coordinators)
from logan_ray.producer import COMPRESSION_HEADROOM, DEFAULT_MAX_MESSAGE_BYTES, HEADER_OVERHEAD, RECORD_OVERHEAD
from logan_ray.storage.batch_header import HEADER_SIZE
from logan_ray.storage.compression import NONE, codec_id
from logan_ray.storage.producer_state import RETAINED_BATCHES
from logan_ray.storage.record_builder import build_batch

from .murmur import partitions_for_keys
from .values import encode_column

BATCH_BYTES = 512 << 10  # bytes per batch at most; the topic's max.message.bytes may lower it
APPEND_BATCHES = RETAINED_BATCHES  # batches per append call: what the broker's duplicate window covers
RETRIES = 10
COMMIT_THREADS = 8  # the driver's EndTxn calls in flight at once
_RETRIABLE = ACTOR_GONE

Partitioner = Callable[[Any, int], int]


class TopicDatasink(Datasink):
    def __init__(self, topic: str, actors: Sequence[Any], router: Any, *, key: str | None, value: Any,
                 partition: str | None, timestamp: str | None, headers: str | None,
                 key_format: str | None, value_format: str | None, partitioner: Partitioner | None,
                 compression: int, batch_bytes: int, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 durable: bool = True, transactional_id_prefix: str | None = None,
                 transaction_timeout_ms: int = 900_000) -> None:
        self.topic = topic
        self.actors = list(actors)
        self.router = router
        self.key, self.value = key, value
        self.partition, self.timestamp, self.headers = partition, timestamp, headers
        self.key_format, self.value_format = key_format, value_format
        self.partitioner = partitioner
        self.compression = compression
        self.batch_bytes = batch_bytes
        self.max_message_bytes = max_message_bytes
        self.durable = durable
        self.transactional_id_prefix = transactional_id_prefix  # set: exactly once, in transactions
        self.transaction_timeout_ms = transaction_timeout_ms
        self.result: dict[int, int] = {}
        self.committed: list[str] = []  # the transactional ids committed by on_write_complete

    def get_name(self) -> str:
        return "LoganTopic"

    # ------------------------------------------------------------ per task
    def write(self, blocks: Iterable[Any], ctx: Any) -> Any:
        if self.transactional_id_prefix is not None:
            return self.write_attempt(blocks, ctx.task_idx)
        return self._write_blocks(blocks, get(self.router.allocate_producer_id.remote()))

    def _write_blocks(self, blocks: Iterable[Any], producer_id: int, **table_options: Any) -> dict[int, int]:
        """Every block's rows as batches of ``producer_id`` (sequences counted per partition): {partition: records}."""
        sequences: dict[int, int] = {}
        written: dict[int, int] = {}
        for block in blocks:
            table = BlockAccessor.for_block(block).to_arrow()
            if table.num_rows == 0:
                continue
            for p, n in self._write_table(table, producer_id, sequences, **table_options).items():
                written[p] = written.get(p, 0) + n
        return written

    def write_attempt(self, blocks: Iterable[Any], task_idx: int) -> tuple[dict[int, int], PreparedTransaction]:
        """One attempt of write task ``task_idx`` in its own transaction, left open for the driver.

        The transactional id depends on the task alone, so opening it fences every earlier
        attempt of the task (a worker that died after writing, a task Ray ran again) and
        aborts what that attempt wrote."""
        tid = f"{self.transactional_id_prefix}-{task_idx}"
        producer_id, epoch = open_transaction(tid, self.transaction_timeout_ms)
        added: set[int] = set()

        def add(parts: set[int]) -> None:
            new = sorted(parts - added)
            if new:
                add_partitions(tid, producer_id, epoch, [(self.topic, p) for p in new])
                added.update(new)

        written = self._write_blocks(blocks, producer_id, epoch=epoch, before_append=add)
        txn = PreparedTransaction(tid, producer_id, epoch, tuple((self.topic, p) for p in sorted(added)))
        return written, txn

    def _write_table(self, table: pa.Table, producer_id: int, sequences: dict[int, int], *, epoch: int = 0,
                     before_append: Callable[[set[int]], None] | None = None) -> dict[int, int]:
        n = len(self.actors)
        values = self._values(table)
        keys = encode_column(table.column(self.key), self.key_format) if self.key else None
        parts = self._partitions(table, keys, n)
        timestamps = self._timestamps(table)
        headers = self._headers(table)

        order = np.argsort(parts, kind="stable")
        sorted_parts = parts[order]
        bounds = np.flatnonzero(np.diff(sorted_parts)) + 1
        queues: dict[int, list[bytes]] = {}
        counts: dict[int, int] = {}
        for rows in np.split(order, bounds):
            p = int(parts[rows[0]])
            take = pa.array(rows)
            v = values.take(take).to_pylist()
            k = keys.take(take).to_pylist() if keys is not None else None
            ts = timestamps[rows].tolist() if timestamps is not None else [int(time.time() * 1000)] * len(rows)
            h = [headers[i] for i in rows.tolist()] if headers is not None else None
            batches = self._batches(v, k, ts, h, producer_id, sequences, p, epoch)
            queues[p] = [b"".join(batches[i:i + APPEND_BATCHES]) for i in range(0, len(batches), APPEND_BATCHES)]
            counts[p] = len(rows)
        if before_append is not None:
            before_append(set(queues))  # a transaction's partitions join it before their first batch
        # One append in flight per partition, all partitions at once: a resend after a
        # crash then repeats at most the five batches the broker can recognise.
        pending = {p: (q.pop(0), 1) for p, q in queues.items()}
        refs = {p: self._append(p, payload) for p, (payload, _) in pending.items()}
        while refs:
            ready, _ = ray.wait(list(refs.values()), num_returns=1)
            p = next(q for q, r in refs.items() if r == ready[0])
            payload, attempt = pending[p]
            try:
                ray.get(ready[0])
            except _RETRIABLE:
                if attempt > RETRIES:
                    raise
                time.sleep(min(0.05 * attempt, 1.0))
                pending[p] = (payload, attempt + 1)
                refs[p] = self._append(p, payload)
                continue
            except ray.exceptions.RayTaskError as e:
                cause = getattr(e, "cause", None)
                raise (cause if isinstance(cause, Exception) else e) from None
            if queues[p]:
                pending[p] = (queues[p].pop(0), 1)
                refs[p] = self._append(p, pending[p][0])
            else:
                del refs[p], pending[p]
        return counts

    def _append(self, p: int, payload: bytes):
        actor = self.actors[p]
        return (actor.append_durable if self.durable else actor.append).remote(payload)

    def _budget(self) -> int:
        """Record-size bounds one batch may hold: min(batch_bytes, max.message.bytes) less the header."""
        limit = min(self.batch_bytes, self.max_message_bytes)
        if self.compression != NONE:
            limit -= int(limit * COMPRESSION_HEADROOM) + 64
        return max(limit - HEADER_SIZE, 1)

    def _batches(self, values: list, keys: list | None, ts: list[int], headers: list | None,
                 producer_id: int, sequences: dict[int, int], partition: int, epoch: int = 0) -> list[bytes]:
        """Whole batches of at most the budget each (upper-bound record sizes), in sequence order."""
        sizes = np.fromiter(((len(x) if x is not None else 0) for x in values), dtype=np.int64, count=len(values))
        if keys is not None:
            sizes += np.fromiter(((len(x) if x is not None else 0) for x in keys), dtype=np.int64, count=len(keys))
        sizes += RECORD_OVERHEAD
        if headers is not None:
            sizes += np.fromiter((sum(HEADER_OVERHEAD + len(hk.encode() if isinstance(hk, str) else hk)
                                      + (len(hv) if hv is not None else 0) for hk, hv in (row or ()))
                                  for row in headers), dtype=np.int64, count=len(headers))
        budget = self._budget()
        cum = np.cumsum(sizes)
        cuts = [0]
        while cuts[-1] < len(values):
            base = cum[cuts[-1] - 1] if cuts[-1] else 0
            nxt = int(np.searchsorted(cum, base + budget, side="right"))
            cuts.append(max(nxt, cuts[-1] + 1))  # a record over the budget goes alone
        out: list[bytes] = []
        spans = list(zip(cuts[:-1], cuts[1:]))
        while spans:
            a, b = spans.pop(0)
            seq = sequences.get(partition, 0)
            batch = build_batch(
                values[a:b], keys[a:b] if keys is not None else None,
                headers=headers[a:b] if headers is not None else None, timestamps=ts[a:b],
                compression=self.compression, producer_id=producer_id, producer_epoch=epoch, base_sequence=seq,
                is_transactional=self.transactional_id_prefix is not None)
            if len(batch) > self.max_message_bytes:
                if b - a == 1:
                    raise RecordTooLargeError(
                        f"a record makes a batch of {len(batch)} bytes, over max.message.bytes="
                        f"{self.max_message_bytes} of topic {self.topic!r}")
                mid = (a + b) // 2  # a compressed batch that grew: halve it
                spans[:0] = [(a, mid), (mid, b)]
                continue
            out.append(batch)
            sequences[partition] = (seq + (b - a)) & 0x7FFFFFFF
        return out

    # ------------------------------------------------------------- columns
    def _values(self, table: pa.Table) -> pa.Array:
        if isinstance(self.value, str):
            return encode_column(table.column(self.value), self.value_format)
        names = list(self.value)
        struct = pa.StructArray.from_arrays([table.column(c).combine_chunks() for c in names], names=names)
        return encode_column(struct, self.value_format or "json")

    def _partitions(self, table: pa.Table, keys: pa.Array | None, n: int) -> np.ndarray:
        rows = table.num_rows
        if self.partition is not None:
            col = table.column(self.partition)
            if col.null_count:
                raise ValueError(f"partition column {self.partition!r} holds nulls")
            parts = col.to_numpy(zero_copy_only=False).astype(np.int64)
            if rows and (parts.min() < 0 or parts.max() >= n):
                raise ValueError(f"partition column {self.partition!r} has values outside [0, {n})")
            return parts
        if self.partitioner is not None:
            ks = keys.to_pylist() if keys is not None else [None] * rows
            parts = np.fromiter((self.partitioner(k, n) for k in ks), dtype=np.int64, count=rows)
            if rows and (parts.min() < 0 or parts.max() >= n):
                raise ValueError(f"partitioner returned a partition outside [0, {n})")
            return parts
        # Unkeyed rows: one partition per block (the sticky partitioner's idea at block scale).
        sticky = random.randrange(n)
        if keys is None:
            return np.full(rows, sticky, dtype=np.int64)
        parts = partitions_for_keys(keys, n).astype(np.int64)
        if keys.null_count:
            parts[~keys.is_valid().to_numpy(zero_copy_only=False)] = sticky
        return parts

    def _timestamps(self, table: pa.Table) -> np.ndarray | None:
        if self.timestamp is None:
            return None
        col = table.column(self.timestamp)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ms", tz=col.type.tz)).cast(pa.int64())
        if col.null_count:
            raise ValueError(f"timestamp column {self.timestamp!r} holds nulls")
        return col.to_numpy(zero_copy_only=False).astype(np.int64)

    def _headers(self, table: pa.Table) -> list | None:
        if self.headers is None:
            return None
        out = []
        for row in table.column(self.headers).to_pylist():
            if not row:
                out.append(None)
            elif isinstance(row, dict):  # map-like {key: value}
                out.append([(k, _bytes(v)) for k, v in row.items()])
            else:  # [{key, value}] as read_topic produces, or [(key, value)] from a map column
                out.append([(h["key"], _bytes(h["value"])) if isinstance(h, dict) else (h[0], _bytes(h[1]))
                            for h in row])
        return out

    # ---------------------------------------------------------- on driver
    def on_write_complete(self, write_result: Any) -> None:
        total: dict[int, int] = {}
        txns: list[PreparedTransaction] = []
        for part in write_result.write_returns:
            if self.transactional_id_prefix is not None:
                part, txn = part
                txns.append(txn)
            for p, n in (part or {}).items():
                total[p] = total.get(p, 0) + n
        if txns:
            self.commit(txns)
        self.result = dict(sorted(total.items()))

    def commit(self, txns: Sequence[PreparedTransaction]) -> None:
        """Commit every task's transaction (the second phase); ExactlyOnceCommitError names the ones
        that did not commit. Committing one again is harmless, so a caller may retry."""
        with ThreadPoolExecutor(max_workers=COMMIT_THREADS) as pool:
            outcomes = list(pool.map(_commit_one, txns))
        failed = {t.transactional_id: e for t, e in zip(txns, outcomes) if e is not None}
        self.committed = [t.transactional_id for t, e in zip(txns, outcomes) if e is None]
        if failed:
            raise ExactlyOnceCommitError(failed, self.committed)


def _commit_one(txn: PreparedTransaction) -> BaseException | None:
    try:
        commit_prepared_transaction(txn)
    except Exception as e:  # every failure is reported, by transactional id
        return e
    return None


def _bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    return v.encode("utf-8") if isinstance(v, str) else bytes(v)


def write_topic(
    ds: Dataset,
    topic: str,
    *,
    key: str | None = "key",
    value: str | Sequence[str] | None = "value",
    partition: str | None = None,
    timestamp: str | None = None,
    headers: str | None = None,
    key_format: str | None = None,
    value_format: str | None = None,
    partitioner: Partitioner | None = None,
    compression: str | int = "none",
    batch_bytes: int = BATCH_BYTES,
    auto_create: bool = True,
    acks: int | str = "all",
    client: Any = None,
    exactly_once: bool = False,
    transactional_id_prefix: str | None = None,
    transaction_timeout_ms: int = 900_000,
) -> dict[int, int]:
    """Write every row of ``ds`` as a record of ``topic``; returns records written per partition.

    ``key``/``value`` name columns (binary as is, strings as UTF-8, numbers as
    their text, nested values as JSON); ``value`` may list several columns,
    written as one JSON (or msgpack) object. Defaults follow Spark's Kafka sink:
    columns named ``key`` and ``value`` (a missing ``key`` means unkeyed; a
    missing ``value`` means all other columns as a JSON object). Keyed rows go
    to ``murmur2(key) % partitions`` like the producer; ``partition`` names a
    column of explicit partitions and ``partitioner(key, n)`` overrides both.
    Per-key order holds within a block, not across blocks written in parallel.
    ``acks``: "all" (the default, as Kafka's producer since 3.0) returns only once every
    record is fsynced; 1 once it is in the log (a power loss can take the tail back).

    ``exactly_once=True``: every task writes in a transaction of its own, with the transactional
    id ``f"{transactional_id_prefix}-{task index}"``, and the driver commits them all once every
    task has returned, so read_committed readers see each row exactly once even when Ray ran a
    task twice (a new attempt fences the old one and aborts what it wrote). Nothing is visible
    to them before that commit. The prefix defaults to a new one per call; pass the same one
    when running a failed write again, so its first tasks abort what the failed run left open.
    If the driver dies before committing, the tasks' transactions stay open, holding
    read_committed readers of those partitions back at the last stable offset, until
    ``transaction_timeout_ms`` (default and maximum 15 minutes, Kafka's
    ``transaction.max.timeout.ms``) aborts them; ``logan-ray transactions abort`` or a rerun
    with the same prefix ends them sooner. A write must finish within that timeout. A commit
    that fails raises ExactlyOnceCommitError naming the transactional ids that did not commit.
    """
    if acks not in ("all", -1, "-1", 1, "1"):
        raise ValueError(f"acks must be 'all', -1 or 1 for write_topic, got {acks!r}")
    if exactly_once and acks not in ("all", -1, "-1"):
        raise ValueError("exactly_once needs acks='all', as Kafka's transactional producer")
    if exactly_once and transactional_id_prefix is None:
        transactional_id_prefix = f"logan-ray-write-{uuid.uuid4().hex[:16]}"
    if transactional_id_prefix is not None and not exactly_once:
        raise ValueError("transactional_id_prefix applies only with exactly_once=True")
    if client is None:
        import logan_ray

        client = logan_ray.connect()
    names = ds.columns()
    if key is not None and key not in names:
        if key != "key":
            raise ValueError(f"key column {key!r} not in the dataset's columns {names}")
        key = None
    special = {c for c in (key, partition, timestamp, headers) if c}
    if value is None or (value == "value" and "value" not in names):
        value = [c for c in names if c not in special]
    for c in ([value] if isinstance(value, str) else list(value)) + sorted(special):
        if c not in names:
            raise ValueError(f"column {c!r} not in the dataset's columns {names}")
    routes = client.partitions(topic, auto_create=auto_create, activate=True)  # every partition takes writes
    if exactly_once:
        start_coordinators()
    max_message_bytes = int(client.topic_config(topic).get("max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES))
    sink = TopicDatasink(topic, [a for a, _node in routes], client.router, key=key, value=value,
                         partition=partition, timestamp=timestamp, headers=headers, key_format=key_format,
                         value_format=value_format, partitioner=partitioner, compression=codec_id(compression),
                         batch_bytes=batch_bytes, max_message_bytes=max_message_bytes,
                         durable=acks in ("all", -1, "-1"), transactional_id_prefix=transactional_id_prefix,
                         transaction_timeout_ms=transaction_timeout_ms)
    ds.write_datasink(sink)
    return sink.result
