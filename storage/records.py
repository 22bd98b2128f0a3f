"""Kafka v2 record codec: build and decode whole record batches.

The per-record work runs in the compiled ``_codec`` extension (storage/_codec.c,
built by ``pip install``) when it is present; every function here also has a
pure-Python implementation with identical results, used when the extension was
not built or ``LOGAN_RAY_PURE_CODEC=1`` is set (tests run both).

The broker itself never decodes records (it moves batches by header); this
module is for producers, consumers, compaction and tests. Producers are the
throughput-critical user, so ``build_batch`` has a fast path that spends no
Python function call per record: lengths and offset deltas come from
precomputed varint tables and every record is a handful of bytes objects
joined once.

Record layout inside a batch (all varints zigzag)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    keyLength varint (-1 null) | key | valueLength varint (-1 null) | value
    headerCount varint | (keyLength varint | key utf8 | valueLength varint | value)*
"""
from __future__ import annotations

import os
import time
from array import array
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Sequence, Union

from .batch_header import (
    CONTROL_BIT,
    HEADER_SIZE,
    MAGIC,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    encode_batch,
    framed,
    parse_header,
    validate_batch,
)
from .compression import NONE, codec_id, compress, decompress
from .errors import CorruptRecordError, InvalidRecordError
from .varint import (
    INT32_MAX,
    TABLE_SIZE,
    VARINT,
    VARINT_LEN,
    ZIGZAG1,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

Buffer = Union[bytes, bytearray, memoryview]
Headers = Sequence[tuple[str, Union[bytes, None]]]



@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    # Hand-written so construction costs half of the generated frozen
    # __init__ (which looks up object.__setattr__ for every field).
    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[tuple[str, bytes | None], ...] = (),
    ) -> None:
        _setattr(self, "offset", offset)
        _setattr(self, "timestamp", timestamp)
        _setattr(self, "key", key)
        _setattr(self, "value", value)
        _setattr(self, "headers", headers)


_setattr = object.__setattr__
# Slot setters: the decoder fills records through these, skipping __init__.
_SET_OFFSET = Record.offset.__set__  # type: ignore[attr-defined]
_SET_TIMESTAMP = Record.timestamp.__set__  # type: ignore[attr-defined]
_SET_KEY = Record.key.__set__  # type: ignore[attr-defined]
_SET_VALUE = Record.value.__set__  # type: ignore[attr-defined]
_SET_HEADERS = Record.headers.__set__  # type: ignore[attr-defined]

class Column(NamedTuple):
    """Keys or values as column buffers: row i is ``data[starts[i]:starts[i] + lengths[i]]``.

    ``starts`` and ``lengths`` are native int64 buffers (e.g. numpy arrays);
    length -1 is a null. Lets ``build_batch`` take Arrow/numpy columns without
    a Python object per record.
    """

    starts: Buffer
    lengths: Buffer
    data: Buffer


try:
    from . import _codec as _compiled
except ImportError:  # not built (e.g. running from a source tree): the pure-Python codec serves
    _compiled = None
if os.environ.get("LOGAN_RAY_PURE_CODEC", "") not in ("", "0"):
    _compiled = None
if _compiled is not None:
    _compiled.setup(Record, CorruptRecordError, Column)
_C = _compiled  # the implementation in use; None = pure Python


def compiled() -> bool:
    """True when the compiled codec serves (False: the pure-Python one)."""
    return _C is not None


def use_compiled(flag: bool) -> bool:
    """Switch implementation (tests compare both); returns the previous setting."""
    global _C
    prev = _C is not None
    if flag and _compiled is None:
        raise RuntimeError("the compiled record codec (logan_ray.storage._codec) is not built")
    _C = _compiled if flag else None
    return prev


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# ---------------------------------------------------------------- building

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

    if _C is not None:
        records = _C.build_records(count, values, keys, headers, ts_deltas)
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


# ---------------------------------------------------------------- decoding


def _records_blob(buf: Buffer, pos: int, h: BatchHeader) -> Buffer:
    """The batch's (decompressed) records; a view, not a copy, when uncompressed."""
    start = pos + HEADER_SIZE
    end = pos + h.size
    if h.compression == NONE:
        return memoryview(buf)[start:end]
    return decompress(h.compression, memoryview(buf)[start:end])


def _check_header(buf: Buffer, pos: int, verify_crc: bool) -> BatchHeader:
    return validate_batch(buf, pos) if verify_crc else framed(buf, pos)


