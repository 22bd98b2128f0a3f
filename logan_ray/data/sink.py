"""``write_topic``: a Ray Dataset into a topic through the partition actors.

Each write task partitions a block's rows with the producer's murmur2 rule
(vectorised over the key column), builds whole v2 batches per partition and
sends each partition's batches in one ``append`` call, so a block costs one
actor call per partition it touches. Batches carry an idempotent producer id
and sequence, so a resend after a partition actor restart is deduplicated by
the actor instead of written twice.
"""
from __future__ import annotations

import random
import time
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa
import ray
from ray.data import Dataset
from ray.data.block import BlockAccessor
from ray.data.datasource import Datasink

from logan_ray._ray import get
from logan_ray.storage.compression import codec_id
from logan_ray.storage.records import build_batch

from .murmur import partitions_for_keys
from .values import encode_column

BATCH_BYTES = 512 << 10  # record bytes per batch; below Kafka's default max.message.bytes (1 MB)
RETRIES = 10
_RETRIABLE = (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError)

Partitioner = Callable[[Any, int], int]


class TopicDatasink(Datasink):
    def __init__(self, topic: str, actors: Sequence[Any], router: Any, *, key: str | None, value: Any,
                 partition: str | None, timestamp: str | None, headers: str | None,
                 key_format: str | None, value_format: str | None, partitioner: Partitioner | None,
                 compression: int, batch_bytes: int) -> None:
        self.topic = topic
        self.actors = list(actors)
        self.router = router
        self.key, self.value = key, value
        self.partition, self.timestamp, self.headers = partition, timestamp, headers
        self.key_format, self.value_format = key_format, value_format
        self.partitioner = partitioner
        self.compression = compression
        self.batch_bytes = batch_bytes
        self.result: dict[int, int] = {}

    def get_name(self) -> str:
        return "LoganTopic"

    # ------------------------------------------------------------ per task
    def write(self, blocks: Iterable[Any], ctx: Any) -> dict[int, int]:
        producer_id = get(self.router.allocate_producer_id.remote())
        sequences: dict[int, int] = {}
        written: dict[int, int] = {}
        for block in blocks:
            table = BlockAccessor.for_block(block).to_arrow()
            if table.num_rows == 0:
                continue
            for p, n in self._write_table(table, producer_id, sequences).items():
                written[p] = written.get(p, 0) + n
        return written

    def _write_table(self, table: pa.Table, producer_id: int, sequences: dict[int, int]) -> dict[int, int]:
        n = len(self.actors)
        values = self._values(table)
        keys = encode_column(table.column(self.key), self.key_format) if self.key else None
        parts = self._partitions(table, keys, n)
        timestamps = self._timestamps(table)
        headers = self._headers(table)

        order = np.argsort(parts, kind="stable")
        sorted_parts = parts[order]
        bounds = np.flatnonzero(np.diff(sorted_parts)) + 1
        pending = []
        counts: dict[int, int] = {}
        for rows in np.split(order, bounds):
            p = int(parts[rows[0]])
            take = pa.array(rows)
            v = values.take(take).to_pylist()
            k = keys.take(take).to_pylist() if keys is not None else None
            ts = timestamps[rows].tolist() if timestamps is not None else [int(time.time() * 1000)] * len(rows)
            h = [headers[i] for i in rows.tolist()] if headers is not None else None
            payload = self._batches(v, k, ts, h, producer_id, sequences, p)
            pending.append((p, payload, self.actors[p].append.remote(payload), 1))
            counts[p] = len(rows)
        while pending:
            retry = []
            for p, payload, ref, attempt in pending:
                try:
                    ray.get(ref)
                except _RETRIABLE:
                    if attempt > RETRIES:
                        raise
                    time.sleep(min(0.05 * attempt, 1.0))
                    retry.append((p, payload, self.actors[p].append.remote(payload), attempt + 1))
                except ray.exceptions.RayTaskError as e:
                    cause = getattr(e, "cause", None)
                    raise (cause if isinstance(cause, Exception) else e) from None
            pending = retry
        return counts

    def _batches(self, values: list, keys: list | None, ts: list[int], headers: list | None,
                 producer_id: int, sequences: dict[int, int], partition: int) -> bytes:
        """Whole batches of about ``batch_bytes`` record bytes each, concatenated for one append."""
        sizes = np.fromiter(((len(x) if x is not None else 0) for x in values), dtype=np.int64, count=len(values))
        if keys is not None:
            sizes += np.fromiter(((len(x) if x is not None else 0) for x in keys), dtype=np.int64, count=len(keys))
        cum = np.cumsum(sizes + 16)
        cuts = [0]
        while cuts[-1] < len(values):
            base = cum[cuts[-1] - 1] if cuts[-1] else 0
            nxt = int(np.searchsorted(cum, base + self.batch_bytes, side="right"))
            cuts.append(max(nxt, cuts[-1] + 1))
        out = []
        for a, b in zip(cuts[:-1], cuts[1:]):
            seq = sequences.get(partition, 0)
            out.append(build_batch(
                values[a:b], keys[a:b] if keys is not None else None,
                headers=headers[a:b] if headers is not None else None, timestamps=ts[a:b],
                compression=self.compression, producer_id=producer_id, producer_epoch=0, base_sequence=seq))
            sequences[partition] = (seq + (b - a)) & 0x7FFFFFFF
        return b"".join(out)

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
        for part in write_result.write_returns:
            for p, n in (part or {}).items():
                total[p] = total.get(p, 0) + n
        self.result = dict(sorted(total.items()))


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
    client: Any = None,
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
    """
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
    routes = client.partitions(topic, auto_create=auto_create, refresh=True)
    sink = TopicDatasink(topic, [a for a, _node in routes], client.router, key=key, value=value,
                         partition=partition, timestamp=timestamp, headers=headers, key_format=key_format,
                         value_format=value_format, partitioner=partitioner, compression=codec_id(compression),
                         batch_bytes=batch_bytes)
    ds.write_datasink(sink)
    return sink.result
