"""Kafka v2 record batches -> Arrow columns, a whole chunk of batches at a time.

Why not ``storage.records.decode_batch``: it builds one Python object per record
and a table built from those would pay for every record twice more. Here the
only per-record Python is a tight loop that finds where each record starts
(a record's position depends on the previous record's length, so this chain
cannot be vectorised cheaply); every field is then decoded with numpy over all
records of the chunk at once, and key/value columns are assembled straight into
Arrow buffers. Pure Python + numpy + pyarrow: no Ray import, so it is testable
on its own.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa

from logan_ray.storage.batch_header import HEADER_SIZE, MAGIC, iter_headers, validate_batch
from logan_ray.storage.compression import NONE, decompress
from logan_ray.storage.errors import CorruptRecordError
from logan_ray.storage.records import _decode_headers
from logan_ray.storage.varint import ZIGZAG1, decode_varint

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

#: Same columns as ``ray.data.read_kafka`` (and Spark's Kafka source), except
#: headers, which keep Kafka's order and duplicate keys like Spark's source does.
RECORD_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),  # ms since epoch
        ("timestamp_type", pa.int32()),  # 0 CreateTime, 1 LogAppendTime
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", HEADERS_TYPE),
    ]
)
COLUMNS = tuple(RECORD_SCHEMA.names)

_PAD = b"\x00" * 16  # lets vectorised varint reads run past the last record safely


def empty_table(columns: Sequence[str] | None = None) -> pa.Table:
    schema = RECORD_SCHEMA if columns is None else pa.schema([RECORD_SCHEMA.field(c) for c in columns])
    return schema.empty_table()


class _Chunk:
    """Decompressed record blobs of the kept batches, concatenated, plus per-batch facts."""

    __slots__ = ("blob", "bounds", "counts", "base_offsets", "base_ts", "max_ts", "log_append")

    def __init__(self) -> None:
        self.blob = b""
        self.bounds: list[tuple[int, int]] = []
        self.counts: list[int] = []
        self.base_offsets: list[int] = []
        self.base_ts: list[int] = []
        self.max_ts: list[int] = []
        self.log_append: list[bool] = []


def _collect(data, start: int, end: int | None, verify_crc: bool) -> _Chunk:
    """Pick the data batches overlapping [start, end) and decompress their records."""
    chunk = _Chunk()
    view = memoryview(data)
    parts: list = []
    pos_in_blob = 0
    for pos, h in iter_headers(data):
        if h.magic != MAGIC:
            raise CorruptRecordError(f"unsupported record batch magic {h.magic} at byte {pos}")
        if h.is_control or h.record_count == 0:
            continue
        if h.last_offset < start or (end is not None and h.base_offset >= end):
            continue
        if verify_crc:
            validate_batch(view, pos, end=pos + h.size)
        body = view[pos + HEADER_SIZE:pos + h.size]
        blob = body if h.compression == NONE else decompress(h.compression, body)
        parts.append(blob)
        chunk.bounds.append((pos_in_blob, pos_in_blob + len(blob)))
        pos_in_blob += len(blob)
        chunk.counts.append(h.record_count)
        chunk.base_offsets.append(h.base_offset)
        chunk.base_ts.append(h.base_timestamp)
        chunk.max_ts.append(h.max_timestamp)
        chunk.log_append.append(h.is_log_append_time)
    parts.append(_PAD)
    chunk.blob = b"".join(parts)
    return chunk


def _record_starts(blob: bytes, bounds: list[tuple[int, int]], counts: list[int]) -> list[int]:
    """Byte position of every record: the one sequential pass (length varints only)."""
    Z = ZIGZAG1
    starts: list[int] = []
    add = starts.append
    for (p, stop), count in zip(bounds, counts):
        first = p
        for _ in range(count):
            add(p)
            b = blob[p]
            if b < 0x80:
                p += 1 + Z[b]
                continue
            b2 = blob[p + 1]
            if b2 < 0x80:
                u = (b & 0x7F) | (b2 << 7)
                p += 2 + ((u >> 1) ^ -(u & 1))
            else:
                ln, q = decode_varint(blob, p)
                p = q + ln
        if p != stop:
            raise CorruptRecordError(
                f"record lengths of a batch add up to {p - first} bytes, its records hold {stop - first}")
    return starts


def _varints(buf: np.ndarray, pos: np.ndarray, max_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Decode one zigzag varint at each of ``pos`` at once: (values, positions after them)."""
    value = np.zeros(len(pos), dtype=np.uint64)
    length = np.zeros(len(pos), dtype=np.int64)
    active = np.ones(len(pos), dtype=bool)
    for k in range(max_bytes):
        b = buf[pos + k]
        value |= np.where(active, (b & 0x7F).astype(np.uint64) << np.uint64(7 * k), np.uint64(0))
        length += active
        active &= b >= 0x80
        if not active.any():
            break
    else:
        if active.any():
            raise CorruptRecordError("varint longer than allowed in record")
    signed = (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)
    return signed, pos + length


def binary_array(buf: np.ndarray, pos: np.ndarray, lengths: np.ndarray, valid: np.ndarray | None) -> pa.Array:
    """An Arrow binary array of the byte ranges ``buf[pos:pos+len]`` (nulls where not valid).

    Ranges must be ascending and disjoint (as keys and values in a records blob
    are). The bytes are gathered through a boolean mask made by ``np.repeat``
    of alternating skip/take runs: a few cheap passes over the blob instead of
    index arithmetic per byte.
    """
    n = len(pos)
    lengths = lengths.astype(np.int64, copy=False)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if n and offsets[-1]:
        ends = pos + lengths
        runs = np.empty(2 * n + 1, dtype=np.int64)
        runs[0] = pos[0]
        runs[1:-1:2] = lengths
        runs[2:-1:2] = pos[1:] - ends[:-1]
        runs[-1] = len(buf) - ends[-1]
        take = np.zeros(2 * n + 1, dtype=bool)
        take[1::2] = True
        data = buf[np.repeat(take, runs)]
    else:
        data = np.zeros(0, dtype=np.uint8)
    return _from_buffers(n, offsets, data, valid)


