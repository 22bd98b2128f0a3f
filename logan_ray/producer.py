"""Producer: builds Kafka v2 batches client-side and sends whole batches to partition actors.

One actor call carries thousands of records, which is what makes Ray's ~1 ms
per call affordable. Batches are idempotent (producer id + per-partition
sequence), so a resend after a partition actor crash never duplicates records;
resends go out in order, as Kafka's idempotent producer does.

Batch sizing: a batch never exceeds min(``batch_size``, the topic's
``max.message.bytes``), header and per-record framing included (an upper bound
is used while filling, the encoded size is checked before sending). A record
too large to fit any batch fails alone with RecordTooLargeError before it
gets a sequence number, as Kafka's producer does with ``max.request.size``; a
record larger than ``batch_size`` but within ``max.message.bytes`` travels in
a batch of its own, also as in Kafka.

After a batch fails for good (the broker rejected it), the partition's
sequence recovers as KIP-360 describes: if nothing was sent after it the
next batch reuses its sequence; otherwise the producer bumps its epoch for
that partition and resends the later batches from sequence 0, so nothing
waits for a batch that will never arrive.
"""
from __future__ import annotations

import bisect
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Sequence as _SequenceABC
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import numpy as np
import ray

from logan_ray.storage.batch_header import HEADER_SIZE
from logan_ray.storage.codec_choice import compiled
from logan_ray.storage.compression import NONE, codec_id
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import Column

from ._ray import ACTOR_GONE, get
from .errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    LoganError,
    NotLeaderOrFollowerError,
    NotRunningError,
    PartitionHibernatedError,
    RecordTooLargeError,
    RequestTimedOutError,
    UnknownPartitionError,
    UnsupportedCompressionError,
)
from .common.partitioner import partition_for_key
from .local_path import ChannelClosedError, ChannelError
from .local_path import result as local_result
from .serializers import serializer

log = logging.getLogger("logan_ray.producer")
_now = time.time
try:
    from ._send_path import SendPath as _SendPath  # built by pip install next to its source
except ImportError:  # not built: Producer.send (Python) serves
    _SendPath = None
_RETRIABLE = (*ACTOR_GONE, ChannelClosedError)
# Errors the partition raises while validating, before it writes a byte: the batch is surely not in the log.
_REJECTED = (RecordTooLargeError, CorruptRecordError, InvalidRecordError, InvalidTimestampError,
             UnsupportedCompressionError)
# Upper bound of a v2 record's framing: length, timestamp delta, offset delta, key
# length, value length and header count varints at their widest, plus attributes.
RECORD_OVERHEAD = 36
HEADER_OVERHEAD = 10  # per record header: key and value length varints
# Headroom for codec framing when a compressed batch does not shrink (zstd, lz4
# and gzip add well under 1% on incompressible data); a batch that still comes out
# too large is split before it is sent.
COMPRESSION_HEADROOM = 1 / 64
MAX_EPOCH = 0x7FFF
MAX_UNREPORTED_ERRORS = 64
DEFAULT_MAX_MESSAGE_BYTES = 1048588  # Kafka's max.message.bytes default, until the topic's is known


def record_size_bound(value: bytes | None, key: bytes | None = None, headers=None) -> int:
    """Most bytes one record can take inside a v2 batch (Kafka's estimateSizeInBytesUpperBound)."""
    size = RECORD_OVERHEAD + (len(value) if value is not None else 0) + (len(key) if key is not None else 0)
    if headers:
        for hk, hv in headers:
            size += HEADER_OVERHEAD + len(hk.encode() if isinstance(hk, str) else hk) + (len(hv) if hv is not None else 0)
    return size


def _is_table(x: Any) -> bool:
    return type(x).__name__ == "Table" and type(x).__module__.startswith("pyarrow")


def _is_column(x: Any) -> bool:
    return isinstance(x, np.ndarray) or type(x).__module__.startswith("pyarrow")


