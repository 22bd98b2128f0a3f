"""Building Kafka v2 record batches: what producers (and tests) send.

Producers are the throughput-critical user, so ``build_batch`` has a fast
path that spends no Python function call per record: lengths and offset
deltas come from precomputed varint tables and every record is a handful of
bytes objects joined once. With the compiled codec (see :mod:`.records`) the
per-record work runs in C; the pure-Python code gives identical bytes.
"""
from __future__ import annotations

import time
from typing import Sequence

from .batch_header import CONTROL_BIT, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT, encode_batch
from .compression import NONE, codec_id, compress
from .errors import InvalidRecordError
from .records import Column, Headers, implementation
from .varint import INT32_MAX, TABLE_SIZE, VARINT, VARINT_LEN, encode_varint, encode_varlong


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# _MID0[i] = timestampDelta 0, offsetDelta i, null key: the constant middle of
# a record in the common producer case; _MID0K[i] the same without the null
# key marker, for keyed records. Built lazily (~5 MB) on first use.
_MID0: tuple[bytes, ...] | None = None
_MID0K: tuple[bytes, ...] | None = None


def _mid0() -> tuple[bytes, ...]:
    global _MID0
    if _MID0 is None:
        _MID0 = tuple(b"\x00\x00" + v + b"\x01" for v in VARINT)
    return _MID0


def _mid0k() -> tuple[bytes, ...]:
    global _MID0K
    if _MID0K is None:
        _MID0K = tuple(b"\x00\x00" + v for v in VARINT)
    return _MID0K


def _enc_bytes(b: bytes | None) -> bytes:
    if b is None:
        return b"\x01"
    n = len(b)
    return (VARINT[n] if n < TABLE_SIZE else encode_varint(n)) + b


def _enc_headers(hs: Headers | None) -> bytes:
    if not hs:
        return b"\x00"
    parts = [encode_varint(len(hs))]
    for k, v in hs:
        if not isinstance(k, str):
            raise TypeError(f"record header key must be str, got {type(k).__name__}")
        parts.append(_enc_bytes(k.encode("utf-8")))
        parts.append(_enc_bytes(v))
    return b"".join(parts)


def _records_fast(values: Sequence[bytes]) -> bytes | None:
    """Null-key, header-free, single-timestamp records; None if not applicable."""
    count = len(values)
    if count > TABLE_SIZE:
        return None
    try:
        lens = list(map(len, values))
    except TypeError:  # a None value
        return None
    if lens and max(lens) > TABLE_SIZE - 32:
        return None
    V = VARINT
    VL = VARINT_LEN
    M = _mid0()
    Z = b"\x00"
    parts: list[bytes] = []
    ext = parts.extend
    i = 0
    for v in values:
        n = lens[i]
        ext((V[n + VL[n] + VL[i] + 4], M[i], V[n], v, Z))
        i += 1
    return b"".join(parts)


def _records_fast_ts(values: Sequence[bytes], deltas: Sequence[int]) -> bytes | None:
    """Null-key, header-free records with per-record timestamp deltas (a lingering producer)."""
    count = len(values)
    if count > TABLE_SIZE or min(deltas) < 0 or max(deltas) >= TABLE_SIZE // 2:
        return None
    try:
        lens = list(map(len, values))
    except TypeError:  # a None value
        return None
    if lens and max(lens) > TABLE_SIZE - 32:
        return None
    V = VARINT
    VL = VARINT_LEN
    A = b"\x00"
    parts: list[bytes] = []
    ext = parts.extend
    i = 0
    for v in values:
        n = lens[i]
        d = deltas[i]
        ext((V[n + VL[n] + VL[i] + VL[d] + 3], A, V[d], V[i], b"\x01", V[n], v, A))
        i += 1
    return b"".join(parts)


def _records_fast_keyed(values: Sequence[bytes], keys: Sequence[bytes]) -> bytes | None:
    """Like _records_fast with non-null keys; None if any key/value is null or huge."""
    count = len(values)
    if count > TABLE_SIZE:
        return None
    try:
        lens = list(map(len, values))
        klens = list(map(len, keys))
    except TypeError:  # a None key or value
        return None
    if max(lens) + max(klens) > TABLE_SIZE - 32:
        return None
    V = VARINT
    VL = VARINT_LEN
    M = _mid0k()
    Z = b"\x00"
    parts: list[bytes] = []
    ext = parts.extend
    i = 0
    for v in values:
        n = lens[i]
        kn = klens[i]
        ext((V[n + VL[n] + kn + VL[kn] + VL[i] + 3], M[i], V[kn], keys[i], V[n], v, Z))
        i += 1
    return b"".join(parts)