def _bad(msg: str, where: int) -> CorruptRecordError:
    return CorruptRecordError(f"corrupt record at byte {where} of the records: {msg}")


def _decode_headers(data: bytes, p: int, hc: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    if hc < 0:
        raise _bad(f"negative header count {hc}", p)
    out = []
    for _ in range(hc):
        kl, p = decode_varint(data, p)
        if kl < 0:
            raise _bad(f"header key length {kl}", p)
        if p + kl > len(data):
            raise _bad("header key overruns the records", p)
        try:
            k = data[p : p + kl].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _bad(f"header key is not UTF-8: {exc}", p) from exc
        p += kl
        vl, p = decode_varint(data, p)
        if vl >= 0:
            v: bytes | None = data[p : p + vl]
            p += vl
        elif vl == -1:
            v = None
        else:
            raise _bad(f"header value length {vl}", p)
        out.append((k, v))
    return tuple(out), p


def _decode_blob(data: Buffer, h: BatchHeader) -> list[Record]:
    args = (h.base_offset, h.base_timestamp, h.max_timestamp, h.is_log_append_time, h.record_count)
    if _C is not None:
        return _C.decode_blob(data, *args)
    return _decode_blob_py(bytes(data), *args)


def _decode_blob_py(data: bytes, base_off: int, base_ts: int, max_ts: int, lat: bool, count: int) -> list[Record]:
    """Decode every record; the 1- and 2-byte varint cases are inlined."""
    Z = ZIGZAG1
    dv = decode_varint
    dl = decode_varlong
    R = Record
    new = object.__new__
    so, st, sk, sv, sh = _SET_OFFSET, _SET_TIMESTAMP, _SET_KEY, _SET_VALUE, _SET_HEADERS
    out: list[Record] = []
    append = out.append
    n = len(data)
    p = 0
    start = 0
    try:
        for _ in range(count):
            start = p
            # length
            b = data[p]
            if b < 0x80:
                ln = Z[b]
                p += 1
            else:
                b2 = data[p + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    ln = (u >> 1) ^ -(u & 1)
                    p += 2
                else:
                    ln, p = dv(data, p)
            end = p + ln
            # attributes (unused in v2 records), timestamp delta
            b = data[p + 1]
            if b < 0x80:
                tsd = Z[b]
                p += 2
            else:
                tsd, p = dl(data, p + 1)
            # offset delta
            b = data[p]
            if b < 0x80:
                od = Z[b]
                p += 1
            else:
                b2 = data[p + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    od = (u >> 1) ^ -(u & 1)
                    p += 2
                else:
                    od, p = dv(data, p)
            # key
            b = data[p]
            if b < 0x80:
                kl = Z[b]
                p += 1
            else:
                kl, p = dv(data, p)
            if kl >= 0:
                key = data[p : p + kl]
                p += kl
            elif kl == -1:
                key = None
            else:
                raise _bad(f"key length {kl}", start)
            # value
            b = data[p]
            if b < 0x80:
                vl = Z[b]
                p += 1
            else:
                b2 = data[p + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    vl = (u >> 1) ^ -(u & 1)
                    p += 2
                else:
                    vl, p = dv(data, p)
            if vl >= 0:
                value = data[p : p + vl]
                p += vl
            elif vl == -1:
                value = None
            else:
                raise _bad(f"value length {vl}", start)
            # headers
            b = data[p]
            if b == 0:
                p += 1
                if p != end:
                    raise _bad(f"record length {ln} does not match its fields", start)
                hdrs = ()
            else:
                hc, p = dv(data, p)
                hdrs, p = _decode_headers(data, p, hc)
                if p != end:
                    raise _bad(f"record length {ln} does not match its fields", start)
            r = new(R)
            so(r, base_off + od)
            st(r, max_ts if lat else base_ts + tsd)
            sk(r, key)
            sv(r, value)
            sh(r, hdrs)
            append(r)
    except IndexError:
        raise _bad(f"records truncated ({n} bytes for {count} records)", start) from None
    except CorruptRecordError as exc:
        if str(exc).startswith("corrupt record"):
            raise
        raise _bad(str(exc), start) from exc
    if p != n:
        raise _bad(f"{n - p} trailing bytes after {count} records", p)
    return out


def decode_batch(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> tuple[BatchHeader, list[Record]]:
    """Decode the batch at ``pos`` into its header and records."""
    h = _check_header(buf, pos, verify_crc)
    return h, _decode_blob(_records_blob(buf, pos, h), h)


def _iter_complete(buf: Buffer, verify_crc: bool) -> Iterator[tuple[int, BatchHeader]]:
    """Checked headers of concatenated batches; a trailing partial batch (legal in fetch responses) ends it."""
    pos = 0
    n = len(buf)
    while n - pos >= HEADER_SIZE:
        h = parse_header(buf, pos)
        if h.magic == MAGIC and h.batch_length >= MIN_BATCH_LENGTH and h.size > n - pos:
            break  # partial trailing batch
        yield pos, _check_header(buf, pos, verify_crc)
        pos += h.size


def decode_records(buf: Buffer, *, verify_crc: bool = True, include_control: bool = False) -> list[Record]:
    """Decode every record of concatenated batches (a fetch response's records).

    A trailing partial batch, which fetch responses may legally contain, is
    ignored; anything else malformed raises.
    """
    out: list[Record] = []
    for pos, h in _iter_complete(buf, verify_crc):
        recs = _decode_blob(_records_blob(buf, pos, h), h)
        if include_control or not h.is_control:
            out.extend(recs)
    return out


def decode_tagged(
    buf: Buffer, make: type, topic: object, partition: object, min_offset: int = 0, *, verify_crc: bool = True
) -> list:
    """Data records with offset >= ``min_offset`` as ``make(topic, partition, offset, timestamp, key, value,
    headers)``, where ``make`` is a 7-field tuple subclass (a NamedTuple).

    What a consumer hands its caller, made in one step: no intermediate Record.
    Control batches are skipped; a trailing partial batch is ignored.
    """
    out: list = []
    for pos, h in _iter_complete(buf, verify_crc):
        blob = _records_blob(buf, pos, h)
        if h.is_control:
            _decode_blob(blob, h)  # still validated, as decode_records does
            continue
        if h.last_offset < min_offset:
            _decode_blob(blob, h)
            continue
        if _C is not None:
            out.extend(_C.decode_tuples(blob, h.base_offset, h.base_timestamp, h.max_timestamp,
                                        h.is_log_append_time, h.record_count, make, topic, partition, min_offset))
        else:
            out.extend(make(topic, partition, r.offset, r.timestamp, r.key, r.value, r.headers)
                       for r in _decode_blob(blob, h) if r.offset >= min_offset)
    return out


class Columns(NamedTuple):
    """Records of many batches as column buffers (native byte order), see :func:`decode_columns`.

    ``key``/``value``: None when not asked for, else (offsets, data, validity,
    null count) with int32 offsets (int64 when ``wide``), one validity byte per
    row (1 = present). ``headers``: (row, headers) for the rows that have any.
    """

    rows: int
    offsets: bytes  # int64
    timestamps: bytes  # int64
    timestamp_types: bytes  # int32: 0 CreateTime, 1 LogAppendTime
    key: tuple[bytes, bytes, bytes, int] | None
    value: tuple[bytes, bytes, bytes, int] | None
    headers: list[tuple[int, tuple[tuple[str, bytes | None], ...]]]
    wide: bool


def decode_columns(
    buf: Buffer,
    start: int = 0,
    end: int | None = None,
    *,
    keys: bool = True,
    values: bool = True,
    verify_crc: bool = True,
) -> Columns:
    """Data records with ``start <= offset < end`` of concatenated batches, as column buffers.

    The columnar twin of :func:`decode_records` (Arrow tables for consumers,
    Ray Data and Spark are made from these buffers without a copy): no Python
    object per record in the compiled codec. Control batches are skipped; a
    trailing partial batch is ignored; every record is validated.
    """
    in_place: list[tuple] = []  # (pos, stop, count, base offset, base ts, max ts, log append time) in buf
    joined: list[tuple] = []  # the same with positions in the concatenated blobs
    parts: list[Buffer] = []
    compressed = False
    at = 0
    for pos, h in _iter_complete(buf, verify_crc):
        if h.is_control or h.record_count == 0:
            continue
        if h.last_offset < start or (end is not None and h.base_offset >= end):
            continue
        blob = _records_blob(buf, pos, h)
        compressed |= h.compression != NONE
        facts = (h.record_count, h.base_offset, h.base_timestamp, h.max_timestamp, h.is_log_append_time)
        in_place.append((pos + HEADER_SIZE, pos + h.size) + facts)
        joined.append((at, at + len(blob)) + facts)
        parts.append(blob)
        at += len(blob)
    # Uncompressed records are read where they lie; only decompressed ones are joined.
    data: Buffer = b"".join(parts) if compressed else buf
    batches = joined if compressed else in_place
    hi_off = -1 if end is None else end
    if _C is not None:
        res = _C.columns(data, batches, start, hi_off, keys, values)
    else:
        res = _columns_py(data, batches, start, hi_off, keys, values)
    return Columns(*res, wide=len(data) >= 0x7FFFFFFF)


class _PyCol:
    __slots__ = ("offsets", "data", "valid", "nulls")

    def __init__(self, wide: bool) -> None:
        self.offsets = array("q" if wide else "i", [0])
        self.data: list[bytes] = []
        self.valid = bytearray()
        self.nulls = 0

    def put(self, b: bytes | None, used: int) -> int:
        if b is None:
            self.valid.append(0)
            self.nulls += 1
        else:
            self.valid.append(1)
            self.data.append(b)
            used += len(b)
        self.offsets.append(used)
        return used

    def finish(self) -> tuple[bytes, bytes, bytes, int]:
        return self.offsets.tobytes(), b"".join(self.data), bytes(self.valid), self.nulls


def _columns_py(data: Buffer, batches, lo: int, hi: int, want_key: bool, want_value: bool) -> tuple:
    wide = len(data) >= 0x7FFFFFFF
    offs, tss, tts = array("q"), array("q"), array("i")
    kc, vc = _PyCol(wide), _PyCol(wide)
    ku = vu = 0
    hdrs: list = []
    for pos, stop, count, base_off, base_ts, max_ts, lat in batches:
        for r in _decode_blob_py(bytes(data[pos:stop]), base_off, base_ts, max_ts, lat, count):
            if r.offset < lo or (hi >= 0 and r.offset >= hi):
                continue
            if r.headers:
                hdrs.append((len(offs), r.headers))
            offs.append(r.offset)
            tss.append(r.timestamp)
            tts.append(1 if lat else 0)
            if want_key:
                ku = kc.put(r.key, ku)
            if want_value:
                vu = vc.put(r.value, vu)
    return (len(offs), offs.tobytes(), tss.tobytes(), tts.tobytes(),
            kc.finish() if want_key else None, vc.finish() if want_value else None, hdrs)


# ------------------------------------------------------- raw (compaction) view


class RawRecord(NamedTuple):
    """Where one record sits in a batch's (decompressed) records blob.

    Compaction only needs the key, whether the value is a tombstone and the
    record's bytes to copy: ``blob[start:end]`` is the whole record, length
    prefix included, still valid under the batch's base offset/timestamp.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value_is_null: bool
    start: int
    end: int


class RawBatch(NamedTuple):
    header: BatchHeader
    blob: bytes  # decompressed records
    records: list[RawRecord]


def scan_batch_raw(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> RawBatch:
    """Decode just what compaction needs from the batch at ``pos``."""
    h = _check_header(buf, pos, verify_crc)
    data = bytes(_records_blob(buf, pos, h))
    keys, deltas, ts_deltas, nulls, starts = scan_records(data, 0, len(data), h.record_count)
    base_off = h.base_offset
    if h.is_log_append_time:
        stamps = [h.max_timestamp] * len(keys)
    else:
        base_ts = h.base_timestamp
        stamps = [base_ts + d for d in ts_deltas]
    out = [RawRecord(base_off + d, t, k, z, s, e)
           for d, t, k, z, s, e in zip(deltas, stamps, keys, nulls, starts, starts[1:])]
    return RawBatch(h, data, out)


def scan_records(blob: Buffer, p: int, stop: int, count: int) -> tuple[list, list[int], list[int], list[bool], list[int]]:
    """Keys, offset deltas, timestamp deltas, tombstone flags and record starts (plus the end) of the
    ``count`` records in ``blob[p:stop]``: compaction's view of a batch (no value is copied, headers are
    not parsed). Raises CorruptRecordError when a record's fields overrun it."""
    if _C is not None:
        return _C.scan_raw(blob, p, stop, count)
    try:
        return _scan_records_py(blob, p, stop, count)
    except IndexError:
        raise _bad(f"records truncated ({stop - p} bytes for {count} records)", p) from None


def _scan_records_py(blob: Buffer, p: int, stop: int, count: int) -> tuple[list, list[int], list[int], list[bool], list[int]]:
    Z = ZIGZAG1
    dv = decode_varint
    keys: list = []
    deltas: list[int] = []
    ts_deltas: list[int] = []
    nulls: list[bool] = []
    starts: list[int] = []
    first = p
    for _ in range(count):
        starts.append(p)
        b = blob[p]
        if b < 0x80:
            ln = Z[b]
            p += 1
        else:
            b2 = blob[p + 1]
            if b2 < 0x80:  # records of 64 B .. 8 KiB
                u = (b & 0x7F) | (b2 << 7)
                ln = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                ln, p = dv(blob, p)
        end = p + ln
        if ln < 0 or end > stop:
            raise _bad(f"record length {ln} overruns the records ({stop - first} bytes)", starts[-1] - first)
        b = blob[p + 1]
        if b < 0x80:
            ts_deltas.append(Z[b])
            p += 2
        elif blob[p + 2] < 0x80:
            u = (b & 0x7F) | (blob[p + 2] << 7)
            ts_deltas.append((u >> 1) ^ -(u & 1))
            p += 3
        else:
            tsd, p = decode_varlong(blob, p + 1)
            ts_deltas.append(tsd)
        b = blob[p]
        if b < 0x80:
            deltas.append(Z[b])
            p += 1
        elif blob[p + 1] < 0x80:  # offset deltas 64 .. 8191
            u = (b & 0x7F) | (blob[p + 1] << 7)
            deltas.append((u >> 1) ^ -(u & 1))
            p += 2
        else:
            od, p = dv(blob, p)
            deltas.append(od)
        b = blob[p]
        if b < 0x80:
            kl = Z[b]
            p += 1
        else:
            kl, p = dv(blob, p)
        if kl >= 0:
            if p + kl > end:
                raise _bad("key overruns its record", starts[-1] - first)
            keys.append(bytes(blob[p : p + kl]))
            p += kl
        elif kl == -1:
            keys.append(None)
        else:
            raise _bad(f"key length {kl}", starts[-1] - first)
        b = blob[p]
        if b < 0x80:
            vl = Z[b]
            p += 1
        else:
            b2 = blob[p + 1]
            if b2 < 0x80:
                u = (b & 0x7F) | (b2 << 7)
                vl = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                vl, p = dv(blob, p)
        if vl < -1:
            raise _bad(f"value length {vl}", starts[-1] - first)
        if p + max(vl, 0) > end:
            raise _bad("value overruns its record", starts[-1] - first)
        nulls.append(vl == -1)
        p = end
    if p != stop:
        raise _bad(f"{stop - p} trailing bytes after {count} records", p - first)
    starts.append(p)
    return keys, deltas, ts_deltas, nulls, starts


def iter_batch_records_raw(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> Iterator[RawRecord]:
    """The records of ``scan_batch_raw`` alone, for callers that only inspect keys."""
    return iter(scan_batch_raw(buf, pos, verify_crc=verify_crc).records)


def rebuild_batch(
    header: BatchHeader,
    blob: Buffer,
    keep: Sequence[RawRecord],
    *,
    compression: int | str | None = None,
    keep_last_offset_delta: bool = False,
    compression_level: int | None = None,
) -> bytes:
    """Re-pack the kept records of a scanned batch without re-encoding them.

    Base offset, base timestamp, producer state and attributes are kept, so
    every kept record's deltas stay valid byte-for-byte. As in Kafka's
    cleaner, lastOffsetDelta becomes the last kept record's unless
    ``keep_last_offset_delta`` (which preserves the producer's last sequence).
    With no records kept this yields an empty batch that keeps producer state.
    """
    mv = memoryview(blob)
    records = b"".join([mv[r.start : r.end] for r in keep])
    codec = header.compression if compression is None else codec_id(compression)
    if codec != NONE:
        records = compress(codec, records, compression_level)
    if keep and not keep_last_offset_delta:
        last_delta = keep[-1].offset - header.base_offset
    else:
        last_delta = header.last_offset_delta
    if header.is_log_append_time or not keep:
        max_ts = header.max_timestamp
    else:
        max_ts = max(r.timestamp for r in keep)
    attributes = (header.attributes & ~0x07) | codec
    return encode_batch(records, attributes=attributes, last_offset_delta=last_delta,
                        base_timestamp=header.base_timestamp, max_timestamp=max_ts, record_count=len(keep),
                        base_offset=header.base_offset, partition_leader_epoch=header.partition_leader_epoch,
                        producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                        base_sequence=header.base_sequence)