def _to_column(x: Any) -> Column:
    """Keys or values as a record-codec Column (row i = data[starts[i]:starts[i]+lengths[i]], -1 = null)."""
    import pyarrow as pa

    if isinstance(x, np.ndarray):
        if x.dtype.kind == "S" and x.ndim == 1:
            x = np.ascontiguousarray(x)
            width = x.dtype.itemsize
            lengths = np.strings.str_len(x).astype(np.int64)  # numpy drops trailing NULs of S items
            return Column(np.arange(len(x), dtype=np.int64) * width, lengths, x.view(np.uint8))
        if x.dtype == np.uint8 and x.ndim == 2:
            x = np.ascontiguousarray(x)
            rows, width = x.shape
            return Column(np.arange(rows, dtype=np.int64) * width, np.full(rows, width, np.int64), x.reshape(-1))
        x = list(x)  # object arrays: their items
    if isinstance(x, pa.ChunkedArray):
        x = x.combine_chunks()
    if not isinstance(x, pa.Array):
        x = pa.array(x, pa.binary())
    if pa.types.is_string(x.type) or pa.types.is_large_string(x.type):
        x = x.cast(pa.large_binary() if pa.types.is_large_string(x.type) else pa.binary())
    if not (pa.types.is_binary(x.type) or pa.types.is_large_binary(x.type)):
        raise TypeError(f"keys/values must be binary or string columns, got {x.type}")
    validity, offsets, data = x.buffers()
    width = np.int64 if pa.types.is_large_binary(x.type) else np.int32
    offs = np.frombuffer(offsets, dtype=width)[x.offset:x.offset + len(x) + 1].astype(np.int64)
    lengths = np.diff(offs)
    if x.null_count:
        lengths[~x.is_valid().to_numpy(zero_copy_only=False)] = -1
    return Column(offs[:-1], lengths, data if data is not None else b"")


def _rows(col: Column) -> int:
    return len(col.lengths)


def _lengths(col: Column, nulls: bool = False) -> np.ndarray:
    return col.lengths if nulls else np.maximum(col.lengths, 0)


def _slice(col: Column, start: int, stop: int) -> Column:
    return Column(col.starts[start:stop], col.lengths[start:stop], col.data)


def _take(col: Column, idx: np.ndarray) -> Column:
    return Column(np.ascontiguousarray(col.starts[idx]), np.ascontiguousarray(col.lengths[idx]), col.data)


def _column_array(col: Column):
    """A Column as a pyarrow binary array (nulls kept), for the vectorised murmur2 partitioner."""
    import pyarrow as pa

    lengths = np.maximum(col.lengths, 0)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    buf = np.frombuffer(col.data, dtype=np.uint8) if not isinstance(col.data, np.ndarray) else col.data
    idx = np.repeat(col.starts - offsets[:-1], lengths) + np.arange(int(offsets[-1]), dtype=np.int64)
    valid = col.lengths >= 0
    mask = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.large_binary(), len(lengths), [mask, pa.py_buffer(offsets), pa.py_buffer(buf[idx])],
                                 null_count=int((~valid).sum()))


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int


class _Batch:
    """Records bound for one partition, then the in-flight request that carries them."""

    __slots__ = ("topic", "partition", "values", "keys", "headers", "timestamps", "size", "ref", "payload",
                 "base_sequence", "base_offset", "append_time", "error", "done", "attempts", "parts", "cols")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self.values: list = []
        self.keys: list = []
        self.headers: list = []
        self.timestamps: list = []
        self.size = 0
        self.ref = None
        self.payload: bytes | None = None
        self.base_sequence = -1
        self.base_offset = -1
        self.append_time = -1
        self.error: BaseException | None = None
        self.done = False
        self.attempts = 0
        self.parts: list[tuple[int, "_Batch"]] | None = None  # (first index, sub-batch) once split
        self.cols: tuple[Any, Any, int] | None = None  # (values, keys, count) of a columnar send_batch

    def __len__(self) -> int:
        return self.cols[2] if self.cols is not None else len(self.values)

    def append(self, value, key, headers, ts: int, size: int) -> int:
        self.values.append(value)
        self.keys.append(key)
        self.headers.append(headers)
        self.timestamps.append(ts)
        self.size += size
        return len(self.values) - 1

    def slice(self, start: int, stop: int) -> "_Batch":
        part = _Batch(self.topic, self.partition)
        part.values, part.keys = self.values[start:stop], self.keys[start:stop]
        part.headers, part.timestamps = self.headers[start:stop], self.timestamps[start:stop]
        return part

    def resolve(self, index: int) -> tuple["_Batch", int]:
        """The (sub-)batch and index that hold record ``index`` after any splits."""
        b = self
        while b.parts is not None:
            k = bisect.bisect_right([first for first, _ in b.parts], index) - 1
            first, b = b.parts[k]
            index -= first
        return b, index

    def is_done(self) -> bool:
        if self.parts is not None:
            return all(part.is_done() for _, part in self.parts)
        return self.done


def _failed(topic: str, partition: int, value, key, headers, ts: int, error: BaseException) -> _Batch:
    b = _Batch(topic, partition)
    b.append(value, key, headers, ts, 0)
    b.error, b.done = error, True
    return b


