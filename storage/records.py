"""Kafka v2 record codec: the record types, the compiled/pure switch, and decoding whole batches.

The per-record work runs in the compiled ``_codec`` extension (storage/_codec.c,
built by ``pip install``) when it is present; every function here also has a
pure-Python implementation with identical results, used when the extension was
not built or ``LOGAN_RAY_PURE_CODEC=1`` is set (tests run both).

The broker itself never decodes records (it moves batches by header); this
module is for consumers, compaction and tests. Building batches is
:mod:`.record_builder`; the cleaner's raw view of records is :mod:`.raw_records`.

Record layout inside a batch (all varints zigzag)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    keyLength varint (-1 null) | key | valueLength varint (-1 null) | value
    headerCount varint | (keyLength varint | key utf8 | valueLength varint | value)*
"""
from __future__ import annotations

import os
from array import array
from dataclasses import dataclass
from typing import Any, Callable, Iterator, NamedTuple, Sequence, Union

from .batch_header import HEADER_SIZE, MAGIC, MIN_BATCH_LENGTH, BatchHeader, framed, parse_header, validate_batch
from .compression import NONE, decompress
from .errors import CorruptRecordError
from .varint import ZIGZAG1, decode_varint, decode_varlong

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


def implementation():
    """The compiled codec module in use, or None when the pure-Python code serves."""
    return _C


def use_compiled(flag: bool) -> bool:
    """Switch implementation (tests compare both); returns the previous setting."""
    global _C
    prev = _C is not None
    if flag and _compiled is None:
        raise RuntimeError("the compiled record codec (logan_ray.storage._codec) is not built")
    _C = _compiled if flag else None
    return prev


# ---------------------------------------------------------------- decoding


def records_blob(buf: Buffer, pos: int, h: BatchHeader) -> Buffer:
    """The batch's (decompressed) records; a view, not a copy, when uncompressed."""
    start = pos + HEADER_SIZE
    end = pos + h.size
    if h.compression == NONE:
        return memoryview(buf)[start:end]
    return decompress(h.compression, memoryview(buf)[start:end])


def check_header(buf: Buffer, pos: int, verify_crc: bool) -> BatchHeader:
    return validate_batch(buf, pos) if verify_crc else framed(buf, pos)


def bad_record(msg: str, where: int) -> CorruptRecordError:
    return CorruptRecordError(f"corrupt record at byte {where} of the records: {msg}")


def _decode_headers(data: bytes, p: int, hc: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    if hc < 0:
        raise bad_record(f"negative header count {hc}", p)
    out = []
    for _ in range(hc):
        kl, p = decode_varint(data, p)
        if kl < 0:
            raise bad_record(f"header key length {kl}", p)
        if p + kl > len(data):
            raise bad_record("header key overruns the records", p)
        try:
            k = data[p : p + kl].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise bad_record(f"header key is not UTF-8: {exc}", p) from exc
        p += kl
        vl, p = decode_varint(data, p)
        if vl >= 0:
            v: bytes | None = data[p : p + vl]
            p += vl
        elif vl == -1:
            v = None
        else:
            raise bad_record(f"header value length {vl}", p)
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
                raise bad_record(f"key length {kl}", start)
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
                raise bad_record(f"value length {vl}", start)
            # headers
            b = data[p]
            if b == 0:
                p += 1
                if p != end:
                    raise bad_record(f"record length {ln} does not match its fields", start)
                hdrs = ()
            else:
                hc, p = dv(data, p)
                hdrs, p = _decode_headers(data, p, hc)
                if p != end:
                    raise bad_record(f"record length {ln} does not match its fields", start)
            r = new(R)
            so(r, base_off + od)
            st(r, max_ts if lat else base_ts + tsd)
            sk(r, key)
            sv(r, value)
            sh(r, hdrs)
            append(r)
    except IndexError:
        raise bad_record(f"records truncated ({n} bytes for {count} records)", start) from None
    except CorruptRecordError as exc:
        if str(exc).startswith("corrupt record"):
            raise
        raise bad_record(str(exc), start) from exc
    if p != n:
        raise bad_record(f"{n - p} trailing bytes after {count} records", p)
    return out


def decode_batch(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> tuple[BatchHeader, list[Record]]:
    """Decode the batch at ``pos`` into its header and records."""
    h = check_header(buf, pos, verify_crc)
    return h, _decode_blob(records_blob(buf, pos, h), h)


def _iter_complete(buf: Buffer, verify_crc: bool) -> Iterator[tuple[int, BatchHeader]]:
    """Checked headers of concatenated batches; a trailing partial batch (legal in fetch responses) ends it."""
    pos = 0
    n = len(buf)
    while n - pos >= HEADER_SIZE:
        h = parse_header(buf, pos)
        if h.magic == MAGIC and h.batch_length >= MIN_BATCH_LENGTH and h.size > n - pos:
            break  # partial trailing batch
        yield pos, check_header(buf, pos, verify_crc)
        pos += h.size


def decode_records(buf: Buffer, *, verify_crc: bool = True, include_control: bool = False) -> list[Record]:
    """Decode every record of concatenated batches (a fetch response's records).

    A trailing partial batch, which fetch responses may legally contain, is
    ignored; anything else malformed raises.
    """
    out: list[Record] = []
    for pos, h in _iter_complete(buf, verify_crc):
        recs = _decode_blob(records_blob(buf, pos, h), h)
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
        blob = records_blob(buf, pos, h)
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
    alloc: Callable[[int], Any] | None = None,
) -> Columns:
    """Data records with ``start <= offset < end`` of concatenated batches, as column buffers.

    The columnar twin of :func:`decode_records` (Arrow tables for consumers,
    Ray Data and Spark are made from these buffers without a copy): no Python
    object per record in the compiled codec. Control batches are skipped; a
    trailing partial batch is ignored; every record is validated.

    ``alloc``: where the compiled codec takes its output buffers (``n -> resizable
    writable buffer``, e.g. ``pyarrow.allocate_buffer(n, resizable=True)``): a pool
    that reuses pages saves the page faults of fresh megabytes, which cost more than
    the decoding. The buffers hold the same bytes as without it.
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
        blob = records_blob(buf, pos, h)
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
        res = _C.columns(data, batches, start, hi_off, keys, values, alloc)
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