def _records_general(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None,
    headers: Sequence[Headers] | None,
    ts_deltas: Sequence[int] | None,
) -> bytes:
    parts: list[bytes] = []
    append = parts.append
    for i, v in enumerate(values):
        body = b"".join(
            (
                b"\x00",
                encode_varlong(ts_deltas[i]) if ts_deltas is not None else b"\x00",
                encode_varint(i),
                _enc_bytes(keys[i]) if keys is not None else b"\x01",
                _enc_bytes(v),
                _enc_headers(headers[i]) if headers is not None else b"\x00",
            )
        )
        append(encode_varint(len(body)))
        append(body)
    return b"".join(parts)


def build_batch(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    *,
    headers: Sequence[Headers] | None = None,
    timestamps: Sequence[int] | int | None = None,
    base_offset: int = 0,
    compression: int | str = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
    is_control: bool = False,
    compression_level: int | None = None,
) -> bytes:
    """Encode one complete, checksummed v2 batch.

    ``values``/``keys``: sequences of bytes-like objects or None, or a
    :class:`Column`. ``timestamps``: ms since epoch; one int for all records,
    a sequence per record, or None for "now". The first record's timestamp
    becomes the base.
    """
    count = _rows(values)
    if count == 0:
        raise InvalidRecordError("a record batch needs at least one record")
    if count - 1 > INT32_MAX:
        raise InvalidRecordError(f"too many records for one batch: {count}")
    if isinstance(keys, Column):
        if _rows(keys) != count:
            raise ValueError("key column length does not match the values")
    elif keys is not None and len(keys) != count:
        raise ValueError(f"{len(keys)} keys for {count} values")
    if headers is not None:
        if len(headers) != count:
            raise ValueError(f"{len(headers)} header lists for {count} values")
        if not any(headers):
            headers = None
    if keys is not None and not isinstance(keys, Column) and list(keys).count(None) == count:
        keys = None
    codec = codec_id(compression)

    ts_deltas: list[int] | None = None
    if timestamps is None:
        base_ts = max_ts = now_ms()
    elif isinstance(timestamps, int):
        base_ts = max_ts = timestamps
    else:
        if len(timestamps) != count:
            raise ValueError(f"{len(timestamps)} timestamps for {count} values")
        base_ts = timestamps[0]
        max_ts = max(timestamps)
        if max_ts != base_ts or min(timestamps) != base_ts:
            ts_deltas = [t - base_ts for t in timestamps]

    compiled_codec = implementation()
    if compiled_codec is not None:
        records = compiled_codec.build_records(count, values, keys, headers, ts_deltas)
    else:
        records = _records_py(values, keys, headers, ts_deltas)
    return seal_batch(
        records, count, base_ts, max_ts, base_offset=base_offset, compression=codec, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, is_transactional=is_transactional,
        partition_leader_epoch=partition_leader_epoch, log_append_time=log_append_time, is_control=is_control,
        compression_level=compression_level)


def _records_py(values, keys, headers, ts_deltas) -> bytes:
    if isinstance(values, Column) or isinstance(keys, Column):
        values, keys = _column_rows(values), _column_rows(keys)
    records = None
    if headers is None and ts_deltas is None:
        records = _records_fast(values) if keys is None else _records_fast_keyed(values, keys)
    elif headers is None and keys is None:
        records = _records_fast_ts(values, ts_deltas)
    if records is None:
        records = _records_general(values, keys, headers, ts_deltas)
    return records


def _rows(seq) -> int:
    return memoryview(seq.lengths).nbytes // 8 if isinstance(seq, Column) else len(seq)


def _column_rows(col):
    """A Column's rows as a list of bytes/None (the pure-Python path's input)."""
    if not isinstance(col, Column):
        return col
    starts = memoryview(col.starts).cast("B").cast("q")
    lengths = memoryview(col.lengths).cast("B").cast("q")
    data = bytes(col.data)
    return [None if n < 0 else data[s : s + n] for s, n in zip(starts, lengths)]


def seal_batch(
    records: bytes,
    count: int,
    base_ts: int,
    max_ts: int,
    *,
    base_offset: int = 0,
    compression: int | str = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
    is_control: bool = False,
    compression_level: int | None = None,
) -> bytes:
    """Compress ``records`` (the encoded records of ``count`` records) and put the checksummed header on."""
    codec = codec_id(compression)
    if codec != NONE:
        records = compress(codec, records, compression_level)

    attributes = codec
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_BIT
    if is_transactional:
        attributes |= TRANSACTIONAL_BIT
    if is_control:
        attributes |= CONTROL_BIT
    return encode_batch(records, attributes=attributes, last_offset_delta=count - 1, base_timestamp=base_ts,
                        max_timestamp=max_ts, record_count=count, base_offset=base_offset,
                        partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=base_sequence)