class RecordFuture:
    """Completes with RecordMetadata once the record's batch is acknowledged."""

    __slots__ = ("_producer", "_batch", "_index")

    def __init__(self, producer: "Producer", batch: _Batch, index: int) -> None:
        self._producer, self._batch, self._index = producer, batch, index

    def done(self) -> bool:
        return self._batch.is_done()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        b, index = self._batch.resolve(self._index)
        if not b.done:
            self._producer._complete(b, timeout)
            b, index = self._batch.resolve(self._index)  # a wait may have split it
        if b.error is not None:
            self._producer._reported(b.error)
            raise b.error
        ts = b.append_time if b.append_time >= 0 else b.timestamps[index]
        offset = b.base_offset + index if b.base_offset >= 0 else -1
        return RecordMetadata(b.topic, b.partition, offset, ts)

    get = result


class _BatchFutures(_SequenceABC):
    """Futures of a ``send_batch`` call, created on access: no per-record object up front."""

    def __init__(self, producer: "Producer", spans: list[tuple[_Batch, int, int]],
                 where: np.ndarray | None = None) -> None:
        self._producer = producer
        self._spans = spans  # (batch, first index in batch, count)
        self._where = where  # record i's place in the spans, when grouping by partition reordered them
        self._starts = []
        total = 0
        for _, _, n in spans:
            self._starts.append(total)
            total += n
        self._len = total

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._len))]
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(i)
        if self._where is not None:
            i = int(self._where[i])
        k = bisect.bisect_right(self._starts, i) - 1
        batch, first, _ = self._spans[k]
        return RecordFuture(self._producer, batch, first + i - self._starts[k])

    def result(self, timeout: float | None = None) -> list[RecordMetadata]:
        """Wait for every batch; metadata of each record in order."""
        return [f.result(timeout) for f in self]


@dataclass
class _PartitionState:
    """Idempotence state of one partition: its own epoch, so a KIP-360 bump touches only it."""

    producer_id: int = -1
    epoch: int = 0
    next_sequence: int = 0
    acked: bool = False  # the broker holds state for this producer id (a batch was acknowledged)
    in_flight: deque = None  # type: ignore[assignment]
    via_channel: bool = False  # the batches in flight went over the node-local channel (else by Ray)

    def __post_init__(self) -> None:
        self.in_flight = deque()