def _from_buffers(n: int, offsets: np.ndarray, data: np.ndarray, valid: np.ndarray | None,
                  string: bool = False) -> pa.Array:
    large = int(offsets[-1]) >= 2**31
    if large:
        typ = pa.large_string() if string else pa.large_binary()
    else:
        typ = pa.string() if string else pa.binary()
        offsets = offsets.astype(np.int32)
    null_count = 0
    bitmap = None
    if valid is not None and not valid.all():
        null_count = int(n - np.count_nonzero(valid))
        bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=null_count)


def decode_to_table(
    data,
    *,
    topic: str,
    partition: int,
    start: int = 0,
    end: int | None = None,
    columns: Sequence[str] | None = None,
    verify_crc: bool = True,
) -> pa.Table:
    """Records with ``start <= offset < end`` of concatenated v2 batches as a table of RECORD_SCHEMA.

    Control batches are skipped; a trailing partial batch is ignored.
    """
    columns = list(COLUMNS if columns is None else columns)
    unknown = set(columns) - set(COLUMNS)
    if unknown:
        raise ValueError(f"unknown record columns {sorted(unknown)}; choose from {list(COLUMNS)}")
    chunk = _collect(data, start, end, verify_crc)
    if not chunk.counts:
        return empty_table(columns)
    blob = chunk.blob
    starts = np.array(_record_starts(blob, chunk.bounds, chunk.counts), dtype=np.int64)
    buf = np.frombuffer(blob, dtype=np.uint8)

    ln, p = _varints(buf, starts, 5)
    rec_end = p + ln
    tsd, p = _varints(buf, p + 1, 10)  # skip the attributes byte
    od, p = _varints(buf, p, 5)
    klen, p = _varints(buf, p, 5)
    kpos = p
    p = p + np.maximum(klen, 0)
    vlen, p = _varints(buf, p, 5)
    vpos = p
    p = p + np.maximum(vlen, 0)
    hcount, p = _varints(buf, p, 5)
    if (klen < -1).any() or (vlen < -1).any() or (hcount < 0).any():
        raise CorruptRecordError("negative key, value or header length in a record")
    plain = hcount == 0
    if not np.array_equal(p[plain], rec_end[plain]):
        raise CorruptRecordError("a record's length does not match its fields")

    counts = np.array(chunk.counts, dtype=np.int64)
    batch_of = np.repeat(np.arange(len(counts)), counts)
    offset = np.array(chunk.base_offsets, dtype=np.int64)[batch_of] + od

    keep = None
    if offset[0] < start or (end is not None and offset[-1] >= end) or not np.all(np.diff(offset) > 0):
        keep = (offset >= start) if end is None else ((offset >= start) & (offset < end))
    n = len(offset) if keep is None else int(np.count_nonzero(keep))

    def sel(a: np.ndarray) -> np.ndarray:
        return a if keep is None else a[keep]

    out: dict[str, pa.Array] = {}
    for name in columns:
        if name == "topic":
            out[name] = pa.repeat(pa.scalar(topic, pa.string()), n)
        elif name == "partition":
            out[name] = pa.repeat(pa.scalar(partition, pa.int32()), n)
        elif name == "offset":
            out[name] = pa.array(sel(offset), pa.int64())
        elif name == "timestamp":
            lat = np.array(chunk.log_append, dtype=bool)[batch_of]
            ts = np.where(lat, np.array(chunk.max_ts, dtype=np.int64)[batch_of],
                          np.array(chunk.base_ts, dtype=np.int64)[batch_of] + tsd)
            out[name] = pa.array(sel(ts), pa.int64())
        elif name == "timestamp_type":
            lat = np.array(chunk.log_append, dtype=np.int32)[batch_of]
            out[name] = pa.array(sel(lat), pa.int32())
        elif name == "key":
            out[name] = binary_array(buf, sel(kpos), np.maximum(sel(klen), 0), sel(klen) >= 0)
        elif name == "value":
            out[name] = binary_array(buf, sel(vpos), np.maximum(sel(vlen), 0), sel(vlen) >= 0)
        elif name == "headers":
            out[name] = _headers_column(blob, sel(p), sel(hcount), sel(rec_end), sel(starts))
    if "headers" not in columns and not plain.all():
        _headers_column(blob, p, hcount, rec_end, starts)  # still validate the records that carry headers
    return pa.table(out)


def _headers_column(blob: bytes, after_count: np.ndarray, hcount: np.ndarray, rec_end: np.ndarray,
                    starts: np.ndarray) -> pa.Array:
    """Headers are rare: decode them in Python only for the records that have any."""
    n = len(hcount)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(hcount, out=offsets[1:])
    keys: list[str] = []
    values: list[bytes | None] = []
    for i in np.flatnonzero(hcount).tolist():
        hdrs, q = _decode_headers(blob, int(after_count[i]), int(hcount[i]))
        if q != int(rec_end[i]):
            raise CorruptRecordError(f"record at byte {int(starts[i])}: length does not match its headers")
        for k, v in hdrs:
            keys.append(k)
            values.append(v)
    child = pa.StructArray.from_arrays(
        [pa.array(keys, pa.string()), pa.array(values, pa.binary())], names=["key", "value"])
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), child, type=HEADERS_TYPE)


def concat(tables: Iterable[pa.Table]) -> pa.Table:
    return pa.concat_tables(list(tables))
