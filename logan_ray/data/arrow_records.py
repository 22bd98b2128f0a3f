"""Kafka v2 record batches -> Arrow columns, a whole chunk of batches at a time.

The one columnar record decoder: ``Consumer.poll_arrow``, Ray Data's
``read_topic`` and Spark's read all use it. The records are decoded by the
record codec's :func:`~logan_ray.storage.records.decode_columns` (compiled: no
Python object per record) into offset/data/validity buffers that become Arrow
arrays without another copy. No Ray import, so it is testable on its own.
"""
from __future__ import annotations

import functools
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa

from logan_ray.storage.records import decode_columns

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

#: The codec's output buffers come from Arrow's memory pool, which reuses freed pages:
#: a table's worth of fresh memory (megabytes) otherwise costs more in page faults than
#: the decoding itself.
_alloc = functools.partial(pa.allocate_buffer, resizable=True)


def _buffer(b) -> pa.Buffer:
    return b if isinstance(b, pa.Buffer) else pa.py_buffer(b)


def empty_table(columns: Sequence[str] | None = None) -> pa.Table:
    schema = RECORD_SCHEMA if columns is None else pa.schema([RECORD_SCHEMA.field(c) for c in columns])
    return schema.empty_table()


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
    cols = decode_columns(data, start, end, keys="key" in columns, values="value" in columns,
                          verify_crc=verify_crc, alloc=_alloc)
    n = cols.rows
    if n == 0:
        return empty_table(columns)
    out: dict[str, pa.Array] = {}
    for name in columns:
        if name == "topic":
            out[name] = pa.repeat(pa.scalar(topic, pa.string()), n)
        elif name == "partition":
            out[name] = pa.repeat(pa.scalar(partition, pa.int32()), n)
        elif name == "offset":
            out[name] = pa.Array.from_buffers(pa.int64(), n, [None, _buffer(cols.offsets)])
        elif name == "timestamp":
            out[name] = pa.Array.from_buffers(pa.int64(), n, [None, _buffer(cols.timestamps)])
        elif name == "timestamp_type":
            out[name] = pa.Array.from_buffers(pa.int32(), n, [None, _buffer(cols.timestamp_types)])
        elif name == "key":
            out[name] = _binary(n, cols.key, cols.wide)
        elif name == "value":
            out[name] = _binary(n, cols.value, cols.wide)
        elif name == "headers":
            out[name] = _headers_column(n, cols.headers)
    return pa.table(out)


def _binary(n: int, col: tuple[bytes, bytes, bytes, int], wide: bool) -> pa.Array:
    offsets, data, valid, nulls = col
    bitmap = None
    if nulls:
        bitmap = pa.py_buffer(np.packbits(np.frombuffer(valid, dtype=np.bool_), bitorder="little"))
    typ = pa.large_binary() if wide else pa.binary()
    arr = pa.Array.from_buffers(typ, n, [bitmap, _buffer(offsets), _buffer(data)], null_count=nulls)
    return arr.cast(pa.binary()) if wide and len(data) < 2**31 else arr


def _headers_column(n: int, with_headers: list) -> pa.Array:
    """Headers are rare: the codec lists only the rows that carry any."""
    counts = np.zeros(n, dtype=np.int32)
    keys: list[str] = []
    values: list[bytes | None] = []
    for row, hdrs in with_headers:
        counts[row] = len(hdrs)
        for k, v in hdrs:
            keys.append(k)
            values.append(v)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    child = pa.StructArray.from_arrays(
        [pa.array(keys, pa.string()), pa.array(values, pa.binary())], names=["key", "value"])
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), child, type=HEADERS_TYPE)


def concat(tables: Iterable[pa.Table]) -> pa.Table:
    return pa.concat_tables(list(tables))
