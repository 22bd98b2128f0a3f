"""Records of many batches as column buffers (the Arrow path for consumers, Ray Data and Spark)."""
from __future__ import annotations

from array import array
from typing import Any, Callable, NamedTuple

from .batch_header import HEADER_SIZE
from .codec_choice import implementation
from .compression import NONE
from .record_decode import decode_blob_py, iter_complete, records_blob
from .record_types import Buffer


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

    The columnar twin of :func:`.records.decode_records` (Arrow tables for consumers,
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
    for pos, h in iter_complete(buf, verify_crc):
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
    compiled_codec = implementation()
    if compiled_codec is not None:
        res = compiled_codec.columns(data, batches, start, hi_off, keys, values, alloc)
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
        for r in decode_blob_py(bytes(data[pos:stop]), base_off, base_ts, max_ts, lat, count):
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


__all__ = ["Columns", "decode_columns"]