class Producer:
    """Thread-safe producer. ``acks``: 0 (fire and forget), 1 (wait for the append) or "all"/-1
    (wait until the append is fsynced: a group commit shared with concurrent appends)."""

    #: batches carry the transactional bit (set by logan_ray.txn_producer.TransactionalProducer)
    _transactional = False

    def __init__(self, client, *, acks: int | str = 1, compression: str | int = "none",
                 batch_size: int = 1 << 20, linger_ms: float = 5, max_in_flight: int = 5,
                 key_serializer: Any = None, value_serializer: Any = None, idempotent: bool = True,
                 request_timeout_ms: int = 30000, retries: int = 10, auto_create_topics: bool = True) -> None:
        self._client = client
        self._acks = -1 if acks == "all" else int(acks)
        if self._acks not in (-1, 0, 1):
            raise ValueError(f"acks must be 0, 1, -1 or 'all', got {acks!r}")
        self._compression = codec_id(compression)
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self._batch_size = batch_size
        self._linger_s = linger_ms / 1000.0
        # Without idempotence nothing can restore order if Ray starts pipelined appends
        # out of order, so a non-idempotent producer keeps one batch in flight per partition.
        self._max_in_flight = max_in_flight if idempotent else 1
        self._key_ser = serializer(key_serializer)
        self._value_ser = serializer(value_serializer)
        self._timeout_s = request_timeout_ms / 1000.0
        self._retries = retries
        self._auto_create = auto_create_topics
        self._idempotent = idempotent
        #: batches sent per path: "channel" (node-local fast path) or "ray" (actor call)
        self.append_paths: dict[str, int] = {"channel": 0, "ray": 0}
        self._producer_id = self._first_producer_id() if idempotent else -1
        self._epoch = 0  # the epoch new partition states start with (a transactional producer's is the coordinator's)
        self._lock = threading.RLock()
        #: wakes the linger thread when a batch opens (it sleeps while none is open) and at close
        self._linger_wake = threading.Condition(self._lock)
        self._open: dict[tuple[str, int], _Batch] = {}
        self._opened_at: dict[tuple[str, int], float] = {}
        self._partitions: dict[tuple[str, int], _PartitionState] = {}
        self._sticky: dict[str, int] = {}
        self._max_message_bytes: dict[str, int] = {}
        # send()'s per-topic cache: (the client's route list it was computed from, partitions, budget)
        self._topics: dict[str, tuple[list, int, int]] = {}
        self._routes: dict[str, list] = client.routes
        self._errors: list[BaseException] = []  # failures no future has reported yet
        self._closed = False
        if _SendPath is not None and compiled():
            # The compiled twin of send() (see send's docstring); it shares these very objects.
            self.send = _SendPath(self, self._value_ser, self._key_ser, self._topics, self._routes, self._sticky,
                                  self._open, self._lock, _Batch, RecordFuture, RECORD_OVERHEAD).send
        self._linger_thread = threading.Thread(target=self._linger_loop, name="logan-ray-linger", daemon=True)
        self._linger_thread.start()

    def _first_producer_id(self) -> int:
        """The producer id of an idempotent producer: the router hands out a fresh one (a transactional
        producer gets its id from the transaction coordinator instead, see logan_ray.txn_producer)."""
        return get(self._client.router.allocate_producer_id.remote())

    # ------------------------------------------------------------------- send
    def partitions_for(self, topic: str) -> int:
        return len(self._client.partitions(topic, auto_create=self._auto_create))

    def _topic_limit(self, topic: str, refresh: bool = False) -> int:
        """The topic's max.message.bytes (cached; refreshed before rejecting a record with it)."""
        limit = self._max_message_bytes.get(topic)
        if limit is None or refresh:
            try:
                limit = int(self._client.topic_config(topic).get("max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES))
            except LoganError:
                limit = DEFAULT_MAX_MESSAGE_BYTES
            self._max_message_bytes[topic] = limit
            self._topics.pop(topic, None)  # its batch budget follows the limit
        return limit

    def _record_budget(self, topic: str) -> int:
        """Bytes of record bounds one batch may hold: min(batch_size, max.message.bytes) less the header."""
        limit = min(self._batch_size, self._topic_limit(topic))
        if self._compression != NONE:
            limit -= int(limit * COMPRESSION_HEADROOM) + 64
        return max(limit - HEADER_SIZE, 1)

    def _too_large(self, topic: str, value, key, headers, ts: int, bound: int) -> RecordTooLargeError | None:
        """The error for a record that cannot fit any batch of ``topic``, else None (exact check, rare path)."""
        if HEADER_SIZE + bound <= self._topic_limit(topic):
            return None
        limit = self._topic_limit(topic, refresh=True)
        size = len(build_batch([value], [key], headers=[headers] if headers else None, timestamps=ts,
                               compression=self._compression, producer_id=self._producer_id,
                               producer_epoch=0 if self._producer_id >= 0 else -1,
                               base_sequence=0 if self._producer_id >= 0 else -1))
        if size <= limit:
            return None
        return RecordTooLargeError(
            f"a record of {len(value) if value is not None else 0} value bytes makes a batch of {size} bytes, "
            f"over max.message.bytes={limit} of topic {topic!r}")

    def _open_batch(self, tp: tuple[str, int], need: int, budget: int) -> _Batch:
        """The open batch of ``tp`` with room for ``need`` more bytes, shipping a full one first."""
        b = self._open.get(tp)
        if b is not None and b.values and b.size + need > budget:
            self._ship(tp)
            b = None
        if b is None:
            b = self._open[tp] = _Batch(*tp)
            if not self._opened_at:
                self._linger_wake.notify()  # the linger thread sleeps while no batch is open
            self._opened_at[tp] = time.monotonic()
        return b

    def _topic_info(self, topic: str) -> tuple[list, int, int]:
        """(the client's route list, partition count, record budget) of ``topic``, cached while the
        client keeps that route list (a refresh replaces it, so a new partition count is seen)."""
        parts = self._client.partitions(topic, auto_create=self._auto_create)
        info = self._topics[topic] = (parts, len(parts), self._record_budget(topic))
        return info

    def send(self, topic: str, value: Any = None, key: Any = None, *, headers: Sequence[tuple[str, bytes]] | None = None,
             partition: int | None = None, timestamp_ms: int | None = None) -> RecordFuture:
        """Queue one record for ``topic``; the future completes once its batch is acknowledged.

        The hot path of apps that produce record by record. Where the compiled send path is
        built (``logan_ray/_send_path.c``), each producer's ``send`` is its C twin, which does
        these same steps and calls the methods below for everything but the common case
        (about 4x fewer nanoseconds per record). This Python version serves otherwise, and is
        kept inline (one dict lookup for the topic's partition count and batch budget)
        because each extra Python call here costs about a tenth of the per-record budget.
        """
        if self._value_ser is not None:
            value = self._value_ser(value)
        if key is not None and self._key_ser is not None:
            key = self._key_ser(key)
        info = self._topics.get(topic)
        if info is None or info[0] is not self._routes.get(topic):
            info = self._topic_info(topic)
        if partition is None:
            if key is not None:
                partition = partition_for_key(key, info[1])
            else:
                partition = self._sticky.get(topic)
                if partition is None or partition >= info[1]:
                    partition = self._new_sticky(topic, info[1])
        elif not 0 <= partition < info[1]:
            self._bad_partition(topic, partition, info[1])
        ts = int(_now() * 1000) if timestamp_ms is None else timestamp_ms
        if headers:
            bound = -1
        else:
            bound = RECORD_OVERHEAD + (len(value) if value is not None else 0) + (len(key) if key is not None else 0)
        return self._send_locked(topic, partition, value, key, headers, ts, bound, info[2])

    def _new_sticky(self, topic: str, partitions: int) -> int:
        """A new sticky partition for unkeyed records of ``topic`` (after each shipped batch)."""
        partition = self._sticky[topic] = random.randrange(partitions)
        return partition

    @staticmethod
    def _bad_partition(topic: str, partition: int, partitions: int) -> None:
        raise UnknownPartitionError(f"topic {topic!r} has no partition {partition} (it has {partitions})")

    def _send_locked(self, topic: str, partition: int, value: Any, key: Any, headers: Any, ts: int,
                     bound: int, budget: int) -> RecordFuture:
        """Append one serialized record to its partition's open batch (``bound`` -1: count the headers)."""
        if bound < 0:
            bound = record_size_bound(value, key, headers)
        tp = (topic, partition)
        with self._lock:
            if self._closed:
                raise LoganError("producer is closed")
            if bound > budget:
                error = self._too_large(topic, value, key, headers, ts, bound)
                if error is not None:
                    self._note_error(error)
                    return RecordFuture(self, _failed(topic, partition, value, key, headers, ts, error), 0)
            b = self._open.get(tp)
            if b is None or (b.size + bound > budget and b.values):
                b = self._open_batch(tp, bound, budget)
            values = b.values
            fut = RecordFuture(self, b, len(values))
            values.append(value)
            b.keys.append(key)
            b.headers.append(headers)
            b.timestamps.append(ts)
            b.size += bound
            if b.size >= budget:
                self._ship(tp)
        return fut

    def send_batch(self, topic: str, values: Any, keys: Any = None, *,
                   partition: int | None = None, timestamp_ms: int | None = None) -> Sequence[RecordFuture]:
        """Send many records in one call; unkeyed records without a partition go to one sticky partition.

        ``values`` and ``keys``: lists of bytes (or of objects for the serializers), or
        columns: numpy arrays (fixed-width ``S`` dtype, 2-D uint8 rows, or object), pyarrow
        binary/string arrays, or a pyarrow table with ``value`` (and ``key``) columns. Keyed
        records are partitioned with murmur2 as ``send`` does, over the whole key column at
        once; columns and keyed lists are encoded by the record codec straight from their
        buffers into batches that are sent at once (no Python step per record).
        """
        if _is_table(values):
            if keys is not None:
                raise ValueError("pass keys inside the table (a 'key' column), not separately")
            keys = values.column("key") if "key" in values.column_names else None
            values = values.column("value")
        columnar = _is_column(values) or _is_column(keys)
        if (columnar or keys is not None) and (self._value_ser is not None or self._key_ser is not None):
            if columnar:
                raise ValueError("columns are sent as bytes; a producer with serializers takes lists")
            return [self.send(topic, v, k, partition=partition, timestamp_ms=timestamp_ms)
                    for v, k in zip(values, keys)]
        if columnar or keys is not None:
            return self._send_columns(topic, values, keys, partition, timestamp_ms)
        if self._value_ser is not None:
            values = [self._value_ser(v) for v in values]
        partition = self._choose_partition(topic, None, partition)
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        bounds = [RECORD_OVERHEAD + (len(v) if v is not None else 0) for v in values]
        spans: list[tuple[_Batch, int, int]] = []
        with self._lock:
            if self._closed:
                raise LoganError("producer is closed")
            tp = (topic, partition)
            budget = self._record_budget(topic)
            start, n = 0, len(values)
            while start < n:
                if bounds[start] > budget:  # a record that fits no shared batch
                    error = self._too_large(topic, values[start], None, None, ts, bounds[start])
                    if error is not None:
                        self._note_error(error)
                        spans.append((_failed(topic, partition, values[start], None, None, ts, error), 0, 1))
                        start += 1
                        continue
                b = self._open_batch(tp, bounds[start], budget)
                # fill the batch in one slice: as many records as its budget still allows
                room, stop = budget - b.size, start
                while stop < n and (bounds[stop] <= room or (stop == start and not b.values)):
                    room -= bounds[stop]
                    stop += 1
                chunk = values[start:stop]
                first = len(b.values)
                b.values.extend(chunk)
                b.keys.extend([None] * len(chunk))
                b.headers.extend([None] * len(chunk))
                b.timestamps.extend([ts] * len(chunk))
                b.size = budget - room  # its size plus the chunk's bounds
                spans.append((b, first, len(chunk)))
                start = stop
                if b.size >= budget or (start < n and b.size + bounds[start] > budget):
                    self._ship(tp)
        return _BatchFutures(self, spans)

    def _send_columns(self, topic: str, values: Any, keys: Any, partition: int | None,
                      timestamp_ms: int | None) -> Sequence[RecordFuture]:
        """Keyed or columnar records: partition by key column, then ship batch-sized slices."""
        vcol = _to_column(values)
        n = _rows(vcol)
        kcol = _to_column(keys) if keys is not None else None
        if kcol is not None and _rows(kcol) != n:
            raise ValueError(f"{_rows(kcol)} keys for {n} values")
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        groups: list[tuple[int, Any, Any]] = []
        where = None
        if partition is not None or kcol is None or n == 0:
            groups.append((self._choose_partition(topic, None, partition), vcol, kcol))
        else:
            order, parts = self._by_key_partition(topic, vcol, kcol)
            groups.extend(parts)
            if order is not None:
                where = np.empty(n, dtype=np.int64)
                where[order] = np.arange(n, dtype=np.int64)
        spans: list[tuple[_Batch, int, int]] = []
        with self._lock:
            if self._closed:
                raise LoganError("producer is closed")
            for part, vals, ks in groups:
                tp = (topic, part)
                if tp in self._open:
                    self._ship(tp)  # keep order: records sent before these go first
                # a record over the budget travels alone (the broker judges one over the topic's limit)
                budget = self._record_budget(topic)
                sizes = _lengths(vals) + (_lengths(ks) if ks is not None else 0) + RECORD_OVERHEAD
                ends = np.cumsum(sizes)
                start = 0
                total = _rows(vals)
                while start < total:
                    used = ends[start - 1] if start else 0
                    stop = max(start + 1, int(np.searchsorted(ends, used + budget, side="right")))
                    stop = min(stop, total)
                    b = _Batch(topic, part)
                    b.cols = (_slice(vals, start, stop), _slice(ks, start, stop) if ks is not None else None,
                              stop - start)
                    b.timestamps = [ts] * (stop - start)
                    self._open[tp] = b
                    spans.append((b, 0, stop - start))
                    self._ship(tp)
                    start = stop
        return _BatchFutures(self, spans, where)

    def _by_key_partition(self, topic: str, vcol: Any, kcol: Any
                          ) -> tuple[np.ndarray | None, list[tuple[int, Any, Any]]]:
        """Rows grouped by murmur2 partition of their key (null keys go to the sticky partition),
        with the row order of the groups (None: one group, rows in order)."""
        from logan_ray.data.murmur import partitions_for_keys

        num = self.partitions_for(topic)
        klens = _lengths(kcol, nulls=True)
        karr = _column_array(kcol)
        parts = partitions_for_keys(karr, num)
        if (klens < 0).any():
            parts[klens < 0] = self._choose_partition(topic, None, None)
        if (parts == parts[0]).all():
            return None, [(int(parts[0]), vcol, kcol)]
        order = np.argsort(parts, kind="stable")
        bounds = np.flatnonzero(np.diff(parts[order])) + 1
        out = []
        for idx in np.split(order, bounds):
            out.append((int(parts[idx[0]]), _take(vcol, idx), _take(kcol, idx)))
        return order, out

    def _choose_partition(self, topic: str, key: bytes | None, partition: int | None) -> int:
        n = self.partitions_for(topic)
        if partition is not None:
            if not 0 <= partition < n:
                raise UnknownPartitionError(f"topic {topic!r} has no partition {partition} (it has {n})")
            return partition
        if key is not None:
            return partition_for_key(key, n)
        sticky = self._sticky.get(topic)
        if sticky is None or sticky >= n:
            sticky = self._new_sticky(topic, n)
        return sticky

    def _note_error(self, error: BaseException) -> None:
        with self._lock:
            if len(self._errors) < MAX_UNREPORTED_ERRORS:  # bounded: flush() raises only the first anyway
                self._errors.append(error)

    def _reported(self, error: BaseException) -> None:
        with self._lock:
            for i, e in enumerate(self._errors):
                if e is error:
                    del self._errors[i]
                    break

    # ---------------------------------------------------------------- shipping
    def _state(self, tp: tuple[str, int]) -> _PartitionState:
        state = self._partitions.get(tp)
        if state is None:
            state = self._partitions[tp] = _PartitionState(producer_id=self._producer_id, epoch=self._epoch)
        return state

    def _ship(self, tp: tuple[str, int]) -> None:
        """Encode the open batch of ``tp`` and send it (caller holds the lock)."""
        b = self._open.pop(tp)
        self._opened_at.pop(tp, None)
        if self._sticky.get(tp[0]) == tp[1]:
            self._sticky.pop(tp[0], None)  # sticky partitioner: switch after each batch
        self._send(b, self._state(tp), self._topic_limit(tp[0]))

    def _send(self, b: _Batch, state: _PartitionState, limit: int) -> None:
        """Give ``b`` its sequence, encode and submit it; a batch that encodes too large is split."""
        while len(state.in_flight) >= self._max_in_flight:
            self._complete(state.in_flight[0], self._timeout_s)
        self._encode(b, state)
        if len(b.payload) > limit and b.cols is None and len(b.values) > 1:
            # Only a compressed batch that grew past the headroom gets here: halve it (Kafka
            # splits such batches too). Its sequence numbers were not used: take them back.
            if self._producer_id >= 0:
                state.next_sequence = b.base_sequence
            b.payload = None
            half = len(b.values) // 2
            b.parts = [(0, b.slice(0, half)), (half, b.slice(half, len(b.values)))]
            for _, part in b.parts:
                self._send(part, state, limit)
            return
        self._submit(b, state)
        if self._acks == 0:
            b.done = True
        else:
            state.in_flight.append(b)

    def _encode(self, b: _Batch, state: _PartitionState) -> None:
        """(Re)build the batch bytes with the partition's current producer id, epoch and next sequence."""
        if state.producer_id >= 0:
            b.base_sequence = state.next_sequence
            state.next_sequence = (state.next_sequence + len(b)) & 0x7FFFFFFF
        ts = b.timestamps
        if b.cols is not None:
            values, keys, headers = b.cols[0], b.cols[1], None
        else:
            values, keys = b.values, b.keys if b.keys.count(None) != len(b.keys) else None
            headers = b.headers if any(b.headers) else None
        b.payload = build_batch(
            values, keys, headers=headers,
            timestamps=ts[0] if min(ts) == max(ts) else ts,
            compression=self._compression, producer_id=state.producer_id,
            producer_epoch=state.epoch if state.producer_id >= 0 else -1, base_sequence=b.base_sequence,
            is_transactional=self._transactional,
        )

    def _submit(self, b: _Batch, state: _PartitionState) -> None:
        handle, node = self._client.partition_route(b.topic, b.partition)
        b.attempts += 1
        # acks=all waits for the partition's group-committed fsync; 0 and 1 for the append alone.
        method = "append_durable" if self._acks == -1 else "append"
        # Over the node-local channel when the partition is on this node, else by Ray. The path
        # changes only when nothing is in flight ahead of this batch, so batches stay in order.
        first = not state.in_flight or state.in_flight[0] is b
        b.ref = None
        if first or state.via_channel:
            b.ref = self._client.local_path.call(handle, node, method, payload=b.payload)
            if first:
                state.via_channel = b.ref is not None
        if b.ref is None:
            b.ref = getattr(handle, method).remote(b.payload)
        self.append_paths["ray" if isinstance(b.ref, ray.ObjectRef) else "channel"] += 1

    def _complete(self, b: _Batch, timeout: float | None) -> None:
        """Wait for ``b`` and every earlier batch of its partition, resending in order after a crash."""
        with self._lock:
            tp = (b.topic, b.partition)
            if self._open.get(tp) is b:
                self._ship(tp)  # waiting on a record whose batch still lingers: send it now
            if b.parts is not None:
                for _, part in b.parts:
                    self._complete(part, timeout)
                return
            state = self._partitions[tp]
            while not b.done and state.in_flight:
                head = state.in_flight[0]
                try:
                    if isinstance(head.ref, ray.ObjectRef):
                        head.base_offset, head.append_time, _ = ray.get(head.ref, timeout=timeout)
                    else:
                        head.base_offset, head.append_time, _ = local_result(head.ref, timeout)
                except (ray.exceptions.GetTimeoutError, RequestTimedOutError):
                    raise RequestTimedOutError(
                        f"append to {head.topic}-{head.partition} not acknowledged within {timeout} s") from None
                except _RETRIABLE as e:
                    self._resend_from(state, e)
                    continue
                except (ray.exceptions.RayTaskError, LoganError, ChannelError) as e:
                    cause = getattr(e, "cause", e)
                    if isinstance(cause, PartitionHibernatedError):
                        self._resend_from(state, e)  # refused unwritten: the partition's next actor takes it
                        continue
                    if isinstance(cause, NotLeaderOrFollowerError) and head.attempts <= self._retries:
                        # retriable, as for Kafka's producer: a leadership move, or a leader whose node's lease
                        # lapsed (a starved machine) and is renewed or replaced; the same sequences go again, so
                        # a batch written before the refusal is not written twice
                        self._resend_from(state, e)
                        continue
                    if type(cause).__name__ == "OutOfOrderSequenceError" and head.attempts > 1:
                        self._resend_from(state, e)  # an earlier batch was lost with the crash; resend in order
                        continue
                    head.error = cause
                head.payload = None
                head.done = True
                state.in_flight.popleft()
                if head.error is None:
                    state.acked = True
                else:
                    self._note_error(head.error)
                    if isinstance(head.error, RecordTooLargeError):
                        self._topic_limit(head.topic, refresh=True)  # the topic's limit may have shrunk
                    if state.producer_id >= 0:
                        self._recover_sequence(state, head)

    def _recover_sequence(self, state: _PartitionState, failed: _Batch) -> None:
        """KIP-360: after a batch failed for good, make the partition's next sequence acceptable again.

        Only for errors the broker raises before writing anything (validation,
        sequence or epoch checks); after any other error the batch's fate is
        unknown and the sequence stays as it is. A rejected batch with nothing
        sent after it hands its sequence to the next batch. Batches already sent
        after it would wait at the broker for the missing one and then fail:
        instead the partition moves to a new epoch, whose first batch starts at
        sequence 0, and they are resent under it at once (their old copies are
        fenced by the new epoch). The same bump follows a sequence or epoch
        error, where the broker's view differs from ours. If the broker has never
        acknowledged this producer on the partition, old copies may still be
        written (it accepts an unknown producer after its wait), so in-flight
        batches are then left to finish rather than risk writing them twice.
        """
        error = failed.error
        sequence_error = type(error).__name__ in ("OutOfOrderSequenceError", "InvalidProducerEpochError")
        if not (sequence_error or isinstance(error, _REJECTED)):
            return
        if not state.in_flight and not sequence_error:
            state.next_sequence = failed.base_sequence
            return
        if state.in_flight and not state.acked:
            return
        state.epoch += 1
        if state.epoch > MAX_EPOCH:  # epochs exhausted: a fresh producer id for this partition
            state.producer_id = get(self._client.router.allocate_producer_id.remote())
            state.epoch = 0
        state.next_sequence = 0
        log.info("%s-%d: batch at sequence %d failed (%s); %d later batches go out again under epoch %d",
                 failed.topic, failed.partition, failed.base_sequence, error, len(state.in_flight), state.epoch)
        for b in state.in_flight:
            self._encode(b, state)
            b.attempts = 0
            self._submit(b, state)

    def _resend_from(self, state: _PartitionState, error: BaseException) -> None:
        head = state.in_flight[0]
        if head.attempts > self._retries:
            head.error = NotRunningError(
                f"append to {head.topic}-{head.partition} failed after {head.attempts} attempts: {error}")
            head.done = True
            state.in_flight.popleft()
            self._note_error(head.error)
            return
        try:  # the actor may be gone for good (hibernated): resend to the current one
            stale, _node = self._client.partition_route(head.topic, head.partition)
            hibernated = self._client.reroute(head.topic, head.partition, stale)[2]
        except LoganError as e:  # the router is restarting, or the partition's node is gone: retry as before
            log.info("%s-%d: no current actor yet: %s", head.topic, head.partition, e)
            hibernated = False
        if hibernated or isinstance(getattr(error, "cause", error), PartitionHibernatedError):
            log.info("resending %d batches to %s-%d, which hibernated", len(state.in_flight), head.topic,
                     head.partition)
        else:
            log.warning("resending %d batches to %s-%d after: %r", len(state.in_flight), head.topic,
                        head.partition, error)
            time.sleep(min(0.05 * head.attempts, 1.0))
        for b in state.in_flight:  # same payloads, same sequences: the actor drops duplicates
            self._submit(b, state)

    # ----------------------------------------------------------- flush/close
    def _linger_loop(self) -> None:
        """Ship each open batch once it is ``linger.ms`` old; sleep while no batch is open.

        Why it waits on a condition rather than polling: an idle producer must cost nothing. Polling
        every ``linger.ms`` (5 ms), the 25 producers a test session had left open took a quarter of a
        core between them, all the time (py-spy of the suite's process, 2026-11-29).
        """
        with self._linger_wake:
            while not self._closed:
                if not self._opened_at:
                    self._linger_wake.wait()
                    continue
                now = time.monotonic()
                due = min(self._opened_at.values()) + self._linger_s
                if due > now:
                    self._linger_wake.wait(due - now)
                    continue
                for tp, opened in list(self._opened_at.items()):
                    if now - opened >= self._linger_s:
                        self._ship(tp)

    def flush(self, timeout: float | None = None) -> None:
        """Send every open batch and wait until all are acknowledged.

        Raises the first failure that no record future has raised yet (so an
        app that only flushes still learns of it); every other record is delivered.
        """
        with self._lock:
            for tp in list(self._open):
                self._ship(tp)
            for state in self._partitions.values():
                while state.in_flight:
                    self._complete(state.in_flight[-1], timeout if timeout is not None else self._timeout_s)
            errors, self._errors = self._errors, []
            if errors:
                raise errors[0]

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            with self._lock:
                self._closed = True
                self._linger_wake.notify()  # the linger thread ends

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
